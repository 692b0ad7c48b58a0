//! \file backend/simd/categorical.hpp
//! \brief SIMD two-level inverse-CDF sampling: the same tokens as `specdec::sample_categorical`
//! (bit-identical, for every architecture).
//!
//! The full pass of the determinism contract (sampling/categorical.hpp, rules 1-3) runs in
//! registers: the 32 lane sums of a tile are 32 / n double accumulators of n lanes (n = 2 SSE/NEON,
//! 4 AVX, 8 AVX-512), updated in index order, so each lane adds exactly the entries and in exactly
//! the order of the scalar code. The tile's remainder (fewer than 32 entries, only in the last tile),
//! the lane tree (rule 3) and the location of u * Z (rules 4-6, one tile re-read in index order)
//! are the scalar code itself (`specdec::detail::reduce_lanes`, `specdec::detail::locate_in_tiles`).
//! Weights are computed in double from float or double rows, with the same operations as seq.
//! Usability (every entry >= 0 and finite) is tracked with one unsigned max per float batch on the
//! raw bits (`fast_usable_tracker`); a row it flags (an unusable entry, or a -0) is checked again
//! exactly, so the status is seq's.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::simd {

namespace detail {

//! The double accumulators of the 32 lanes: `lane_accumulators<Arch>[r]` holds lanes [r n, r n + n).
template <class Arch>
using lane_accumulators = std::array<dbatch<Arch>, sampling_lanes / dbatch<Arch>::size>;

//! A vector step adds the weights of the 32 entries [base, base + 32) to the lane accumulators and
//! records whether their inputs were usable; `scalar(v)` is the weight of one entry (NaN when its
//! inputs are unusable), bit-identical to the vector weights.
template <class S, class Arch>
concept WeightStep = requires(S& s, std::size_t base, lane_accumulators<Arch>& acc) {
  s(base, acc);
  { s.usable() } -> std::same_as<bool>;
  { s.scalar(base) } -> std::same_as<double>;
};

//! One tile's mass (rules 2-3): vector steps over whole rounds of 32, the scalar weight for the rest.
template <class Arch, WeightStep<Arch> Step>
double tile_mass(std::size_t begin, std::size_t end, Step& step, bool& usable) {
  using D = dbatch<Arch>;
  lane_accumulators<Arch> acc;
  acc.fill(D(0.0));
  std::size_t base = begin;
  Step local = step;  // a local copy keeps the step's state (usability) in registers
  for (; base + sampling_lanes <= end; base += sampling_lanes) local(base, acc);
  step = local;
  std::array<double, sampling_lanes> lanes;
  for (std::size_t r = 0; r < acc.size(); ++r) acc[r].store_unaligned(lanes.data() + r * D::size);
  for (std::size_t j = 0; base + j < end; ++j) {
    const double w = step.scalar(base + j);
    usable = usable & specdec::detail::usable_weight(w);
    lanes[j] += w;
  }
  return specdec::detail::reduce_lanes(lanes);
}

//! The two-level inverse CDF of sampling/categorical.hpp with a vector step; the rescan of rules 5-6
//! is `dense_tiles` on the step's scalar weights, or `tiles(weight)` when given (a faster rescan
//! with the same result).
template <class Arch, WeightStep<Arch> Step, class MakeTiles = std::nullptr_t>
sample_result sample_with_step(std::size_t size, Step& step, double u, MakeTiles tiles = nullptr) {
  specdec::detail::tile_masses masses(specdec::detail::tile_count(size));
  bool usable = true;
  for (std::size_t t = 0; t < masses.size(); ++t) {
    const std::size_t begin = t * sampling_tile;
    masses.data()[t] = tile_mass<Arch>(begin, std::min(size, begin + sampling_tile), step, usable);
  }
  usable = usable && step.usable();
  const auto weight = [&step](std::size_t v) { return step.scalar(v); };
  const specdec::detail::dense_tiles<decltype(weight) const> dense{weight};
  if constexpr (std::is_same_v<MakeTiles, std::nullptr_t>)
    return specdec::detail::locate_in_tiles(size, masses.view(), usable, dense, u);
  else
    return specdec::detail::locate_in_tiles(size, masses.view(), usable, tiles(dense), u);
}

//! Loads `count` = 32 / n batches of doubles from row x at `base`, widening floats (the lower half
//! in registers, the upper half straight from memory), and passes each with its accumulator index
//! to `f(r, values)`; records the usability of the raw entries (>= 0 and finite) in `ok`.
template <class Arch, class T, class F>
void for_each_double_batch(const T* x, std::size_t base, fast_usable_tracker<Arch, T>& ok, F&& f) {
  constexpr std::size_t R = sampling_lanes / dbatch<Arch>::size;
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t k = 0; k < R / 2; ++k) {
      const float* at = x + base + k * fbatch<Arch>::size;
      const auto v = fbatch<Arch>::load_unaligned(at);
      ok.add(v);
      f(2 * k, widen_lo<Arch>(v));
      f(2 * k + 1, load_widen<Arch>(at + dbatch<Arch>::size));
    }
  } else {
    static_assert(std::is_same_v<T, double>, "rows are float or double");
    for (std::size_t k = 0; k < R; ++k) {
      const auto v = dbatch<Arch>::load_unaligned(x + base + k * dbatch<Arch>::size);
      ok.add(v);
      f(k, v);
    }
  }
}

