//! \file bench/verify_data.hpp
//! \brief The inputs of the verification benchmarks (bench_verify, bench_simd_verify), built once per
//! shape: a pool of (q, p) row pairs with a calibrated acceptance, K copies of a padded batch so that
//! the rows stay out of the caches, row pairs for the sampler benchmarks, and the bytes a verifier
//! must read.
//!
//! Rows: q = softmax(l), l ~ N(0, 2^2); p = softmax(l + s z), z ~ N(0, 1), with s calibrated (bisection
//! on 4 rows) so that the mean 1 - TV(p, q) is `target_acceptance`. Drafts are sampled from q.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "bandwidth.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec_bench {

inline constexpr double target_acceptance = 0.70;
inline constexpr std::size_t pool_pairs = 64;

//! `pool_pairs` (q, p) pairs of V entries.
struct row_pool {
  std::size_t V = 0;
  double sigma = 0.0;        //!< sd of the logit perturbation that makes p from q
  double mean_accept = 0.0;  //!< mean of 1 - TV(p, q) over the pool
  std::vector<float> q, p;   //!< [pool_pairs][V]
  std::span<const float> q_row(std::size_t j) const { return {q.data() + j * V, V}; }
  std::span<const float> p_row(std::size_t j) const { return {p.data() + j * V, V}; }
};

namespace detail {
inline void perturbed_pair(const std::vector<double>& l, const std::vector<double>& z, double sigma, float* q, float* p) {
  std::vector<double> lp(l.size());
  for (std::size_t v = 0; v < l.size(); ++v) lp[v] = l[v] + sigma * z[v];
  specdec::softmax(std::span<const double>(l), std::span<float>(q, l.size()));
  specdec::softmax(std::span<const double>(lp), std::span<float>(p, l.size()));
}

inline std::unique_ptr<row_pool> make_pool(std::size_t V) {
  auto pool = std::make_unique<row_pool>();
  pool->V = V;
  std::mt19937_64 rng(0x5eedULL + V);
  std::normal_distribution<double> logit(0.0, 2.0), noise(0.0, 1.0);
  const auto draw = [&](std::vector<double>& l, std::vector<double>& z) {
    l.resize(V), z.resize(V);
    for (std::size_t v = 0; v < V; ++v) l[v] = logit(rng), z[v] = noise(rng);
  };
  constexpr std::size_t cal_rows = 4;
  std::vector<std::vector<double>> cl(cal_rows), cz(cal_rows);
  for (std::size_t r = 0; r < cal_rows; ++r) draw(cl[r], cz[r]);
  std::vector<float> qa(V), pa(V);
  const auto mean_accept = [&](double s) {
    double a = 0.0;
    for (std::size_t r = 0; r < cal_rows; ++r) {
      perturbed_pair(cl[r], cz[r], s, qa.data(), pa.data());
      a += specdec::overlap(std::span<const float>(pa), std::span<const float>(qa));
    }
    return a / cal_rows;
  };
  double lo = 0.0, hi = 4.0;
  for (int it = 0; it < 20; ++it) {
    const double mid = 0.5 * (lo + hi);
    (mean_accept(mid) > target_acceptance ? lo : hi) = mid;
  }
  pool->sigma = 0.5 * (lo + hi);
  pool->q.resize(pool_pairs * V);
  pool->p.resize(pool_pairs * V);
  std::vector<double> l, z;
  double acc = 0.0;
  for (std::size_t j = 0; j < pool_pairs; ++j) {
    draw(l, z);
    perturbed_pair(l, z, pool->sigma, pool->q.data() + j * V, pool->p.data() + j * V);
    acc += specdec::overlap(pool->p_row(j), pool->q_row(j));
  }
  pool->mean_accept = acc / pool_pairs;
  return pool;
}
}  // namespace detail

//! The pool of V (built on first use).
inline const row_pool& get_pool(std::size_t V) {
  static std::map<std::size_t, std::unique_ptr<row_pool>> pools;
  auto& slot = pools[V];
  if (!slot) slot = detail::make_pool(V);
  return *slot;
}

//! K consecutive copies of a padded [B][gamma][V] draft / [B][gamma + 1][V] target batch.
struct verify_data {
  std::size_t B = 0, gamma = 0, V = 0, K = 0;
  aligned_buffer<float> draft, target;
  std::vector<specdec::token_id> tokens;  //!< [K][B][gamma]
  std::vector<std::int32_t> num_drafts;
  std::vector<specdec::chain_batch<float>> batches;  //!< one view per copy
  aligned_buffer<float> naive_residual;              //!< [B][gamma][V], allocated by the naive baseline

  std::size_t draft_floats() const { return B * gamma * V; }
  std::size_t target_floats() const { return B * (gamma + 1) * V; }
  std::size_t batch_bytes() const { return (draft_floats() + target_floats()) * sizeof(float); }
  const float* draft_copy(std::size_t k) const { return draft.get() + k * draft_floats(); }
  const float* target_copy(std::size_t k) const { return target.get() + k * target_floats(); }
  const specdec::token_id* tokens_copy(std::size_t k) const { return tokens.data() + k * B * gamma; }
};

