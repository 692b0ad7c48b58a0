//! \file acceptance/multi_candidate.hpp
//! \brief The rules that choose among several candidates at one position: what `verify_tree` applies
//! at every node of a token tree (acceptance/tree.hpp). At a node with target row p, draft row q and
//! children c_1..c_k (in sibling order), a rule accepts one child and descends into it, or rejects
//! them all and emits one token from a residual r. Each preserves the law of the next token; applied
//! node by node with fresh coins it makes the whole emitted sequence follow the target
//! (tests/acceptance/tree.cpp checks the law of the first tokens by exact enumeration).
//!
//! | rule                  | candidates must be             | test of c_j               | after rejecting c_j |
//! |-----------------------|--------------------------------|---------------------------|---------------------|
//! | `strict` (SpecInfer multi-step sampling, arXiv 2305.09781) | i.i.d. draws from q | u < r(c)/q(c) | r <- norm(max(r - q, 0)) = norm(max(p - s q, 0)) |
//! | `recursive_rejection` (Jeon et al., arXiv 2402.14160) | draws from q without replacement | u < r(c)/q_j(c) | r <- norm(max(r - q_j, 0)), q_{j+1} = norm(q_j without c_j) |
//! | `k_seq` (SpecTr K-SEQ, Sun et al., arXiv 2310.15141) | i.i.d. draws from q | u < p(c)/(rho q(c)) | none; if all fail, r(v) ~ max(0, p - rho q) |
//! | `target_only` (EAGLE, SGLang) | any choice not using the coins | u < r(c) | r <- norm(r without c) |
//! | `greedy` | any | c == argmax p | emit argmax p |
//! | `sample_and_match` | any | c == y, y ~ p (one sample per node) | emit y |
//!
//! r starts at p; the emitted token after rejecting every child is drawn from the last r. On a node
//! with one child, `strict`, `recursive_rejection` and `k_seq` are the chain's strict rule, token for
//! token. Duplicated siblings are harmless to `strict`, `k_seq`, `target_only` (r(c) = 0 after c's
//! rejection, so a copy is rejected), greedy and sample-and-match; for `recursive_rejection` a
//! duplicate has q_j(c) = 0 and is rejected with `draft_prob_zero` (it cannot have been drawn
//! without replacement).
#pragma once

#include <type_traits>
#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/lane_ops.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/config.hpp"

