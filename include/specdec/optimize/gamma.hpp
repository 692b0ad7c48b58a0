//! \file optimize/gamma.hpp
//! \brief The draft length gamma that maximises the speed of speculative decoding:
//!   - `sd::real_optimal_gamma(alpha, c)`: the maximiser over real gamma >= 0 of Leviathan et al.'s
//!     walltime improvement (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)) (Thm 3.8);
//!   - `sd::integer_optimal_gamma(alpha, c)`: the best integer gamma, found next to the real one in
//!     O(1) evaluations whatever max_gamma (the same answer as the exhaustive
//!     theory::sd::optimal_gamma);
//!   - `sd::optimal_gamma(alphas, c)` and `sd::optimal_gamma(alpha, t_draft, profile)`: position-
//!     dependent acceptance and latency profiles (exhaustive);
//! Integer results are the smallest gamma among equal maxima. SV's goodput-optimal length (appendix D
//! eq. (6)) is in optimize/sv_length.hpp.
//!
//! Why the real optimum is found by bisection: with N(g) = (1 - alpha^(g+1)) / (1 - alpha) (concave,
//! increasing) and D(g) = g c + 1 (affine), d/dg [N/D] has the sign of
//!   H(g) = alpha^(g+1) (-log alpha) (g c + 1) - c (1 - alpha^(g+1)),
//! and H'(g) = N''(g) D(g) (1 - alpha) <= 0, so H changes sign at most once: the speedup is unimodal
//! (quasi-concave), its maximiser is the root of H (or an endpoint), and the best integer is the
//! floor or the ceiling of that root.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/optimize/unimodal.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/latency_profile.hpp"
#include "specdec/theory/sd.hpp"

namespace specdec::optimize {

namespace sd {

namespace detail {
// E[T] / (g c + 1) for real g >= 0 and alpha in (0, 1): expm1 forms, as theory::sd::expected_tokens.
inline double real_speedup(double log_alpha, double g, double c) {
  return std::expm1((g + 1.0) * log_alpha) / std::expm1(log_alpha) / (g * c + 1.0);
}
// The sign of d speedup / dg (see the file comment), for alpha in (0, 1).
inline double slope_sign(double log_alpha, double g, double c) {
  const double a = std::exp((g + 1.0) * log_alpha);  // alpha^(g+1)
  const double one_minus_a = -std::expm1((g + 1.0) * log_alpha);
  return a * (-log_alpha) * (g * c + 1.0) - c * one_minus_a;
}
}  // namespace detail

//! The real gamma in [0, max_gamma] that maximises Leviathan et al.'s walltime improvement
//! (Thm 3.8) extended to real gamma, and that maximum. The continuous relaxation of
//! theory::sd::optimal_gamma; the integer optimum is next to it (integer_optimal_gamma).
//! Edges: alpha = 0 gives 0; alpha = 1 gives max_gamma if c < 1, else 0; c = 0 and alpha > 0 give
//! max_gamma (the speedup grows without bound). Accuracy: ~1e-14 relative in gamma (bisection on H).
//! \pre alpha in [0, 1]; c finite and >= 0; max_gamma finite and >= 0.
//! \throws specdec::error otherwise.
inline real_maximum real_optimal_gamma(double alpha, double c, double max_gamma = 128.0) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c), "c (draft cost / target cost) must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(max_gamma), "max_gamma must be finite and >= 0");
  if (alpha == 0.0) return {0.0, 1.0, 0};
  if (alpha == 1.0) {
    const double g = c < 1.0 ? max_gamma : 0.0;
    return {g, (g + 1.0) / (g * c + 1.0), 0};
  }
  const double log_alpha = std::log(alpha);
  const auto h = [&](double g) { return detail::slope_sign(log_alpha, g, c); };
  double g = 0.0;
  if (!(h(0.0) > 0.0))
    g = 0.0;
  else if (h(max_gamma) > 0.0)
    g = max_gamma;
  else
    g = bisect_sign_change(h, 0.0, max_gamma);
  return {g, detail::real_speedup(log_alpha, g, c), 0};
}

