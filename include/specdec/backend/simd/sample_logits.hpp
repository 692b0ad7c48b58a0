//! \file backend/simd/sample_logits.hpp
//! \brief One token from a row of logits with sampling parameters (temperature, top-k, top-p,
//! min-p), on the simd backend: seq's token, status and mass bit for bit (the reference,
//! sampling/sample_logits.hpp: `sample_categorical` on the kept weights of
//! distributions/logit_weights.hpp), without materialising the warped row when a top-k or a min-p
//! alone is set, and without sorting the row for a top-p alone.
//!
//! - top_k in [1, `sparse_top_k_limit`], or min_p > 0 with no top-k and no top-p (**sparse paths**):
//!   the kept tokens and their weights from backend/simd/sparse_filter.hpp (a selection pass and a
//!   gathering pass, no exp outside the candidates), then `sample_sparse` on the weights, which the
//!   sampling contract makes the dense row's token.
//! - top_p < 1 with no top-k and no min-p (**top-p path**): one read of the logits
//!   (`one_read_weights`, backend/simd/softmax.hpp) writes the weights to a scratch row (the thread's,
//!   reused across calls: `scratch_row`) and sums them approximately (Z; float rows add groups of
//!   batches in float, then in double: within 3 2^-24 relative; a NaN logit shows as a NaN sum). The
//!   cut, seq's top-p threshold on the weights by fixed-point masses, is found without sorting the
//!   row (backend/simd/top_p_cut.hpp, `top_p_cut`): no entry below a floor from Z can be kept; a band
//!   guessed from a subsample's histogram (`guess_cut_band`, or from the first level's float sums on
//!   peaked rows: `first_band`) is gathered in one pass that also estimates the row's mass and the
//!   mass below the band, and searched over every need those estimates allow; when two needs give
//!   two cuts, a second pass counts the fixed-point masses exactly, and the band is kept when those
//!   show that it holds the cut; otherwise bands are narrowed from the whole row. Each level narrows
//!   by 4 geometric pivots (float sums that decide whenever their error bound allows, else exact
//!   fixed-point ones) until at most 64 entries remain, which are sorted once and walked as
//!   `fixed_threshold_in` walks them; ties at the cut are kept. Then
//!   `backend::simd::sample_categorical`'s inverse CDF runs on the row with the entries below the cut
//!   read as 0 (`threshold_row_step`: the same token as on the zeroed row: the contract adds +0
//!   exactly); its rescan sums strips as vectors when every such sum is exact (`exact_strip_tiles`).
//!   Cost: one read of the logits, one pass over the weights for the guessed band (rarely
//!   2, or 2 for level 0 and shrinking passes after it), and the sampling pass; no sort of the row, no
//!   zeroing pass, no allocation once the thread's scratch rows are large enough.
//! - otherwise, at T > 0 (**dense path**): `keep_logit_weights` (backend/simd/warp.hpp) into a
//!   scratch row, then `backend::simd::sample_categorical` on the kept weights.
//! - temperature 0: the argmax (lowest id on ties), exact; u is not used.
//! - rows other than float and double, and float rows at T below 1 / FLT_MAX: seq's code.
//! The returned `mass` is the kept weights' sum divided by the maximum logit's weight, as seq's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/sparse_filter.hpp"
#include "specdec/backend/simd/top_p_cut.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/sample_logits.hpp"

namespace specdec::backend::simd {

namespace detail {
//! The step (categorical.hpp's `WeightStep`) of a row whose entries below `cut` weigh 0: the same
//! weights and sums as `row_step` on the row after `zero_below(row, cut)`, without that pass over the
//! row. The row holds weights of `one_read_weights` (finite and >= 0: at most e^64), so it is usable
//! without a check. On AVX-512 the conversion to double zeroes the entries below the cut itself.
template <class Arch, class T>
struct threshold_row_step {
  const T* x;
  std::size_t size;
  T cut;

