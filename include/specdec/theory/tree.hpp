//! \file theory/tree.hpp
//! \brief Expected accepted length of token-tree verification, and the per-node acceptance of the
//! single-step multi-candidate lossless rules (target-only, SpecInfer's MSS, RRS, SpecTr's K-SEQ).
//!
//! **Tree model.** A tree (core/tree.hpp: node 0 = root, parent(n) < n, children visited in sibling
//! order) is verified from the root down: at a reached node the children are tried in sibling order,
//! and child n is accepted with probability
//!   alpha_n = P(n accepted | its parent was reached and every earlier sibling of n was rejected);
//! the walk descends into the first accepted child and stops at a node whose children are all
//! rejected (or that has none). Acceptances at different nodes are independent. Then
//!   P(reach n) = P(reach parent(n)) prod_{earlier siblings s of n} (1 - alpha_s) alpha_n,
//!   E[A] = sum_{n >= 1} P(reach n),
//! A = the number of accepted drafts (the depth of the last reached node); the target's correction or
//! bonus token is not counted (T = A + 1 tokens per step, theory/sd.hpp's convention). A chain is the
//! one-branch tree and gives SV's E(N | gamma) (theory/sv.hpp); every lossless rule of
//! acceptance/multi_candidate.hpp (docs/trees.md) fits the model with its per-slot acceptances
//! (below) when the node's rows do not depend on the path, as in the i.i.d. models of SpecInfer
//! (Miao et al., arXiv 2305.09781) and Sequoia (Chen et al., arXiv 2402.12374).
//!
//! **Slot model.** `complete_tree_*` and `best_tree` give the j-th child of every node (j = 0, 1, ...,
//! its "sibling slot") the same alpha_j, whatever its depth. Then P(some child of a reached node is
//! accepted) = 1 - prod_j (1 - alpha_j) at every level, so a complete tree of arity k and depth d has
//! the law of a chain of d drafts with that acceptance.
//!
//! **Multi-candidate rules.** For a node with target row p, draft row q and k candidate children,
//! `*_slot_acceptance` returns alpha_1..alpha_k (alpha_j = P(candidate j accepted | candidates
//! 1..j-1 rejected), 0 for a slot that is never reached) and `*_acceptance` their total
//! 1 - prod_j (1 - alpha_j), the probability that the node emits one of its drafted children.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/sampling/top_w.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/sd.hpp"
#include "specdec/theory/sv.hpp"

