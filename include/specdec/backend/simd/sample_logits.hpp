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
//! - top_p < 1 with no top-k and no min-p (**top-p path**): the row maximum, then one pass that writes
//!   the weights e = exp((x - max) / T) (the vector softmax's, backend/simd/softmax.hpp: float rows
//!   take xsimd's float exp) to a scratch row (the thread's, reused across calls: `scratch_row`) and
//!   sums them in double (Z); the cut, seq's top-p threshold on e with goal top_p * Z, is found
//!   without sorting the row (`top_p_cut`): no entry below (1 - top_p) Z / V can be kept, and the band
//!   between that floor and the maximum is narrowed by 4 geometric pivots per level (one pass for their
//!   masses, float sums on float rows that decide the band whenever their error bound allows, else
//!   exact double sums; one branch-free pass that gathers the chosen band and sums the exact double
//!   mass above it) until at most 256 entries remain, which `threshold_in` sorts; ties at the cut are
//!   kept. Then `backend::simd::sample_categorical`'s inverse CDF runs on the row with the entries
//!   below the cut read as 0 (`threshold_row_step`: the same token as on the zeroed row, and as
//!   `sample_sparse` on the kept entries: the contract adds +0 exactly). Cost: the max pass, the exp
//!   pass, 2 passes over the row for level 0, shrinking passes after it, and the sampling pass; no
//!   sort of the row, no zeroing pass, no allocation once the thread's scratch rows are large enough.
//!   It differs from seq where the dense path does: the weights are within softmax.hpp's bound of
//!   seq's, and seq normalises (rounding p once more) before its filter and its inverse CDF, so a
//!   token boundary or the top-p boundary moves when a cumulative mass is within rounding of u Z or
//!   of the goal. Tests measure agreement (tests/sampling/simd_sample_logits.cpp: every one of 6080
//!   draws at V up to 128256, ~30000 kept tokens included).
//! - otherwise (**dense path**): `backend::simd::warp_logits` into a scratch row, then
//!   `backend::simd::sample_categorical` (agreement as stated in backend/simd/warp.hpp).
//! - temperature 0: the argmax (lowest id on ties), exact; u is not used.
//! The returned `mass` is the total weight sampled: about 1 on the dense path (a normalised row), the
//! sum of exp((x - max) / T) over the surviving candidates on the sparse and top-p paths.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/sparse_filter.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::simd {

namespace detail {
//! The calling thread's scratch row number `Slot` of the top-p path, with room for `size` entries
//! (not zero-filled): it grows and never shrinks, so that a call does not allocate (and fault in) its
//! rows afresh; a thread keeps three rows of its largest V (1.5 MB of floats at V = 128256). Its
//! contents do not outlive a call. \pre no other call on this thread uses the slot
//! \throws std::bad_alloc (the slot is then empty)
template <class T, int Slot>
T* scratch_row(std::size_t size) {
  thread_local std::unique_ptr<T[]> row;
  thread_local std::size_t capacity = 0;
  if (capacity < size) {
    row.reset();
    capacity = 0;
    row = std::make_unique_for_overwrite<T[]>(size);
    capacity = size;
  }
  return row.get();
}

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

//! The masses sum_v [row_v >= pivots_j] row_v, j < P: double sums in lane order, one pass (`top_p_cut`
//! where `choose_band_fast` cannot decide).
template <class Arch, class T, std::size_t P>
std::array<double, P> masses_at_least(std::span<const T> row, const std::array<T, P>& pivots) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  std::array<dbatch<Arch>, 2 * P> acc;
  acc.fill(dbatch<Arch>(0.0));
  std::array<B, P> at;
  for (std::size_t j = 0; j < P; ++j) at[j] = B(pivots[j]);
  const auto add = [&](const B& x) {
    for (std::size_t j = 0; j < P; ++j) accumulate<Arch, T>(xsimd::select(x >= at[j], x, B(T(0))), acc[2 * j], acc[2 * j + 1]);
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) add(B::load_unaligned(row.data() + v));
  if (full < row.size()) add(load_partial<B>(row.data() + full, row.size() - full, T(0)));
  std::array<double, P> mass;
  for (std::size_t j = 0; j < P; ++j) mass[j] = lanes_sum<Arch>(acc[2 * j], acc[2 * j + 1]);
  return mass;
}

