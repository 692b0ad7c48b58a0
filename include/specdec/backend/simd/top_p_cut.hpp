//! \file backend/simd/top_p_cut.hpp
//! \brief seq's top-p threshold of a large row of weights without sorting the row (`top_p_cut`,
//! `search_cut`), by the exact fixed-point masses of distributions/logit_weights.hpp, and the
//! per-thread scratch rows it and the top-p path of backend/simd/sample_logits.hpp work in.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/fixed_mass.hpp"
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

//! The fixed-point masses sum_v [row_v >= pivots_j] f(row_v), j < P, in one pass (`top_p_cut` where
//! `choose_band_fast` cannot decide).
template <class Arch, class T, std::size_t P>
std::array<std::int64_t, P> masses_at_least(std::span<const T> row, const std::array<T, P>& pivots,
                                            const specdec::detail::fixed_mass_scale& f) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  std::array<fixed_sum<Arch>, P> acc;
  acc.fill(fixed_sum<Arch>(f));
  std::array<B, P> at;
  for (std::size_t j = 0; j < P; ++j) at[j] = B(pivots[j]);
  const auto add = [&](const B& x) {
    for (std::size_t j = 0; j < P; ++j) acc[j].add_weights(xsimd::select(x >= at[j], x, B(T(0))));
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) add(B::load_unaligned(row.data() + v));
  if (full < row.size()) add(load_partial<B>(row.data() + full, row.size() - full, T(0)));
  std::array<std::int64_t, P> mass;
  for (std::size_t j = 0; j < P; ++j) mass[j] = acc[j].total();
  return mass;
}

//! The fixed-point mass of a whole row of weights (entries >= 0).
template <class Arch, class T>
std::int64_t fixed_row_mass(std::span<const T> row, const specdec::detail::fixed_mass_scale& f) noexcept {
  return masses_at_least<Arch>(row, std::array<T, 1>{T(0)}, f)[0];
}

//! The approximate mass of a row of weights (entries >= 0): a double sum in lane order.
template <class Arch, class T>
double row_mass(std::span<const T> row) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  dbatch<Arch> acc0(0.0), acc1(0.0);
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) accumulate<Arch, T>(B::load_unaligned(row.data() + v), acc0, acc1);
  if (full < row.size()) accumulate<Arch, T>(load_partial<B>(row.data() + full, row.size() - full, T(0)), acc0, acc1);
  return lanes_sum<Arch>(acc0, acc1);
}

