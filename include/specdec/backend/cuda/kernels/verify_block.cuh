//! \file backend/cuda/kernels/verify_block.cuh
//! \brief The kernel of verify_block.cuh: block verification's walk (`walk_block`, backend/walks/block.hpp,
//! the one seq and simd run) on one request per thread block (`block_verify_kernel`, `block_request_ops`).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/request_block.cuh"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/backend/walks/block.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec::backend::cuda::detail {

using walks::block_output_token;
using walks::block_walk_result;
using walks::walk_block;

//! A request of a chain batch as the block kernel sees it.
struct chain_request {
  std::int64_t draft_row0 = 0;
  std::int64_t target_row0 = 0;
  std::int32_t num_drafts = 0;
  random::request_stream stream;
};

//! Everything the block verification kernel reads and writes, by value.
template <class T>
struct block_kernel_args {
  const T* target = nullptr;
  const T* draft = nullptr;
  const token_id* drafts = nullptr;
  std::size_t vocab = 0, tiles = 0, weight_stride = 0;
  const chain_request* requests = nullptr;  //!< [B]
  double* tile_mass = nullptr;              //!< [B][tiles]
  double* weights = nullptr;                //!< [B][max_drafts + 1]
  bool check_normalisation = false;
  double tolerance = 0.0;
  token_id* out_tokens = nullptr;
  std::int32_t* out_accepted = nullptr;
  verify_status* out_status = nullptr;
  std::size_t out_stride = 0;
};

//! w_v = max(0, p_v - min(p_v, q_v / a)), NaN for unusable entries: `block_residual`'s own accepted mass.
template <class T>
using block_residual_weight = residual_weight_of<row_weight<T>, row_weight<T>, block_residual>;

//! The row operations of `walk_block` (backend/walks/block.hpp), done by the request's block.
template <class T>
struct block_request_ops {
  const block_kernel_args<T>& args;
  const chain_request& r;
  request_shared& sh;
  double* masses;
  bool residual_usable = false;  // whether the last `residual_mass` found every weight usable

  __device__ const T* target(std::int32_t i) const {
    return args.target + static_cast<std::size_t>(r.target_row0 + i) * args.vocab;
  }
  __device__ const T* draft(std::int32_t i) const { return args.draft + static_cast<std::size_t>(r.draft_row0 + i) * args.vocab; }
  __device__ bool target_normalised(std::int32_t i) {
    return !args.check_normalisation || block_normalised(row_weight<T>{target(i)}, args.vocab, args.tolerance, sh);
  }
  __device__ bool draft_normalised(std::int32_t i) {
    return !args.check_normalisation || block_normalised(row_weight<T>{draft(i)}, args.vocab, args.tolerance, sh);
  }
  __device__ walks::row_scalar target_at(std::int32_t i, token_id x) {
    if (!target_normalised(i)) return {verify_status::not_normalised};
    return {verify_status::ok, static_cast<double>(target(i)[x])};
  }
  __device__ walks::row_scalar draft_at(std::int32_t i, token_id x) {
    if (!draft_normalised(i)) return {verify_status::not_normalised};
    return {verify_status::ok, static_cast<double>(draft(i)[x])};
  }
  __device__ verify_status draft_has_mass(std::int32_t i) {
    return block_any_positive(row_weight<T>{draft(i)}, args.vocab) ? verify_status::ok : verify_status::invalid_row;
  }
  __device__ located sample_row(std::int32_t i, double u) {
    return block_sample(row_weight<T>{target(i)}, args.vocab, u, masses, sh);
  }
  __device__ walks::row_draw<located> sample_target(std::int32_t i, double u) {
    if (!target_normalised(i)) return {verify_status::not_normalised};
    return {verify_status::ok, sample_row(i, u)};
  }
  //! Pass 1 over the residual (the tile masses into `masses`); its token is located by `draw_residual`.
  __device__ walks::residual_mass residual_mass(std::int32_t i, double inverse, double) {
    if (!target_normalised(i) || !draft_normalised(i)) return {verify_status::not_normalised};
    residual_usable =
        block_tile_masses(block_residual_weight<T>{{target(i)}, {draft(i)}, {block_residual{inverse}}}, args.vocab, masses);
    const double total = tiles_total(masses, args.vocab);
    return {verify_status::ok, total, walks::residual_falls_back(residual_usable, total)};
  }
  __device__ walks::row_draw<located> draw_residual(std::int32_t i, double inverse, double u) {
    const located s = block_locate(block_residual_weight<T>{{target(i)}, {draft(i)}, {block_residual{inverse}}}, args.vocab,
                                   masses, residual_usable, u, sh);
    if (s.status == row_status::no_mass) return {verify_status::ok, sample_row(i, u), true};
    return {verify_status::ok, s, false};
  }
  __device__ void barrier() { __syncthreads(); }
};

//! One block per request: the walk, then the request's output row.
template <class T>
__global__ void __launch_bounds__(block_threads) block_verify_kernel(block_kernel_args<T> args) {
  __shared__ request_shared sh;
  const std::size_t b = blockIdx.x;
  const chain_request r = args.requests[b];
  block_request_ops<T> ops{args, r, sh, args.tile_mass + b * args.tiles};
  const token_id* drafts = args.drafts + r.draft_row0;
  const block_walk_result res =
      walk_block(ops, drafts, r.num_drafts, args.vocab, r.stream, args.weights + b * args.weight_stride, threadIdx.x == 0);
  token_id* row = args.out_tokens + b * args.out_stride;
  for (std::size_t j = threadIdx.x; j < args.out_stride; j += blockDim.x) row[j] = block_output_token(drafts, res, j);
  if (threadIdx.x == 0) {
    args.out_accepted[b] = res.accepted;
    args.out_status[b] = res.status;
  }
}

}  // namespace specdec::backend::cuda::detail
