//! \file backend/simd/arch.hpp
//! \brief The few register operations the simd kernels need that xsimd 8.1 does not offer:
//! widening half of a float batch to a double batch, and loading a row of float or double as
//! doubles.
//!
//! xsimd 8.1 converts float to double element by element through memory; the kernels accumulate in
//! double (the determinism contract of sampling/categorical.hpp), so they widen in registers with
//! one instruction per half (SSE2 `cvtps2pd`, AVX `vcvtps2pd`, AVX-512F `vcvtps2pd zmm`, NEON64
//! `fcvtl`/`fcvtl2`). Any other architecture goes through memory (correct, slower). NEON64 code is
//! written against the ARM intrinsics but has not been compiled on this project's x86 machines.
//! GCC 12 reports false -Wmaybe-uninitialized warnings inside xsimd's AVX-512 kernels (its
//! `_mm512_undefined_*` helpers); translation units built for AVX-512 may silence that warning.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

//! Marks a kernel helper that must be inlined into its loop: GCC 12 keeps `weight_exp` on a group
//! of batches out of line otherwise, and passes the group through memory on every call.
#if defined(__GNUC__)
#define SPECDEC_SIMD_INLINE [[gnu::always_inline]] inline
#elif defined(_MSC_VER)
#define SPECDEC_SIMD_INLINE __forceinline
#else
#define SPECDEC_SIMD_INLINE inline
#endif

namespace specdec::backend::simd {

//! A batch of doubles of architecture `Arch`.
template <class Arch>
using dbatch = xsimd::batch<double, Arch>;
//! A batch of floats of architecture `Arch`.
template <class Arch>
using fbatch = xsimd::batch<float, Arch>;

namespace detail {

//! Rows the vector kernels take: float and double (other element types run seq's code).
template <class T>
inline constexpr bool vector_row_type = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class Arch, class Family>
inline constexpr bool is_family = std::is_base_of_v<Family, Arch>;

//! Whether `xsimd::max(x, y)` is an x86 max instruction, which returns y when either is NaN (so a
//! running maximum max(x, best) skips NaN entries).
template <class Arch>
inline constexpr bool max_skips_nan_first =
    is_family<Arch, xsimd::sse2> || is_family<Arch, xsimd::avx> || is_family<Arch, xsimd::avx512f>;

//! The lower (Half = 0) or upper (Half = 1) half of a float batch, as doubles.
template <int Half, class Arch>
dbatch<Arch> widen_half(const fbatch<Arch>& x) noexcept {
  static_assert(fbatch<Arch>::size == 2 * dbatch<Arch>::size, "a float batch holds twice as many lanes as a double batch");
#if XSIMD_WITH_AVX512F
  if constexpr (is_family<Arch, xsimd::avx512f>) {
    // The zero-masked forms: GCC 12 warns (-Wmaybe-uninitialized) on the unmasked ones.
    const __m256 half = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(x), Half));
    return _mm512_maskz_cvtps_pd(0xFF, half);
  } else
#endif
#if XSIMD_WITH_AVX
      if constexpr (is_family<Arch, xsimd::avx>) {
    const __m256 r = x;
    if constexpr (Half == 0)
      return _mm256_cvtps_pd(_mm256_castps256_ps128(r));
    else
      return _mm256_cvtps_pd(_mm256_extractf128_ps(r, 1));
  } else
#endif
#if XSIMD_WITH_SSE2
      if constexpr (is_family<Arch, xsimd::sse2>) {
    const __m128 r = x;
    if constexpr (Half == 0)
      return _mm_cvtps_pd(r);
    else
      return _mm_cvtps_pd(_mm_movehl_ps(r, r));
  } else
#endif
#if XSIMD_WITH_NEON64
      if constexpr (is_family<Arch, xsimd::neon64>) {
    const float32x4_t r = x;
    if constexpr (Half == 0)
      return vcvt_f64_f32(vget_low_f32(r));
    else
      return vcvt_high_f64_f32(r);
  } else
#endif
  {
    constexpr std::size_t n = dbatch<Arch>::size;
    alignas(64) std::array<float, 2 * n> f{};
    alignas(64) std::array<double, n> d{};
    x.store_unaligned(f.data());
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<double>(f[Half * n + i]);
    return dbatch<Arch>::load_unaligned(d.data());
  }
}

}  // namespace detail

