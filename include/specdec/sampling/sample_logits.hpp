//! \file sampling/sample_logits.hpp
//! \brief `sample_logits(logits, w, u)`: one token from warp(softmax(logits / T)) with the uniform u,
//! the reference that faster paths (backend/simd/sample_logits.hpp) are measured against.
#pragma once

#include <span>
#include <vector>

#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! One token from warp(softmax(logits / T)) with u: the documented sampling contract from logits
//! (\ref sampling_from_logits). Float and double rows at T > 0: `sample_categorical` on the kept
//! weights of `detail::keep_logit_weights` (written to `scratch`, not normalised), with the mass
//! returned relative to the maximum's weight; other rows: `warp_logits` into `scratch`, then
//! `sample_categorical`. A row that cannot be warped gives no token and its status. Allocates only
//! when `scratch` is shorter than the row.
//! \throws specdec::error on invalid `w`
template <class T>
sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u, std::vector<T>& scratch) {
  scratch.resize(logits.size());
  if (w.temperature > 0.0 && detail::weighs_logits<T>(w.temperature)) {
    validate(w);
    const detail::kept_weights k = detail::keep_logit_weights(logits, w, std::span<T>(scratch));
    if (k.status != row_status::ok) return {no_token, k.status, 0.0};
    sample_result s = sample_categorical(std::span<const T>(scratch), u);
    s.mass /= k.top;
    return s;
  }
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
