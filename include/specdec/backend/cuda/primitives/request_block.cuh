//! \file backend/cuda/primitives/request_block.cuh
//! \brief Whole-row work of one request by one thread block of `block_threads` threads: the pieces
//! the tree walk (verify_tree.cuh) and block verification (verify_block.cuh) run at each row they
//! visit, in the orders of the determinism contract (sampling/categorical.hpp), so that a token
//! equals seq's for the same uniform, bit for bit.
//!
//! - `block_tile_masses`: rules 1-3, the block's warps take tiles round robin (warp w: tiles w,
//!   w + 8, ...), each tile summed by one warp as `warp_tile_mass` sums it (the order of a tile's
//!   sum does not depend on which warp sums it);
//! - `block_locate`: rules 4-6 by warp 0 (`warp_locate`, one tile re-read), the result in every thread;
//! - `block_greedy`: greedy's usability test and argmax (larger value, then lower index: any order);
//! - `block_row_sum`: a row's sum for `check_normalisation` (any order: the tolerance dwarfs the rounding);
//! - `block_any_positive`: whether a row has some entry > 0.
//! Every function contains __syncthreads and must be called by all threads of the block with the same
//! arguments (the walks run redundantly in every thread on block-uniform values, so they do).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "specdec/acceptance/status.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/backend/cuda/primitives/block.cuh"
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::cuda::detail {

// The steps every walk shares (backend/walks/steps.hpp), as this backend's kernels name them.
using walks::emit_sample;
using walks::first_uniform;
using walks::greedy_row;
//! A located token and whether it came from the zero-residual fallback to p.
using residual_draw = walks::row_draw<located>;

//! Shared memory of one request block. Trivially constructible (a __shared__ variable cannot have a
//! constructor): no default member initialisers.
struct request_shared {
  double locate[locate_shared_doubles];  //!< `warp_locate`'s tile masses, staged tile and strip masses
  double sums[block_warps];              //!< `block_sum_all`'s scratch
  arg_best best[block_warps];            //!< `block_argmax`'s scratch
  double value;                          //!< a double broadcast from warp 0
  token_id found_token;                  //!< `block_locate`'s result, broadcast from warp 0
  row_status found_status;
};

//! Rules 1-3 of the contract for one row of `vocab` weights: the tile masses into `masses[0, tiles)`
//! (global memory, visible to the whole block on return); whether every weight was usable, in every
//! thread. The first barrier keeps the writes behind every thread's reads of the previous masses.
template <class Weight>
__device__ bool block_tile_masses(const Weight& weight, std::size_t vocab, double* masses) {
  const std::size_t tiles = specdec::detail::tile_count(vocab);
  bool usable = true;
  __syncthreads();
  for (std::size_t t = threadIdx.x / warp_size; t < tiles; t += block_warps) {  // (warp-uniform loop)
    const double m = warp_tile_mass(weight, tile_range::of(t, vocab), usable);
    if (lane_id() == 0) masses[t] = m;
  }
  return __syncthreads_and(usable ? 1 : 0) != 0;
}

//! Z of rule 4: the sequential sum of the tile masses in tile order, as `locate_in_tiles` and
//! `warp_locate` compute it (the `mass` of seq's `sample_result`).
__device__ inline double tiles_total(const double* masses, std::size_t vocab) {
  const std::size_t tiles = specdec::detail::tile_count(vocab);
  double total = 0.0;
  for (std::size_t t = 0; t < tiles; ++t) total += masses[t];
  return total;
}

//! Rules 4-6 by warp 0 on the masses of `block_tile_masses`; the token and status in every thread.
template <class Weight>
__device__ located block_locate(const Weight& weight, std::size_t vocab, const double* masses, bool usable, double u,
                                request_shared& sh) {
  if (threadIdx.x < warp_size) {
    const located r = warp_locate(weight, vocab, masses, usable, u, sh.locate);
    if (threadIdx.x == 0) {
      sh.found_token = r.token;
      sh.found_status = r.status;
    }
  }
  __syncthreads();
  const located r{sh.found_token, sh.found_status};
  __syncthreads();  // the next call may overwrite `sh`
  return r;
}

//! `specdec::sample_by_weights(vocab, weight, u)`'s token and status, in every thread; `masses` is
//! scratch of `tile_count(vocab)` doubles (global memory).
template <class Weight>
__device__ located block_sample(const Weight& weight, std::size_t vocab, double u, double* masses, request_shared& sh) {
  const bool usable = block_tile_masses(weight, vocab, masses);
  return block_locate(weight, vocab, masses, usable, u, sh);
}

//! Greedy's usability test and argmax of a row, in every thread.
template <class Weight>
__device__ greedy_row block_greedy(const Weight& p, std::size_t vocab, request_shared& sh) {
  const std::size_t tiles = specdec::detail::tile_count(vocab);
  arg_best best{0.0, -1};
  bool usable = true, positive = false;
  for (std::size_t t = threadIdx.x / warp_size; t < tiles; t += block_warps)
    for_lane_loaded(tile_range::of(t, vocab), p, [&](std::size_t v, double x) {
      usable = usable & specdec::detail::usable_weight(x);
      positive = positive | (x > 0.0);
      best = better(best, arg_best{x, static_cast<long long>(v)});
    });
  best = block_argmax(best, sh.best);
  usable = __syncthreads_and(usable ? 1 : 0) != 0;
  positive = __syncthreads_or(positive ? 1 : 0) != 0;
  return {usable && positive, static_cast<token_id>(best.index)};
}

//! The sum of a row (any fixed order), in every thread.
template <class Weight>
__device__ double block_row_sum(const Weight& row, std::size_t vocab, request_shared& sh) {
  double s = 0.0;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) s += row(v);
  return block_sum_all(s, sh.sums);
}

//! Whether some entry of the row is > 0, in every thread.
template <class Weight>
__device__ bool block_any_positive(const Weight& row, std::size_t vocab) {
  bool positive = false;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) positive = positive | (row(v) > 0.0);
  return __syncthreads_or(positive ? 1 : 0) != 0;
}

//! `check_normalisation`'s test of a row: |sum - 1| <= tolerance (seq flags `not_normalised` otherwise).
template <class Weight>
__device__ bool block_normalised(const Weight& row, std::size_t vocab, double tolerance, request_shared& sh) {
  return fabs(block_row_sum(row, vocab, sh) - 1.0) <= tolerance;
}

}  // namespace specdec::backend::cuda::detail
