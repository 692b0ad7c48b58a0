//! \file backend/cuda/verify_block.cuh
//! \brief Block verification (acceptance/block.hpp, Sun et al., ICLR 2025) on the GPU:
//! `specdec::verify(exec::cuda, specdec::block, ...)` lands here. The tokens, counts and statuses of
//! seq's `verify_block_one` (backend/seq/verify.hpp) for the same streams, bit for bit.
//!
//! Kernel (`block_verify_kernel`, one block of `block_threads` threads per request): every thread
//! runs the walk (`walk_block`, backend/walks/block.hpp: the one seq runs) on block-uniform values.
//!  1. The forward pass gathers p_i(X_i), q_i(X_i) and computes the weights a_i = min(1, a_{i-1} p / q)
//!     (`block_weight`, the same host/device function as seq); thread 0 stores them for the scan.
//!  2. tau = n is tested on scalars alone (eta q < a_{n-1} p, strict's test for n = 1): then the bonus
//!     is sampled from p_{n+1} (one block pass and one tile re-read, sampling/categorical.hpp's contract).
//!  3. The scan from i = n - 1 down: a prefix with eta_i >= a_i fails unread (h_i <= a_i); otherwise
//!     the block sums the tile masses of max(0, p - min(p, q / a_i)) (the residual of block_residual,
//!     with q / a_i rounded by __dmul_rn as seq's product), R_i = a_i * mass (never an fma),
//!     h_i = `block_stop_probability(R_i, a_i)`; a passing prefix locates its token in the same masses
//!     (warp 0 re-reads one tile), and a residual without mass falls back to p with
//!     `residual_fallback`. Prefix 0 always passes.
//! With `check_normalisation` every row the walk reads is summed (any order: the tolerance dwarfs the
//! rounding, but a row whose sum lies within rounding of the tolerance can be flagged differently).
//! Memory: `verify_block_workspace_bytes` then a caller-owned device workspace, or the overload that
//! allocates on the stream; the spans of `chain_batch` and `chain_outputs` are device memory, the
//! layout and the streams host memory. Rows given as logits (`verify_from_logits`) have no kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/cuda/kernels/verify_block.cuh"
#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/request_block.cuh"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec::backend::cuda {
namespace detail {

//! The workspace parts of one block verification, taken in a fixed order.
struct block_parts {
  std::size_t batch = 0, tiles = 0, weight_stride = 0;

  template <class T>
  static block_parts of(const chain_batch<T>& batch) {
    return {batch.layout.batch_size(), specdec::detail::tile_count(batch.vocab_size), batch.layout.max_drafts() + 1};
  }
  struct pointers {
    chain_request* requests;
    double* tile_mass;
    double* weights;
  };
  pointers take(workspace_plan& plan) const {
    pointers w{};
    w.requests = plan.take<chain_request>(batch);
    w.tile_mass = plan.take<double>(batch * tiles);
    w.weights = plan.take<double>(batch * weight_stride);
    return w;
  }
  std::size_t bytes() const {
    workspace_plan plan;
    (void)take(plan);
    return plan.bytes();
  }
};

}  // namespace detail

//! Device bytes `verify_block` needs for this batch shape: the request table, B tile-mass rows and
//! B rows of max_drafts + 1 weights.
template <class T>
std::size_t verify_block_workspace_bytes(const block_rule&, const chain_batch<T>& batch, const verify_options& = {}) {
  return detail::block_parts::of(batch).bytes();
}

//! Block verification on `stream` with a caller-owned device `workspace` of at least
//! `verify_block_workspace_bytes(block, batch, options)` bytes. The spans of `batch` and `out` are
//! device memory; `streams` (one per request) and the layout are host memory. Asynchronous.
//! \throws specdec::error on shape mismatches or a small workspace (before any CUDA call);
//! specdec::cuda_error on CUDA errors.
template <class T>
void verify_block(cudaStream_t stream, const block_rule&, const chain_batch<T>& batch,
                  std::span<const random::request_stream> streams, const chain_outputs& out, std::span<std::byte> workspace,
                  const verify_options& options = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "cuda verify_block: float or double rows");
  seq::detail::check_shapes(batch, true, streams, out);
  const auto parts = detail::block_parts::of(batch);
  SPECDEC_EXPECTS(parts.batch <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                  "cuda verify_block: too many requests for one launch");
  workspace_plan plan(workspace);
  const auto w = parts.take(plan);
  if (parts.batch == 0) return;
  std::vector<detail::chain_request> requests(parts.batch);
  for (std::size_t b = 0; b < parts.batch; ++b)
    requests[b] = {static_cast<std::int64_t>(batch.layout.draft_row(b, 0)),
                   static_cast<std::int64_t>(batch.layout.target_row(b, 0)),
                   static_cast<std::int32_t>(batch.layout.num_drafts(b)), streams[b]};
  copy_to_device(w.requests, requests.data(), requests.size(), stream);
  detail::block_kernel_args<T> args;
  args.target = batch.target_rows.data();
  args.draft = batch.draft_rows.data();
  args.drafts = batch.draft_tokens.data();
  args.vocab = batch.vocab_size;
  args.tiles = parts.tiles;
  args.weight_stride = parts.weight_stride;
  args.requests = w.requests;
  args.tile_mass = w.tile_mass;
  args.weights = w.weights;
  args.check_normalisation = options.check_normalisation;
  args.tolerance = options.normalisation_tolerance;
  args.out_tokens = out.tokens.data();
  args.out_accepted = out.num_accepted.data();
  args.out_status = out.status.data();
  args.out_stride = batch.layout.max_drafts() + 1;
  detail::block_verify_kernel<T><<<static_cast<unsigned>(parts.batch), detail::block_threads, 0, stream>>>(args);
  check_launch("block_verify_kernel");
}

//! `verify_block` with a workspace allocated (and freed) on `stream`.
template <class T>
void verify_block(cudaStream_t stream, const block_rule& rule, const chain_batch<T>& batch,
                  std::span<const random::request_stream> streams, const chain_outputs& out, const verify_options& options = {}) {
  seq::detail::check_shapes(batch, true, streams, out);  // before allocating
  device_buffer workspace(verify_block_workspace_bytes(rule, batch, options), stream);
  verify_block(stream, rule, batch, streams, out, workspace.span(), options);
}

}  // namespace specdec::backend::cuda
