//! \file theory/multi_draft_bound.hpp
//! \brief The largest first-token acceptance probability that any lossless multi-draft rule can
//! reach: a closed form for k i.i.d. drafts (one sort, O(V log V)) and an exact maximum flow for any
//! law of the drafted set (i.i.d., or sampled without replacement) on small vocabularies.
//!
//! **Setting.** A node drafts candidates X = (X_1..X_k) from a draft process (here i.i.d. from q, or
//! successive sampling without replacement from q) and a lossless rule emits Y ~ p (the target row),
//! accepting a draft when Y is one of the candidates. Only the set of distinct candidates matters.
//!
//! **Bound.** For every token set H, {Y in X} is contained in {Y not in H} union {X meets H}, so
//!   P(Y in X) <= min over H of [ (1 - p(H)) + P(X meets H) ],
//! and for k i.i.d. drafts P(X meets H) = 1 - (1 - q(H))^k. Conversely, a coupling of (X, Y) is a flow
//! from drafted sets (mass P(set)) to tokens (capacity p) along "token in set" edges; max-flow/min-cut
//! makes the bound attained, so it is the optimum. This is the optimal-transport view of multi-draft
//! speculative sampling: Khisti et al., "Multi-Draft Speculative Sampling: Canonical Decomposition and
//! Theoretical Limits" (ICLR 2025, arXiv 2410.18234); Hu et al., "Towards Optimal Multi-draft
//! Speculative Decoding" (ICLR 2025, arXiv 2502.18779); Thomas and Pal, "Partial Resolution: Optimal
//! Multi-Draft Speculative Sampling in Near-Linear Time" (NeurIPS 2025: the LP as a max-flow problem)
//! and "Global Resolution: Optimal Multi-Draft Speculative Sampling via Convex Minimization"
//! (arXiv 2511.15898).
//!
//! **One sort.** With g(t) = 1 - (1 - t)^k (concave) the objective is 1 - p(H) + g(q(H)). A concave g
//! is the minimum of its tangents l_s(t) = g(s) + g'(s) (t - s), and for one tangent the best H is
//! {x : g'(s) q(x) < p(x)}: a prefix of the tokens sorted by q/p ascending. So the minimum over all
//! 2^V sets is the minimum over the V + 1 prefixes (tokens with p = 0 never help and are left out).
//! tests/theory/multi_draft_bound.cpp checks it against the maximum flow and every subset.
//!
//! Every implemented multi-candidate rule is below its bound: MSS and K-SEQ (theory/tree.hpp) below
//! `optimal_iid_acceptance`, RRS below `optimal_without_replacement_acceptance`. On the pair
//! p = (.5, .3, .2), q = (.2, .3, .5) at k = 2: 0.86 (MSS 0.76, K-SEQ 0.7914), without replacement
//! 69/70 = 0.9857 (RRS 0.82).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/max_flow.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/tree.hpp"

