//! \file theory/sd.hpp
//! \brief Closed forms of standard speculative decoding (Leviathan, Kalman and Matias 2023,
//! "Fast Inference from Transformers via Speculative Decoding", arXiv 2211.17192) and their generalisations: position-dependent acceptance alpha_1..alpha_gamma, a
//! latency profile t_target(k) instead of a constant cost ratio c, and the variance of the number
//! of tokens per iteration.
//!
//! Model (Leviathan section 3): one iteration drafts gamma tokens, the target verifies them in one
//! call, the drafts are accepted left to right until the first rejection, and the target then
//! emits one more token (the correction at the rejected position, or the bonus token when all
//! gamma drafts pass). The number of tokens emitted per iteration is
//!   T = 1 + A,  A = number of accepted drafts in {0, ..., gamma},
//! so the bonus/correction token IS counted (Leviathan's convention; SV's N = A does not count it,
//! see theory/sv.hpp). Acceptances are independent across positions with P(accept position i |
//! positions 1..i-1 accepted) = alpha_i; Leviathan's i.i.d. assumption is alpha_i = alpha.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec::theory::sd {

namespace detail {
template <class T>
constexpr double acceptance_rate_impl(std::span<const T> p, std::span<const T> q) noexcept {
  double s = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double pv = static_cast<double>(p[v]), qv = static_cast<double>(q[v]);
    s += pv < qv ? pv : qv;
  }
  return s > 1.0 ? 1.0 : s;
}
constexpr bool all_probabilities(std::span<const double> a) noexcept {
  for (const double x : a)
    if (!theory::detail::is_probability(x)) return false;
  return true;
}
//! gamma as the signed 64-bit length of theory::detail's closed forms (geometric_sum,
//! truncated_geometric_variance), clamped at INT64_MAX = 2^63 - 1. The clamp does not change their
//! value for alpha < 1: alpha^(2^63) <= (1 - 2^-53)^(2^63) ~ e^-1024 underflows to 0 in double, so
//! there they already equal their gamma -> infinity limits; alpha = 1 is handled by the callers.
constexpr std::int64_t closed_form_length(std::size_t gamma) noexcept {
  constexpr auto most = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(gamma < most ? gamma : most);
}
}  // namespace detail

//! The acceptance rate beta = sum_x min(p(x), q(x)) = 1 - TV(p, q) of one position: the
//! probability that standard rejection sampling keeps a draft token x ~ q against target p
//! (Leviathan et al. 2023, section 3.1 / Definition 3.1; alpha = E[beta] over contexts).
//! Accumulated in double; clamped to <= 1 against rounding.
//! \pre p.size() == q.size() > 0; every entry in [0, 1] (no NaN); each row sums to 1 within 1e-6.
//! \throws specdec::error otherwise.
constexpr double acceptance_rate(std::span<const double> p, std::span<const double> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "p and q must have the same length");
  SPECDEC_EXPECTS(!p.empty(), "p and q must not be empty");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<double>),
                  "q must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  return detail::acceptance_rate_impl(p, q);
}

//! float rows: as the double overload (accumulated in double); rows must sum to 1 within 1e-4.
//! \pre p.size() == q.size() > 0; every entry in [0, 1] (no NaN); each row sums to 1 within 1e-4.
//! \throws specdec::error otherwise.
constexpr double acceptance_rate(std::span<const float> p, std::span<const float> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "p and q must have the same length");
  SPECDEC_EXPECTS(!p.empty(), "p and q must not be empty");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<float>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-4)");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<float>),
                  "q must be a probability row (entries in [0, 1], sum 1 within 1e-4)");
  return detail::acceptance_rate_impl(p, q);
}

//! P(T = k): the distribution of the number of tokens emitted per iteration with i.i.d.
//! acceptance alpha: alpha^(k-1) (1 - alpha) for 1 <= k <= gamma, alpha^gamma for k = gamma + 1,
//! 0 otherwise (a capped geometric law; Leviathan section 3.4, whose mean is eq. (1)).
//! Bonus/correction token counted: T >= 1. 0^0 = 1.
//! \pre alpha in [0, 1] (k = 0 or k > gamma + 1 give 0).
//! \throws specdec::error otherwise.
constexpr double prob_tokens(std::size_t k, double alpha, std::size_t gamma) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  if (k == 0 || k - 1 > gamma) return 0.0;  // k - 1, not gamma + 1: no wrap-around at gamma = SIZE_MAX
  if (k - 1 == gamma) return theory::detail::pow_int(alpha, gamma);
  return theory::detail::pow_int(alpha, k - 1) * (1.0 - alpha);
}

