//! \file backend/simd/sample_logits.hpp
//! \brief One token from a row of logits with sampling parameters (temperature, top-k, top-p,
//! min-p), on the simd backend, without materialising the warped row when a top-k or a min-p alone is
//! set, and without sorting the row for a top-p alone.
//!
//! The seq reference is `warp_logits` followed by `sample_categorical` on the warped row.
//! - top_k in [1, `sparse_top_k_limit`], or min_p > 0 with no top-k and no top-p (**sparse paths**):
//!   the kept tokens and their weights e = T(exp((x - max) / temperature)) from
//!   backend/simd/sparse_filter.hpp (a selection pass and a gathering pass, no exp outside the
//!   candidates), then `sample_sparse` on the weights, which follows the sampling contract. The same
//!   kept set as `backend::simd::warp_logits`, whose row is these weights normalised. It differs from
//!   seq only where rounding matters: seq multiplies by 1 / sum and rounds once more before its
//!   filters and its inverse CDF (token boundaries move by ~1e-7 relative, and a filter boundary can
//!   move when two values are that close). Tests measure agreement above 99.9 % on random rows and
//!   uniforms.
//! - top_p < 1 with no top-k and no min-p (**top-p path**): one read of the logits
//!   (`one_read_weights`, backend/simd/softmax.hpp) writes the weights e = exp((x - R) / T) to a
//!   scratch row (the thread's, reused across calls: `scratch_row`) and sums them (Z; float rows add
//!   pairs of batches in float, then in double: within 2^-24 relative). R is a reference at most 64 T
//!   below the maximum (the first chunk's maximum, or the row's), so the weights are the softmax's up
//!   to one common factor, which neither the cut nor the token depends on. The cut, seq's top-p
//!   threshold on e with goal top_p * Z, is found without sorting the row (backend/simd/top_p_cut.hpp,
//!   `top_p_cut`): no entry below (1 - top_p) Z / V can be kept; a band guessed from a subsample
//!   (`guess_cut_band`) is gathered in one pass that also sums the exact double mass above it, and
//!   kept when those masses show that it holds the cut; otherwise the band between that floor and the
//!   maximum is narrowed by 4 geometric pivots per level (one pass for their masses, float sums on
//!   float rows that decide the band whenever their error bound allows, else exact double sums; one
//!   branch-free pass that gathers the chosen band and sums the exact double mass above it). Either
//!   way the band is narrowed until at most 256 entries remain, which `threshold_in` sorts; ties at
//!   the cut are kept. Then `backend::simd::sample_categorical`'s inverse CDF runs on the row with
//!   the entries below the cut read as 0 (`threshold_row_step`: the same token as on the zeroed row,
//!   and as `sample_sparse` on the kept entries: the contract adds +0 exactly). Cost: one read of the
//!   logits, one pass over the weights for the guessed band (or 2 for level 0 and shrinking passes
//!   after it), and the sampling pass; no sort of the row, no zeroing pass, no allocation once the
//!   thread's scratch rows are large enough. It differs from seq where the dense path does: the
//!   weights are within softmax.hpp's bound of seq's (relative to R), Z is summed in another order,
//!   and seq normalises (rounding p once more) before its filter and its inverse CDF, so a token
//!   boundary or the top-p boundary moves when a cumulative mass is within rounding of u Z or of the
//!   goal. Tests measure agreement (tests/sampling/simd_sample_logits.cpp: every one of 6080 draws at
//!   V up to 128256, ~30000 kept tokens included) and the cut's exactness
//!   (tests/backend/simd_top_p_cut.cpp).
//! - otherwise (**dense path**): `backend::simd::warp_logits` into a scratch row, then
//!   `backend::simd::sample_categorical` (agreement as stated in backend/simd/warp.hpp).
//! - temperature 0: the argmax (lowest id on ties), exact; u is not used.
//! The returned `mass` is the total weight sampled: about 1 on the dense path (a normalised row), the
//! sum of exp((x - max) / T) over the surviving candidates on the sparse and top-p paths (on the
//! top-p path, the sum of the weights divided by the maximum's weight).
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

namespace specdec::backend::simd {

namespace detail {
//! The step (categorical.hpp's `WeightStep`) of a row whose entries below `cut` weigh 0: the same
//! weights, sums and usability as `row_step` on the row after `zero_below(row, cut)`, without that
//! pass over the row.
template <class Arch, class T>
struct threshold_row_step {
  const T* x;
  std::size_t size;
  T cut;
  fast_usable_tracker<Arch, T> ok{};