namespace specdec::theory::tree {

//! The largest vocabulary of the max-flow functions: the network has one node per drafted set,
//! 2^V of them.
inline constexpr std::size_t max_flow_vocabulary = 12;

//! The largest number of drafts k of the draft-set laws (their cost is O(k V 2^V)).
inline constexpr std::size_t max_flow_drafts = 64;

//! The optimal first-token acceptance of any lossless rule with k i.i.d. drafts from q (file
//! comment): min over prefixes H of the tokens sorted by q/p ascending of (1 - p(H)) + 1 - (1 - q(H))^k,
//! the empty prefix giving 1. 1 - p(H) and 1 - q(H) are summed over the tokens outside H (no
//! cancellation). k = 1 gives sum_x min(p(x), q(x)). O(V log V).
//! \pre p, q probability rows of the same length; k >= 1. \throws specdec::error otherwise.
inline double optimal_iid_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k) {
  detail::check_row_pair(p, q);
  SPECDEC_EXPECTS(k >= 1, "k must be >= 1");
  std::vector<std::size_t> order;  // tokens with p > 0 by q/p ascending (ties: lower id)
  for (std::size_t x = 0; x < p.size(); ++x)
    if (p[x] > 0.0) order.push_back(x);
  std::vector<double> ratio(p.size(), 0.0);
  for (const std::size_t x : order) ratio[x] = q[x] / p[x];
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ratio[a] < ratio[b]; });
  // suffix[i] = (p, q) mass of order[i..] plus the left-out tokens: what lies outside prefix order[0..i).
  std::vector<double> p_suffix(order.size() + 1, 0.0), q_suffix(order.size() + 1, 0.0);
  for (std::size_t x = 0; x < p.size(); ++x)
    if (!(p[x] > 0.0)) q_suffix[order.size()] += q[x];
  for (std::size_t i = order.size(); i-- > 0;) {
    p_suffix[i] = p_suffix[i + 1] + p[order[i]];
    q_suffix[i] = q_suffix[i + 1] + q[order[i]];
  }
  const auto kk = static_cast<std::uint64_t>(k);
  double best = 1.0;  // H empty: P(Y not in H) = 1
  for (std::size_t i = 1; i <= order.size(); ++i)
    best = std::min(best, p_suffix[i] + theory::detail::one_minus_pow(std::clamp(q_suffix[i], 0.0, 1.0), kk));
  return std::clamp(best, 0.0, 1.0);
}

namespace detail {
inline void check_set_law_input(std::span<const double> q, std::size_t k) {
  SPECDEC_EXPECTS(!q.empty() && q.size() <= max_flow_vocabulary,
                  "the draft-set law needs 1 <= V <= max_flow_vocabulary (12): it has 2^V entries");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<double>),
                  "q must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  SPECDEC_EXPECTS(k >= 1 && k <= max_flow_drafts, "k must be in [1, max_flow_drafts (64)]");
}
//! One draw added to every set: next[S | x] += law[S] * step(S, x); step returns the probability of
//! drawing x after the set S, or a negative value when S stays as it is (no mass left).
template <class Step>
std::vector<double> add_draw(const std::vector<double>& law, std::size_t v, Step step) {
  std::vector<double> next(law.size(), 0.0);
  for (std::size_t set = 0; set < law.size(); ++set) {
    if (!(law[set] > 0.0)) continue;
    for (std::size_t x = 0; x < v; ++x) {
      const double probability = step(set, x);
      if (probability < 0.0) {
        next[set] += law[set];
        break;
      }
      next[set | (std::size_t{1} << x)] += law[set] * probability;
    }
  }
  for (double& mass : next) mass = std::min(mass, 1.0);  // a certain set may round to 1 + ulp
  return next;
}
}  // namespace detail

//! The law of the set of distinct tokens among k i.i.d. drafts from q: entry S (a bit mask, bit x =
//! token x) is P({X_1..X_k} = S). Built one draw at a time, O(k V 2^V).
//! \pre q a probability row with 1 <= V <= max_flow_vocabulary; 1 <= k <= max_flow_drafts.
//! \throws specdec::error otherwise.
inline std::vector<double> iid_draft_set_law(std::span<const double> q, std::size_t k) {
  detail::check_set_law_input(q, k);
  std::vector<double> law(std::size_t{1} << q.size(), 0.0);
  law[0] = 1.0;
  for (std::size_t j = 0; j < k; ++j) law = detail::add_draw(law, q.size(), [&](std::size_t, std::size_t x) { return q[x]; });
  return law;
}