//! The band choice of `top_p_cut` from float sums: `chosen` = the least j with
//! above + masses_at_least(row, pivots)[j] >= goal (P if none), as the exact double masses give it,
//! whenever every comparison it rests on is farther from `goal` than the float sums' error bound
//! (positive terms: (k - 1) 2^-24 of the mass for k terms per lane, doubled); false when one is not,
//! or for double rows: then the caller takes the exact masses. Float adds cost a quarter of the
//! widening double adds of `masses_at_least`.
template <class Arch, class T, std::size_t P>
bool choose_band_fast(std::span<const T> row, const std::array<T, P>& pivots, double above, double goal,
                      std::size_t& chosen) noexcept {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    using B = xsimd::batch<float, Arch>;
    constexpr std::size_t n = B::size;
    std::array<B, 2 * P> acc;
    acc.fill(B(0.0f));
    std::array<B, P> at;
    for (std::size_t j = 0; j < P; ++j) at[j] = B(pivots[j]);
    const B zero(0.0f);
    const std::size_t full = row.size() / (2 * n) * (2 * n);
    std::size_t v = 0;
    for (; v < full; v += 2 * n) {
      const B x0 = B::load_unaligned(row.data() + v), x1 = B::load_unaligned(row.data() + v + n);
      for (std::size_t j = 0; j < P; ++j) {
        acc[2 * j] += xsimd::select(x0 >= at[j], x0, zero);
        acc[2 * j + 1] += xsimd::select(x1 >= at[j], x1, zero);
      }
    }
    for (; v < row.size(); v += n) {
      const B x = v + n <= row.size() ? B::load_unaligned(row.data() + v) : load_partial<B>(row.data() + v, row.size() - v, 0.0f);
      for (std::size_t j = 0; j < P; ++j) acc[2 * j] += xsimd::select(x >= at[j], x, zero);
    }
    const double terms = static_cast<double>(row.size() / (2 * n) + 2);  // per lane, at most
    const double rel = 2.0 * terms * std::ldexp(1.0, -24) + std::ldexp(1.0, -50);
    for (std::size_t j = 0; j < P; ++j) {
      alignas(64) std::array<float, 2 * n> lanes;
      acc[2 * j].store_aligned(lanes.data());
      acc[2 * j + 1].store_aligned(lanes.data() + n);
      double mass = 0.0;
      for (const float x : lanes) mass += static_cast<double>(x);
      const double estimate = above + mass, bound = rel * estimate;
      if (estimate - bound >= goal) {
        chosen = j;
        return true;
      }
      if (!(estimate + bound < goal)) return false;
    }
    chosen = P;
    return true;
  }
}

//! The entries of a row in [lo, hi) gathered by `gather_band`: their number, least and largest.
template <class T>
struct band_summary {
  std::size_t size;
  T least, most;
};

//! Writes the entries of `row` in [lo, hi) to `out` (room for row.size() plus a batch), in row order,
//! without a branch per entry (`compress_greater`). With `Mass`, also sets `*above` to the mass of
//! the entries >= hi, bit for bit `masses_at_least(row, {hi})` (the same sums in the same order).
//! \pre lo > 0
template <class Arch, class T, bool Mass = false>
band_summary<T> gather_band(std::span<const T> row, T lo, T hi, T* out, double* above = nullptr) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const B tau(std::nextafter(lo, -inf)), upper(hi), none(-inf);
  B least(inf), most(-inf);
  std::size_t size = 0;
  dbatch<Arch> acc0(0.0), acc1(0.0);
  const auto take = [&](const B& x) {
    if constexpr (Mass) accumulate<Arch, T>(xsimd::select(x >= upper, x, B(T(0))), acc0, acc1);
    const B y = xsimd::select(x < upper, x, none);
    size += compress_greater<Arch>(y, tau, out + size);
    most = xsimd::max(most, y);                                    // (y < hi)
    least = xsimd::min(least, xsimd::select(y > tau, y, B(inf)));  // (y >= lo)
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) take(B::load_unaligned(row.data() + v));
  if (full < row.size()) take(load_partial<B>(row.data() + full, row.size() - full, -inf));
  alignas(64) std::array<T, n> low, high;
  least.store_aligned(low.data());
  most.store_aligned(high.data());
  if constexpr (Mass) *above = lanes_sum<Arch>(acc0, acc1);
  return {size, *std::min_element(low.begin(), low.end()), *std::max_element(high.begin(), high.end())};
}