  void operator()(std::size_t base, lane_accumulators<Arch>& acc) {
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t R = sampling_lanes / dbatch<Arch>::size;
    const B c(cut), zero(T(0));
    if constexpr (std::is_same_v<T, float>) {
      for (std::size_t k = 0; k < R / 2; ++k) {
        const B l = B::load_unaligned(x + base + k * B::size);
        const B v = xsimd::select(l < c, zero, l);
        ok.add(v);
        acc[2 * k] += widen_lo<Arch>(v);
        acc[2 * k + 1] += widen_hi<Arch>(v);
      }
    } else {
      for (std::size_t k = 0; k < R; ++k) {
        const B l = B::load_unaligned(x + base + k * B::size);
        const B v = xsimd::select(l < c, zero, l);
        ok.add(v);
        acc[k] += v;
      }
    }
  }
  bool usable() const {
    if (ok.all()) return true;
    for (std::size_t v = 0; v < size; ++v)
      if (!specdec::detail::usable_weight(scalar(v))) return false;
    return true;
  }
  double scalar(std::size_t v) const { return x[v] < cut ? 0.0 : static_cast<double>(x[v]); }
};

//! The top-p path of `sample_logits` (see the file comment). \pre T > 0, top_p in (0, 1), the
//! temperature is one the vector softmax takes (`vector_temperature`)
template <class Arch, class T>
sample_result sample_top_p(std::span<const T> logits, const warp_params& w, double u) {
  const std::span<T> e(scratch_row<T, 0>(logits.size()), logits.size());
  const referenced_weights r = one_read_weights<Arch>(logits, w.temperature, e.data());
  if (r.status != row_status::ok) return {no_token, r.status, 0.0};
  // The maximum's weight (1 when the reference is the maximum), as the weights pass computed it.
  const T top = scaled_exp<Arch, T>(r.reference, w.temperature)(xsimd::batch<T, Arch>(static_cast<T>(r.max))).get(0);
  const double goal = w.top_p * r.sum;
  // No entry below (z - goal) / V is kept: the entries below c weigh less than V c, so those above
  // it reach z - V c >= goal. (Less a relative 2^-20 for the rounding of the sums.)
  const double floor = (r.sum - goal) / static_cast<double>(logits.size()) * (1.0 - std::ldexp(1.0, -20));
  const T lo = std::clamp(round_down_to<T>(floor), std::numeric_limits<T>::denorm_min(), top);
  const T cut = top_p_cut<Arch>(std::span<const T>(e), goal, lo, top, r.sum);
  threshold_row_step<Arch, T> step{e.data(), e.size(), cut};
  sample_result s = sample_with_step<Arch>(e.size(), step, u);
  s.mass /= static_cast<double>(top);  // (relative to the maximum's weight, as on the other paths)
  return s;
}
}  // namespace detail

//! Samples one token from softmax-and-warp(logits) with the uniform u (see the file comment).
//! \throws specdec::error on invalid `w`
template <class Arch, class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u) {
  validate(w);
  if (detail::sparse_filter_applies<T>(w)) {
    detail::sparse_buffers<T>& kept = detail::thread_sparse_buffers<T>();
    const row_status s = detail::sparse_filter<Arch>(logits, w, kept.tokens, kept.weights);
    if (s != row_status::ok) return {no_token, s, 0.0};
    return sample_sparse(logits.size(), kept.tokens, kept.weights, u);
  }
  if (w.temperature > 0.0 && w.top_k == 0 && w.top_p < 1.0 && w.min_p == 0.0 && detail::vector_row_type<T> &&
      detail::vector_temperature<T>(w.temperature))
    return detail::sample_top_p<Arch>(logits, w, u);
  double m = 0.0;
  const row_status s = logit_row_max<Arch>(logits, m);
  if (s != row_status::ok) return {no_token, s, 0.0};
  if (w.temperature == 0.0) return {static_cast<token_id>(argmax<Arch>(logits)), row_status::ok, 1.0};
  const std::span<T> probs(detail::scratch_row<T, 0>(logits.size()),
                           logits.size());  // (slot 0: the top-p path's, never both in a call)
  const row_status ws = warp_logits<Arch>(logits, probs, w);
  if (ws != row_status::ok) return {no_token, ws, 0.0};
  return sample_categorical<Arch>(std::span<const T>(probs), u);
}

}  // namespace specdec::backend::simd
