//! \file bench/logit_chains.hpp
//! \brief One-request chains of gamma drafts from logits, shared by bench/simd_verify_from_logits.cpp
//! and bench/llama_cpp_sampler.cpp.
//!
//! Both sides are warped with top-k 50 -> top-p 0.9 -> T 1 (`warping`). Target logits are the draft's
//! plus N(0, 0.3^2) noise (l ~ N(0, 2^2)); draft tokens are sampled from the draft's warped rows.
//! `copies` chains are cycled so that the rows come from DRAM (`dram`: the chains take twice the L3)
//! or from cache (as many chains as fit in half the L3, at least one).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#include "bandwidth.hpp"
#include "specdec/specdec.hpp"

namespace specdec_bench {

using specdec::token_id;

inline const specdec::warp_params warping{.temperature = 1.0, .top_k = 50, .top_p = 0.9};

//! `copies` one-request chains of gamma drafts: logits of both sides, the warped q rows, q(x).
struct chains {
  std::size_t V = 0, gamma = 0, copies = 0;
  std::vector<float> target_logits, draft_logits, q_rows, q_at_drafts;  // [copies][gamma (+1)][V], [copies][gamma]
  std::vector<token_id> drafts;                                         // [copies][gamma]
  std::vector<std::int32_t> num_drafts;

  specdec::chain_batch<float> batch(std::size_t c, bool q) const {
    return {specdec::ragged_layout::packed(std::span<const std::int32_t>(num_drafts)), V,
            std::span<const token_id>(drafts).subspan(c * gamma, gamma),
            std::span<const float>(q ? q_rows : draft_logits).subspan(c * gamma * V, gamma * V),
            std::span<const float>(target_logits).subspan(c * (gamma + 1) * V, (gamma + 1) * V)};
  }
};

inline const chains& make_chains(std::size_t V, std::size_t gamma, bool dram) {
  static std::map<std::tuple<std::size_t, std::size_t, bool>, std::unique_ptr<chains>> cache;
  auto& slot = cache[{V, gamma, dram}];
  if (slot) return *slot;
  slot = std::make_unique<chains>();
  chains& c = *slot;
  c.V = V, c.gamma = gamma;
  const std::size_t bytes_per_copy = (3 * gamma + 1) * V * sizeof(float);
  c.copies = dram ? 2 * l3_bytes / bytes_per_copy + 1 : std::max<std::size_t>(1, l3_bytes / 2 / bytes_per_copy);
  c.num_drafts = {static_cast<std::int32_t>(gamma)};
  c.target_logits.resize(c.copies * (gamma + 1) * V);
  c.draft_logits.resize(c.copies * gamma * V);
  c.q_rows.resize(c.copies * gamma * V);
  std::mt19937_64 rng(0xF05EDULL + V + gamma);
  std::normal_distribution<float> logit(0.0f, 2.0f), noise(0.0f, 0.3f);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (std::size_t k = 0; k < c.copies; ++k)
    for (std::size_t i = 0; i <= gamma; ++i) {
      float* t = c.target_logits.data() + (k * (gamma + 1) + i) * V;
      std::vector<float> l(V);
      for (std::size_t v = 0; v < V; ++v) l[v] = logit(rng), t[v] = l[v] + noise(rng);
      if (i == gamma) continue;
      const std::size_t row = k * gamma + i;
      std::copy(l.begin(), l.end(), c.draft_logits.begin() + static_cast<std::ptrdiff_t>(row * V));
      const std::span<float> q(c.q_rows.data() + row * V, V);
      specdec::warp_logits(specdec::exec::seq, std::span<const float>(l), q, warping);
      const token_id x = specdec::sample_categorical(std::span<const float>(q), uniform(rng)).token;
      c.drafts.push_back(x);
      c.q_at_drafts.push_back(q[static_cast<std::size_t>(x)]);
    }
  return c;
}

}  // namespace specdec_bench