//! seq's top-p threshold (`threshold_in` on the whole row) of a row of weights in [0, 1] whose mass
//! reaches `goal` at or above `lo`: the value c with S(> c) < goal <= S(>= c), S(>= c) the mass of the
//! entries >= c. A band [lo, hi) that holds c, and the mass `above` of the entries >= hi, are narrowed
//! with `pivots` thresholds spaced geometrically from the band's maximum down to lo (one pass for
//! their masses, `choose_band_fast` or exact double sums, and one that gathers the chosen band and
//! adds the exact mass above it to `above`) until the band holds at most `sort_limit` entries, which
//! `threshold_in` sorts (a smaller sort for one more cheap level). \pre 0 < lo <= 1
template <class Arch, class T>
T top_p_cut(std::span<const T> row, double goal, T lo) {
  constexpr std::size_t pivots = 4, n = xsimd::batch<T, Arch>::size;
  constexpr int max_levels = 12;           // (then the band is sorted whatever its size)
  constexpr std::size_t sort_limit = 256;  // (2048, `top_p_sort_limit`, spent ~10 % of a call sorting)
  T hi = std::numeric_limits<T>::infinity(), top = T(1);
  double above = 0.0;
  // Two buffers (the thread's scratch rows 1 and 2) that the levels' bands alternate between.
  const std::array<T*, 2> buffer{scratch_row<T, 1>(row.size() + n), scratch_row<T, 2>(row.size() + n)};
  std::span<const T> in = row;  // the whole row at level 0 (entries outside [lo, hi) too), then the band
  for (int level = 0;; ++level) {
    if (in.size() <= sort_limit || level == max_levels) {
      if (level == 0) in = std::span<const T>(buffer[0], gather_band<Arch>(row, lo, hi, buffer[0]).size);
      std::vector<T> band(in.begin(), in.end());
      const T least = band.empty() ? lo : *std::min_element(band.begin(), band.end());
      return threshold_in(band, above, goal, least);
    }
    std::array<T, pivots> at;  // at[0] = top > at[1] > ... >= lo (rounded down: duplicates are harmless)
    for (std::size_t j = 0; j < pivots; ++j)
      at[j] = round_down_to<T>(static_cast<double>(top) *
                               std::pow(static_cast<double>(lo) / static_cast<double>(top), static_cast<double>(j) / pivots));
    at[0] = top;
    std::size_t j = 0;
    if (!choose_band_fast<Arch>(in, at, above, goal, j)) {
      const std::array<double, pivots> mass = masses_at_least<Arch>(in, at);
      j = 0;
      while (j < pivots && above + mass[j] < goal) ++j;
    }
    // The new band [at[j], at[j - 1]): at[-1] is hi, at[pivots] is lo; `above` gains the exact mass
    // >= at[j - 1], summed by the gathering pass.
    const T new_lo = j < pivots ? at[j] : lo, new_hi = j > 0 ? at[j - 1] : hi;
    T* const out = buffer[static_cast<std::size_t>(level + 1) % 2];
    double gained = 0.0;
    const band_summary<T> got =
        j > 0 ? gather_band<Arch, T, true>(in, new_lo, new_hi, out, &gained) : gather_band<Arch>(in, new_lo, new_hi, out);
    above += gained;
    in = std::span<const T>(out, got.size);
    lo = new_lo;
    hi = new_hi;
    if (in.empty()) return lo;                    // (rounding: keep every entry >= lo)
    if (got.least == got.most) return got.least;  // ties only, e.g. at[0]'s
    top = got.most;
  }
}

//! The top-p path of `sample_logits` (see the file comment). \pre T > 0, top_p in (0, 1), the
//! temperature is one the vector softmax takes (`vector_temperature`)
template <class Arch, class T>
sample_result sample_top_p(std::span<const T> logits, const warp_params& w, double u) {
  double m = 0.0;
  const row_status s = logit_row_max<Arch>(logits, m);
  if (s != row_status::ok) return {no_token, s, 0.0};
  const std::span<T> e(scratch_row<T, 0>(logits.size()), logits.size());
  const double z = sum_scaled_exp<Arch, true>(logits, m, w.temperature, e.data());  // >= 1: the maximum's is 1
  const double goal = w.top_p * z;
  // No entry below (z - goal) / V is kept: the entries below c weigh less than V c, so those above
  // it reach z - V c >= goal. (Less a relative 2^-20 for the rounding of the sums.)
  const double floor = (z - goal) / static_cast<double>(logits.size()) * (1.0 - std::ldexp(1.0, -20));
  const T lo = std::clamp(round_down_to<T>(floor), std::numeric_limits<T>::denorm_min(), T(1));
  const T cut = top_p_cut<Arch>(std::span<const T>(e), goal, lo);
  threshold_row_step<Arch, T> step{e.data(), e.size(), cut};
  return sample_with_step<Arch>(e.size(), step, u);
}
}  // namespace detail

//! Samples one token from softmax-and-warp(logits) with the uniform u (see the file comment).
//! \throws specdec::error on invalid `w`
template <class Arch, class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u) {
  validate(w);
  if (detail::sparse_filter_applies<T>(w)) {
    thread_local std::vector<token_id> tokens;
    thread_local std::vector<double> weights;
    const row_status s = detail::sparse_filter<Arch>(logits, w, tokens, weights);
    if (s != row_status::ok) return {no_token, s, 0.0};
    return sample_sparse(logits.size(), tokens, weights, u);
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
