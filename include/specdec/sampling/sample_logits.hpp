//! \file sampling/sample_logits.hpp
//! \brief `sample_logits(logits, w, u)`: one token from warp(softmax(logits / T)) with the uniform u,
//! the reference that faster paths (backend/simd/sample_logits.hpp) are measured against.
#pragma once

#include <span>
#include <vector>

#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! `warp_logits` into `scratch` (resized to the row's length), then `sample_categorical` on it with
//! u: the documented sampling contract from logits. A row `warp_logits` cannot use gives no token and
//! its status. Allocates only when `scratch` is shorter than the row.
//! \throws specdec::error on invalid `w`
template <class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u, std::vector<T>& scratch) {
  scratch.resize(logits.size());
  const row_status s = warp_logits(logits, std::span<T>(scratch), w);
  if (s != row_status::ok) return {no_token, s, 0.0};
  return sample_categorical(std::span<const T>(scratch), u);
}

//! `sample_logits` with a warped row of its own (allocated per call).
//! \throws specdec::error on invalid `w`
template <class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u) {
  std::vector<T> probs;
  return sample_logits(logits, w, u, probs);
}

}  // namespace specdec
