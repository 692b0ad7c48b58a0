//! \file backend/walks/chain.hpp
//! \brief The chain walk of one request (every rule family but block verification, walks/block.hpp),
//! written once for every backend: seq and simd run it through `seq::detail::chain_walk_ops` over their
//! row kernels (backend/seq/verify.hpp), the cuda kernels through `plan_ops` (`plan_rejection`, one
//! thread per request) and `target_walk_ops` (`walk_targets`, over the row jobs' argmax or samples)
//! (backend/cuda/kernels/verify.cuh).
//!
//! The walk tests positions i = 0, 1, ... in order and stops at the first one that is not accepted,
//! or at an unusable row (nothing is emitted then; the status says why). Ids outside [0, V) refuse the
//! whole request before any row is read. It decides; the backend emits what the decision asks for:
//!  - rejection rules (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023): accept x_i when
//!    `test_position` passes on p_i(x_i), q_i(x_i) with the uniform (i, accept); a rejection stops at
//!    i with a token of the residual norm(max(0, p_i - a_i)) to draw with (i, resample), and q_i(x_i) = 0
//!    (`draft_prob_zero`) asks the backend to check first that q_i has mass (status.hpp); after n
//!    acceptances the bonus, a sample of p_n with (n, resample). `walk_rejection`.
//!  - greedy and sample-and-match: the target's choice at row i (its argmax, or y ~ p_i with
//!    (i, target_sample)) accepts x_i when equal, else it is emitted; the bonus is row n's choice. The
//!    tree walk's step on a chain of width 1 (`match_target_choice`). `walk_target_choice`.
//!  - typical acceptance (acceptance/typical.hpp): accept x_i when p_i(x_i) > the row's threshold, else
//!    emit argmax p_i or a sample of p_i restricted to p_i(v) >= threshold with (i, resample).
//!    `walk_typical`.
//!
//! `Ops` reads request's rows at position i (`Sample`: the backend's sampled-token type, with `token`
//! and `status`). A row check flags an unusable row `invalid_row` and, with `check_normalisation`, a row
//! off its sum `not_normalised`; the operations return those flags:
//!   target_at(i, x) -> row_scalar               row p_i checked, then p_i(x) (rejection rules)
//!   draft_at(i, x) -> row_scalar                q_i(x), given by the caller or read from row q_i, checked
//!   check_bonus(n) -> verify_status             row p_n as the bonus's draw needs it checked (ok when
//!                                               the backend's sampler reports an unusable row itself)
//!   check_target(i) -> verify_status            row p_i (greedy, typical)
//!   greedy(i) -> greedy_row                     greedy_usable and argmax of p_i
//!   sample_target(i, u) -> row_draw<Sample>     row p_i checked, then y ~ p_i drawn with u
//!   typical_threshold(rule, i) -> double        rule.threshold(p_i): NaN for an unusable row
//!   target_value(i, x) -> double                p_i(x) of the row check_target(i) read
//!   typical_correction(rule, i, threshold, u)   argmax p_i or the restricted sample with u, a Sample
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/position_test.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/backend/walks/tree.hpp"
#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::walks {

//! What a chain walk stopped for: what the backend emits at the stopping position.
enum class chain_stop : std::uint8_t {
  none,             //!< nothing: a row or an id could not be used (the status says why)
  residual,         //!< a rejection: a token of the rule's residual at `stop`, with (stop, resample)
  residual_q_zero,  //!< a rejection with q(x) = 0: that residual, once q_stop is known to have mass
  bonus,            //!< every draft accepted (rejection rules): a sample of p_n, with (n, resample)
  target_choice,    //!< the walk's own token, `emitted` (greedy, sample-and-match, typical)
};

//! The outcome of one request's chain walk.
struct chain_walk_result {
  std::int32_t stop = 0;                     //!< the position it stopped at: the accepted count
  chain_stop kind = chain_stop::none;        //!< what is emitted there
  token_id emitted = no_token;               //!< the token, when `kind` is `target_choice`
  verify_status status = verify_status::ok;  //!< the request's status flags
};

//! A chain of `n` drafts as a tree of width 1: node i sits at depth i, its one child i + 1 carries
//! draft i (the shape on which the tree walk's addresses are the chain's).
struct chain_tree {
  const token_id* drafts;  //!< the n drafts
  std::int32_t n;          //!< their count
  //! Node i's one child, i + 1, or none at depth n.
  SPECDEC_HOST_DEVICE std::int32_t first_child(std::int32_t i) const { return i < n ? i + 1 : no_node; }
  //! A chain's nodes have no siblings.
  SPECDEC_HOST_DEVICE std::int32_t next_sibling(std::int32_t) const { return no_node; }
  //! Node c's token: draft c - 1.
  SPECDEC_HOST_DEVICE token_id token(std::int32_t c) const { return drafts[c - 1]; }
};

