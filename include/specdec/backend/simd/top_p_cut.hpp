//! \file backend/simd/top_p_cut.hpp
//! \brief seq's top-p threshold of a large row of weights without sorting the row (`top_p_cut`), and
//! the per-thread scratch rows it and the top-p path of backend/simd/sample_logits.hpp work in.
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

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/sparse_filter.hpp"

namespace specdec::backend::simd::detail {

//! The calling thread's scratch row number `Slot` of the top-p path, with room for `size` entries
//! (not zero-filled): it grows and never shrinks, so that a call does not allocate (and fault in) its
//! rows afresh. Slot 0 holds the weights of the top-p path, slots 1 and 2 the bands of `top_p_cut`,
//! slot 3 the subsample of `guess_cut_band` (2048 entries): three rows of a thread's largest V (1.5
//! MB of floats at V = 128256) and a small one. Its contents do not outlive a call.
//! \pre no other call on this thread uses the slot
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
//! Without `Summary`, the returned least and largest are the bounds lo and the float below hi (a
//! lighter pass).
//! \pre lo > 0
template <class Arch, class T, bool Mass = false, bool Summary = true>
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
    if constexpr (Summary) {
      most = xsimd::max(most, y);                                    // (y < hi)
      least = xsimd::min(least, xsimd::select(y > tau, y, B(inf)));  // (y >= lo)
    }
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) take(B::load_unaligned(row.data() + v));
  if (full < row.size()) take(load_partial<B>(row.data() + full, row.size() - full, -inf));
  if constexpr (Mass) *above = lanes_sum<Arch>(acc0, acc1);
  if constexpr (!Summary) return {size, lo, std::nextafter(hi, -inf)};
  alignas(64) std::array<T, n> low, high;
  least.store_aligned(low.data());
  most.store_aligned(high.data());
  return {size, *std::min_element(low.begin(), low.end()), *std::max_element(high.begin(), high.end())};
}

template <class Arch, class T>
T top_p_cut(std::span<const T> row, double goal, T lo, T top = T(1), double z = 0.0);

//! Batches in the subsample of `guess_cut_band`.
inline constexpr std::size_t guess_batches = 128;

//! A guess at a narrow band [lo, hi) that holds the top-p cut c of `row` (`top_p_cut`; z the row's
//! mass, goal <= z), from a subsample of `guess_batches` evenly spaced batches of the row; nothing
//! when the row is too short for it to pay, or the estimate too uncertain. The entries below c carry
//! z - S(>= c), about z - goal; the subsample's mass below a threshold, scaled by the subsampled
//! fraction, estimates the row's with a small relative error, since those entries are all below the
//! threshold (the mass above it is dominated by the few largest entries, and would not). The band
//! runs between the subsample's cuts for a mass below of (z - goal) (1 +- margin), the margin 4.5
//! standard errors of the estimate (from the subsample's spread), at least 0.1; nothing when it would
//! exceed 0.5 (rows whose few largest entries hold the mass, such as low temperatures). Only a guess:
//! `top_p_cut` checks it against the exact masses of one pass over the row and falls back to its full
//! search when it misses. \pre as `top_p_cut`
template <class Arch, class T>
std::optional<std::array<T, 2>> guess_cut_band(std::span<const T> row, double z, double goal, T lo, T top) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size, sampled = guess_batches;
  constexpr double least_margin = 0.1, most_margin = 0.5, errors = 4.5;
  const std::size_t batches = row.size() / n;
  if (batches < 4 * sampled) return std::nullopt;  // (so the subsample's own cuts never guess)
  const std::size_t stride = batches / sampled;    // (>= 4: at most 2 sampled batches per stride)
  T* const sub = scratch_row<T, 3>(2 * sampled * n);
  std::size_t size = 0;
  for (std::size_t b = 0; b < batches; b += stride, size += n) B::load_unaligned(row.data() + b * n).store_unaligned(sub + size);
  const std::span<const T> s(sub, size);
  const double sub_mass = masses_at_least<Arch>(s, std::array<T, 1>{T(0)})[0];
  const double below = (z - goal) * static_cast<double>(size) / static_cast<double>(row.size());
  // The subsample's entries below lo (1 - most_margin) weigh less than `size` of them, at most
  // below (1 - most_margin): every goal below is reached at or above it (`top_p_cut`'s precondition).
  const T sub_lo =
      std::max(round_down_to<T>(static_cast<double>(lo) * (1.0 - most_margin)), std::numeric_limits<T>::denorm_min());
  const auto cut_at = [&](double relative) { return top_p_cut<Arch>(s, sub_mass - below * relative, sub_lo, top); };
  if (!(sub_mass - below > 0.0)) return std::nullopt;
  // The estimate's relative standard error, from the subsample's entries below its cut: the margin
  // is `errors` of them (at least `least_margin`); none when that exceeds `most_margin`.
  const T nominal = cut_at(1.0);
  dbatch<Arch> sum0(0.0), sum1(0.0), squares0(0.0), squares1(0.0);
  for (std::size_t v = 0; v < size; v += n) {
    const B x = B::load_unaligned(sub + v), kept_out = xsimd::select(x < B(nominal), x, B(T(0)));
    accumulate<Arch, T>(kept_out, sum0, sum1);
    accumulate<Arch, T>(kept_out * kept_out, squares0, squares1);
  }
  const double s1 = lanes_sum<Arch>(sum0, sum1), s2 = lanes_sum<Arch>(squares0, squares1);
  const double margin = std::max(least_margin, errors * std::sqrt(std::max(0.0, s2 - s1 * s1 / static_cast<double>(size))) / s1);
  if (!(margin <= most_margin) || !(sub_mass - below * (1.0 + margin) > 0.0)) return std::nullopt;
  const T high = cut_at(1.0 + margin), low = cut_at(1.0 - margin);
  return std::array<T, 2>{std::max(low, lo), std::nextafter(high, std::numeric_limits<T>::infinity())};
}