namespace specdec::theory::tree {

namespace detail {
inline bool all_probabilities(std::span<const double> a) noexcept {
  return std::all_of(a.begin(), a.end(), [](double x) { return theory::detail::is_probability(x); });
}
//! The preconditions shared by the functions over (layout, b, alphas).
inline void check_node_alphas(const tree_layout& layout, std::size_t b, std::span<const double> alphas) {
  SPECDEC_EXPECTS(b < layout.batch_size(), "b is not a request of the layout");
  SPECDEC_EXPECTS(alphas.size() == layout.num_nodes(b), "one alpha per node (the root's is ignored) is required");
  SPECDEC_EXPECTS(all_probabilities(alphas.subspan(1)), "every alpha_n (n >= 1) must be in [0, 1]");
}
inline void check_row_pair(std::span<const double> p, std::span<const double> q) {
  SPECDEC_EXPECTS(p.size() == q.size() && !p.empty(), "p and q must be non-empty rows of the same length");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<double>),
                  "q must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
}
//! row <- norm(max(0, row - q)); returns false (row untouched) when that has no mass.
inline bool subtract_and_normalise(std::vector<double>& row, std::span<const double> q) {
  double mass = 0.0;
  for (std::size_t v = 0; v < row.size(); ++v) mass += std::max(0.0, row[v] - q[v]);
  if (!(mass > 0.0)) return false;
  for (std::size_t v = 0; v < row.size(); ++v) row[v] = std::max(0.0, row[v] - q[v]) / mass;
  return true;
}
//! One level of the recursive-rejection enumeration (see rrs_slot_acceptance).
inline void rrs_level(std::span<const double> residual, std::span<const double> draft, double reach, std::size_t slot,
                      std::vector<double>& accepted_at) {
  if (slot == accepted_at.size() || !(reach > 0.0)) return;
  std::vector<double> next_residual(residual.begin(), residual.end());
  if (!subtract_and_normalise(next_residual, draft)) next_residual.clear();  // r <= q_j: every candidate passes
  double draft_mass = 0.0;
  for (const double x : draft) draft_mass += x;
  std::vector<double> next_draft(draft.size());
  for (std::size_t x = 0; x < draft.size(); ++x) {
    if (!(draft[x] > 0.0)) continue;
    accepted_at[slot] += reach * std::min(draft[x], residual[x]);  // q_j(x) min(1, r(x) / q_j(x))
    const double rejected = reach * std::max(0.0, draft[x] - residual[x]);
    const double rest = draft_mass - draft[x];
    if (next_residual.empty() || !(rejected > 0.0) || !(rest > 0.0)) continue;
    for (std::size_t v = 0; v < draft.size(); ++v) next_draft[v] = v == x ? 0.0 : draft[v] / rest;
    rrs_level(next_residual, next_draft, rejected, slot + 1, accepted_at);
  }
}
//! alpha_j = P(accepted at j) / P(slot j reached), 0 for an unreached slot.
inline std::vector<double> conditional_on_reaching(const std::vector<double>& accepted_at) {
  std::vector<double> alphas(accepted_at.size(), 0.0);
  double reach = 1.0;
  for (std::size_t j = 0; j < alphas.size() && reach > 0.0; ++j) {
    alphas[j] = std::clamp(accepted_at[j] / reach, 0.0, 1.0);
    reach = std::max(0.0, reach - accepted_at[j]);
  }
  return alphas;
}
}  // namespace detail

// ---- trees under per-node acceptance ---------------------------------------------------------------

//! reach[n] = P(node n of request b is on the accepted path): 1 for the root, and
//! P(reach parent) prod_{earlier siblings s} (1 - alpha_s) alpha_n below it (file comment). O(nodes).
//! \pre b < layout.batch_size(); alphas.size() == reach.size() == layout.num_nodes(b); alphas[n] in
//!      [0, 1] for n >= 1 (alphas[0] is ignored).
//! \throws specdec::error otherwise.
inline void path_probabilities(const tree_layout& layout, std::size_t b, std::span<const double> alphas,
                               std::span<double> reach) {
  detail::check_node_alphas(layout, b, alphas);
  SPECDEC_EXPECTS(reach.size() == alphas.size(), "reach needs one entry per node");
  std::fill(reach.begin(), reach.end(), 0.0);
  reach[0] = 1.0;
  for (std::size_t n = 0; n < reach.size(); ++n) {  // parents come before their children
    double all_rejected = reach[n];
    for (std::int32_t c = layout.first_child(b, n); c != no_node; c = layout.next_sibling(b, static_cast<std::size_t>(c))) {
      const auto child = static_cast<std::size_t>(c);
      reach[child] = all_rejected * alphas[child];
      all_rejected *= 1.0 - alphas[child];
    }
  }
}

//! last[n] = P(the accepted path ends at node n) = P(reach n) prod_{children c of n} (1 - alpha_c);
//! the entries sum to 1.
//! \pre as path_probabilities, with last.size() == layout.num_nodes(b).
//! \throws specdec::error otherwise.
inline void end_probabilities(const tree_layout& layout, std::size_t b, std::span<const double> alphas, std::span<double> last) {
  path_probabilities(layout, b, alphas, last);
  for (std::size_t n = 0; n < last.size(); ++n)
    for (std::int32_t c = layout.first_child(b, n); c != no_node; c = layout.next_sibling(b, static_cast<std::size_t>(c)))
      last[n] *= 1.0 - alphas[static_cast<std::size_t>(c)];
}

