//! \file backend/simd/exp.hpp
//! \brief `weight_exp` on batches of float or double: the same operations, in the same order, as
//! the scalar `specdec::detail::weight_exp` (distributions/logit_weights.hpp), so every lane equals
//! the scalar result bit for bit on every architecture (no fused multiply-add; products pass through
//! `no_contract` before they are added).
//!
//! The scaling by 2^k: `vscalefps`/`vscalefpd` on AVX-512 (one instruction, rounded once, which also
//! gives the subnormal results); elsewhere 2^k is built in the exponent field (k + bias added to a
//! power of two whose low bits then hold it, shifted into place), and a result below the normal range
//! takes a second, rounding scaling, as the scalar code does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/distributions/logit_weights.hpp"

namespace specdec::backend::simd::detail {

//! `specdec::detail::multiply_add` on batches.
template <class B>
B multiply_add(const B& a, const B& b, const B& c) noexcept {
  auto product = static_cast<typename B::register_type>(a * b);
  specdec::detail::no_contract(product);
  return B(product) + c;
}

//! 2^k for integer-valued k in [least_normal, largest exponent], built in the exponent field.
template <class Arch, class T>
xsimd::batch<T, Arch> power_of_two(const xsimd::batch<T, Arch>& k) noexcept {
  using C = specdec::detail::weight_exp_constants<T>;
  using U = xsimd::batch<specdec::detail::weight_bits_t<T>, Arch>;
  using B = xsimd::batch<T, Arch>;
  // k + 2^fraction_bits + bias is exact, and its low bits hold k + bias.
  const B biased = k + B(static_cast<T>((std::uint64_t(1) << C::fraction_bits) + C::bias));
  return xsimd::bitwise_cast<B>(xsimd::bitwise_cast<U>(biased) << C::fraction_bits);
}

//! e 2^k, rounded once, for e in [0.7, 1.42] and integer-valued k (0 below the subnormal range).
template <class Arch, class T>
SPECDEC_SIMD_INLINE xsimd::batch<T, Arch> times_power_of_two(const xsimd::batch<T, Arch>& e,
                                                             const xsimd::batch<T, Arch>& k) noexcept {
  using B = xsimd::batch<T, Arch>;
  using C = specdec::detail::weight_exp_constants<T>;
#if XSIMD_WITH_AVX512F
  if constexpr (is_family<Arch, xsimd::avx512f>) {
    if constexpr (std::is_same_v<T, float>)
      return B(_mm512_scalef_ps(e, k));
    else
      return B(_mm512_scalef_pd(e, k));
  } else
#endif
  {
    const B least(static_cast<T>(C::least_normal));
    const B first = e * power_of_two<Arch, T>(xsimd::max(k, least));  // exact: a normal result
    const B second =
        power_of_two<Arch, T>(xsimd::min(xsimd::max(k - least, B(static_cast<T>(C::least_nonzero - C::least_normal))), B(T(0))));
    return xsimd::select(k < B(static_cast<T>(C::least_nonzero)), B(T(0)), first * second);
  }
}

//! exp(t) lane by lane on each of N batches, in place, bit for bit `specdec::detail::weight_exp`
//! (NaN and t below its floor give 0; with `KeepNaN`, NaN gives NaN, so that a sum of the results
//! shows a NaN argument without a check of its own). Each step runs on all N batches before the next: a single
//! exp is a chain of about 20 dependent operations, and independent chains side by side keep the
//! vector units busy (8 batches measured about 1.3x the throughput of one at a time on AVX-512).
//! (-k) c and k (-c) are the same product, so the reduction multiplies k by the negated constants.
//! \pre t <= 88 (float), 709 (double)
template <class Arch, class T, std::size_t N, bool KeepNaN = false>
SPECDEC_SIMD_INLINE void weight_exp(std::array<xsimd::batch<T, Arch>, N>& t) noexcept {
  using B = xsimd::batch<T, Arch>;
  using C = specdec::detail::weight_exp_constants<T>;
  std::array<B, N> k, r, p;
  for (std::size_t i = 0; i < N; ++i) {
    if constexpr (KeepNaN && max_skips_nan_first<Arch>)  // t below the floor: the floor; NaN: NaN
      t[i] = xsimd::max(B(C::floor), t[i]);
    else if constexpr (KeepNaN)
      t[i] = xsimd::select(t[i] < B(C::floor), B(C::floor), t[i]);
    else if constexpr (max_skips_nan_first<Arch>)  // NaN and t below the floor: the floor
      t[i] = xsimd::max(t[i], B(C::floor));
    else
      t[i] = xsimd::select(t[i] > B(C::floor), t[i], B(C::floor));
  }
  for (std::size_t i = 0; i < N; ++i) k[i] = xsimd::nearbyint(t[i] * B(C::log2e));
  for (std::size_t i = 0; i < N; ++i) r[i] = multiply_add(k[i], B(-C::ln2_hi), t[i]);
  for (std::size_t i = 0; i < N; ++i) r[i] = multiply_add(k[i], B(-C::ln2_lo), r[i]);
  for (std::size_t i = 0; i < N; ++i) p[i] = multiply_add(B(C::poly[0]), r[i], B(C::poly[1]));
  for (std::size_t j = 2; j < C::poly.size(); ++j)
    for (std::size_t i = 0; i < N; ++i) p[i] = multiply_add(p[i], r[i], B(C::poly[j]));
  for (std::size_t i = 0; i < N; ++i) p[i] = multiply_add(r[i] * r[i], p[i], r[i]) + B(T(1));
  for (std::size_t i = 0; i < N; ++i) t[i] = times_power_of_two<Arch, T>(p[i], k[i]);
}

//! exp(t) lane by lane (the group of one batch).
template <class Arch, class T>
xsimd::batch<T, Arch> weight_exp(xsimd::batch<T, Arch> t) noexcept {
  std::array<xsimd::batch<T, Arch>, 1> one{t};
  weight_exp<Arch, T, 1>(one);
  return one[0];
}

}  // namespace specdec::backend::simd::detail