//! seq's top-p threshold (`threshold_in` on the whole row) of a row of weights in [0, top] whose mass
//! reaches `goal` at or above `lo`: the value c with S(> c) < goal <= S(>= c), S(>= c) the mass of the
//! entries >= c. A band [lo, hi) that holds c, and the mass `above` of the entries >= hi, are narrowed
//! with `pivots` thresholds spaced geometrically from the band's maximum down to lo (one pass for
//! their masses, `choose_band_fast` or exact double sums, and one that gathers the chosen band and
//! adds the exact mass above it to `above`) until the band holds at most `sort_limit` entries, which
//! `threshold_in` sorts (a smaller sort for one more cheap level). On a long row (given its mass z),
//! the first band is `guess_cut_band`'s when one pass that gathers it and sums the mass above it
//! shows that it holds c; the search runs from the whole row otherwise. \pre 0 < lo <= top
template <class Arch, class T>
T top_p_cut(std::span<const T> row, double goal, T lo, T top, double z) {
  constexpr std::size_t pivots = 4, n = xsimd::batch<T, Arch>::size;
  constexpr int max_levels = 12;           // (then the band is sorted whatever its size)
  constexpr std::size_t sort_limit = 256;  // (2048, `top_p_sort_limit`, spent ~10 % of a call sorting)
  const std::optional<std::array<T, 2>> guess = z > 0.0 ? guess_cut_band<Arch>(row, z, goal, lo, top) : std::nullopt;
  T hi = std::numeric_limits<T>::infinity();
  double above = 0.0;
  // Two buffers (the thread's scratch rows 1 and 2) that the levels' bands alternate between.
  const std::array<T*, 2> buffer{scratch_row<T, 1>(row.size() + n), scratch_row<T, 2>(row.size() + n)};
  std::span<const T> in = row;  // the whole row at level 0 (entries outside [lo, hi) too), then the band
  int level = 0;
  if (guess && (*guess)[0] < (*guess)[1]) {
    double guess_above = 0.0;
    const band_summary<T> got = gather_band<Arch, T, true, false>(row, (*guess)[0], (*guess)[1], buffer[1], &guess_above);
    const std::span<const T> band(buffer[1], got.size);
    if (guess_above < goal && guess_above + masses_at_least<Arch>(band, std::array<T, 1>{T(0)})[0] >= goal) {
      in = band;  // the state after level 0, with the guessed band
      lo = (*guess)[0];
      hi = (*guess)[1];
      top = got.most;
      above = guess_above;
      level = 1;
    }
  }
  for (;; ++level) {
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

}  // namespace specdec::backend::simd::detail
