// Reference models for the step decoder's tests: logits that depend on the last two tokens (a smooth
// "wave" shifted per model, so drafts, rejections and rollbacks all happen), and order-1 Markov tables.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/model/adapters.hpp"

namespace specdec_test {

inline auto wave_logits(double shift) {
  return [shift](std::span<const specdec::token_id> ctx, std::span<float> out) {
    const int last = ctx.empty() ? 0 : ctx.back(), before = ctx.size() < 2 ? 0 : ctx[ctx.size() - 2];
    for (std::size_t v = 0; v < out.size(); ++v)
      out[v] = static_cast<float>(std::sin(1.7 * double(v) + 0.9 * last + 0.4 * before + shift) * 2.0);
  };
}

// The test pair over V tokens, made once: the target (wave shift 0.0) and the draft (shift 0.8).
template <std::size_t V>
const auto& wave_target() {
  static const auto m = specdec::make_model(V, wave_logits(0.0));
  return m;
}
template <std::size_t V>
const auto& wave_draft() {
  static const auto m = specdec::make_model(V, wave_logits(0.8));
  return m;
}

// A Markov model of a table p[prev][next] (log-probabilities as logits).
inline auto table_logits(std::vector<double> table, std::size_t vocab) {
  return [table = std::move(table), vocab](std::span<const specdec::token_id> ctx, std::span<float> out) {
    const auto last = static_cast<std::size_t>(ctx.back());
    for (std::size_t v = 0; v < vocab; ++v) out[v] = static_cast<float>(std::log(table[last * vocab + v]));
  };
}

}  // namespace specdec_test