//! Expected tokens per iteration E[T] = (1 - alpha^(gamma+1)) / (1 - alpha) (Leviathan et al.
//! 2023, eq. (1); i.i.d. acceptance alpha; bonus token counted).
//! Computed as -expm1((gamma+1) log alpha) / -expm1(log alpha): exact limits gamma + 1 at
//! alpha = 1 and 1 at alpha = 0, a few ulps for alpha = 1 - 1e-12 and for huge gamma. During
//! constant evaluation: Horner's sum 1 + alpha (1 + alpha (...)).
//! \pre alpha in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double expected_tokens(double alpha, std::size_t gamma) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  if (alpha == 1.0) return static_cast<double>(gamma) + 1.0;  // exact for any gamma, unclamped
  return theory::detail::geometric_sum(alpha, detail::closed_form_length(gamma));
}

//! Expected tokens per iteration with position-dependent acceptance (beyond the papers):
//!   E[T] = 1 + sum_{k=1}^{gamma} prod_{i=1}^{k} alpha_i,   gamma = alphas.size(),
//! where alphas[i-1] = alpha_i = P(draft i accepted | drafts 1..i-1 accepted).
//! Reduces to Leviathan eq. (1) when every alpha_i = alpha, and equals 1 + E(N | gamma) of SV
//! appendix D eq. (4) with a = alphas (theory/sv.hpp counts accepted drafts only).
//! An empty span (gamma = 0) gives 1.
//! \pre every alphas[i] in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double expected_tokens(std::span<const double> alphas) {
  SPECDEC_EXPECTS(detail::all_probabilities(alphas), "every alpha_i must be in [0, 1]");
  double sum = 1.0, t = 1.0;
  for (const double a : alphas) {
    t *= a;
    if (t == 0.0) break;
    sum += t;
  }
  return sum;
}

//! Var(T), the variance of the number of tokens per iteration with i.i.d. acceptance alpha
//! (beyond the papers; T = 1 + min(G, gamma), G geometric with P(G >= k) = alpha^k):
//!   Var(T) = [alpha - alpha^(2 gamma + 2) - (2 gamma + 1) alpha^(gamma+1) (1 - alpha)] / (1 - alpha)^2.
//! Limits: 0 at alpha = 0, alpha = 1 and gamma = 0; alpha (1 - alpha) at gamma = 1;
//! alpha / (1 - alpha)^2 (the untruncated geometric law) as gamma -> infinity. Evaluated in the
//! sinh/series form of theory::detail::truncated_geometric_variance, which keeps full relative
//! accuracy for alpha -> 1 and costs O(1) for any gamma.
//! \pre alpha in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double tokens_variance(double alpha, std::size_t gamma) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  return theory::detail::truncated_geometric_variance(alpha, detail::closed_form_length(gamma));
}

//! Var(T) with position-dependent acceptance (beyond the papers). With t_k = prod_{i<=k} alpha_i
//! = P(A >= k) and the indicators 1[A >= k] nested,
//!   Var(T) = Var(A) = sum_k t_k [(1 - t_k) + 2 sum_{j<k} (1 - t_j)],
//! a sum of non-negative terms (no cancellation); 1 - t_k is computed as -expm1(sum log alpha_i).
//! Reduces to tokens_variance(alpha, gamma) for constant alphas; it is also the variance of SV's
//! N (theory/sv.hpp, App. D eq. (3)), since T = N + 1.
//! \pre every alphas[i] in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double tokens_variance(std::span<const double> alphas) {
  SPECDEC_EXPECTS(detail::all_probabilities(alphas), "every alpha_i must be in [0, 1]");
  double var = 0.0, prefix = 0.0, t = 1.0, log_t = 0.0;
  for (const double a : alphas) {
    t *= a;
    if (t == 0.0) break;
    double one_minus_t = 0.0;
    if (std::is_constant_evaluated()) {
      one_minus_t = 1.0 - t;
    } else {
      log_t += std::log(a);
      one_minus_t = -std::expm1(log_t);
    }
    var += t * (one_minus_t + 2.0 * prefix);
    prefix += one_minus_t;
  }
  return var;
}

//! Walltime improvement factor (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)) =
//! E[T] / (gamma c + 1) (Leviathan et al. 2023, Theorem 3.8): the expected speedup over plain
//! target decoding when a draft call costs c target calls and a target call costs the same for
//! any number of scored positions. gamma = 0 gives 1.
//! \pre alpha in [0, 1]; c finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double speedup(double alpha, std::size_t gamma, double c) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c), "c (draft cost / target cost) must be finite and >= 0");
  return expected_tokens(alpha, gamma) / (static_cast<double>(gamma) * c + 1.0);
}

//! Walltime improvement with position-dependent acceptance (beyond the papers):
//! expected_tokens(alphas) / (gamma c + 1), gamma = alphas.size(). Reduces to Leviathan Theorem 3.8
//! when every alpha_i = alpha.
//! \pre every alphas[i] in [0, 1]; c finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double speedup(std::span<const double> alphas, double c) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c), "c (draft cost / target cost) must be finite and >= 0");
  return expected_tokens(alphas) / (static_cast<double>(alphas.size()) * c + 1.0);
}

