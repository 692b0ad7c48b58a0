//! \file backend/simd/reduce.hpp
//! \brief Whole-row reductions on the simd backend: argmax (lowest index on ties, NaN skipped), the
//! checks a verifier makes on a row (usable, has mass, sum), and double sums.
//!
//! `argmax` and the usability / mass checks are exact (comparisons only): the same answers as seq.
//! `sum` adds in double with `sampling_lanes` lane-strided partial sums and a fixed tree, which
//! differs from a sequential sum by at most (n / 32 + 5) ulp-sized roundings of the partial sums
//! (relative error < 1e-12 for rows of non-negative entries up to 10^6 long).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::simd {

namespace detail {
//! Signed integers as wide as T (the lane indices of an argmax over a batch of T).
template <class T>
using index_of_t = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
}  // namespace detail

//! The index of the largest entry; ties go to the lowest index; NaN entries are skipped; -1 for an
//! empty or all-NaN row. The same result as `specdec::argmax`.
template <class Arch, class T>
std::ptrdiff_t argmax(std::span<const T> row) noexcept {
  using B = xsimd::batch<T, Arch>;
  using I = detail::index_of_t<T>;
  using IB = xsimd::batch<I, Arch>;
  constexpr std::size_t n = B::size;
  const std::size_t full = row.size() / n * n;
  B best(-std::numeric_limits<T>::infinity());
  IB at(I(-1));
  alignas(64) std::array<I, n> iota{};
  for (std::size_t j = 0; j < n; ++j) iota[j] = static_cast<I>(j);
  IB index = IB::load_aligned(iota.data());
  const IB step(static_cast<I>(n));
  for (std::size_t v = 0; v < full; v += n) {
    const B x = B::load_unaligned(row.data() + v);
    // Strictly greater keeps a lane's first maximum; a lane's first non-NaN entry is always taken
    // (so rows of -inf have an argmax, as in seq). NaN fails both tests.
    const auto take =
        (x > best) | (xsimd::bool_cast(at < IB(I(0))) & (x == x));  // NOLINT(misc-redundant-expression): x == x is false for NaN
    best = xsimd::select(take, x, best);
    at = xsimd::select(xsimd::bool_cast(take), index, at);
    index += step;
  }
  alignas(64) std::array<T, n> lane_best{};
  alignas(64) std::array<I, n> lane_at{};
  best.store_aligned(lane_best.data());
  at.store_aligned(lane_at.data());
  std::ptrdiff_t result = -1;
  T value = T(0);
  const auto offer = [&](std::ptrdiff_t i, T x) {
    if (i < 0 || std::isnan(x)) return;
    if (result < 0 || x > value || (x == value && i < result)) result = i, value = x;
  };
  for (std::size_t j = 0; j < n; ++j) offer(static_cast<std::ptrdiff_t>(lane_at[j]), lane_best[j]);
  for (std::size_t v = full; v < row.size(); ++v) offer(static_cast<std::ptrdiff_t>(v), row[v]);
  return result;
}

//! What a verifier needs to know about a probability row.
struct row_summary {
  bool usable = true;     //!< every entry >= 0 (or -0) and finite
  bool has_mass = false;  //!< some entry > 0
};

//! Checks a row in one pass (the seq verifier's `row_unusable` is !usable || !has_mass).
template <class Arch, class T>
row_summary summarise(std::span<const T> row) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const std::size_t full = row.size() / n * n;
  usable_tracker<Arch, T> ok;
  B high(T(0));
  for (std::size_t v = 0; v < full; v += n) {
    const B x = B::load_unaligned(row.data() + v);
    ok.add(x);
    high = xsimd::max(high, x);  // NaN lanes are caught by `ok`
  }
  row_summary s{ok.all(), xsimd::any(high > B(T(0)))};
  for (std::size_t v = full; v < row.size(); ++v) {
    const double x = static_cast<double>(row[v]);
    s.usable = s.usable && specdec::detail::usable_weight(x);
    s.has_mass = s.has_mass || x > 0.0;
  }
  return s;
}

//! True if some entry is > 0 (the seq verifier's `row_has_mass`).
template <class Arch, class T>
bool has_mass(std::span<const T> row) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n)
    if (xsimd::any(B::load_unaligned(row.data() + v) > B(T(0)))) return true;
  for (std::size_t v = full; v < row.size(); ++v)
    if (static_cast<double>(row[v]) > 0.0) return true;
  return false;
}

//! sum_v double(row_v), in lane-strided order (see the file comment for the error bound).
template <class Arch, class T>
double sum(std::span<const T> row) noexcept {
  using D = dbatch<Arch>;
  constexpr std::size_t R = sampling_lanes / D::size;
  std::array<D, R> acc;
  acc.fill(D(0.0));
  std::size_t v = 0;
  for (; v + sampling_lanes <= row.size(); v += sampling_lanes) {
    if constexpr (std::is_same_v<T, float>) {
      for (std::size_t k = 0; k < R / 2; ++k) {
        const auto x = fbatch<Arch>::load_unaligned(row.data() + v + k * fbatch<Arch>::size);
        acc[2 * k] += widen_lo<Arch>(x);
        acc[2 * k + 1] += widen_hi<Arch>(x);
      }
    } else {
      for (std::size_t k = 0; k < R; ++k) acc[k] += D::load_unaligned(row.data() + v + k * D::size);
    }
  }
  std::array<double, sampling_lanes> lanes;
  for (std::size_t r = 0; r < R; ++r) acc[r].store_unaligned(lanes.data() + r * D::size);
  for (std::size_t j = 0; v + j < row.size(); ++j) lanes[j] += static_cast<double>(row[v + j]);
  return specdec::detail::reduce_lanes(lanes);
}

}  // namespace specdec::backend::simd