//! E[A] = sum_{n >= 1} P(reach n), the expected number of accepted drafts of request b's tree
//! (file comment; the bonus/correction token is not counted).
//! \pre as path_probabilities. \throws specdec::error otherwise.
inline double expected_accepted(const tree_layout& layout, std::size_t b, std::span<const double> alphas) {
  std::vector<double> reach(alphas.size());
  path_probabilities(layout, b, alphas, reach);
  double sum = 0.0;
  for (std::size_t n = 1; n < reach.size(); ++n) sum += reach[n];
  return sum;
}

//! P(A = d) for d = 0 .. the depth of request b's tree: the end probabilities summed by depth.
//! \pre as path_probabilities. \throws specdec::error otherwise.
inline std::vector<double> accepted_length_law(const tree_layout& layout, std::size_t b, std::span<const double> alphas) {
  std::vector<double> last(alphas.size());
  end_probabilities(layout, b, alphas, last);
  std::int32_t depth = 0;
  for (std::size_t n = 0; n < last.size(); ++n) depth = std::max(depth, layout.depth(b, n));
  std::vector<double> law(static_cast<std::size_t>(depth) + 1, 0.0);
  for (std::size_t n = 0; n < last.size(); ++n) law[static_cast<std::size_t>(layout.depth(b, n))] += last[n];
  return law;
}

//! E[A] of a chain of gamma = alphas.size() drafts, alphas[i] = alpha_{i+1}:
//! sum_{k=1}^{gamma} prod_{i<=k} alpha_i (SV appendix D eq. (4), theory::sv::expected_accepted;
//! = theory::sd::expected_tokens(alphas) - 1). Equals expected_accepted over
//! tree_layout::chains({gamma}) with those alphas at nodes 1..gamma.
//! \pre every alpha in [0, 1]. \throws specdec::error otherwise.
inline double chain_expected_accepted(std::span<const double> alphas) { return sv::expected_accepted(alphas, alphas.size()); }

//! P(some candidate is accepted) = 1 - prod_j (1 - alpha_j) from the slot acceptances alpha_j.
//! \pre every alpha in [0, 1]. \throws specdec::error otherwise.
inline double any_accepted(std::span<const double> slot_alphas) {
  SPECDEC_EXPECTS(detail::all_probabilities(slot_alphas), "every slot acceptance must be in [0, 1]");
  double all_rejected = 1.0;
  for (const double a : slot_alphas) all_rejected *= 1.0 - a;
  return 1.0 - all_rejected;
}

//! Node alphas of the slot model: node n gets slot_alphas[j] when it is the j-th child (0-based) of
//! its parent; the root gets 0 (ignored). The result feeds path_probabilities and expected_accepted.
//! \pre b < layout.batch_size(); every node has at most slot_alphas.size() children; slot alphas in
//!      [0, 1]. \throws specdec::error otherwise.
inline std::vector<double> slot_model_alphas(const tree_layout& layout, std::size_t b, std::span<const double> slot_alphas) {
  SPECDEC_EXPECTS(b < layout.batch_size(), "b is not a request of the layout");
  SPECDEC_EXPECTS(detail::all_probabilities(slot_alphas), "every slot acceptance must be in [0, 1]");
  std::vector<double> alphas(layout.num_nodes(b), 0.0);
  for (std::size_t n = 0; n < alphas.size(); ++n) {
    std::size_t slot = 0;
    for (std::int32_t c = layout.first_child(b, n); c != no_node;
         c = layout.next_sibling(b, static_cast<std::size_t>(c)), ++slot) {
      SPECDEC_EXPECTS(slot < slot_alphas.size(), "a node has more children than there are slot acceptances");
      alphas[static_cast<std::size_t>(c)] = slot_alphas[slot];
    }
  }
  return alphas;
}