//! The integer gamma in [0, max_gamma] that maximises theory::sd::speedup(alpha, gamma, c), smallest
//! on ties, and that speedup: the same answer as the exhaustive theory::sd::optimal_gamma, found by
//! evaluating the integers within one of the real optimum (and gamma = 0), so O(1) in max_gamma.
//! Exception: with c = 0 the speedup E[T] increases with gamma but stops changing in double
//! precision once alpha^gamma is below rounding; "smallest on ties" then means the first gamma of
//! that numerical plateau, which only a scan finds, so c = 0 runs the exhaustive search (O(max_gamma)).
//! \pre alpha in [0, 1]; c finite and >= 0; max_gamma >= 0.
//! \throws specdec::error otherwise.
inline integer_maximum integer_optimal_gamma(double alpha, double c, int max_gamma = 128) {
  SPECDEC_EXPECTS(max_gamma >= 0, "max_gamma must be >= 0");
  if (c == 0.0) {
    const std::size_t g = theory::sd::optimal_gamma(alpha, c, static_cast<std::size_t>(max_gamma));
    return {static_cast<int>(g), theory::sd::speedup(alpha, g, c)};
  }
  const double g = real_optimal_gamma(alpha, c, static_cast<double>(max_gamma)).x;
  const int lo = std::max(1, static_cast<int>(std::floor(g)) - 1);
  const int hi = std::min(max_gamma, static_cast<int>(std::ceil(g)) + 1);
  integer_maximum best{0, theory::sd::speedup(alpha, 0, c)};
  for (int k = lo; k <= hi; ++k) {
    const double s = theory::sd::speedup(alpha, static_cast<std::size_t>(k), c);
    if (s > best.value) best = {k, s};
  }
  return best;
}

//! The prefix length gamma in [0, alphas.size()] that maximises the position-dependent speedup
//! theory::sd::speedup(alphas.first(gamma), c) (beyond the papers), smallest on ties; O(gamma).
//! \pre every alphas[i] in [0, 1]; c finite and >= 0.
//! \throws specdec::error otherwise.
inline integer_maximum optimal_gamma(std::span<const double> alphas, double c) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c), "c (draft cost / target cost) must be finite and >= 0");
  for (const double a : alphas) SPECDEC_EXPECTS(theory::detail::is_probability(a), "every alpha_i must be in [0, 1]");
  integer_maximum best{0, 1.0};
  double tokens = 1.0, t = 1.0;  // E[T] of the prefix, prod alpha_i
  for (std::size_t k = 1; k <= alphas.size(); ++k) {
    t *= alphas[k - 1];
    tokens += t;
    const double s = tokens / (static_cast<double>(k) * c + 1.0);
    if (s > best.value) best = {static_cast<int>(k), s};
  }
  return best;
}

//! The gamma in [0, max_gamma] that maximises theory::sd::speedup(alpha, gamma, t_draft, t_target)
//! (a latency profile instead of a constant c), smallest on ties; exhaustive, O(max_gamma).
//! \pre alpha in [0, 1]; t_draft finite and >= 0; max_gamma >= 0; t_target(k) finite and > 0 for
//!      0 <= k <= max_gamma.
//! \throws specdec::error otherwise.
template <theory::LatencyProfile L>
integer_maximum optimal_gamma(double alpha, double t_draft, const L& t_target, int max_gamma) {
  SPECDEC_EXPECTS(max_gamma >= 0, "max_gamma must be >= 0");
  return argmax_integer([&](int g) { return theory::sd::speedup(alpha, static_cast<std::size_t>(g), t_draft, t_target); }, 0,
                        max_gamma);
}

}  // namespace sd

}  // namespace specdec::optimize