  void operator()(std::size_t base, lane_accumulators<Arch>& acc) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t R = sampling_lanes / dbatch<Arch>::size;
    const B c(cut), zero(T(0));
    if constexpr (std::is_same_v<T, float>) {
      for (std::size_t k = 0; k < R / 2; ++k) {
        const B l = B::load_unaligned(x + base + k * B::size);
#if XSIMD_WITH_AVX512F
        if constexpr (is_family<Arch, xsimd::avx512f>) {
          const __mmask16 kept = _mm512_cmp_ps_mask(l, c, _CMP_GE_OQ);
          const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(l), 1));
          acc[2 * k] += dbatch<Arch>(_mm512_maskz_cvtps_pd(static_cast<__mmask8>(kept), _mm512_castps512_ps256(l)));
          acc[2 * k + 1] += dbatch<Arch>(_mm512_maskz_cvtps_pd(static_cast<__mmask8>(kept >> 8), high));
          continue;
        }
#endif
        const B v = xsimd::select(l < c, zero, l);
        acc[2 * k] += widen_lo<Arch>(v);
        acc[2 * k + 1] += widen_hi<Arch>(v);
      }
    } else {
      for (std::size_t k = 0; k < R; ++k) {
        const B l = B::load_unaligned(x + base + k * B::size);
        acc[k] += xsimd::select(l < c, zero, l);
      }
    }
  }
  bool usable() const { return true; }
  //! (without a branch: which entries are kept is as unpredictable as the row; 0 w is +0, w finite)
  double scalar(std::size_t v) const { return static_cast<double>(x[v] >= cut) * static_cast<double>(x[v]); }
};

//! Whether every sum of at most `sampling_strip` float weights in [cut, top] is exact in double:
//! they are multiples of 2^(e_cut - 23) below 2^(e_top + 1), so such a sum lies below 2^(e_top + 7)
//! on at most 53 bits when e_top - e_cut <= 23 (e the binary exponent; a subnormal cut counts as
//! the least normal's).
inline bool strip_sums_exact(float top, float cut) noexcept {
  return cut > 0.0f && std::ilogb(top) - std::max(std::ilogb(cut), std::numeric_limits<float>::min_exponent - 1) <= 23;
}

//! The rescans of rules 5-6 (sampling/categorical.hpp) on a float row with the entries below `cut`
//! read as 0, when `strip_sums_exact`: a strip's mass is then the same in any order, so a vector sum
//! gives the contract's sequential one (about 30 cycles a strip instead of 64 dependent adds); the
//! running prefix is the contract's, and the crossing strip is walked by `dense` itself.
template <class Arch, class Dense>
struct exact_strip_tiles {
  const float* x;
  float cut;
  const Dense& dense;

  double strip_mass(std::size_t begin) const noexcept {
    using F = fbatch<Arch>;
    static_assert(sampling_strip % F::size == 0, "a strip holds whole batches");
    const F c(cut);
    dbatch<Arch> acc0(0.0), acc1(0.0);
    for (std::size_t v = begin; v < begin + sampling_strip; v += F::size) {
      const F l = F::load_unaligned(x + v);
      accumulate<Arch, float>(xsimd::select(l < c, F(0.0f), l), acc0, acc1);
    }
    return lanes_sum<Arch>(acc0, acc1);
  }
  std::size_t first_crossing(std::size_t begin, std::size_t end, double prefix, double goal) const {
    double r = prefix;
    std::size_t s0 = begin;
    for (; s0 + sampling_strip <= end; s0 += sampling_strip) {
      const double m = strip_mass(s0);
      if (r + m > goal) return dense.first_crossing(s0, s0 + sampling_strip, r, goal);  // (it crosses in this strip)
      r += m;
    }
    return s0 < end ? dense.first_crossing(s0, end, r, goal) : end;
  }
  std::size_t last_positive(std::size_t begin, std::size_t end) const { return dense.last_positive(begin, end); }
};