//! Nodes of a complete tree of arity k and depth d, the root included: (k^(d+1) - 1) / (k - 1).
//! \pre k >= 1; the count fits in int32. \throws specdec::error otherwise.
inline std::size_t complete_tree_nodes(int arity, std::size_t depth) {
  SPECDEC_EXPECTS(arity >= 1, "arity must be >= 1");
  std::size_t nodes = 1, level = 1;
  for (std::size_t d = 1; d <= depth; ++d) {
    SPECDEC_EXPECTS(level <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) / static_cast<std::size_t>(arity),
                    "the tree is too large");
    level *= static_cast<std::size_t>(arity);
    nodes += level;
    SPECDEC_EXPECTS(nodes <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()), "the tree is too large");
  }
  return nodes;
}

//! The complete tree of arity k and depth d as a one-request layout, nodes in breadth-first order
//! (children of a node in slot order). arity 1 is tree_layout::chains({d}).
//! \pre as complete_tree_nodes. \throws specdec::error otherwise.
inline tree_layout complete_tree(int arity, std::size_t depth) {
  const std::size_t nodes = complete_tree_nodes(arity, depth);
  std::vector<std::int32_t> parents(nodes, no_node);
  for (std::size_t n = 1; n < nodes; ++n) parents[n] = static_cast<std::int32_t>((n - 1) / static_cast<std::size_t>(arity));
  const std::int32_t count[] = {static_cast<std::int32_t>(nodes)};
  return tree_layout::from_parents(count, parents);
}

//! E[A] of a complete tree of depth d whose every node has k = slot_alphas.size() children, the j-th
//! accepted with slot_alphas[j] (slot model): with s = any_accepted(slot_alphas), A = min(G, d) for a
//! geometric G with P(G >= i) = s^i, so E[A] = sum_{i=1}^{d} s^i = theory::sd::expected_tokens(s, d) - 1
//! (Leviathan eq. (1) with acceptance s, bonus token removed). k = 1 is the i.i.d. chain.
//! \pre slot_alphas not empty, in [0, 1]. \throws specdec::error otherwise.
inline double complete_tree_expected_accepted(std::span<const double> slot_alphas, std::size_t depth) {
  SPECDEC_EXPECTS(!slot_alphas.empty(), "a complete tree needs arity >= 1");
  return sd::expected_tokens(any_accepted(slot_alphas), depth) - 1.0;
}

//! E[A] of the complete tree of arity k and depth d in which every child is accepted with the same
//! conditional probability alpha: s = 1 - (1 - alpha)^k, E[A] = sum_{i=1}^{d} s^i.
//! \pre alpha in [0, 1]; arity >= 1. \throws specdec::error otherwise.
inline double complete_tree_expected_accepted(double alpha, int arity, std::size_t depth) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  SPECDEC_EXPECTS(arity >= 1, "arity must be >= 1");
  const double s = theory::detail::one_minus_pow(1.0 - alpha, static_cast<std::uint64_t>(arity));
  return sd::expected_tokens(s, depth) - 1.0;
}

