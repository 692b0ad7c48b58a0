//! \file backend/simd/exp.hpp
//! \brief exp(t) of float batches for the weights of the simd softmax (backend/simd/softmax.hpp,
//! `scaled_exp`), whose arguments are scaled gaps to a row's maximum or to a reference at most 64
//! below it, so no overflow handling is needed.
//!
//! On AVX-512: t = k ln 2 + r with k = nearbyint(t / ln 2) and r from two fused multiply-adds (ln 2
//! split in a high part with 10 significant bits, so k * hi is exact for |k| < 2^14, and a low part:
//! Cody and Waite's reduction), |r| <= ln(2) / 2; exp(r) = 1 + r + r^2 P(r) with P the degree-4
//! minimax polynomial of Cephes's expf (Moshier) for (exp(r) - 1 - r) / r^2; then 2^k exp(r) in one
//! `vscalefps`, which also gives the subnormal results below FLT_MIN (and +0 below them).
//! Error: within 2 ulp of exp(t) for normal results (tests/backend/simd_top_p_cut.cpp measures 1.46
//! ulp at most over every 61st float of [-87.3, 64]).
//! Other architectures: xsimd::exp (the same reduction and polynomial, with xsimd's `ldexp` and
//! selects for the range ends; +0 below t = -87.3).
//! \pre -1000 <= t <= 88 (the caller raises smaller arguments; -inf would give NaN here)
#pragma once

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"

namespace specdec::backend::simd::detail {

template <class Arch>
fbatch<Arch> exp_in_range(const fbatch<Arch>& t) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_family<Arch, xsimd::avx512f>) {
    using B = fbatch<Arch>;
    const B k = xsimd::nearbyint(t * B(1.44269504088896341f));  // 1 / ln 2
    B r = xsimd::fnma(k, B(0.693359375f), t);                   // ln 2, high part (0x3f318000)
    r = xsimd::fnma(k, B(-2.12194440e-4f), r);                  // ln 2 - high part
    B p = B(1.3997796e-03f);
    p = xsimd::fma(p, r, B(8.3955629e-03f));
    p = xsimd::fma(p, r, B(4.1665401e-02f));
    p = xsimd::fma(p, r, B(1.6666277e-01f));
    p = xsimd::fma(p, r, B(5.0000000e-01f));
    const B e = xsimd::fma(p, r * r, r) + B(1.0f);
    return B(_mm512_scalef_ps(e, k));
  } else
#endif
  {
    return xsimd::exp(t);
  }
}

}  // namespace specdec::backend::simd::detail