//! The top-p path of `sample_logits` (see the file comment). \pre T > 0, top_p in (0, 1), no top-k,
//! no min-p, `specdec::detail::weighs_logits<T>(T)`
template <class Arch, class T>
sample_result sample_top_p(std::span<const T> logits, const warp_params& w, double u) {
  const std::span<T> e(scratch_row<T, 0>(logits.size()), logits.size());
  const referenced_weights r = one_read_weights<Arch>(logits, w.temperature, e.data());
  if (r.status != row_status::ok) return {no_token, r.status, 0.0};
  // The maximum's weight, as the weights pass computed it.
  const T top = scaled_exp<Arch, T>(r.reference, w.temperature)(xsimd::batch<T, Arch>(static_cast<T>(r.max))).get(0);
  const specdec::detail::fixed_mass_scale f(static_cast<double>(top), logits.size());
  // No entry below ((1 - top_p) z - V 2^-g) / V is kept: the entries below c count less than
  // V (c 2^g + 1/2), so those above it reach the goal (z within 2^-20 relative of the weights' sum).
  const double size = static_cast<double>(logits.size());
  const double floor = ((1.0 - w.top_p) * r.sum * (1.0 - std::ldexp(1.0, -16)) - size * std::ldexp(1.0, -f.exponent)) / size;
  const T lo = std::clamp(round_down_to<T>(floor), std::numeric_limits<T>::denorm_min(), top);
  const T cut = top_p_cut<Arch>(std::span<const T>(e), w.top_p, f, lo, top, r.sum);
  threshold_row_step<Arch, T> step{e.data(), e.size(), cut};
  const auto strip_tiles = [&](const auto& dense) {
    return exact_strip_tiles<Arch, std::remove_cvref_t<decltype(dense)>>{e.data(), cut, dense};
  };
  sample_result s;
  if constexpr (std::is_same_v<T, float>)
    s = strip_sums_exact(top, cut) ? sample_with_step<Arch>(e.size(), step, u, strip_tiles)
                                   : sample_with_step<Arch>(e.size(), step, u);
  else
    s = sample_with_step<Arch>(e.size(), step, u);
  s.mass /= static_cast<double>(top);  // (relative to the maximum's weight, as on every path)
  return s;
}
}  // namespace detail

//! Samples one token from softmax-and-warp(logits) with the uniform u (see the file comment): seq's
//! token bit for bit.
//! \throws specdec::error on invalid `w`
template <class Arch, class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u) {
  validate(w);
  if (detail::sparse_filter_applies<T>(w)) {
    detail::sparse_buffers<T>& kept = detail::thread_sparse_buffers<T>();
    const specdec::detail::kept_weights k = detail::sparse_filter<Arch>(logits, w, kept.tokens, kept.weights);
    if (k.status != row_status::ok) return {no_token, k.status, 0.0};
    sample_result s = sample_sparse(logits.size(), kept.tokens, kept.weights, u);
    s.mass /= k.top;
    return s;
  }
  if constexpr (detail::vector_row_type<T>) {
    if (w.temperature > 0.0 && specdec::detail::weighs_logits<T>(w.temperature)) {
      if (w.top_k == 0 && w.top_p < 1.0 && w.min_p == 0.0) return detail::sample_top_p<Arch>(logits, w, u);
      const std::span<T> e(detail::scratch_row<T, 0>(logits.size()), logits.size());
      const specdec::detail::kept_weights k = detail::keep_logit_weights<Arch>(logits, w, e);
      if (k.status != row_status::ok) return {no_token, k.status, 0.0};
      sample_result s = sample_categorical<Arch>(std::span<const T>(e), u);
      s.mass /= k.top;
      return s;
    }
  }
  if (w.temperature == 0.0) {
    double m = 0.0;
    const row_status s = logit_row_max<Arch>(logits, m);
    if (s != row_status::ok) return {no_token, s, 0.0};
    return {static_cast<token_id>(argmax<Arch>(logits)), row_status::ok, 1.0};
  }
  return specdec::sample_logits(logits, w, u);  // other rows, and float rows at T below 1 / FLT_MAX: seq's code
}

}  // namespace specdec::backend::simd
