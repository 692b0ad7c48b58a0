//! \file backend/simd/fixed_mass.hpp
//! \brief Sums of fixed-point masses (distributions/logit_weights.hpp, `fixed_mass_scale`) on
//! batches: every weight w counts nearbyint((w 2^g1) 2^g2), exactly as the scalar code counts it, and
//! the counts add in 64-bit integers, so a sum does not depend on the order of its terms.
//!
//! The count of a lane: y = ((w 2^g1) 2^g2) + 2^52 in double rounds the scaled weight (< 2^51) to the
//! nearest integer, ties to even, as nearbyint does, and leaves it in the low bits of y; the lanes
//! add y's bit patterns, and `total` takes away 2^52's pattern once per added lane. On AVX-512DQ,
//! float weights are scaled in float and converted to int64 directly when the scale allows it
//! (`float_countable`), with the same counts.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/distributions/logit_weights.hpp"

namespace specdec::backend::simd::detail {

//! Whether float weights can be counted in float (`fixed_sum::add_weights` on AVX-512DQ): the
//! scale is one power of two that is a normal float, so w 2^g is exact in float (it is below 2^51,
//! and a product that underflows counts 0 either way) and converts to int64 with the same rounding
//! as nearbyint.
inline bool float_countable(const specdec::detail::fixed_mass_scale& f) noexcept {
  return f.second == 1.0 && f.exponent >= -126 && f.exponent <= 127;
}

//! A running fixed-point mass of batches of weights.
template <class Arch>
class fixed_sum {
 public:
  using D = dbatch<Arch>;
  using I = xsimd::batch<std::uint64_t, Arch>;

  fixed_sum() noexcept = default;  //!< (scale 1, for arrays that are filled next)
  explicit fixed_sum(const specdec::detail::fixed_mass_scale& f) noexcept
      : first_(f.first), second_(f.second), float_scale_(static_cast<float>(f.first)), in_float_(float_countable(f)) {}

  //! Adds the counts of a batch of doubles.
  void add(const D& w) noexcept {
    acc_ += xsimd::bitwise_cast<I>(w * first_ * second_ + D(0x1p52));
    ++steps_;
  }
  //! Adds the counts of a batch of float or double weights.
  template <class T>
  void add_weights(const xsimd::batch<T, Arch>& w) noexcept {
    if constexpr (std::is_same_v<T, float>) {
#if XSIMD_WITH_AVX512DQ
      if constexpr (is_family<Arch, xsimd::avx512dq>) {
        if (in_float_) {  // 3 conversions and a multiply instead of 8 double operations and 2 widenings
          const std::array<I, 2> counts = float_counts(w);
          acc_ += counts[0] + counts[1];
          return;
        }
      }
#endif
      add(widen_lo<Arch>(w));
      add(widen_hi<Arch>(w));
    } else {
      add(w);
    }
  }
  //! Adds the counts of a batch of weights, and those of its lanes >= `at` to `above` (a sum of
  //! the same scale): on AVX-512DQ, each weight is converted once for both.
  template <class T>
  void add_weights_and_above(const xsimd::batch<T, Arch>& w, const xsimd::batch<T, Arch>& at, fixed_sum& above) noexcept {
#if XSIMD_WITH_AVX512DQ
    if constexpr (std::is_same_v<T, float> && is_family<Arch, xsimd::avx512dq>) {
      if (in_float_) {
        const std::array<I, 2> counts = float_counts(w);
        const __mmask16 high = _mm512_cmp_ps_mask(w, at, _CMP_GE_OQ);
        acc_ += counts[0] + counts[1];
        above.acc_ = _mm512_mask_add_epi64(above.acc_, static_cast<__mmask8>(high), above.acc_, counts[0]);
        above.acc_ = _mm512_mask_add_epi64(above.acc_, static_cast<__mmask8>(high >> 8), above.acc_, counts[1]);
        return;
      }
    }
#endif
    add_weights(w);
    above.add_weights(xsimd::select(w >= at, w, xsimd::batch<T, Arch>(T(0))));
  }
  //! The sum of every count added.
  std::int64_t total() const noexcept {
    alignas(64) std::array<std::uint64_t, D::size> lanes;
    acc_.store_aligned(lanes.data());
    std::uint64_t sum = 0;  // (mod 2^64: the true sum is below 2^62)
    for (const std::uint64_t x : lanes) sum += x;
    return static_cast<std::int64_t>(sum - steps_ * D::size * std::bit_cast<std::uint64_t>(0x1p52));
  }

 private:
#if XSIMD_WITH_AVX512DQ
  //! The counts of the lower and upper halves of a batch of floats (\pre `in_float_`).
  std::array<I, 2> float_counts(const fbatch<Arch>& w) const noexcept {
    const __m512 scaled = _mm512_mul_ps(w, float_scale_);
    const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(scaled), 1));
    return {I(_mm512_cvtps_epi64(_mm512_castps512_ps256(scaled))), I(_mm512_cvtps_epi64(high))};
  }
#endif

  D first_ = D(1.0), second_ = D(1.0);
  xsimd::batch<float, Arch> float_scale_ = xsimd::batch<float, Arch>(1.0f);
  bool in_float_ = false;
  I acc_ = I(std::uint64_t(0));
  std::uint64_t steps_ = 0;  // batches added through doubles, each with 2^52 in every lane
};

}  // namespace specdec::backend::simd::detail