//! The tree of `budget` drafted nodes (plus the root) with the largest E[A] in the slot model, at most
//! max_depth deep: grown greedily, each step adding the frontier node (the next child slot of a tree
//! node) with the largest P(reach) (ties: the one that became frontier first). Node ids follow the
//! order of addition, so siblings are in slot order. E[A] is the sum of the chosen nodes' P(reach),
//! and a node's P(reach) never exceeds its parent's; when the slot probabilities
//! r_j = alpha_j prod_{i<j} (1 - alpha_i) are non-increasing in j it neither exceeds its previous
//! sibling's, so the `budget` largest P(reach) form a tree and the greedy tree is optimal (checked
//! against all trees of up to 7 nodes in tests/theory/tree.cpp). The slot model is Sequoia's
//! positional acceptance (Chen et al., arXiv 2402.12374), which builds its trees by dynamic
//! programming. Otherwise the result is the greedy tree, not necessarily the best.
//! Cost O(budget log budget).
//! \pre slot_alphas not empty, in [0, 1]; budget >= 0 and < 2^31 - 1; max_depth >= 1 when budget > 0.
//! \throws specdec::error otherwise.
inline tree_layout best_tree(std::span<const double> slot_alphas, std::size_t budget,
                             int max_depth = std::numeric_limits<int>::max()) {
  SPECDEC_EXPECTS(!slot_alphas.empty() && detail::all_probabilities(slot_alphas),
                  "slot acceptances must be a non-empty list of probabilities");
  SPECDEC_EXPECTS(budget < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()), "budget is too large");
  SPECDEC_EXPECTS(budget == 0 || max_depth >= 1, "max_depth must be >= 1");
  std::vector<double> slot_reach(slot_alphas.size());
  double all_rejected = 1.0;
  for (std::size_t j = 0; j < slot_alphas.size(); ++j) {
    slot_reach[j] = all_rejected * slot_alphas[j];
    all_rejected *= 1.0 - slot_alphas[j];
  }
  struct candidate {
    double reach;
    std::uint64_t order;  // when it joined the frontier
    std::int32_t parent;
    std::size_t slot;
  };
  const auto worse = [](const candidate& a, const candidate& c) {
    return a.reach < c.reach || (a.reach == c.reach && a.order > c.order);
  };
  std::priority_queue<candidate, std::vector<candidate>, decltype(worse)> frontier(worse);
  std::vector<std::int32_t> parents{no_node};
  std::vector<double> reach{1.0};
  std::vector<int> depth{0};
  std::uint64_t order = 0;
  frontier.push({slot_reach[0], order++, 0, 0});
  while (parents.size() <= budget && !frontier.empty()) {
    const candidate c = frontier.top();
    frontier.pop();
    const auto node = static_cast<std::int32_t>(parents.size());
    parents.push_back(c.parent);
    reach.push_back(c.reach);
    depth.push_back(depth[static_cast<std::size_t>(c.parent)] + 1);
    if (c.slot + 1 < slot_alphas.size())
      frontier.push({reach[static_cast<std::size_t>(c.parent)] * slot_reach[c.slot + 1], order++, c.parent, c.slot + 1});
    if (depth.back() < max_depth) frontier.push({c.reach * slot_reach[0], order++, node, 0});
  }
  const std::int32_t count[] = {static_cast<std::int32_t>(parents.size())};
  return tree_layout::from_parents(count, parents);
}

// ---- per-node acceptance of the multi-candidate lossless rules ---------------------------------------

//! The k tokens with the largest q (ties: lower id first), the siblings of a "top-k of the draft"
//! tree node. \pre k >= 1. \throws specdec::error otherwise.
inline std::vector<token_id> top_k_tokens(std::span<const double> q, std::size_t k) {
  SPECDEC_EXPECTS(k >= 1, "k must be >= 1");
  std::vector<std::size_t> indices;
  top_w_indices(q, k, indices);
  return std::vector<token_id>(indices.begin(), indices.end());
}