//! The band choice of `top_p_cut` from float sums: `chosen` = the least j with
//! above + masses_at_least(row, pivots, f)[j] >= goal (P if none), as the exact fixed-point masses
//! give it for every goal in [goal_low, goal_high], whenever every comparison it rests on is farther
//! from those goals than the float sums' error bound (positive terms: (k - 1) 2^-24 of the mass for k
//! terms per lane, doubled) plus the rounding of the counts (half a unit per entry); false when one
//! is not, or for double rows: then the caller takes the exact masses. Float adds cost a fraction of
//! the fixed-point conversions.
template <class Arch, class T, std::size_t P>
bool choose_band_fast(std::span<const T> row, const std::array<T, P>& pivots, std::int64_t above, std::int64_t goal_low,
                      std::int64_t goal_high, const specdec::detail::fixed_mass_scale& f, std::size_t& chosen) noexcept {
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
    const double unit = std::ldexp(1.0, -f.exponent);  // one count, in weight units
    const double least_target = static_cast<double>(goal_low) * unit, target = static_cast<double>(goal_high) * unit;
    for (std::size_t j = 0; j < P; ++j) {
      alignas(64) std::array<float, 2 * n> lanes;
      acc[2 * j].store_aligned(lanes.data());
      acc[2 * j + 1].store_aligned(lanes.data() + n);
      double mass = 0.0;
      for (const float x : lanes) mass += static_cast<double>(x);
      const double estimate = static_cast<double>(above) * unit + mass;
      const double bound = rel * estimate + (static_cast<double>(row.size()) + 2.0) * unit;
      if (estimate - bound >= target) {
        chosen = j;
        return true;
      }
      if (!(estimate + bound < least_target)) return false;
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
//! without a branch per entry (`compress_greater`). With `Mass`, also sets `*above` to the fixed-point
//! mass of the entries >= hi and `*total` to the row's. Without `Summary`, the returned least and
//! largest are the bounds lo and the float below hi (a lighter pass).
//! \pre lo > 0, the entries of `row` are >= 0
template <class Arch, class T, bool Mass = false, bool Summary = true>
band_summary<T> gather_band(std::span<const T> row, T lo, T hi, T* out, const specdec::detail::fixed_mass_scale* f = nullptr,
                            std::int64_t* above = nullptr, std::int64_t* total = nullptr) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const B tau(std::nextafter(lo, -inf)), upper(hi), none(-inf);
  B least(inf), most(-inf);
  std::size_t size = 0;
  std::optional<fixed_sum<Arch>> high, all;
  if constexpr (Mass) {
    high.emplace(*f);
    all.emplace(*f);
  }
  const auto take = [&](const B& x) {
    if constexpr (Mass) all->add_weights_and_above(x, upper, *high);
    const B y = xsimd::select(x < upper, x, none);
    size += compress_greater<Arch>(y, tau, out + size);
    if constexpr (Summary) {
      most = xsimd::max(most, y);                                    // (y < hi)
      least = xsimd::min(least, xsimd::select(y > tau, y, B(inf)));  // (y >= lo)
    }
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) take(B::load_unaligned(row.data() + v));
  if (full < row.size()) take(load_partial<B>(row.data() + full, row.size() - full, T(0)));  // (0 is below lo: not gathered)
  if constexpr (Mass) {
    *above = high->total();
    if (total) *total = all->total();
  }
  if constexpr (!Summary) return {size, lo, std::nextafter(hi, -inf)};
  alignas(64) std::array<T, n> low, high_lanes;
  least.store_aligned(low.data());
  most.store_aligned(high_lanes.data());
  return {size, *std::min_element(low.begin(), low.end()), *std::max_element(high_lanes.begin(), high_lanes.end())};
}

//! Where the search of `top_p_cut` stands: the band [lo, hi) that holds the cut, its entries `in`
//! (the whole row, entries outside the band too, at level 0), their largest `top`, and the
//! fixed-point mass `above` of the entries >= hi.
template <class T>
struct cut_search {
  std::span<const T> in;
  T lo, hi, top;
  std::int64_t above;
  int level;
};

//! Pivots per level of `search_cut`.
inline constexpr std::size_t cut_pivots = 4;

//! The pivots of a band [lo, hi) whose largest entry is top: at[0] = top > at[1] > ... >= lo,
//! top (lo / top)^(j / 4) rounded down (duplicates are harmless).
template <class T>
std::array<T, cut_pivots> band_pivots(T lo, T top) noexcept {
  static_assert(cut_pivots == 4, "the ratio's fourth root is two square roots");
  const double ratio = std::sqrt(std::sqrt(static_cast<double>(lo) / static_cast<double>(top)));
  std::array<T, cut_pivots> at;
  double pivot = static_cast<double>(top);
  for (std::size_t j = 0; j < cut_pivots; ++j, pivot *= ratio) at[j] = std::max(round_down_to<T>(pivot), lo);
  at[0] = top;
  return at;
}

//! The cut for a fixed-point `goal` (the value c with S(> c) < goal <= S(>= c), S(>= c) the
//! fixed-point mass of the entries >= c) from the state `st` of the search: the band is narrowed
//! with `pivots` thresholds spaced geometrically from its maximum down to lo (one pass for their
//! masses, `choose_band_fast` or exact fixed-point sums, and one that gathers the chosen band and adds
//! the exact mass above it to `above`) until it holds at most `sort_limit` entries, which
//! `fixed_threshold_in` sorts. \pre S(>= st.lo) >= goal
template <class Arch, class T>
T search_cut(std::span<const T> row, cut_search<T> st, std::int64_t goal, const specdec::detail::fixed_mass_scale& f) {
  constexpr std::size_t pivots = cut_pivots, n = xsimd::batch<T, Arch>::size;
  constexpr int max_levels = 12;          // (then the band is sorted whatever its size)
  constexpr std::size_t sort_limit = 64;  // (256 spent ~8 % of a call sorting, 2048 ~10 %)
  // Two buffers (the thread's scratch rows 1 and 2) that the levels' bands alternate between.
  const std::array<T*, 2> buffer{scratch_row<T, 1>(row.size() + n), scratch_row<T, 2>(row.size() + n)};
  for (;; ++st.level) {
    if (st.in.size() <= sort_limit || st.level == max_levels) {
      if (st.level == 0) st.in = std::span<const T>(buffer[0], gather_band<Arch>(row, st.lo, st.hi, buffer[0]).size);
      std::vector<T> band(st.in.begin(), st.in.end());
      const T least = band.empty() ? st.lo : *std::min_element(band.begin(), band.end());
      return specdec::detail::fixed_threshold_in(band, st.above, goal, least, f);
    }
    const std::array<T, pivots> at = band_pivots(st.lo, st.top);
    std::size_t j = 0;
    if (!choose_band_fast<Arch>(st.in, at, st.above, goal, goal, f, j)) {
      const std::array<std::int64_t, pivots> mass = masses_at_least<Arch>(st.in, at, f);
      j = 0;
      while (j < pivots && st.above + mass[j] < goal) ++j;
    }
    // The new band [at[j], at[j - 1]): at[-1] is hi, at[pivots] is lo; `above` gains the exact mass
    // >= at[j - 1], summed by the gathering pass.
    const T new_lo = j < pivots ? at[j] : st.lo, new_hi = j > 0 ? at[j - 1] : st.hi;
    T* const out = buffer[static_cast<std::size_t>(st.level + 1) % 2];
    std::int64_t gained = 0;
    const band_summary<T> got = j > 0 ? gather_band<Arch, T, true>(st.in, new_lo, new_hi, out, &f, &gained)
                                      : gather_band<Arch>(st.in, new_lo, new_hi, out);
    st.above += gained;
    st.in = std::span<const T>(out, got.size);
    st.lo = new_lo;
    st.hi = new_hi;
    if (st.in.empty()) return st.lo;              // (rounding: keep every entry >= lo)
    if (got.least == got.most) return got.least;  // ties only, e.g. at[0]'s
    st.top = got.most;
  }
}

//! The search of `search_cut` from the whole row.
template <class T>
cut_search<T> whole_row(std::span<const T> row, T lo, T top) {
  return {row, lo, std::numeric_limits<T>::infinity(), top, 0, 0};
}

//! Batches in the subsample of `guess_cut_band`.
inline constexpr std::size_t guess_batches = 128;

//! A guess at a narrow band [lo, hi) that holds the top-p cut c of `row` (`top_p_cut`; z about the
//! row's mass, goal about top_p z), from a subsample of `guess_batches` evenly spaced batches of the
//! row; nothing when the row is too short for it to pay, or the estimate too uncertain. The entries
//! below c carry z - S(>= c), about z - goal; the subsample's mass below a threshold, scaled by the
//! subsampled fraction, estimates the row's with a small relative error, since those entries are all
//! below the threshold (the mass above it is dominated by the few largest entries, and would not).
//! The band runs between the subsample's cuts for a mass below of (z - goal) (1 +- margin), the
//! margin 4.5 standard errors of the estimate (from the subsample's spread), at least 0.1; nothing
//! when it would exceed 0.5 (rows whose few largest entries hold the mass, such as low temperatures).
//! Only a guess: `top_p_cut` checks it against the exact masses of one pass over the row and falls
//! back to its full search when it misses. \pre as `top_p_cut`
template <class Arch, class T>
std::optional<std::array<T, 2>> guess_cut_band(std::span<const T> row, double z, double goal, T lo, T top,
                                               const specdec::detail::fixed_mass_scale& f) {
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
  const std::int64_t sub_mass = fixed_row_mass<Arch>(s, f);
  const double unit = std::ldexp(1.0, -f.exponent);  // one count, in weight units
  const double below = (z - goal) * static_cast<double>(size) / static_cast<double>(row.size()) / unit;  // in counts
  // The subsample's entries below lo (1 - most_margin) weigh less than `size` of them, at most
  // below (1 - most_margin): every goal below is reached at or above it (`search_cut`'s precondition).
  const T sub_lo =
      std::max(round_down_to<T>(static_cast<double>(lo) * (1.0 - most_margin)), std::numeric_limits<T>::denorm_min());
  const auto cut_at = [&](double relative) {
    const double goal_counts = std::ceil(static_cast<double>(sub_mass) - below * relative);
    return search_cut<Arch>(s, whole_row(s, sub_lo, top), static_cast<std::int64_t>(goal_counts), f);
  };
  if (!(static_cast<double>(sub_mass) - below > 0.0)) return std::nullopt;
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
  if (!(margin <= most_margin) || !(static_cast<double>(sub_mass) - below * (1.0 + margin) > 0.0)) return std::nullopt;
  const T high = cut_at(1.0 + margin), low = cut_at(1.0 - margin);
  return std::array<T, 2>{std::max(low, lo), std::nextafter(high, std::numeric_limits<T>::infinity())};
}

//! A band [lo, hi) that holds the top-p cut of `row` (as `top_p_cut`; z about the row's mass), for
//! rows where `guess_cut_band` gives none: `search_cut`'s first level (the pivots of [lo, top] and
//! their float sums, `choose_band_fast`), for every goal that the row's mass within 2^-16 relative of
//! z allows; nothing when the float sums cannot decide. The exact mass is not known before this pass,
//! so it is a guess too, which `top_p_cut` checks.
template <class Arch, class T>
std::optional<std::array<T, 2>> first_band(std::span<const T> row, double z, double top_p, T lo, T top,
                                           const specdec::detail::fixed_mass_scale& f) {
  const double counts = z * std::ldexp(1.0, f.exponent), slack = std::ldexp(counts, -16) + static_cast<double>(row.size());
  if (!(counts - slack > 0.0) || !(counts + slack < 0x1p62)) return std::nullopt;
  const std::int64_t goal_low = static_cast<std::int64_t>(std::floor(top_p * (counts - slack)));
  const std::int64_t goal_high = static_cast<std::int64_t>(std::ceil(top_p * (counts + slack)));
  const std::array<T, cut_pivots> at = band_pivots(lo, top);
  std::size_t j = 0;
  if (!choose_band_fast<Arch>(row, at, 0, goal_low, goal_high, f, j)) return std::nullopt;
  return std::array<T, 2>{j < cut_pivots ? at[j] : lo, j > 0 ? at[j - 1] : std::numeric_limits<T>::infinity()};
}

//! The top-p cut of a row of weights in [0, top] (`specdec::detail::keep_top_p_fixed`'s threshold,
//! without sorting the row): the value c with S(> c) < goal <= S(>= c), S(>= c) the fixed-point
//! mass (`f`) of the entries >= c and goal = `fixed_goal(top_p, S(>= 0))`. `lo` is a floor that the cut
//! cannot be below (S(>= lo) >= goal; the denormal minimum when none is known). On a long row, given
//! z > 0 (about the row's mass), the first band is guessed (`guess_cut_band`, else `first_band`), and
//! kept when the pass that gathers it, and sums the fixed-point masses above it and of the whole row,
//! shows that it holds c; otherwise the search runs from the whole row. \pre 0 < lo <= top, top_p in
//! (0, 1)
template <class Arch, class T>
T top_p_cut(std::span<const T> row, double top_p, const specdec::detail::fixed_mass_scale& f, T lo, T top, double z = 0.0) {
  constexpr std::size_t n = xsimd::batch<T, Arch>::size;
  std::optional<std::array<T, 2>> guess = z > 0.0 ? guess_cut_band<Arch>(row, z, top_p * z, lo, top, f) : std::nullopt;
  if (z > 0.0 && !guess) guess = first_band<Arch>(row, z, top_p, lo, top, f);
  std::int64_t total = 0;
  if (guess && (*guess)[0] < (*guess)[1]) {
    T* const band_buffer = scratch_row<T, 1>(row.size() + n);
    std::int64_t above = 0;
    const band_summary<T> got = gather_band<Arch, T, true, false>(row, (*guess)[0], (*guess)[1], band_buffer, &f, &above, &total);
    const std::span<const T> band(band_buffer, got.size);
    const std::int64_t goal = specdec::detail::fixed_goal(top_p, total);
    if (above < goal && above + fixed_row_mass<Arch>(band, f) >= goal)  // the state after level 0, with the guessed band
      return search_cut<Arch>(row, cut_search<T>{band, (*guess)[0], (*guess)[1], std::min(got.most, top), above, 1}, goal, f);
  } else {
    total = fixed_row_mass<Arch>(row, f);
  }
  return search_cut<Arch>(row, whole_row(row, lo, top), specdec::detail::fixed_goal(top_p, total), f);
}

}  // namespace specdec::backend::simd::detail
