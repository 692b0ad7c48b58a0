//! \file length/concepts.hpp
//! \brief How far to draft: the concepts of the step decoder's length stages (decode/batch_decoder.hpp).
//!
//! - `LengthPolicy`: the draft length of the next round from the request's counters (`decode_stats`),
//!   without state (`fixed_length`, `oracle_length`).
//! - `LengthController`: a per-request policy with state, told each round's outcome (`record`) before
//!   it chooses the next length (`heuristic_length`, transformers' schedule).
//! - `DraftStopRule`: consulted after each drafted token with what is known so far (this round's
//!   drafts and the q rows they were sampled from, the request's counters), it keeps drafting, stops
//!   after the token, or drops it and stops (`confidence_stop`, `p_min_stop`, `entropy_stop`,
//!   `cumulative_acceptance_stop`).
//!
//! **Which rules keep a lossless rule lossless.** Strict verification of a chain emits exactly the
//! target's law whenever the number of drafts verified is a stopping time of the draft process: the
//! decision to draft (and verify) position j depends only on x_{<j} and the q rows up to j, never on
//! x_j itself nor on the target (the argument of SV's exact mode, decode/sv.hpp). Hence:
//! - every `LengthPolicy` and `LengthController` (their choice is fixed before the round's drafts);
//! - `stop` after x_j on any function of x_{<=j} and q_{<=j} (x_j is verified, and whether x_{j+1}
//!   exists depends on what came before it);
//! - `drop` of x_j on a function of x_{<j} and q_{<=j} only: the decision may read q_j (its top
//!   probability, its entropy) but not the drawn x_j. A rule that drops x_j because of x_j, or one that
//!   reads the target, is not exact: tests/length/stop_rules.cpp has such a negative control and its
//!   chi-squared test fails.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "specdec/core/token.hpp"
#include "specdec/core/decode_stats.hpp"

namespace specdec {

//! Chooses how many tokens to draft in the next round from what the request has seen so far.
template <class L>
concept LengthPolicy = requires(const L& l, const decode_stats& s) {
  { l.next_length(s) } -> std::convertible_to<std::size_t>;
};

//! What one round of a request did: tokens drafted (verified) and accepted.
struct round_record {
  std::size_t drafted = 0;   //!< drafts verified this round
  std::size_t accepted = 0;  //!< drafts accepted this round
};

//! A stateful per-request length policy: `record(r)` after each round, `next_length(stats)` before the next.
template <class C>
concept LengthController = requires(C& c, const decode_stats& s, const round_record& r) {
  { c.next_length(s) } -> std::convertible_to<std::size_t>;
  c.record(r);
};

//! What a draft stop rule does after draft x_j.
enum class draft_decision : std::uint8_t {
  next,  //!< keep x_j and draft x_{j+1}
  stop,  //!< keep x_j, draft no more this round
  drop,  //!< drop x_j and draft no more (exact only when decided without looking at x_j)
};

//! What a draft stop rule sees after draft x_j (j = position): this round's drafts x_0..x_j and their
//! q rows ([j + 1][vocab]), and the request's counters before this round.
struct draft_view {
  std::size_t position = 0;             //!< j, the index of the latest draft in this round
  std::span<const token_id> drafts;     //!< this round's drafts x_0..x_j
  std::span<const float> q_rows;        //!< their q rows, [j + 1][vocab]
  std::size_t vocab = 0;                //!< V, the length of a q row
  const decode_stats* stats = nullptr;  //!< the request's counters before this round

  //! q_j, the row x_j was sampled from.
  std::span<const float> q_row() const { return q_rows.subspan(position * vocab, vocab); }
  //! x_j.
  token_id token() const { return drafts[position]; }
  //! q_j(x_j).
  double token_probability() const { return static_cast<double>(q_row()[static_cast<std::size_t>(token())]); }
};

//! A rule consulted after each drafted token (it may keep state across tokens and rounds).
template <class S>
concept DraftStopRule = requires(S& s, const draft_view& v) {
  { s.decide(v) } -> std::same_as<draft_decision>;
};

//! What a batch length stage sees of a running request: its counters so far and the longest draft
//! its own length stage allows this round.
struct length_request {
  const decode_stats* stats = nullptr;  //!< the request's counters so far
  std::size_t max_length = 0;           //!< the longest draft its own length stage allows this round
  std::uint64_t request = 0;            //!< the request's handle (stages that keep per-request state key on it)
};

//! A stage that chooses every request's draft length of a round together (SV's batch scheduler,
//! length/sv_batch.hpp): `lengths` comes in holding each request's `max_length` and the stage may
//! lower any of them. A choice that depends only on the counters (what the requests did before this
//! round), not on this round's drafts, keeps a lossless rule lossless: the round's length is fixed
//! before anything of the round is drawn.
using batch_length_stage = std::function<void(std::span<const length_request>, std::span<std::size_t>)>;

}  // namespace specdec
