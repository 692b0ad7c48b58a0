// seq's `sample_logits` for one row and many uniforms: the kept weights of the row computed once
// (`specdec::detail::keep_logit_weights`), then `sample_categorical` on them per uniform, the mass
// divided by the maximum's weight; rows the weights do not cover (T = 0, other types, float rows at T
// below 1 / FLT_MAX) call `sample_logits` each time. Equal to `specdec::sample_logits(logits, w, u)`
// for every u (tests/distributions/logit_weights.cpp checks it); the tests that draw many uniforms
// per row use it so that seq's reference costs one warp per row, not one per draw.
#pragma once

#include <span>
#include <vector>

#include "specdec/distributions/warp.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/sample_logits.hpp"

namespace specdec_test {

template <class T>
class logits_reference {
 public:
  logits_reference(std::span<const T> logits, const specdec::warp_params& w) : logits_(logits), w_(w) {
    if (w.temperature > 0.0 && specdec::detail::weighs_logits<T>(w.temperature)) {
      kept_.resize(logits.size());
      k_ = specdec::detail::keep_logit_weights(logits, w, std::span<T>(kept_));
      weighed_ = true;
    }
  }
  specdec::sample_result operator()(double u) const {
    if (!weighed_) return specdec::sample_logits(logits_, w_, u);
    if (k_.status != specdec::row_status::ok) return {specdec::no_token, k_.status, 0.0};
    specdec::sample_result s = specdec::sample_categorical(std::span<const T>(kept_), u);
    s.mass /= k_.top;
    return s;
  }

 private:
  std::span<const T> logits_;
  specdec::warp_params w_;
  std::vector<T> kept_;
  specdec::detail::kept_weights k_{specdec::row_status::ok, 0.0, 0, specdec::detail::fixed_mass_scale(1.0, 1)};
  bool weighed_ = false;
};

}  // namespace specdec_test
