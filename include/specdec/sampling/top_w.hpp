//! \file sampling/top_w.hpp
//! \brief The W largest of n keys without sorting all n: the selection step of beam search and of
//! Gumbel-top-k sampling (MTAD, seed 003, section 2.1).
//!
//! Algorithm: gather the indices of the usable keys (> -inf, not NaN), `std::nth_element` them
//! around position W (O(n) expected), then sort only the W survivors (O(W log W)). The order is a
//! strict total order, key descending then index ascending, so the result is deterministic and
//! ties go to the lowest index (the convention of every greedy rule in specdec).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace specdec {

//! Writes into `out` the indices of the min(w, u) largest keys, u being the number of keys that are
//! neither -inf nor NaN, ordered by key descending and, among equal keys, by index ascending.
//! Keys equal to -inf or NaN are never selected; w = 0 gives an empty result.
//! Cost: one pass over `keys`, an nth_element over the usable indices and a sort of w of them.
template <class T>
void top_w_indices(std::span<const T> keys, std::size_t w, std::vector<std::size_t>& out) {
  out.clear();
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (keys[i] > -INFINITY) out.push_back(i);  // false for NaN and -inf
  const auto before = [&](std::size_t a, std::size_t b) { return keys[a] > keys[b] || (keys[a] == keys[b] && a < b); };
  if (out.size() > w) {
    std::nth_element(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(w), out.end(), before);
    out.resize(w);
  }
  std::sort(out.begin(), out.end(), before);
}

}  // namespace specdec
