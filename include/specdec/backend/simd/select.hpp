//! \file backend/simd/select.hpp
//! \brief Selection without sorting the row: the k-th largest value of a row, and the indices of the
//! entries at or above a threshold, on the simd backend.
//!
//! `kth_largest` is a threshold filter: one pass compares each batch with a running threshold tau
//! (a lower bound of the answer) and copies only the entries above it into a small buffer; when the
//! buffer fills, `std::nth_element` finds the k-th largest of the buffer, which becomes the new tau,
//! and the entries below it are dropped. On typical rows tau rises after the first few thousand
//! entries and almost every batch costs one compare and one test; the worst case (an ascending row)
//! is O(V) nth_element work. The answer is exact: the same value as `std::nth_element` on the whole
//! row (seq's `keep_top_k`). Measured against a histogram (radix) select and against a pivot search
//! in bench/README.md ("why a threshold filter").
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "specdec/backend/simd/arch.hpp"

namespace specdec::backend::simd {

//! The k-th largest (k >= 1) of the entries of `row` that are > -inf (NaN and -inf are ignored), or
//! nothing when fewer than k entries qualify. Exact (comparisons only).
template <class Arch, class T>
std::optional<T> kth_largest(std::span<const T> row, std::size_t k) {
  if (k == 0) return std::nullopt;
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  std::size_t cap = std::max<std::size_t>(4 * k, 256);
  std::vector<T> buffer;
  buffer.reserve(cap + n);
  T tau = lowest;  // every entry > tau is in the buffer; once set, >= k entries seen are >= tau
  const auto shrink = [&] {
    std::nth_element(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(k - 1), buffer.end(), std::greater<T>());
    tau = buffer[k - 1];
    buffer.erase(std::remove_if(buffer.begin(), buffer.end(), [tau](T x) { return x < tau; }), buffer.end());
    if (buffer.size() > cap / 2) cap *= 2;  // many ties at tau: let the buffer grow
  };
  const auto offer = [&](T x) {
    if (x > tau) buffer.push_back(x);  // false for NaN
  };
  const std::size_t full = row.size() / n * n;
  alignas(64) std::array<T, n> lanes;
  for (std::size_t v = 0; v < full; v += n) {
    const B x = B::load_unaligned(row.data() + v);
    if (!xsimd::any(x > B(tau))) continue;
    x.store_aligned(lanes.data());
    for (const T y : lanes) offer(y);
    if (buffer.size() >= cap) shrink();
  }
  for (std::size_t v = full; v < row.size(); ++v) offer(row[v]);
  if (buffer.size() < k) return std::nullopt;  // (after a shrink the buffer holds >= k entries)
  std::nth_element(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(k - 1), buffer.end(), std::greater<T>());
  return buffer[k - 1];
}

//! Appends to `out`, in increasing order, the indices v with row[v] >= threshold (NaN never).
template <class Arch, class T, class Index>
void indices_at_least(std::span<const T> row, T threshold, std::vector<Index>& out) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const std::size_t full = row.size() / n * n;
  const B t(threshold);
  for (std::size_t v = 0; v < full; v += n) {
    if (!xsimd::any(B::load_unaligned(row.data() + v) >= t)) continue;
    for (std::size_t j = 0; j < n; ++j)
      if (row[v + j] >= threshold) out.push_back(static_cast<Index>(v + j));
  }
  for (std::size_t v = full; v < row.size(); ++v)
    if (row[v] >= threshold) out.push_back(static_cast<Index>(v));
}

}  // namespace specdec::backend::simd