//! Lanes [0, n) of a float batch of 2n lanes, as doubles (exact).
template <class Arch>
dbatch<Arch> widen_lo(const fbatch<Arch>& x) noexcept {
  return detail::widen_half<0, Arch>(x);
}
//! Lanes [n, 2n) of a float batch of 2n lanes, as doubles (exact).
template <class Arch>
dbatch<Arch> widen_hi(const fbatch<Arch>& x) noexcept {
  return detail::widen_half<1, Arch>(x);
}

namespace detail {
//! Two double batches of n lanes rounded (to nearest) into one float batch of 2n lanes.
template <class Arch>
fbatch<Arch> narrow_pair(const dbatch<Arch>& lo, const dbatch<Arch>& hi) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_family<Arch, xsimd::avx512f>) {
    const __m256 a = _mm512_maskz_cvtpd_ps(0xFF, lo), b = _mm512_maskz_cvtpd_ps(0xFF, hi);
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1));
  } else
#endif
#if XSIMD_WITH_AVX
      if constexpr (is_family<Arch, xsimd::avx>) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
  } else
#endif
#if XSIMD_WITH_SSE2
      if constexpr (is_family<Arch, xsimd::sse2>) {
    return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
  } else
#endif
#if XSIMD_WITH_NEON64
      if constexpr (is_family<Arch, xsimd::neon64>) {
    return vcvt_high_f32_f64(vcvt_f32_f64(lo), hi);
  } else
#endif
  {
    constexpr std::size_t n = dbatch<Arch>::size;
    alignas(64) std::array<double, 2 * n> d{};
    alignas(64) std::array<float, 2 * n> f{};
    lo.store_unaligned(d.data());
    hi.store_unaligned(d.data() + n);
    for (std::size_t i = 0; i < 2 * n; ++i) f[i] = static_cast<float>(d[i]);
    return fbatch<Arch>::load_unaligned(f.data());
  }
}

//! The n floats at p (n = the double batch size) as doubles, converted straight from memory (SSE
//! `cvtps2pd xmm, m64`, AVX `vcvtps2pd ymm, m128`, ...): the upper half of a float batch that is
//! already loaded costs one instruction instead of a shuffle and a conversion.
template <class Arch>
dbatch<Arch> load_widen(const float* p) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_family<Arch, xsimd::avx512f>) {
    return _mm512_cvtps_pd(_mm256_loadu_ps(p));
  } else
#endif
#if XSIMD_WITH_AVX
      if constexpr (is_family<Arch, xsimd::avx>) {
    return _mm256_cvtps_pd(_mm_loadu_ps(p));
  } else
#endif
#if XSIMD_WITH_SSE2
      if constexpr (is_family<Arch, xsimd::sse2>) {
    return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));  // (a may_alias load)
  } else
#endif
#if XSIMD_WITH_NEON64
      if constexpr (is_family<Arch, xsimd::neon64>) {
    return vcvt_f64_f32(vld1_f32(p));
  } else
#endif
  {
    constexpr std::size_t n = dbatch<Arch>::size;
    alignas(64) std::array<double, n> d{};
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<double>(p[i]);
    return dbatch<Arch>::load_unaligned(d.data());
  }
}
}  // namespace detail

//! Lanes [0, n) from `lo` and [n, 2n) from `hi`, each rounded to float as static_cast<float> does.
template <class Arch>
fbatch<Arch> narrow(const dbatch<Arch>& lo, const dbatch<Arch>& hi) noexcept {
  return detail::narrow_pair<Arch>(lo, hi);
}