//! The law of the set of k drafts sampled sequentially without replacement from q (successive
//! sampling: after the set S, x not in S is drawn with q(x) / sum_{y not in S} q(y)); once supp q is
//! drawn the process stops, so k > |supp q| gives supp q. Entry S (bit x = token x) is P(set = S).
//! O(k V 2^V). \pre as iid_draft_set_law. \throws specdec::error otherwise.
inline std::vector<double> without_replacement_draft_set_law(std::span<const double> q, std::size_t k) {
  detail::check_set_law_input(q, k);
  std::vector<double> law(std::size_t{1} << q.size(), 0.0), rest(law.size(), 0.0);
  for (std::size_t set = 0; set < law.size(); ++set)
    for (std::size_t x = 0; x < q.size(); ++x)
      if ((set >> x & 1u) == 0) rest[set] += q[x];
  law[0] = 1.0;
  for (std::size_t j = 0; j < k; ++j)
    law = detail::add_draw(law, q.size(), [&](std::size_t set, std::size_t x) {
      if (!(rest[set] > 0.0)) return -1.0;  // nothing left to draw
      return (set >> x & 1u) != 0 ? 0.0 : q[x] / rest[set];
    });
  return law;
}

//! The optimal first-token acceptance of any lossless rule whose drafted set has the law `set_law`
//! (entry S, a bit mask over the V tokens, is P(drafted set = S)), as the maximum flow from the
//! drafted sets (capacity P(S)) to the tokens (capacity p(x)) along the edges S -> x for x in S
//! (file comment). Dinic's algorithm (theory/detail/max_flow.hpp) on 2^V + V + 2 nodes; exact to
//! about (2^V + V) 1e-15.
//! \pre p a probability row with 1 <= V <= max_flow_vocabulary; set_law.size() == 2^V, entries in
//!      [0, 1] summing to 1 within 1e-6. \throws specdec::error otherwise.
inline double optimal_acceptance_max_flow(std::span<const double> p, std::span<const double> set_law) {
  SPECDEC_EXPECTS(!p.empty() && p.size() <= max_flow_vocabulary,
                  "the max-flow bound needs 1 <= V <= max_flow_vocabulary (12): its network has 2^V set nodes; "
                  "optimal_iid_acceptance has no such limit");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  SPECDEC_EXPECTS(set_law.size() == std::size_t{1} << p.size(), "set_law needs one entry per token set (2^V)");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(set_law, theory::detail::row_sum_tolerance<double>),
                  "set_law must be a probability law over the token sets (entries in [0, 1], sum 1 within 1e-6)");
  const std::size_t v = p.size(), sets = set_law.size(), source = 0, sink = 1, first_set = 2, first_token = 2 + sets;
  theory::detail::max_flow_network network(first_token + v);
  for (std::size_t set = 1; set < sets; ++set) {  // the empty set reaches no token
    if (!(set_law[set] > 0.0)) continue;
    network.add_edge(source, first_set + set, set_law[set]);
    for (std::size_t x = 0; x < v; ++x)
      if ((set >> x & 1u) != 0) network.add_edge(first_set + set, first_token + x, std::numeric_limits<double>::infinity());
  }
  for (std::size_t x = 0; x < v; ++x) network.add_edge(first_token + x, sink, p[x]);
  return std::min(1.0, network.solve(source, sink, 1e-15));
}

//! optimal_acceptance_max_flow for k i.i.d. drafts from q: the exact oracle of
//! optimal_iid_acceptance on small vocabularies.
//! \pre p, q probability rows of the same length 1 <= V <= max_flow_vocabulary; 1 <= k <= max_flow_drafts.
//! \throws specdec::error otherwise.
inline double optimal_iid_acceptance_max_flow(std::span<const double> p, std::span<const double> q, std::size_t k) {
  detail::check_row_pair(p, q);
  return optimal_acceptance_max_flow(p, iid_draft_set_law(q, k));
}

//! The optimal first-token acceptance of any lossless rule with k drafts sampled without replacement
//! from q (without_replacement_draft_set_law), by maximum flow; the bound of RRS (rrs_acceptance).
//! No closed form is known to specdec; Hu et al. compute it through the dual LP.
//! \pre as optimal_iid_acceptance_max_flow. \throws specdec::error otherwise.
inline double optimal_without_replacement_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k) {
  detail::check_row_pair(p, q);
  return optimal_acceptance_max_flow(p, without_replacement_draft_set_law(q, k));
}

}  // namespace specdec::theory::tree