//! Slot acceptances of the target-only rule (q := 1; EAGLE's reference code and SGLang's
//! `tree_speculative_sampling_target_only`): siblings c_1..c_k, chosen by any procedure independent
//! of the coins, are tried in order with r <- p, accept c_j iff u < r(c_j), else r(c_j) <- 0 and
//! renormalise. So alpha_j = p(c_j) / (1 - sum_{i<j} p(c_i)) and the total is sum_j p(c_j).
//! \pre p a probability row; siblings distinct ids in [0, p.size()). \throws specdec::error otherwise.
inline std::vector<double> target_only_slot_acceptance(std::span<const double> p, std::span<const token_id> siblings) {
  SPECDEC_EXPECTS(!p.empty() && theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  std::vector<bool> seen(p.size(), false);
  std::vector<double> alphas(siblings.size(), 0.0);
  double remaining = 1.0;
  for (std::size_t j = 0; j < siblings.size(); ++j) {
    SPECDEC_EXPECTS(in_vocabulary(siblings[j], p.size()), "a sibling id outside the vocabulary");
    const auto c = static_cast<std::size_t>(siblings[j]);
    SPECDEC_EXPECTS(!seen[c], "siblings must be distinct (the rule counts a duplicate twice)");
    seen[c] = true;
    if (remaining > 0.0) alphas[j] = std::clamp(p[c] / remaining, 0.0, 1.0);
    remaining = std::max(0.0, remaining - p[c]);
  }
  return alphas;
}

//! Total acceptance of the target-only rule: sum of p over the siblings (= any_accepted of the slots).
//! \pre as target_only_slot_acceptance. \throws specdec::error otherwise.
inline double target_only_acceptance(std::span<const double> p, std::span<const token_id> siblings) {
  return any_accepted(target_only_slot_acceptance(p, siblings));
}

//! Slot acceptances of SpecInfer's multi-step speculative sampling (Miao et al., arXiv 2305.09781)
//! with k i.i.d. candidates from q: r_1 = p; candidate j is accepted with
//! min(1, r_j(c_j) / q(c_j)); on rejection r_{j+1} = norm(max(0, r_j - q)). The residuals do not
//! depend on the candidates, so the candidates' independence gives the exact closed form
//!   alpha_j = sum_x q(x) min(1, r_j(x) / q(x)) = sum_x min(q(x), r_j(x)),
//! total 1 - prod_j (1 - alpha_j), in O(k V) (tests/theory/tree.cpp checks it against the
//! enumeration of all V^k candidate tuples). A slot after one with alpha = 1 is never reached (0).
//! \pre p, q probability rows of the same length; k >= 1. \throws specdec::error otherwise.
inline std::vector<double> mss_slot_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k) {
  detail::check_row_pair(p, q);
  SPECDEC_EXPECTS(k >= 1, "k must be >= 1");
  std::vector<double> alphas(k, 0.0), residual(p.begin(), p.end());
  for (std::size_t j = 0; j < k; ++j) {
    alphas[j] = sd::detail::acceptance_rate_impl(std::span<const double>(residual), q);
    if (!detail::subtract_and_normalise(residual, q)) break;  // r_j <= q: alpha_j = 1
  }
  return alphas;
}

//! Total acceptance of MSS with k i.i.d. candidates (= any_accepted of mss_slot_acceptance).
//! \pre as mss_slot_acceptance. \throws specdec::error otherwise.
inline double mss_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k) {
  return any_accepted(mss_slot_acceptance(p, q, k));
}

//! Slot acceptances of recursive rejection sampling without replacement (Jeon et al., "Recursive
//! Speculative Decoding", arXiv 2402.14160): candidate j is drawn from q_j = q with c_1..c_{j-1}
//! removed and renormalised, accepted with min(1, r_j(c_j) / q_j(c_j)); on rejection
//! r_{j+1} = norm(max(0, r_j - q_j)). q_j depends on the earlier candidates, so the probability is
//! computed exactly by enumerating every ordered tuple of distinct candidates (depth-first, with the
//! probability of reaching each prefix): V! / (V - k)! <= V^k tuples, O(V) work each, so
//! O(V^(k+1)) time and O(k V) memory; meant for small V. At most |supp q| distinct candidates
//! exist: a slot beyond them has acceptance 0.
//! \pre p, q probability rows of the same length; k >= 1; V! / (V - min(k, V))! <= max_tuples.
//! \throws specdec::error otherwise.
inline std::vector<double> rrs_slot_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k,
                                               std::size_t max_tuples = std::size_t{1} << 24) {
  detail::check_row_pair(p, q);
  SPECDEC_EXPECTS(k >= 1, "k must be >= 1");
  std::size_t tuples = 1;  // V (V - 1) ... (V - min(k, V) + 1)
  for (std::size_t j = 0; j < k && j < p.size() && tuples <= max_tuples; ++j) tuples *= p.size() - j;
  SPECDEC_EXPECTS(tuples <= max_tuples, "the enumeration would visit more than max_tuples candidate tuples");
  std::vector<double> accepted_at(k, 0.0);
  detail::rrs_level(p, q, 1.0, 0, accepted_at);
  return detail::conditional_on_reaching(accepted_at);
}

