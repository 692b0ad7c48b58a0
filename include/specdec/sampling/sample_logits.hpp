//! \file sampling/sample_logits.hpp
//! \brief `sample_logits(logits, w, u)`: one token from warp(softmax(logits / T)) with the uniform u,
//! the reference that faster paths (backend/simd/sample_logits.hpp) are measured against.
#pragma once

#include <span>
#include <vector>

#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! `warp_logits` into a row of the logits' type, then `sample_categorical` on it with u: the
//! documented sampling contract from logits. A row `warp_logits` cannot use gives no token and its
//! status. Allocates the warped row.
//! \throws specdec::error on invalid `w`
template <class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u) {
  std::vector<T> probs(logits.size());
  const row_status s = warp_logits(logits, std::span<T>(probs), w);
  if (s != row_status::ok) return {no_token, s, 0.0};
  return sample_categorical(std::span<const T>(probs), u);
}

}  // namespace specdec