namespace specdec {

//! Recursive rejection sampling: candidates drawn from q without replacement.
struct recursive_rejection_rule {
  //! Verified with `tree_method::recursive_rejection`.
  static constexpr tree_method method = tree_method::recursive_rejection;
};
//! Recursive rejection sampling, as a value to pass to `verify_tree`.
inline constexpr recursive_rejection_rule recursive_rejection{};

//! SpecTr's K-SEQ selection among k i.i.d. candidates (rho solved per node, `k_seq_rho`).
struct k_seq_rule {
  //! Verified with `tree_method::k_seq`.
  static constexpr tree_method method = tree_method::k_seq;
};
//! SpecTr's K-SEQ, as a value to pass to `verify_tree`.
inline constexpr k_seq_rule k_seq{};

//! The deterministic-candidate rule: q(c) := 1 for each distinct sibling.
struct target_only_rule {
  //! Verified with `tree_method::target_only`.
  static constexpr tree_method method = tree_method::target_only;
};
//! The target-only rule, as a value to pass to `verify_tree`.
inline constexpr target_only_rule target_only{};

//! The tree method of a rule: its own `Rule::method` (every rule that verifies trees declares one:
//! the three above, and the chain rules `strict`, `greedy`, `sample_and_match` and `typical_rule`).
template <class Rule>
struct tree_method_of {};
//! A rule that names its method.
template <class Rule>
  requires requires { Rule::method; }
struct tree_method_of<Rule> {
  //! The rule's own `Rule::method`.
  static constexpr tree_method value = Rule::method;
};

//! Any rule `specdec::verify_tree` accepts.
template <class Rule>
concept TreeRule = requires {
  { tree_method_of<Rule>::value } -> std::convertible_to<tree_method>;
};

//! Whether a tree rule reads the draft rows q.
template <TreeRule Rule>
inline constexpr bool tree_reads_draft =
    tree_method_of<Rule>::value == tree_method::multi_step || tree_method_of<Rule>::value == tree_method::recursive_rejection ||
    tree_method_of<Rule>::value == tree_method::k_seq;

//! K-SEQ's rho* in [1, k]: the root of 1 - (1 - beta(rho))^k = rho beta(rho), beta(rho) =
//! sum_v min(q(v), p(v) / rho) (SpecTr, the acceptance-optimal rho of its section 4). The left side
//! decreases and the right side increases in rho, so the root is unique; it is found by bisection
//! on the tokens whose ratio p/q lies strictly inside (1, k), after one pass that sums the others.
//! With rho = rho*, the residual p - min(p, rho q) is non-negative and the acceptance probability is
//! 1 - (1 - beta(rho*))^k. Returns 1 when k <= 1 or beta = 0.
template <class T>
double k_seq_rho(std::span<const T> p, std::span<const T> q, std::size_t k) {
  if (k <= 1) return 1.0;
  const double kd = static_cast<double>(k);
  double q_fixed = 0.0, p_fixed = 0.0;  // ratio >= k: always q; ratio <= 1: always p / rho
  thread_local std::vector<std::pair<double, double>> middle;
  middle.clear();
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double pv = static_cast<double>(p[v]), qv = static_cast<double>(q[v]);
    if (!(pv > 0.0) || !(qv > 0.0)) continue;
    if (pv >= kd * qv)
      q_fixed += qv;
    else if (pv <= qv)
      p_fixed += pv;
    else
      middle.emplace_back(pv, qv);
  }
  const auto beta = [&](double rho) {
    double b = q_fixed + p_fixed / rho;
    for (const auto& [pv, qv] : middle) b += (pv / rho < qv) ? pv / rho : qv;
    return b;
  };
  const auto excess = [&](double rho) {  // decreasing in rho; >= 0 at rho = 1, <= 0 at rho = k
    const double b = beta(rho);
    return 1.0 - std::pow(1.0 - b, kd) - rho * b;
  };
  if (!(beta(1.0) > 0.0)) return 1.0;
  double lo = 1.0, hi = kd;
  for (int it = 0; it < 60 && hi - lo > 1e-15 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    (excess(mid) > 0.0 ? lo : hi) = mid;
  }
  return hi;  // the residual p - min(p, rho q) stays >= 0 for rho >= rho*
}

//! The residual max(0, p - s q) as a rejection-rule residual (weight p - min(p, s q)): K-SEQ's
//! (s = rho*), and multi-step sampling's after rejecting j i.i.d. siblings: with r_0 = p and
//! r_{j+1} ~ max(0, r_j / M_j - q), r_j = max(0, p - s_j q) where s_0 = 0 and s_{j+1} = s_j + M_j
//! (M_j = the mass of r_j, M_0 = 1), so r is never materialised. s = 1 is strict's residual, to the bit.
struct scaled_draft_residual {
  //! s >= 0, the multiple of q already accepted (K-SEQ's rho*, or s_j after j rejected siblings); 1 is strict's residual.
  double scale = 1.0;
  //! True iff u * s * q < p: accepts x with probability min(1, p / (s q)), where p = p(x), q = q(x), u ~ U[0, 1).
  SPECDEC_HOST_DEVICE constexpr bool accepts(double p, double q, double u) const noexcept { return u * scale * q < p; }
  //! min(p, s q): the residual is norm(max(0, p - s q)).
  //! (T: double, or a batch of doubles the simd backend evaluates it on: acceptance/lane_ops.hpp.)
  template <class T = double>
  SPECDEC_HOST_DEVICE constexpr T accepted_mass(std::type_identity_t<T> p, std::type_identity_t<T> q) const noexcept {
    const T scaled = product_rn(T(scale), q);
    return lane_min(scaled, p);
  }
};

}  // namespace specdec