//! Total acceptance of RRS without replacement (= any_accepted of rrs_slot_acceptance).
//! \pre as rrs_slot_acceptance. \throws specdec::error otherwise.
inline double rrs_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k,
                             std::size_t max_tuples = std::size_t{1} << 24) {
  return any_accepted(rrs_slot_acceptance(p, q, k, max_tuples));
}

//! SpecTr's k-sequential selection at its optimal parameter: rho, beta(rho) and the acceptance.
struct kseq_solution {
  double rho = 1.0;         //!< rho*, in [1, k]
  double beta = 0.0;        //!< beta(rho*) = sum_x min(q(x), p(x) / rho*): each candidate's acceptance
  double acceptance = 0.0;  //!< 1 - (1 - beta)^k
};

//! beta(rho) = sum_x min(q(x), p(x) / rho) (SpecTr K-SEQ). \pre rho > 0.
inline double kseq_beta(std::span<const double> p, std::span<const double> q, double rho) {
  SPECDEC_EXPECTS(rho > 0.0, "rho must be > 0");
  double beta = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) beta += std::min(q[v], p[v] / rho);
  return std::min(beta, 1.0);
}

//! SpecTr's k-sequential selection (Sun, Suresh, Ro, Beirami, Jain, Yu, NeurIPS 2023,
//! arXiv 2310.15141): candidates c_1..c_k i.i.d. from q, c_i accepted with min(1, p(c_i) / (rho q(c_i)));
//! if none passes, the residual is p_res = [p - min(q, p/rho) (1 - (1 - beta)^k) / beta] / (1 - beta)^k.
//! With f(rho) = 1 - (1 - beta(rho))^k - rho beta(rho): f decreases in rho, f(1) >= 0 >= f(k), and
//! f(rho) <= 0 makes p_res >= 0. rho* is the smallest root of f on [1, k], found by bisection to the
//! last bit (each step O(V)). The acceptance 1 - (1 - beta)^k decreases in rho, and a valid rho below
//! rho* (if any) has every token of supp p on the side q(x) < p(x) / rho, hence the same beta; so
//! rho* gives the largest acceptance of any valid rho. Each candidate is accepted with probability
//! beta(rho*), so every slot acceptance is beta.
//! \pre p, q probability rows of the same length; k >= 1. \throws specdec::error otherwise.
inline kseq_solution kseq(std::span<const double> p, std::span<const double> q, std::size_t k) {
  detail::check_row_pair(p, q);
  SPECDEC_EXPECTS(k >= 1, "k must be >= 1");
  const auto kk = static_cast<std::uint64_t>(k);
  const auto f = [&](double rho) {
    const double beta = kseq_beta(p, q, rho);
    return theory::detail::one_minus_pow(1.0 - beta, kk) - rho * beta;
  };
  double lo = 1.0, hi = static_cast<double>(k);  // invariant: f(hi) <= 0, and f(lo) > 0 unless lo == hi
  if (f(lo) <= 0.0) hi = lo;
  while (hi > lo) {
    const double mid = lo + 0.5 * (hi - lo);
    if (mid <= lo || mid >= hi) break;
    (f(mid) <= 0.0 ? hi : lo) = mid;
  }
  kseq_solution s;
  s.rho = hi;
  s.beta = kseq_beta(p, q, hi);
  s.acceptance = theory::detail::one_minus_pow(1.0 - s.beta, kk);
  return s;
}

//! Total acceptance of K-SEQ at rho*: 1 - (1 - beta(rho*))^k.
//! \pre as kseq. \throws specdec::error otherwise.
inline double kseq_acceptance(std::span<const double> p, std::span<const double> q, std::size_t k) {
  return kseq(p, q, k).acceptance;
}

}  // namespace specdec::theory::tree
