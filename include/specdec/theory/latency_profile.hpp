//! \file theory/latency_profile.hpp
//! \brief `LatencyProfile`: the wall time of a verification step as a function of how many drafted
//! tokens it verifies, used instead of Leviathan's constant cost ratio c (sd::speedup) and as SV's
//! profiled Latency(gamma) (sv::estimated_goodput, SV appendix D eq. (6)).
//!
//! A profile is either
//!   - a callable `L(int k) -> double` (a lambda, a function pointer, a functor), or
//!   - a contiguous range of doubles convertible to `std::span<const double>` (a std::vector, a
//!     std::array, a C array, a span) whose entry `L[k]` is the latency for k.
//! Index convention, shared by every theory function: k is the number of drafted tokens the
//! step verifies, k = 0 being a plain (non-speculative) decoding step of the target. So a span
//! profile for gamma up to G holds G + 1 entries L[0], ..., L[G]. Latencies are in any unit
//! (the ratios that use them are unit-free) and must be finite and > 0.
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::theory {

//! A latency profile: a contiguous range of doubles (entry k = latency for k drafted tokens) or a
//! callable taking an int k and returning something convertible to double.
// clang-format off
template <class L>
concept LatencyProfile =
    std::convertible_to<const L&, std::span<const double>> ||
    (std::invocable<const L&, int> && std::convertible_to<std::invoke_result_t<const L&, int>, double>);
// clang-format on

//! The latency L(k) of a profile for k drafted tokens verified: `profile[k]` for a range,
//! `profile(int(k))` for a callable. A type that is both is read as a range.
//! \pre for a range, k < its size; for a callable, k <= INT_MAX.
//! \throws specdec::error if k is out of range or L(k) is not finite and > 0.
template <LatencyProfile L>
constexpr double latency_at(const L& profile, std::size_t k) {
  double t = 0.0;
  if constexpr (std::convertible_to<const L&, std::span<const double>>) {
    const std::span<const double> values = profile;
    SPECDEC_EXPECTS(k < values.size(), "the latency profile has no entry for k (a span profile needs entries 0..gamma)");
    t = values[k];
  } else {
    SPECDEC_EXPECTS(k <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                    "k (the number of drafted tokens verified) must fit a callable profile's int");
    t = static_cast<double>(std::invoke(profile, static_cast<int>(k)));
  }
  SPECDEC_EXPECTS(detail::is_finite(t) && t > 0.0, "a latency L(k) must be finite and > 0");
  return t;
}

}  // namespace specdec::theory
