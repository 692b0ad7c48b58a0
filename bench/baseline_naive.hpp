//! \file bench/baseline_naive.hpp
//! \brief A peer-style baseline for chain verification (strict rule), for bench/verify.cpp only.
//!
//! Our own straightforward scalar code, written the way transformers' assisted generation and vLLM v0's
//! `RejectionSampler` (`_get_recovered_probs`) organise the work, not the way specdec does:
//!   1. materialise the residual max(p - q, tiny) for *every* drafted position into a [B][gamma][V]
//!      buffer (vLLM v0 clamps at torch.finfo(float32).tiny rather than 0), sum it and normalise it by
//!      division, so every p and q row is read and the whole residual buffer is written and re-read;
//!   2. run the accept test u * q(x) < p(x) at every drafted position;
//!   3. at the first rejected position sample the normalised residual with a linear inverse CDF
//!      (running float sum, early exit); if all gamma drafts are accepted, sample the bonus from the
//!      target row gamma with the same linear inverse CDF.
//! Concessions in the baseline's favour: the residual buffer is allocated once by the caller (like
//! PyTorch's caching allocator), and recovered tokens are sampled only where one is needed (vLLM v0
//! samples all B * gamma positions). It uses the same Philox uniforms as specdec, so the accepted
//! counts are identical to specdec's and the tokens agree except where float and double rounding of
//! the CDF differ (bench/verify.cpp checks this at start-up).
//! Traffic per call: every p row of positions 0..gamma-1 and every q row (2 B gamma V floats), the
//! B gamma V residual written, read, read and written again, plus the sampled rows (a bonus row when all
//! drafts are accepted).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"

namespace specdec_bench {

//! Linear inverse CDF over a (normalised) float row: the first v with p[0] + ... + p[v] > u.
//! Falls back to the last positive entry when rounding leaves the running sum at or below u.
inline specdec::token_id naive_inverse_cdf(const float* row, std::size_t V, float u) {
  float c = 0.0f;
  std::size_t last_positive = 0;
  for (std::size_t v = 0; v < V; ++v) {
    c += row[v];
    if (row[v] > 0.0f) last_positive = v;
    if (c > u) return static_cast<specdec::token_id>(v);
  }
  return static_cast<specdec::token_id>(last_positive);
}

//! Verifies B chains of gamma drafts each (padded layout: draft rows [B][gamma][V], target rows
//! [B][gamma + 1][V]) with the strict rule. `residual` is caller-owned scratch of B * gamma * V floats.
//! Writes tokens [B][gamma + 1] (accepted drafts, one correction or bonus, then -1) and num_accepted [B].
inline void naive_verify_strict(const float* draft_rows, const float* target_rows, const specdec::token_id* drafts, std::size_t B,
                                std::size_t gamma, std::size_t V, std::span<const specdec::random::request_stream> streams,
                                specdec::token_id* tokens, std::int32_t* num_accepted, float* residual) {
  using specdec::random::purpose;
  constexpr float tiny = std::numeric_limits<float>::min();

  // 1. Residuals of every position, materialised and normalised by division.
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t i = 0; i < gamma; ++i) {
      const float* p = target_rows + (b * (gamma + 1) + i) * V;
      const float* q = draft_rows + (b * gamma + i) * V;
      float* f = residual + (b * gamma + i) * V;
      for (std::size_t v = 0; v < V; ++v) f[v] = std::max(p[v] - q[v], tiny);
      float sum = 0.0f;
      for (std::size_t v = 0; v < V; ++v) sum += f[v];
      for (std::size_t v = 0; v < V; ++v) f[v] = f[v] / sum;
    }
  }

  // 2. + 3. Accept tests, then one recovered or bonus token per request.
  for (std::size_t b = 0; b < B; ++b) {
    specdec::token_id* out = tokens + b * (gamma + 1);
    std::fill(out, out + gamma + 1, specdec::no_token);
    std::size_t i = 0;
    for (; i < gamma; ++i) {
      const specdec::token_id x = drafts[b * gamma + i];
      const double px = target_rows[(b * (gamma + 1) + i) * V + static_cast<std::size_t>(x)];
      const double qx = draft_rows[(b * gamma + i) * V + static_cast<std::size_t>(x)];
      const double u = streams[b].open(static_cast<std::uint32_t>(i), purpose::accept).uniform();
      if (!(qx > 0.0 && u * qx < px)) break;
      out[i] = x;
    }
    const float u = static_cast<float>(streams[b].open(static_cast<std::uint32_t>(i), purpose::resample).uniform());
    const float* row = i < gamma ? residual + (b * gamma + i) * V : target_rows + (b * (gamma + 1) + gamma) * V;
    out[i] = naive_inverse_cdf(row, V, u);
    num_accepted[b] = static_cast<std::int32_t>(i);
  }
}

}  // namespace specdec_bench
