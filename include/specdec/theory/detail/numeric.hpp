//! \file theory/detail/numeric.hpp
//! \brief Internals of the theory module: constexpr predicates and integer powers, and the two
//! numerically delicate kernels every closed form leans on -- the geometric sum
//! sum_{k=0}^{n} a^k and the variance of a geometric count truncated at n.
//!
//! Each kernel has two paths: during constant evaluation (std::is_constant_evaluated()) it uses
//! exact-in-structure loops (the standard library's `<cmath>` is not constexpr in C++20); at run
//! time it uses expm1/log forms that stay accurate for a -> 1 and for huge n.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

namespace specdec::theory::detail {

//! True for a finite double (constexpr: no std::isfinite in C++20). False for NaN and +-inf.
constexpr bool is_finite(double x) noexcept {
  return x == x && x != std::numeric_limits<double>::infinity() && x != -std::numeric_limits<double>::infinity();
}

//! True for a probability: 0 <= p <= 1 (false for NaN).
constexpr bool is_probability(double p) noexcept { return p >= 0.0 && p <= 1.0; }

//! True for a finite x >= 0.
constexpr bool is_nonnegative(double x) noexcept { return x >= 0.0 && is_finite(x); }

//! x^n by binary exponentiation; exact for dyadic x with small n, ~2 log2(n) ulps otherwise.
//! Usable in constant expressions. 0^0 = 1.
constexpr double ipow(double x, std::uint64_t n) noexcept {
  double result = 1.0;
  while (n != 0) {
    if ((n & 1u) != 0) result *= x;
    n >>= 1;
    if (n != 0) x *= x;
  }
  return result;
}

//! x^n for an integer n >= 0: ipow during constant evaluation, std::pow (correctly rounded to
//! about 1 ulp) at run time. 0^0 = 1.
constexpr double pow_int(double x, std::uint64_t n) noexcept {
  if (std::is_constant_evaluated()) return ipow(x, n);
  return std::pow(x, static_cast<double>(n));
}

//! 1 - a^n for a in [0, 1], accurate when a^n is close to 1 (a -> 1, small n): -expm1(n log a).
constexpr double one_minus_pow(double a, std::uint64_t n) noexcept {
  if (n == 0) return 0.0;
  if (std::is_constant_evaluated()) return 1.0 - ipow(a, n);
  if (a == 0.0) return 1.0;
  return -std::expm1(static_cast<double>(n) * std::log(a));
}

//! G(a, n) = sum_{k=0}^{n} a^k = (1 - a^(n+1)) / (1 - a) for a in [0, 1], n >= -1 (G(a, -1) = 0).
//! Run time: -expm1((n+1) log a) / -expm1(log a), exact limit n + 1 at a = 1, 1 at a = 0; a few
//! ulps for every a and n (no cancellation as a -> 1). Constant evaluation: Horner's loop.
constexpr double geometric_sum(double a, std::int64_t n) noexcept {
  if (n < 0) return 0.0;
  if (a == 1.0) return static_cast<double>(n) + 1.0;
  if (a == 0.0) return 1.0;
  if (std::is_constant_evaluated()) {
    double s = 1.0;
    for (std::int64_t k = 0; k < n; ++k) s = 1.0 + a * s;
    return s;
  }
  const double log_a = std::log(a);
  return std::expm1((static_cast<double>(n) + 1.0) * log_a) / std::expm1(log_a);
}

//! Var(min(G, n)) where P(G >= k) = a^k (G counts successes before the first failure of
//! independent trials that succeed with probability a), for a in [0, 1], n >= 0.
//!
//! Run time: with w = -log(a) / 2 and m = 2n + 1 the variance is
//!   e^(-m w) (sinh(m w) - m sinh(w)) / (2 sinh(w)^2),
//! derived from [a - a^(2n+2) - (2n+1) a^(n+1) (1 - a)] / (1 - a)^2. For m w < 3 the bracket is
//! summed as the series sum_{k odd >= 3} ((m w)^k - m w^k) / k!, whose terms are all >= 0, so the
//! result keeps full relative accuracy as a -> 1 (where the textbook form loses every digit);
//! above, the direct form loses at most ~1.5 bits. Constant evaluation: the O(n) covariance sum
//! sum_k t_k [(1 - t_k) + 2 sum_{j<k} (1 - t_j)], t_k = a^k.
constexpr double truncated_geometric_variance(double a, std::int64_t n) noexcept {
  if (n <= 0 || a == 0.0 || a == 1.0) return 0.0;
  if (std::is_constant_evaluated()) {
    double var = 0.0, prefix = 0.0, t = 1.0;
    for (std::int64_t k = 1; k <= n; ++k) {
      t *= a;
      var += t * ((1.0 - t) + 2.0 * prefix);
      prefix += 1.0 - t;
    }
    return var;
  }
  const double w = -0.5 * std::log(a);
  const double m = 2.0 * static_cast<double>(n) + 1.0;
  const double x = m * w;
  const double sinh_w = std::sinh(w);
  double bracket_times_exp;  // e^(-x) (sinh(x) - m sinh(w))
  if (x < 3.0) {
    // sum over odd k >= 3 of x^k/k! (1 - m^(1-k)); term_k = x^k / k!, ratio_k = m^(1-k).
    const double x2 = x * x;
    double term = x * x2 / 6.0;
    double ratio = 1.0 / (m * m);
    double sum = 0.0;
    for (int k = 3; k < 200; k += 2) {
      const double add = term * (1.0 - ratio);
      sum += add;
      if (add <= sum * 1e-17) break;
      term *= x2 / ((k + 1.0) * (k + 2.0));
      ratio /= m * m;
    }
    bracket_times_exp = std::exp(-x) * sum;
  } else {
    bracket_times_exp = -0.5 * std::expm1(-2.0 * x) - m * sinh_w * std::exp(-x);
  }
  const double var = bracket_times_exp / (2.0 * sinh_w * sinh_w);
  return var > 0.0 ? var : 0.0;
}

//! True when every entry of the row is a probability (finite, in [0, 1]) and the entries sum to 1
//! within `tolerance` (accumulated in double).
template <class T>
constexpr bool is_probability_row(std::span<const T> row, double tolerance) noexcept {
  double sum = 0.0;
  for (const T x : row) {
    const double v = static_cast<double>(x);
    if (!is_probability(v)) return false;
    sum += v;
  }
  const double gap = sum - 1.0;
  return gap <= tolerance && -gap <= tolerance;
}

//! Tolerance on |sum - 1| accepted for a probability row of element type T: 1e-6 for double
//! (rows normalised in double after a softmax or a warp), 1e-4 for float.
template <class T>
inline constexpr double row_sum_tolerance = std::is_same_v<T, float> ? 1e-4 : 1e-6;

}  // namespace specdec::theory::detail
