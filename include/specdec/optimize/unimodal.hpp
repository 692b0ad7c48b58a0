//! \file optimize/unimodal.hpp
//! \brief Small, dependency-free optimisation kernels used by optimize/: golden-section search
//! for the maximum of a unimodal function on an interval, bisection for the sign change of a
//! monotone function, and an exhaustive integer argmax (smallest argument on ties).
//! Core target: only the C++20 standard library (no Boost.Math).
#pragma once

#include <cmath>
#include <concepts>
#include <type_traits>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::optimize {

//! The maximum of a function of a real variable, as found by a search.
struct real_maximum {
  double x = 0.0;       //!< the argument
  double value = 0.0;   //!< f(x)
  int evaluations = 0;  //!< calls of f made by the search
};

//! The maximum of a function of an integer variable.
struct integer_maximum {
  int x = 0;           //!< the argument (the smallest one among equal maxima)
  double value = 0.0;  //!< f(x)
};

//! Golden-section search for the maximum of f on [lo, hi]. If f is unimodal there (non-decreasing
//! then non-increasing, e.g. quasi-concave) the result is within tolerance * max(1, |lo| + |hi|)
//! of a maximiser; the endpoints are evaluated too, so a monotone f gives its endpoint exactly.
//! On ties between the two probes the left part is kept (smaller arguments are preferred).
//! \pre lo <= hi, both finite; tolerance > 0 and finite.
//! \throws specdec::error otherwise.
// clang-format off
template <class F>
  requires std::invocable<F&, double> && std::convertible_to<std::invoke_result_t<F&, double>, double>
real_maximum maximize_unimodal(F&& f, double lo, double hi, double tolerance = 1e-12) {
  // clang-format on
  SPECDEC_EXPECTS(theory::detail::is_finite(lo) && theory::detail::is_finite(hi) && lo <= hi,
                  "the interval [lo, hi] must be finite and non-empty");
  SPECDEC_EXPECTS(theory::detail::is_finite(tolerance) && tolerance > 0.0, "tolerance must be finite and > 0");
  const double shrink = 0.5 * (std::sqrt(5.0) - 1.0);  // 1 / golden ratio
  const double width = tolerance * std::fmax(1.0, std::fabs(lo) + std::fabs(hi));
  real_maximum best{lo, static_cast<double>(f(lo)), 1};
  const auto consider = [&best](double x, double v) {
    if (v > best.value || (v == best.value && x < best.x)) {
      best.x = x;
      best.value = v;
    }
  };
  consider(hi, static_cast<double>(f(hi)));
  ++best.evaluations;
  double a = lo, b = hi;
  double x1 = b - shrink * (b - a), x2 = a + shrink * (b - a);
  double f1 = static_cast<double>(f(x1)), f2 = static_cast<double>(f(x2));
  best.evaluations += 2;
  while (b - a > width) {
    if (f1 >= f2) {  // a maximiser lies in [a, x2]
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - shrink * (b - a);
      f1 = static_cast<double>(f(x1));
    } else {  // in [x1, b]
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + shrink * (b - a);
      f2 = static_cast<double>(f(x2));
    }
    ++best.evaluations;
  }
  consider(x1, f1);
  consider(x2, f2);
  return best;
}

//! Bisection for the point where a non-increasing function h changes sign on [lo, hi]: returns x
//! with h > 0 on [lo, x - tolerance) and h <= 0 on (x + tolerance, hi], to tolerance * max(1, |lo| + |hi|)
//! (or to the resolution of doubles).
//! \pre lo <= hi, both finite; h(lo) > 0 >= h(hi); tolerance > 0 and finite.
//! \throws specdec::error otherwise.
// clang-format off
template <class H>
  requires std::invocable<H&, double> && std::convertible_to<std::invoke_result_t<H&, double>, double>
double bisect_sign_change(H&& h, double lo, double hi, double tolerance = 1e-14) {
  // clang-format on
  SPECDEC_EXPECTS(theory::detail::is_finite(lo) && theory::detail::is_finite(hi) && lo <= hi,
                  "the interval [lo, hi] must be finite and non-empty");
  SPECDEC_EXPECTS(theory::detail::is_finite(tolerance) && tolerance > 0.0, "tolerance must be finite and > 0");
  SPECDEC_EXPECTS(static_cast<double>(h(lo)) > 0.0 && !(static_cast<double>(h(hi)) > 0.0), "h must be > 0 at lo and <= 0 at hi");
  const double width = tolerance * std::fmax(1.0, std::fabs(lo) + std::fabs(hi));
  while (hi - lo > width) {
    const double mid = lo + 0.5 * (hi - lo);
    if (mid <= lo || mid >= hi) break;  // no double strictly inside
    if (static_cast<double>(h(mid)) > 0.0)
      lo = mid;
    else
      hi = mid;
  }
  return lo + 0.5 * (hi - lo);
}

//! The exhaustive maximum of f over the integers lo..hi: the smallest x with the largest f(x)
//! (a NaN value never wins).
//! \pre lo <= hi.
//! \throws specdec::error otherwise.
// clang-format off
template <class F>
  requires std::invocable<F&, int> && std::convertible_to<std::invoke_result_t<F&, int>, double>
integer_maximum argmax_integer(F&& f, int lo, int hi) {
  // clang-format on
  SPECDEC_EXPECTS(lo <= hi, "lo must be <= hi");
  integer_maximum best{lo, static_cast<double>(f(lo))};
  for (int x = lo; x < hi;) {
    ++x;
    const double v = static_cast<double>(f(x));
    if (v > best.value || (best.value != best.value && v == v)) best = {x, v};
  }
  return best;
}

}  // namespace specdec::optimize
