//! \file backend/simd/top_p_cut.hpp
//! \brief seq's top-p threshold of a large row of weights without sorting the row (`top_p_cut`,
//! `search_cut`), by the exact fixed-point masses of distributions/logit_weights.hpp, and the
//! per-thread scratch rows it and the top-p path of backend/simd/sample_logits.hpp work in.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
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
//! slot 3 the subsample of `guess_cut_band` (2048 entries) and slot 4 its histogram (about 200 bins):
//! three rows of a thread's largest V (1.5 MB of floats at V = 128256) and two small ones. Its
//! contents do not outlive a call.
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

//! The band choice of `search_cut` from float sums: `chosen` = the least j with
//! masses_at_least(row, pivots, f)[j] >= need (P if none), as the exact fixed-point masses give it
//! for every need in [need_low, need_high], whenever every comparison it rests on is farther from
//! those needs than the float sums' error bound (positive terms: (k - 1) 2^-24 of the mass for k
//! terms per lane, doubled) plus the rounding of the counts (half a unit per entry); false when one
//! is not, or for double rows: then the caller takes the exact masses. Float adds cost a fraction of
//! the fixed-point conversions.
template <class Arch, class T, std::size_t P>
bool choose_band_fast(std::span<const T> row, const std::array<T, P>& pivots, std::int64_t need_low, std::int64_t need_high,
                      const specdec::detail::fixed_mass_scale& f, std::size_t& chosen) noexcept {
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
    const double least_target = static_cast<double>(need_low) * unit, target = static_cast<double>(need_high) * unit;
    for (std::size_t j = 0; j < P; ++j) {
      alignas(64) std::array<float, 2 * n> lanes;
      acc[2 * j].store_aligned(lanes.data());
      acc[2 * j + 1].store_aligned(lanes.data() + n);
      double mass = 0.0;
      for (const float x : lanes) mass += static_cast<double>(x);
      const double bound = rel * mass + (static_cast<double>(row.size()) + 2.0) * unit;
      if (mass - bound >= target) {
        chosen = j;
        return true;
      }
      if (!(mass + bound < least_target)) return false;
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

//! The masses a gathering pass (`gather_band`) adds up: none.
struct no_masses {
  static constexpr std::size_t block = 1;  //!< batches between `end_block` calls
  //! Adds a batch x of a row whose band is [lo, hi): `below_hi` is x < hi, `below_lo` x < lo.
  template <class B, class M>
  void add(const B&, const M&, const M&, const B&) noexcept {}
  void end_block() noexcept {}
};

//! The exact fixed-point masses of a gathering pass: of the whole row and of its entries >= hi.
template <class Arch>
struct exact_masses {
  static constexpr std::size_t block = 1;
  fixed_sum<Arch> all, above;
  explicit exact_masses(const specdec::detail::fixed_mass_scale& f) noexcept : all(f), above(f) {}
  template <class B, class M>
  void add(const B& x, const M&, const M&, const B& hi) noexcept {
    all.add_weights_and_above(x, hi, above);
  }
  void end_block() noexcept {}
};

//! The exact fixed-point mass of a gathering pass's entries >= hi (a level of `search_cut`).
template <class Arch>
struct exact_mass_above {
  static constexpr std::size_t block = 1;
  fixed_sum<Arch> above;
  explicit exact_mass_above(const specdec::detail::fixed_mass_scale& f) noexcept : above(f) {}
  template <class B, class M>
  void add(const B& x, const M& below_hi, const M&, const B&) noexcept {
    above.add_weights(xsimd::select(below_hi, B(0), x));
  }
  void end_block() noexcept {}
};

//! The relative error of `estimated_masses`: block 2^-24 >= (block - 1) 2^-24 (1 + 2^-20), plus the
//! double sums' 2^-40.
inline constexpr double estimated_mass_error = 0x1p-21 + 0x1p-40;

//! Estimates of the masses of a gathering pass for float rows, in weight units, for a fraction of the
//! cost of the counts: of the whole row and of its entries below lo (with the band's exact mass, they
//! give the mass above the band; see `estimated_needs`). Each lane adds `block` batches in float, then
//! the block's sum in double; the weights are >= 0, so a block's float sum is within
//! (block - 1) 2^-24 of its mass: both estimates are within `estimated_mass_error` of the weights'
//! sums. One add and one masked add per batch, on the compares that the gathering makes anyway.
template <class Arch>
class estimated_masses {
 public:
  static constexpr std::size_t block = 8;
  using F = fbatch<Arch>;

  //! Adds a batch x of a row whose band is [lo, hi) (`below_lo`: x < lo); at most `block` of them
  //! between two `end_block` calls.
  template <class M>
  void add(const F& x, const M&, const M& below_lo, const F&) noexcept {
    total_block_ += x;
    below_block_ += xsimd::select(below_lo, x, F(0.0f));
  }
  //! Adds the block's float sums to the double sums.
  void end_block() noexcept {
    accumulate<Arch, float>(total_block_, total0_, total1_);
    accumulate<Arch, float>(below_block_, below0_, below1_);
    total_block_ = below_block_ = F(0.0f);
  }
  double total() const noexcept { return lanes_sum<Arch>(total0_, total1_); }
  double below() const noexcept { return lanes_sum<Arch>(below0_, below1_); }

 private:
  F total_block_ = F(0.0f), below_block_ = F(0.0f);
  dbatch<Arch> total0_ = dbatch<Arch>(0.0), total1_ = dbatch<Arch>(0.0), below0_ = dbatch<Arch>(0.0), below1_ = dbatch<Arch>(0.0);
};

//! Writes the entries of `row` in [lo, hi) to `out` (room for row.size() plus a batch), in row order,
//! without a branch per entry (`compress_greater`), and adds every entry to `masses` (`no_masses`,
//! `exact_masses`, `estimated_masses`: `block` batches at a time). Without `Summary`, the returned least and largest are the
//! bounds lo and the float below hi (a lighter pass).
//! \pre lo > 0, the entries of `row` are >= 0
template <class Arch, class T, bool Summary = true, class Masses = no_masses>
band_summary<T> gather_band(std::span<const T> row, T lo, T hi, T* out, Masses&& masses = {}) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const B lower(lo), upper(hi), none(-inf);
  B least(inf), most(-inf);
  std::size_t size = 0;
  std::remove_cvref_t<Masses> sums = masses;  // (a local copy stays in registers)
  const auto take = [&](const B& x) {
    const auto below_hi = x < upper, below_lo = x < lower;  // (the two compares every use shares)
    sums.add(x, below_hi, below_lo, upper);
    const auto in_band = below_hi && !below_lo;
    size += compress_where<Arch>(x, in_band, out + size);
    if constexpr (Summary) {
      most = xsimd::max(most, xsimd::select(below_hi, x, none));
      least = xsimd::min(least, xsimd::select(in_band, x, B(inf)));
    }
  };
  constexpr std::size_t block = std::remove_cvref_t<Masses>::block;
  const std::size_t blocks = row.size() / (block * n) * (block * n);
  std::size_t v = 0;
  for (; v < blocks; v += block * n) {
    for (std::size_t k = 0; k < block; ++k) take(B::load_unaligned(row.data() + v + k * n));
    sums.end_block();
  }
  for (; v + n <= row.size(); v += n) take(B::load_unaligned(row.data() + v));      // (with the remainder, at most a block)
  if (v < row.size()) take(load_partial<B>(row.data() + v, row.size() - v, T(0)));  // (0 is below lo: not gathered)
  sums.end_block();
  masses = sums;
  if constexpr (!Summary) return {size, lo, std::nextafter(hi, -inf)};
  alignas(64) std::array<T, n> low, high_lanes;
  least.store_aligned(low.data());
  most.store_aligned(high_lanes.data());
  return {size, *std::min_element(low.begin(), low.end()), *std::max_element(high_lanes.begin(), high_lanes.end())};
}

//! Where the search of `top_p_cut` stands: the band [lo, hi) that holds the cut, its entries `in`
//! (the whole row, entries outside the band too, at level 0), their largest `top`, and the
//! fixed-point mass that the band's entries >= the cut must reach, need = goal - S(>= hi), known to
//! lie in [need_min, need_max] (one value when the masses are exact).
template <class T>
struct cut_search {
  std::span<const T> in;
  T lo, hi, top;
  std::int64_t need_min, need_max;
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

//! The cut for the state `st` of a search: the value c with S(> c) < need <= S(>= c) within the band
//! (S the fixed-point masses of its entries), the same for every need in [st.need_min, st.need_max];
//! nothing when two needs of the range give two cuts. The band is narrowed with `cut_pivots`
//! thresholds spaced geometrically from its maximum down to lo (one pass for their masses,
//! `choose_band_fast` or exact fixed-point sums, and one that gathers the chosen band and takes the
//! exact mass above it from the needs) until it holds at most `sort_limit` entries, which
//! `fixed_threshold_in` sorts. \pre 0 < st.need_min, S(>= st.lo) >= st.need_max
template <class Arch, class T>
std::optional<T> search_cut(std::span<const T> row, cut_search<T> st, const specdec::detail::fixed_mass_scale& f) {
  constexpr std::size_t pivots = cut_pivots, n = xsimd::batch<T, Arch>::size;
  constexpr int max_levels = 12;          // (then the band is sorted whatever its size)
  constexpr std::size_t sort_limit = 64;  // (256 spent ~8 % of a call sorting, 2048 ~10 %)
  // Two buffers (the thread's scratch rows 1 and 2) that the levels' bands alternate between.
  const std::array<T*, 2> buffer{scratch_row<T, 1>(row.size() + n), scratch_row<T, 2>(row.size() + n)};
  for (;; ++st.level) {
    if (st.in.size() <= sort_limit || st.level == max_levels) {
      if (st.level == 0) st.in = std::span<const T>(buffer[0], gather_band<Arch>(row, st.lo, st.hi, buffer[0]).size);
      // `fixed_threshold_in` for both needs on one sort (in the buffer that st.in is not in).
      T* const sorted = buffer[static_cast<std::size_t>(st.level + 1) % 2];
      std::copy(st.in.begin(), st.in.end(), sorted);
      std::sort(sorted, sorted + st.in.size(), std::greater<T>());
      const T least = st.in.empty() ? st.lo : sorted[st.in.size() - 1];
      specdec::detail::fixed_threshold_walk<T> walk(std::span<const T>(sorted, st.in.size()), 0, least, f);
      const T cut = walk.reach(st.need_min);
      if (st.need_max == st.need_min || walk.reach(st.need_max) == cut) return cut;
      return std::nullopt;
    }
    const std::array<T, pivots> at = band_pivots(st.lo, st.top);
    std::size_t j = 0;
    if (!choose_band_fast<Arch>(st.in, at, st.need_min, st.need_max, f, j)) {
      const std::array<std::int64_t, pivots> mass = masses_at_least<Arch>(st.in, at, f);
      std::size_t last = 0;  // the least j with mass[j] >= need, for need_min (j) and need_max (last)
      while (j < pivots && mass[j] < st.need_min) ++j;
      while (last < pivots && mass[last] < st.need_max) ++last;
      if (j != last) return std::nullopt;
    }
    // The new band [at[j], at[j - 1]): at[-1] is hi, at[pivots] is lo; the needs lose the exact mass
    // >= at[j - 1], summed by the gathering pass.
    const T new_lo = j < pivots ? at[j] : st.lo, new_hi = j > 0 ? at[j - 1] : st.hi;
    T* const out = buffer[static_cast<std::size_t>(st.level + 1) % 2];
    std::int64_t gained = 0;
    band_summary<T> got;
    if (j > 0) {
      exact_mass_above<Arch> masses(f);
      got = gather_band<Arch>(st.in, new_lo, new_hi, out, masses);
      gained = masses.above.total();
    } else {
      got = gather_band<Arch>(st.in, new_lo, new_hi, out);
    }
    st.need_min -= gained;
    st.need_max -= gained;
    st.in = std::span<const T>(out, got.size);
    st.lo = new_lo;
    st.hi = new_hi;
    if (st.in.empty()) return st.lo;              // (rounding: keep every entry >= lo)
    if (got.least == got.most) return got.least;  // ties only, e.g. at[0]'s
    st.top = got.most;
  }
}

//! `search_cut` from the whole row, with exact masses, for a fixed-point goal.
template <class Arch, class T>
T search_whole_row(std::span<const T> row, T lo, T top, std::int64_t goal, const specdec::detail::fixed_mass_scale& f) {
  return *search_cut<Arch>(row, cut_search<T>{row, lo, std::numeric_limits<T>::infinity(), top, goal, goal, 0}, f);
}

//! Batches in the subsample of `guess_cut_band`.
inline constexpr std::size_t guess_batches = 128;

//! The bins of `guess_cut_band`'s histogram: a positive weight's exponent and its leading
//! `guess_bin_bits` mantissa bits (16 bins per octave, each about 4.4 % wide), in increasing order of
//! the values they hold; `edge(k)` is the least value of bin k.
template <class T>
struct weight_bins {
  using key_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  static constexpr int guess_bin_bits = 4;
  static constexpr int shift = std::numeric_limits<T>::digits - 1 - guess_bin_bits;
  static key_type key(T x) noexcept { return std::bit_cast<key_type>(x) >> shift; }
  static T edge(key_type k) noexcept { return std::bit_cast<T>(static_cast<key_type>(k << shift)); }
};

//! A guess at a narrow band [lo, hi) that holds the top-p cut c of `row` (`top_p_cut`; z about the
//! row's mass, goal about top_p z), from a subsample of `guess_batches` evenly spaced batches of the
//! row; nothing when the row is too short for it to pay, or the estimate too uncertain. The entries
//! below c carry z - S(>= c), about z - goal; the subsample's mass below a threshold, scaled by the
//! subsampled fraction, estimates the row's with a small relative error, since those entries are all
//! below the threshold (the mass above it is dominated by the few largest entries, and would not).
//! The subsample's masses by bins (`weight_bins`; every entry below lo's bin in the first) locate
//! the bins where its mass below reaches (z - goal) (1 +- margin) of the subsampled fraction, the
//! margin 4.5 standard errors of the estimate (from the spread of the entries below the nominal
//! bin), at least 0.1; the band runs from the lower one's least value to above the upper one; nothing
//! when the margin would exceed 0.5 (rows whose few largest entries hold the mass, such as low
//! temperatures). Only a guess: `top_p_cut` checks it against the masses of one pass over the row and
//! falls back to its full search when it misses. \pre as `top_p_cut`
template <class Arch, class T>
std::optional<std::array<T, 2>> guess_cut_band(std::span<const T> row, double z, double goal, T lo, T top) {
  using B = xsimd::batch<T, Arch>;
  using bins = weight_bins<T>;
  constexpr std::size_t n = B::size, sampled = guess_batches;
  constexpr double least_margin = 0.1, most_margin = 0.5, errors = 4.5;
  const std::size_t batches = row.size() / n;
  if (batches < 4 * sampled) return std::nullopt;  // (a subsample of at most half the row)
  const std::size_t stride = batches / sampled;    // (>= 4: at most 2 sampled batches per stride)
  T* const sub = scratch_row<T, 3>(2 * sampled * n);
  std::size_t size = 0;
  for (std::size_t b = 0; b < batches; b += stride, size += n) B::load_unaligned(row.data() + b * n).store_unaligned(sub + size);
  // below_or_in[k]: the subsample's mass in bins base .. base + k (the first also every entry below),
  // summed in T (an estimate: 2^-24 per add is far below the subsample's own error; a double sum
  // would convert each entry into a register that the last add wrote, one add's latency per entry).
  const typename bins::key_type base = bins::key(lo), count = bins::key(top) - base + 1;
  T* const below_or_in = scratch_row<T, 4>(count);
  std::fill_n(below_or_in, count, T(0));
  for (std::size_t v = 0; v < size; ++v) below_or_in[std::max(bins::key(sub[v]), base) - base] += sub[v];
  for (std::size_t k = 1; k < count; ++k) below_or_in[k] += below_or_in[k - 1];
  const double sub_mass = static_cast<double>(below_or_in[count - 1]);
  const double below = (z - goal) * static_cast<double>(size) / static_cast<double>(row.size());
  if (!(sub_mass - below > 0.0) || !(below > 0.0)) return std::nullopt;
  // The bin where the mass below reaches `below` times `relative` (the least k with below_or_in[k] >= it).
  const auto bin_at = [&](double relative) {
    const auto reaches = [](T mass, double target) { return static_cast<double>(mass) < target; };
    return static_cast<typename bins::key_type>(std::lower_bound(below_or_in, below_or_in + count, below * relative, reaches) -
                                                below_or_in);
  };
  // The estimate's relative standard error, from the subsample's entries below the nominal bin's end:
  // the margin is `errors` of them (at least `least_margin`); none when that exceeds `most_margin`.
  const B nominal(bins::edge(base + bin_at(1.0) + 1));
  dbatch<Arch> sum0(0.0), sum1(0.0), squares0(0.0), squares1(0.0);
  for (std::size_t v = 0; v < size; v += n) {
    const B x = B::load_unaligned(sub + v), kept_out = xsimd::select(x < nominal, x, B(T(0)));
    accumulate<Arch, T>(kept_out, sum0, sum1);
    accumulate<Arch, T>(kept_out * kept_out, squares0, squares1);
  }
  const double s1 = lanes_sum<Arch>(sum0, sum1), s2 = lanes_sum<Arch>(squares0, squares1);
  const double margin = std::max(least_margin, errors * std::sqrt(std::max(0.0, s2 - s1 * s1 / static_cast<double>(size))) / s1);
  if (!(margin <= most_margin) || !(sub_mass - below * (1.0 + margin) > 0.0)) return std::nullopt;
  const auto low = bin_at(1.0 - margin), high = bin_at(1.0 + margin);
  return std::array<T, 2>{std::max(bins::edge(base + low), lo), bins::edge(base + high + 1)};  // (edge(base) <= lo)
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
  if (!choose_band_fast<Arch>(row, at, goal_low, goal_high, f, j)) return std::nullopt;
  return std::array<T, 2>{j < cut_pivots ? at[j] : lo, j > 0 ? at[j - 1] : std::numeric_limits<T>::infinity()};
}

//! The needs of a search from a guessed band (`cut_search`) when the masses of the row and below the
//! band are estimates (`estimated_masses`, in weight units) and the band's is exact: every need that
//! the true fixed-point masses allow, {need_min, need_max}. A count differs from its weight's scaled
//! value by at most 1/2. The mass above the band is A = M - band - L, so need = fixed_goal(top_p, M) - A
//! = band + L - (M - fixed_goal(top_p, M)): it grows with L and, but for the rounding of top_p M in
//! double (within half an ulp of M, and the ceiling's 1), does not grow with M; the range's ends take
//! both roundings as well. The error in need is about dL + (1 - top_p) dM, far below the mass's.
inline std::array<std::int64_t, 2> estimated_needs(double total, double below, std::int64_t band, double top_p, std::size_t size,
                                                   const specdec::detail::fixed_mass_scale& f) noexcept {
  const auto range = [&](double estimate) {
    const double counts = std::ldexp(estimate, f.exponent);
    const double slack = estimated_mass_error * counts + static_cast<double>(size) + 2.0;
    return std::array<std::int64_t, 2>{static_cast<std::int64_t>(std::max(0.0, std::ceil(counts - slack))),
                                       static_cast<std::int64_t>(std::floor(counts + slack))};
  };
  const std::array<std::int64_t, 2> m = range(total), l = range(below);
  const auto need = [&](std::int64_t mass, std::int64_t below_mass) {
    return specdec::detail::fixed_goal(top_p, mass) - (mass - band - below_mass);
  };
  const double largest = static_cast<double>(m[1]);
  const auto rounding = static_cast<std::int64_t>(largest < 0x1p53 ? 1.0 : std::ldexp(1.0, std::ilogb(largest) - 52)) + 1;
  return {need(m[1], l[0]) - rounding, need(m[0], l[1]) + rounding};
}

//! The top-p cut of a row of weights in [0, top] (`specdec::detail::keep_top_p_fixed`'s threshold,
//! without sorting the row): the value c with S(> c) < goal <= S(>= c), S(>= c) the fixed-point
//! mass (`f`) of the entries >= c and goal = `fixed_goal(top_p, S(>= 0))`. `lo` is a floor that the cut
//! cannot be below (S(>= lo) >= goal; the denormal minimum when none is known). On a long row, given
//! z > 0 (about the row's mass), the first band is guessed (`guess_cut_band`, else `first_band`) and
//! gathered in one pass that also sums masses beside it. Float rows estimate the row's and the one
//! below the band (`estimated_masses`), and the search from the band keeps its cut when every need
//! that the estimates allow gives the same one; otherwise, and for double rows, a second pass counts
//! the row's and the one above the band exactly, and the band is searched when those show that it
//! holds c. When it does not, the search
//! runs from the whole row. \pre 0 < lo <= top, top_p in (0, 1)
template <class Arch, class T>
T top_p_cut(std::span<const T> row, double top_p, const specdec::detail::fixed_mass_scale& f, T lo, T top, double z = 0.0) {
  constexpr std::size_t n = xsimd::batch<T, Arch>::size;
  std::optional<std::array<T, 2>> guess = z > 0.0 ? guess_cut_band<Arch>(row, z, top_p * z, lo, top) : std::nullopt;
  if (z > 0.0 && !guess) guess = first_band<Arch>(row, z, top_p, lo, top, f);
  std::int64_t total = 0;
  if (guess && (*guess)[0] < (*guess)[1]) {
    T* const band_buffer = scratch_row<T, 1>(row.size() + n);
    // The search from the gathered band (the state after level 0), when it holds the cut for every need.
    const auto search_band = [&](const band_summary<T>& got, std::int64_t band_mass, std::int64_t need_min,
                                 std::int64_t need_max) -> std::optional<T> {
      if (!(need_min > 0 && band_mass >= need_max)) return std::nullopt;
      const std::span<const T> band(band_buffer, got.size);
      return search_cut<Arch>(row, cut_search<T>{band, (*guess)[0], (*guess)[1], std::min(got.most, top), need_min, need_max, 1},
                              f);
    };
    if constexpr (std::is_same_v<T, float>) {
      estimated_masses<Arch> masses;
      const band_summary<T> got = gather_band<Arch, T, false>(row, (*guess)[0], (*guess)[1], band_buffer, masses);
      const std::int64_t band_mass = fixed_row_mass<Arch>(std::span<const T>(band_buffer, got.size), f);
      const std::array<std::int64_t, 2> need = estimated_needs(masses.total(), masses.below(), band_mass, top_p, row.size(), f);
      if (const std::optional<T> cut = search_band(got, band_mass, need[0], need[1])) return *cut;
    }
    exact_masses<Arch> masses(f);
    const band_summary<T> got = gather_band<Arch, T, false>(row, (*guess)[0], (*guess)[1], band_buffer, masses);
    total = masses.all.total();
    const std::int64_t need = specdec::detail::fixed_goal(top_p, total) - masses.above.total();
    const std::int64_t band_mass = fixed_row_mass<Arch>(std::span<const T>(band_buffer, got.size), f);
    if (const std::optional<T> cut = search_band(got, band_mass, need, need)) return *cut;
  } else {
    total = fixed_row_mass<Arch>(row, f);
  }
  return search_whole_row<Arch>(row, lo, top, specdec::detail::fixed_goal(top_p, total), f);
}

}  // namespace specdec::backend::simd::detail