//! True when every entry is >= 0 (or -0) and finite (`usable_weight`): the exact check behind
//! `fast_usable_tracker`.
template <class T>
bool row_usable(const T* x, std::size_t n) noexcept {
  for (std::size_t v = 0; v < n; ++v)
    if (!specdec::detail::usable_weight(static_cast<double>(x[v]))) return false;
  return true;
}

//! The step of a weight row (a probability row, or the target row of a bonus token): w_v = double(x_v).
template <class Arch, class T>
struct row_step {
  const T* x;
  std::size_t size;
  fast_usable_tracker<Arch, T> ok{};

  void operator()(std::size_t base, lane_accumulators<Arch>& acc) {
    for_each_double_batch<Arch>(x, base, ok, [&acc](std::size_t r, const dbatch<Arch>& w) { acc[r] += w; });
  }
  bool usable() const { return ok.all() || row_usable(x, size); }
  double scalar(std::size_t v) const { return static_cast<double>(x[v]); }
};

//! The step of a row with some entries left out (`masked`: sorted, distinct): a round of 32 that holds
//! one is copied with those entries zeroed, every other round is `row_step`'s.
template <class Arch, class T>
struct masked_row_step {
  row_step<Arch, T> row;
  std::span<const token_id> masked;
  specdec::detail::masked_weights<T> weights{{row.x, row.size}, masked};  // seq's weights, for the rescan
  std::size_t next = 0;                                                   // the first masked entry not before the current round

  void operator()(std::size_t base, lane_accumulators<Arch>& acc) {
    while (next < masked.size() && static_cast<std::size_t>(masked[next]) < base) ++next;
    if (next == masked.size() || static_cast<std::size_t>(masked[next]) >= base + sampling_lanes) return row(base, acc);
    alignas(64) std::array<T, sampling_lanes> round;
    std::copy_n(row.x + base, sampling_lanes, round.begin());
    for (std::size_t k = next; k < masked.size() && static_cast<std::size_t>(masked[k]) < base + sampling_lanes; ++k)
      round[static_cast<std::size_t>(masked[k]) - base] = T(0);
    for_each_double_batch<Arch>(round.data(), 0, row.ok, [&acc](std::size_t r, const dbatch<Arch>& w) { acc[r] += w; });
  }
  //! The fast check, else the exact one on the weights (masked entries are 0 whatever the row holds
  //! there; the raw row's check flagged a NaN at a masked entry: found by tests/fuzz/warp_and_sample.cpp).
  bool usable() const {
    if (row.ok.all()) return true;
    for (std::size_t v = 0; v < row.size; ++v)
      if (!specdec::detail::usable_weight(weights(v))) return false;
    return true;
  }
  double scalar(std::size_t v) const { return weights(v); }
};

}  // namespace detail

//! `specdec::sample_masked` on the simd backend: the same token, status and mass.
template <class Arch, class T>
sample_result sample_masked(std::span<const T> weights, std::span<const token_id> masked, double u) {
  detail::masked_row_step<Arch, T> step{{weights.data(), weights.size()}, masked};
  return detail::sample_with_step<Arch>(weights.size(), step, u);
}

//! `specdec::sample_categorical` on the simd backend: the same token, status and mass for every row
//! and every u (the determinism contract of sampling/categorical.hpp).
//! \tparam Arch an xsimd architecture enabled by the compiler flags (`exec::simd_arch_t<Policy>`)
template <class Arch, class T>
sample_result sample_categorical(std::span<const T> weights, double u) {
  detail::row_step<Arch, T> step{weights.data(), weights.size()};
  return detail::sample_with_step<Arch>(weights.size(), step, u);
}

}  // namespace specdec::backend::simd
