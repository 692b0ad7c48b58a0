//! \file backend/simd/top_w.hpp
//! \brief The W largest keys of a row on the simd backend: the selection step of beam drafts and of
//! Gumbel-top-k sampling (MTAD, seed 003, section 2.1). Same result as `specdec::top_w_indices`
//! (sampling/top_w.hpp): the indices of the min(W, u) largest keys that are neither -inf nor NaN,
//! ordered by key descending and, among equal keys, by index ascending. Exact.
//!
//! Algorithm: the W-th largest key by a threshold filter (backend/simd/select.hpp, one pass with a
//! compare per batch), the indices of the keys >= it (a second pass that touches only the batches
//! holding one), then a sort of those (W plus the keys tied with the W-th).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "specdec/backend/simd/select.hpp"

namespace specdec::backend::simd {

//! Writes into `out` the indices of the min(w, u) largest keys (u = the number of keys that are
//! neither -inf nor NaN), ordered by key descending, then index ascending, as `specdec::top_w_indices`.
template <class Arch, class T>
void top_w_indices(std::span<const T> keys, std::size_t w, std::vector<std::size_t>& out) {
  out.clear();
  if (w == 0) return;
  const std::optional<T> kth = kth_largest<Arch>(keys, w);
  // Fewer than w usable keys: all of them (the smallest key above -inf is the lowest threshold).
  indices_at_least<Arch>(keys, kth ? *kth : std::nextafter(-std::numeric_limits<T>::infinity(), T(0)), out);
  const auto before = [&](std::size_t a, std::size_t b) { return keys[a] > keys[b] || (keys[a] == keys[b] && a < b); };
  std::sort(out.begin(), out.end(), before);
  if (out.size() > w) out.resize(w);
}

}  // namespace specdec::backend::simd
