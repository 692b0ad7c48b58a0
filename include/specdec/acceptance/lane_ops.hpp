//! \file acceptance/lane_ops.hpp
//! \brief The two operations a rule's accepted mass is written with, on a scalar or on a SIMD batch
//! (lane by lane), so that one definition of a(p, q) serves the seq, cuda and simd backends (a rule
//! whose `accepted_mass` is a template over its scalar type gets simd's one-pass residual,
//! backend/simd/residual.hpp) and every backend computes the same doubles.
#pragma once

#include <type_traits>

#include "specdec/config.hpp"

namespace specdec {

//! a < b ? a : b for arithmetic types; for a SIMD batch, its lane-wise `min`, found by argument-dependent
//! lookup (e.g. `xsimd::min`), which equals the scalar form lane by lane on non-NaN values.
template <class T>
SPECDEC_HOST_DEVICE constexpr T lane_min(const T& a, const T& b) noexcept {
  if constexpr (std::is_arithmetic_v<T>)
    return a < b ? a : b;
  else
    return min(a, b);
}

//! x * y rounded once: never fused into an fma with a later sum, on a GPU (`__dmul_rn`) as on the host,
//! so that a weight p - a(p, q) is the same double on every backend.
template <class T>
SPECDEC_HOST_DEVICE constexpr T product_rn(const T& x, const T& y) noexcept {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, double>)
    return __dmul_rn(x, y);
  else
    return x * y;
#else
  return x * y;
#endif
}

}  // namespace specdec
