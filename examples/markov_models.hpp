// The Markov pair of the batch examples (sv_batch_goodput, length_eval): logits after token a are a
// fixed pseudo-random row of V entries, `scale` sets how peaked it is and `phase` how far a draft
// model is from the target.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include <specdec/core/token.hpp>

namespace specdec_examples {

inline auto markov_logits(double scale, double phase) {
  return [scale, phase](std::span<const specdec::token_id> context, std::span<float> out) {
    const double a = context.back();
    for (std::size_t v = 0; v < out.size(); ++v)
      out[v] = static_cast<float>(scale * std::sin(2.3 * double(v) * (a + 1.0) + phase) + 0.5 * std::cos(0.7 * double(v) + a));
  };
}

}  // namespace specdec_examples