//! K: the arena of K batches is >= 256 MB and the rows read between two uses of a copy are >= 4x L3;
//! the arena is capped at 2 GB.
inline std::size_t choose_copies(std::size_t B, std::size_t gamma, std::size_t V) {
  const double row = static_cast<double>(V * sizeof(float));
  const double batch = static_cast<double>((2 * gamma + 1) * B) * row;
  const double tail = std::pow(target_acceptance, static_cast<double>(gamma));
  const double read_per_call = static_cast<double>(B) * row * (2.0 * (1.0 - tail) + tail);
  double k = std::max(std::ceil(256.0 * MB / batch), std::ceil(4.0 * l3_bytes / read_per_call));
  k = std::min(k, std::floor(2048.0 * MB / batch));
  return static_cast<std::size_t>(std::max(1.0, k));
}

//! K copies of the batch of one shape.
inline std::unique_ptr<verify_data> make_verify_data(std::size_t B, std::size_t gamma, std::size_t V, std::size_t K) {
  const row_pool& pool = get_pool(V);
  auto d = std::make_unique<verify_data>();
  d->B = B, d->gamma = gamma, d->V = V, d->K = K;
  d->draft = aligned_buffer<float>(K * d->draft_floats());
  d->target = aligned_buffer<float>(K * d->target_floats());
  d->tokens.resize(K * B * gamma);
  d->num_drafts.assign(B, static_cast<std::int32_t>(gamma));
  std::mt19937_64 rng(0xb0a7ULL ^ (B << 32) ^ (gamma << 24) ^ V);
  std::uniform_int_distribution<std::size_t> pick(0, pool_pairs - 1);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  const std::size_t row_bytes = V * sizeof(float);
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < gamma; ++i) {
        const std::size_t j = pick(rng);
        std::memcpy(d->draft.get() + k * d->draft_floats() + (b * gamma + i) * V, pool.q_row(j).data(), row_bytes);
        std::memcpy(d->target.get() + k * d->target_floats() + (b * (gamma + 1) + i) * V, pool.p_row(j).data(), row_bytes);
        d->tokens[(k * B + b) * gamma + i] = specdec::sample_categorical(pool.q_row(j), unif(rng)).token;
      }
      std::memcpy(d->target.get() + k * d->target_floats() + (b * (gamma + 1) + gamma) * V, pool.p_row(pick(rng)).data(),
                  row_bytes);
    }
  const auto layout = specdec::ragged_layout::padded(d->num_drafts, gamma);
  for (std::size_t k = 0; k < K; ++k)
    d->batches.push_back(specdec::chain_batch<float>{layout, V, std::span<const specdec::token_id>(d->tokens_copy(k), B * gamma),
                                                     std::span<const float>(d->draft_copy(k), d->draft_floats()),
                                                     std::span<const float>(d->target_copy(k), d->target_floats())});
  return d;
}

//! The data of one shape with `choose_copies` copies (one shape at a time: the benchmarks of a shape
//! run back to back).
inline verify_data& get_verify_data(std::size_t B, std::size_t gamma, std::size_t V) {
  static std::unique_ptr<verify_data> slot;
  if (!slot || slot->B != B || slot->gamma != gamma || slot->V != V) {
    slot.reset();
    slot = make_verify_data(B, gamma, V, choose_copies(B, gamma, V));
  }
  return *slot;
}

//! Bytes a verifier must read for the outcomes `accepted`: one row pair per rejecting request, one
//! row per bonus, two scalars per tested position.
inline double min_bytes(std::span<const std::int32_t> accepted, std::size_t gamma, std::size_t V) {
  const double row = static_cast<double>(V * sizeof(float));
  double bytes = 0.0;
  for (const std::int32_t a : accepted) {
    const bool rejected = static_cast<std::size_t>(a) < gamma;
    bytes += (rejected ? 2.0 * row : row) + static_cast<double>(rejected ? a + 1 : a) * 2.0 * sizeof(float);
  }
  return bytes;
}

//! Row pairs for the sampler benchmarks: N copies of pool pairs, N = 1 (cache) or >= 4x L3 (dram).
struct pair_data {
  std::size_t V = 0, N = 0;
  aligned_buffer<float> q, p;
};

inline pair_data& get_pair_data(std::size_t V, bool dram) {
  static std::unique_ptr<pair_data> slot;
  const std::size_t N = dram ? (4 * l3_bytes + 2 * V * sizeof(float) - 1) / (2 * V * sizeof(float)) : 1;
  if (!slot || slot->V != V || slot->N != N) {
    slot.reset();
    const row_pool& pool = get_pool(V);
    slot = std::make_unique<pair_data>();
    slot->V = V, slot->N = N;
    slot->q = aligned_buffer<float>(N * V);
    slot->p = aligned_buffer<float>(N * V);
    for (std::size_t n = 0; n < N; ++n) {
      std::memcpy(slot->q.get() + n * V, pool.q_row(n % pool_pairs).data(), V * sizeof(float));
      std::memcpy(slot->p.get() + n * V, pool.p_row(n % pool_pairs).data(), V * sizeof(float));
    }
  }
  return *slot;
}

}  // namespace specdec_bench
