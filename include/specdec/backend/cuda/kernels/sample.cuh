//! \file backend/cuda/kernels/sample.cuh
//! \brief The kernels of sample.cuh: the tile masses of every row (`tile_mass_kernel`) and the per-row locate pass
//! (`locate_kernel`), over dense or threshold-filtered rows.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::cuda::detail {

inline constexpr int tile_mass_warps = 8;                              //!< warps (tiles) per block of `tile_mass_kernel`
inline constexpr int tile_mass_threads = tile_mass_warps * warp_size;  //!< threads per block of `tile_mass_kernel`

//! Row b's weights are its probabilities (`row_weight`, primitives/categorical.cuh); its stream is streams[b].
template <class T>
struct dense_rows {
  const T* probs;
  std::size_t vocab;
  const random::request_stream* streams;
  __device__ row_weight<T> weight(std::size_t b) const { return {probs + b * vocab}; }
  __device__ random::request_stream stream(std::size_t b) const { return streams[b]; }
};

//! w_v = p_v unless p_v is usable and below the threshold key `tau` (then +0): unusable entries pass
//! through, so that the row is reported `not_finite` as seq's sample_categorical would.
struct threshold_weight {
  const float* x;
  std::uint32_t tau;
  __device__ double operator()(std::size_t v) const {
    const float p = x[v];
    const bool below = (p >= 0.0f) & (prob_key(p) < tau);  // no short circuit: straight-line loops
    return below ? 0.0 : static_cast<double>(p);
  }
};

//! Row b's weights after its filters (the thresholds found by `run_select`); its stream travels with
//! its search state (one upload).
struct filtered_rows {
  const float* probs;
  std::size_t vocab;
  const select_row* rows;
  __device__ threshold_weight weight(std::size_t b) const { return {probs + b * vocab, rows[b].tau}; }
  __device__ random::request_stream stream(std::size_t b) const {
    return random::request_stream{rows[b].seed, rows[b].request, rows[b].step};
  }
};

//! Pass 1: the tile masses of every row; warp `job` handles tile job % tiles of row job / tiles.
template <class Rows>
__global__ void __launch_bounds__(tile_mass_threads)
    tile_mass_kernel(Rows rows, std::size_t vocab, std::size_t tiles, std::size_t jobs, double* tile_mass,
                     std::uint8_t* tile_usable) {
  const std::size_t job = static_cast<std::size_t>(blockIdx.x) * tile_mass_warps + threadIdx.x / warp_size;
  if (job >= jobs) return;  // (whole warps)
  bool usable = true;
  const double m = warp_tile_mass(rows.weight(job / tiles), tile_range::of(job % tiles, vocab), usable);
  usable = warp_all(usable);
  if (lane_id() == 0) {
    tile_mass[job] = m;
    tile_usable[job] = usable ? 1 : 0;
  }
}

//! Pass 2: one warp (block) per row locates its uniform and writes the token and the status.
template <class Rows>
__global__ void __launch_bounds__(warp_size)
    locate_kernel(Rows rows, std::size_t vocab, std::size_t tiles, const double* tile_mass, const std::uint8_t* tile_usable,
                  std::uint32_t position, random::purpose what, token_id* tokens, row_status* statuses) {
  __shared__ double shared[locate_shared_doubles];
  const std::size_t b = blockIdx.x;
  bool usable = true;
  for (std::size_t t = static_cast<std::size_t>(lane_id()); t < tiles; t += warp_size)
    usable = usable && tile_usable[b * tiles + t] != 0;
  usable = warp_all(usable);
  const double u = rows.stream(b).open(position, what).uniform();
  const located r = warp_locate(rows.weight(b), vocab, tile_mass + b * tiles, usable, u, shared);
  if (lane_id() == 0) {
    tokens[b] = r.token;
    statuses[b] = r.status;
  }
}

}  // namespace specdec::backend::cuda::detail