//! A rejection rule's walk of `n` drafts: two scalars and one accept uniform per position; the
//! correction or bonus is left to the backend (`kind`).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Rule, class Ops>
SPECDEC_HOST_DEVICE chain_walk_result walk_rejection(const Rule& rule, Ops& ops, const token_id* drafts, std::int32_t n,
                                                     std::size_t vocab, const random::request_stream& stream) {
  chain_walk_result r;
  if (!drafts_in_vocabulary(drafts, n, vocab, r.status)) return r;
  for (std::int32_t i = 0; i < n; ++i) {
    r.stop = i;
    double p = 0.0, q = 0.0;
    if (!read_scalars(ops, i, drafts[i], r.status, p, q)) return r;
    const position_outcome outcome = test_position(rule, p, q, [&] { return first_uniform(stream, i, random::purpose::accept); });
    if (outcome == position_outcome::accepted) continue;
    if (outcome == position_outcome::unusable) {
      r.status |= verify_status::invalid_row;
    } else if (outcome == position_outcome::draft_prob_zero) {
      r.status |= verify_status::draft_prob_zero;
      r.kind = chain_stop::residual_q_zero;
    } else {
      r.kind = chain_stop::residual;
    }
    return r;
  }
  // Every draft accepted: the bonus is the residual against q = 0, a sample of p_n (docs/design.md, "Conventions").
  r.stop = n;
  r.status |= ops.check_bonus(n);
  if (is_valid(r.status)) r.kind = chain_stop::bonus;
  return r;
}

//! Greedy's (`Family` greedy) or sample-and-match's walk of `n` drafts: at each position the target's
//! choice accepts the draft or is emitted; at n it is the bonus.
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <rule_family Family, class Ops>
SPECDEC_HOST_DEVICE chain_walk_result walk_target_choice(Ops& ops, const token_id* drafts, std::int32_t n, std::size_t vocab,
                                                         const random::request_stream& stream) {
  static_assert(Family == rule_family::greedy || Family == rule_family::sample_and_match);
  constexpr tree_method method = Family == rule_family::greedy ? tree_method::greedy : tree_method::sample_and_match;
  chain_walk_result r;
  if (!drafts_in_vocabulary(drafts, n, vocab, r.status)) return r;
  const chain_tree chain{drafts, n};
  for (std::int32_t i = 0;; ++i) {
    r.stop = i;
    if constexpr (Family == rule_family::greedy) {  // sample_target checks its row itself
      r.status |= ops.check_target(i);
      if (!is_valid(r.status)) return r;
    }
    const tree_choice d = match_target_choice<method>(ops, chain, i, i, vocab, stream, r.status);  // node i at depth i
    if (!is_valid(r.status)) return r;
    if (d.child == no_node) {
      r.kind = chain_stop::target_choice;
      r.emitted = d.emitted;
      return r;
    }
  }
}

//! Typical acceptance's walk of `n` drafts (acceptance/typical.hpp): p_i(x_i) against the row's
//! entropy threshold; the first failing position (or n) emits the rule's correction.
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Rule, class Ops>
SPECDEC_HOST_DEVICE chain_walk_result walk_typical(const Rule& rule, Ops& ops, const token_id* drafts, std::int32_t n,
                                                   std::size_t vocab, const random::request_stream& stream) {
  chain_walk_result r;
  if (!drafts_in_vocabulary(drafts, n, vocab, r.status)) return r;
  for (std::int32_t i = 0;; ++i) {
    r.stop = i;
    r.status |= ops.check_target(i);
    if (!is_valid(r.status)) return r;
    // The threshold is NaN (unusable row) or in [0, epsilon]: `usable_weight` is `isfinite` here.
    const double threshold = ops.typical_threshold(rule, i);
    if (!specdec::detail::usable_weight(threshold)) {
      r.status |= verify_status::invalid_row;
      return r;
    }
    if (i < n && ops.target_value(i, drafts[i]) > threshold) continue;
    emit_sample(ops.typical_correction(rule, i, threshold, first_uniform(stream, i, random::purpose::resample)), vocab, r.emitted,
                r.status);
    if (is_valid(r.status)) r.kind = chain_stop::target_choice;
    return r;
  }
}

//! Entry j of a request's output row: its kept drafts, then `token` at `stop`, then -1.
SPECDEC_HOST_DEVICE inline token_id chain_output_token(const token_id* drafts, std::int32_t stop, token_id token, std::size_t j) {
  const auto i = static_cast<std::int32_t>(j);
  return i < stop ? drafts[i] : (i == stop ? token : no_token);
}

}  // namespace specdec::backend::walks
