//! \file simulate/lengths.hpp
//! \brief A draft-length policy on a simulated acceptance profile: draft j is accepted with the
//! independent probability alpha_j until the first rejection (Leviathan's chain with position-dependent
//! rates, simulate/sd.hpp), a round of k drafts costs k t_draft + L(k) (theory/latency_profile.hpp),
//! and the policy chooses each round's k from the counters of the rounds before (length/). Returns the
//! long-run tokens per unit time, the quantity `oracle_length` (length/oracle.hpp) bounds.
//! Randomness: one Philox stream {seed, 0, 0} of purpose `simulate`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "specdec/contracts.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec::simulate {

//! Runs `rounds` rounds: k = min(choose(stats), alpha.size()), accepted drafts drawn from alpha, then
//! `record(round_record{k, accepted})`; returns emitted tokens (accepted + 1 per round) over time.
//! \throws specdec::error on an acceptance outside [0, 1], t_draft < 0 or no rounds.
template <class Choose, class Record, theory::LatencyProfile L>
double length_policy_rate(std::span<const double> alpha, double t_draft, const L& latency, std::size_t rounds, std::uint64_t seed,
                          Choose&& choose, Record&& record) {
  SPECDEC_EXPECTS(t_draft >= 0.0 && rounds > 0, "specdec::simulate::length_policy_rate: t_draft >= 0 and rounds > 0");
  for (const double a : alpha)
    SPECDEC_EXPECTS(a >= 0.0 && a <= 1.0, "specdec::simulate::length_policy_rate: alpha outside [0, 1]");
  decode_stats s;
  auto rng = random::request_stream{seed, 0, 0}.open(0, random::purpose::simulate);
  double tokens = 0.0, time = 0.0;
  for (std::size_t round = 0; round < rounds; ++round) {
    const std::size_t k = std::min<std::size_t>(choose(std::as_const(s)), alpha.size());
    std::size_t a = 0;
    while (a < k && rng.uniform() < alpha[a]) ++a;
    s.record_round(k, a);
    record(round_record{k, a});
    tokens += static_cast<double>(a + 1);
    time += static_cast<double>(k) * t_draft + theory::latency_at(latency, k);
  }
  return tokens / time;
}

//! The batch stage `stage` (e.g. `dynamic_goodput_length`) as the policy of one simulated request.
template <class Stage>
auto single_request_choice(Stage& stage, std::size_t max_length) {
  return [&stage, max_length](const decode_stats& s) {
    const length_request request{&s, max_length, 0};
    std::size_t n = max_length;
    stage(std::span<const length_request>(&request, 1), std::span<std::size_t>(&n, 1));
    return n;
  };
}

}  // namespace specdec::simulate