//! Walltime improvement with position-dependent acceptance and a latency profile (beyond the
//! papers): one iteration costs gamma t_draft + t_target(gamma) and emits expected_tokens(alphas)
//! tokens; plain decoding costs t_target(0) per token, so
//!   speedup = expected_tokens(alphas) t_target(0) / (gamma t_draft + t_target(gamma)),
//! gamma = alphas.size(). t_target(k) is the time of one target call that verifies k drafted
//! tokens (it scores k + 1 positions); see theory/latency_profile.hpp for the accepted forms.
//! Reduces to Leviathan Theorem 3.8 when t_target is constant and c = t_draft / t_target(0),
//! and to speedup(alphas, c) likewise.
//! \pre every alphas[i] in [0, 1]; t_draft finite and >= 0; t_target(0) and t_target(gamma)
//!      finite and > 0 (a span profile needs gamma + 1 entries).
//! \throws specdec::error otherwise.
template <LatencyProfile L>
constexpr double speedup(std::span<const double> alphas, double t_draft, const L& t_target) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_draft), "t_draft must be finite and >= 0");
  const std::size_t gamma = alphas.size();
  const double baseline = latency_at(t_target, 0);
  const double iteration = static_cast<double>(gamma) * t_draft + latency_at(t_target, gamma);
  return expected_tokens(alphas) * baseline / iteration;
}

//! Walltime improvement with i.i.d. acceptance alpha and a latency profile (beyond the papers):
//! expected_tokens(alpha, gamma) t_target(0) / (gamma t_draft + t_target(gamma)). Reduces to
//! Leviathan Theorem 3.8 when t_target is constant and c = t_draft / t_target(0).
//! \pre alpha in [0, 1]; t_draft finite and >= 0; t_target(0), t_target(gamma) finite, > 0.
//! \throws specdec::error otherwise.
template <LatencyProfile L>
constexpr double speedup(double alpha, std::size_t gamma, double t_draft, const L& t_target) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_draft), "t_draft must be finite and >= 0");
  const double tokens = expected_tokens(alpha, gamma);
  const double baseline = latency_at(t_target, 0);
  return tokens * baseline / (static_cast<double>(gamma) * t_draft + latency_at(t_target, gamma));
}

//! Factor by which the total number of arithmetic operations grows,
//! (1 - alpha)(gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1)) = (gamma c_hat + gamma + 1) / E[T]
//! (Leviathan et al. 2023, Theorem 3.11), c_hat = draft operations per token / target operations
//! per token. The target is charged gamma + 1 scored positions per iteration.
//! \pre alpha in [0, 1]; c_hat finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double operations_factor(double alpha, std::size_t gamma, double c_hat) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c_hat), "c_hat must be finite and >= 0");
  const double g = static_cast<double>(gamma);
  return (g * c_hat + g + 1.0) / expected_tokens(alpha, gamma);
}

//! Operations factor with position-dependent acceptance (beyond the papers):
//! (gamma c_hat + gamma + 1) / expected_tokens(alphas), gamma = alphas.size(); reduces to
//! Leviathan Theorem 3.11 for constant alphas.
//! \pre every alphas[i] in [0, 1]; c_hat finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double operations_factor(std::span<const double> alphas, double c_hat) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c_hat), "c_hat must be finite and >= 0");
  const double g = static_cast<double>(alphas.size());
  return (g * c_hat + g + 1.0) / expected_tokens(alphas);
}

//! The gamma in [0, max_gamma] that maximises speedup(alpha, gamma, c) (Leviathan et al. 2023,
//! Theorem 3.8, searched exhaustively), the smallest one on ties. gamma = 0 (speedup 1: do not
//! speculate) is returned exactly when alpha <= c (or max_gamma = 0): then sum_{k<=gamma} alpha^k
//! <= 1 + gamma alpha <= 1 + gamma c for every gamma; when alpha > c, gamma = 1 already improves by
//! (1 + alpha) / (1 + c) > 1 (Leviathan Corollary 3.9).
//! \pre alpha in [0, 1]; c finite and >= 0.
//! \throws specdec::error otherwise.
constexpr std::size_t optimal_gamma(double alpha, double c, std::size_t max_gamma = 128) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c), "c (draft cost / target cost) must be finite and >= 0");
  std::size_t best = 0;
  double best_speedup = 1.0;
  for (std::size_t gamma = 1; gamma <= max_gamma; ++gamma) {
    const double s = speedup(alpha, gamma, c);
    if (s > best_speedup) {
      best = gamma;
      best_speedup = s;
    }
  }
  return best;
}

}  // namespace specdec::theory::sd