//! The first `count` (< the batch size) values at `p`, the other lanes set to `fill`; for the
//! remainder of a row, so that it goes through the same vector code as the rest.
template <class B>
B load_partial(const typename B::value_type* p, std::size_t count, typename B::value_type fill) noexcept {
  alignas(64) std::array<typename B::value_type, B::size> buf;
  buf.fill(fill);
  for (std::size_t i = 0; i < count; ++i) buf[i] = p[i];
  return B::load_aligned(buf.data());
}

//! Stores the first `count` lanes of x at p.
template <class B>
void store_partial(typename B::value_type* p, const B& x, std::size_t count) noexcept {
  alignas(64) std::array<typename B::value_type, B::size> buf;
  x.store_aligned(buf.data());
  for (std::size_t i = 0; i < count; ++i) p[i] = buf[i];
}

//! max(0, x) per lane (the same value as std::max(0.0, x) for every x that is not NaN).
template <class Arch>
dbatch<Arch> positive_part(const dbatch<Arch>& x) noexcept {
  return xsimd::max(x, dbatch<Arch>(0.0));
}

//! True when x >= 0 and x is finite, per lane (false for NaN, -inf, +inf and negatives; true for -0).
template <class B>
auto usable_lanes(const B& x) noexcept {
  using T = typename B::value_type;
  return (x >= B(T(0))) & (x <= B(std::numeric_limits<T>::max()));
}

//! Tracks whether every entry of a row is usable (>= 0, or -0, and finite).
template <class Arch, class T>
class usable_tracker {
 public:
  //! Adds a batch of entries to the check.
  void add(const xsimd::batch<T, Arch>& x) noexcept { ok_ = ok_ & usable_lanes(x); }
  //! True iff every entry added so far is usable.
  bool all() const noexcept { return xsimd::all(ok_); }

 private:
  xsimd::batch_bool<T, Arch> ok_ = xsimd::batch_bool<T, Arch>(true);
};

//! A cheaper check for the sampling passes: exact for double rows; for float rows one unsigned max
//! of the raw bits per batch, which also reports -0 (sign bit set) as unusable. So `all()` true means
//! usable, false means "unusable, or a -0 somewhere": the caller then checks the row exactly
//! (`detail::row_usable` of categorical.hpp; rows with -0 are rare, and usable).
template <class Arch, class T>
class fast_usable_tracker : public usable_tracker<Arch, T> {};
//! Float rows: one unsigned max of the raw bits per batch (see the primary template).
template <class Arch>
class fast_usable_tracker<Arch, float> {
 public:
  //! The lanes' bits, as unsigned integers.
  using bits = xsimd::batch<std::uint32_t, Arch>;
  //! Adds a batch of entries (keeps the largest bit pattern seen).
  void add(const fbatch<Arch>& x) noexcept { high_ = xsimd::max(high_, xsimd::bitwise_cast<bits>(x)); }
  //! True iff every entry added had bits <= 0x7f7fffff: finite, >= 0 and not -0.
  bool all() const noexcept { return xsimd::all(high_ <= bits(0x7f7fffffu)); }

 private:
  bits high_ = bits(0u);
};

//! For float rows, with one add and one unsigned max per batch instead of two compares: x + 0 turns
//! -0 into +0, and a float is >= 0 and finite iff its bits, read as unsigned, are <= 0x7f7fffff
//! (negatives and -NaN have the sign bit; +inf is 0x7f800000, NaN above it).
template <class Arch>
class usable_tracker<Arch, float> {
 public:
  //! The lanes' bits, as unsigned integers.
  using bits = xsimd::batch<std::uint32_t, Arch>;
  //! Adds a batch of entries (after x + 0, so that -0 counts as usable).
  void add(const fbatch<Arch>& x) noexcept { high_ = xsimd::max(high_, xsimd::bitwise_cast<bits>(x + fbatch<Arch>(0.0f))); }
  //! True iff every entry added so far is >= 0 (or -0) and finite.
  bool all() const noexcept { return xsimd::all(high_ <= bits(largest_finite)); }

 private:
  static constexpr std::uint32_t largest_finite = 0x7f7fffffu;
  bits high_ = bits(0u);
};

}  // namespace specdec::backend::simd
