//! \file backend/cuda/verify_block.cuh
//! \brief Block verification (acceptance/block.hpp, Sun et al., ICLR 2025) on the GPU:
//! `specdec::verify(exec::cuda, specdec::block, ...)` lands here. The tokens, counts and statuses of
//! seq's `verify_block_one` (backend/seq/verify.hpp) for the same streams, bit for bit.
//!
//! Kernel (`block_verify_kernel`, one block of `block_threads` threads per request): every thread
//! runs the walk (`detail::walk_block`, written once for host and device) on block-uniform values.
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

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/cuda/categorical.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/request_block.cuh"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec::backend::cuda {
namespace detail {

//! The outcome of one request's block verification.
struct block_walk_result {
  std::int32_t accepted = 0;    //!< drafts kept (0 on an error, except at the bonus, as seq)
  token_id emitted = no_token;  //!< the residual or bonus token
  verify_status status = verify_status::ok;
};

//! A residual row's pass-1 result: whether every weight was usable and its mass Z (rule 4's order).
struct residual_pass {
  bool usable;
  double total;
};

// The walk calls these operations of `Ops` on the request's positions (block_request_ops on the GPU,
// a host replay in tests/backend/cuda_tree_host.cu):
//   target_normalised(i), draft_normalised(i)   check_normalisation's test (true when off)
//   target_at(i, x), draft_at(i, x)             p_i(x), q_i(x) as doubles
//   sample_target(i, u) -> located              sample_categorical(p_i, u)
//   draft_has_mass(i)                           some q_i(v) > 0
//   residual_mass(i, 1 / a) -> residual_pass    pass 1 over max(0, p_i - min(p_i, q_i / a))
//   locate_residual(i, 1 / a, u, usable)        that residual's token, else p_i's (fallback)
//   barrier()                                   the weights stored by thread 0 are visible

//! Block verification of one chain of `n` drafts (seq's verify_block_one). `weight` holds n + 1
//! doubles; `leader` says whether this thread stores them.
#pragma nv_exec_check_disable  // the walk also runs on the host (tests/backend/cuda_tree_host.cu)
template <class Ops>
SPECDEC_HOST_DEVICE block_walk_result walk_block(Ops& ops, const token_id* drafts, std::int32_t n, std::size_t vocab,
                                                 const random::request_stream& stream, double* weight, bool leader) {
  using random::purpose;
  block_walk_result r;
  for (std::int32_t i = 0; i < n; ++i)
    if (!in_vocabulary(drafts[i], vocab)) {
      r.status = verify_status::bad_draft_token;
      return r;
    }
  // Forward: a_0 = 1, a_{i+1} = min(1, a_i p / q); every row is checked before anything is emitted.
  double a = 1.0, a_last = 1.0, p_last = 0.0, q_last = 0.0;
  if (leader) weight[0] = 1.0;
  for (std::int32_t i = 0; i < n; ++i) {
    const token_id x = drafts[i];
    if (!ops.target_normalised(i)) {
      r.status |= verify_status::not_normalised;
      return r;
    }
    const double px = ops.target_at(i, x);
    if (!ops.draft_normalised(i)) {
      r.status |= verify_status::not_normalised;
      return r;
    }
    const double qx = ops.draft_at(i, x);
    if (!specdec::detail::usable_weight(px) || !specdec::detail::usable_weight(qx)) {
      r.status |= verify_status::invalid_row;
      return r;
    }
    if (qx == 0.0) {
      r.status |= verify_status::draft_prob_zero;
      if (!ops.draft_has_mass(i)) {  // as seq: a q without mass is unusable
        r.status |= verify_status::invalid_row;
        return r;
      }
    }
    a_last = a;
    p_last = px;
    q_last = qx;
    a = block_weight(a, px, qx);
    if (leader) weight[i + 1] = a;
  }
  ops.barrier();
  // tau = n: eta_n < a_n, written as eta q < a_{n-1} p (n = 1 is strict's test to the bit; n = 0: the bonus).
  if (n == 0 || (q_last > 0.0 && first_uniform(stream, n - 1, purpose::accept) * q_last < a_last * p_last)) {
    r.accepted = n;
    if (!ops.target_normalised(n)) {
      r.status |= verify_status::not_normalised;
      return r;
    }
    emit_located(ops.sample_target(n, first_uniform(stream, n, purpose::resample)), vocab, r.emitted, r.status);
    return r;
  }
  for (std::int32_t i = n; i-- > 0;) {
    const double wi = weight[i];
    // h_i <= a_i: when eta_i >= a_i the prefix fails whatever R_i is, unread. Prefix 0 always passes.
    if (i > 0 && !(first_uniform(stream, i - 1, purpose::accept) < wi)) continue;
    if (!ops.target_normalised(i) || !ops.draft_normalised(i)) {
      r.status |= verify_status::not_normalised;
      return r;
    }
    const double inverse = 1.0 / wi;
    const residual_pass m = ops.residual_mass(i, inverse);
    // seq's sampler falls back to p exactly when the residual is usable, finite and without mass; its
    // mass is then taken as 0.
    const bool fallback = m.usable && specdec::detail::usable_weight(m.total) && !(m.total > 0.0);
    const double h = block_stop_probability(fallback ? 0.0 : product_rn(wi, m.total), wi);
    if (i > 0 && !(first_uniform(stream, i - 1, purpose::accept) < h)) continue;
    const residual_draw d = ops.locate_residual(i, inverse, first_uniform(stream, i, purpose::resample), m.usable);
    if (d.fallback) r.status |= verify_status::residual_fallback;
    emit_located(d.sample, vocab, r.emitted, r.status);
    if (is_valid(r.status)) r.accepted = i;
    return r;
  }
  return r;  // unreachable for usable rows: i = 0 always passes
}

//! Entry j of request b's output row: its kept drafts, then the emitted token, then -1.
SPECDEC_HOST_DEVICE inline token_id block_output_token(const token_id* drafts, const block_walk_result& r, std::size_t j) {
  const auto i = static_cast<std::int32_t>(j);
  return i < r.accepted ? drafts[i] : (i == r.accepted ? r.emitted : no_token);
}

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

//! min(p, q / a) with q / a = q * (1 / a) rounded by itself (block_residual's accepted mass).
struct block_accepted_mass {
  double inverse_weight;
  __device__ double operator()(double p, double q) const {
    const double scaled = __dmul_rn(q, inverse_weight);
    return scaled < p ? scaled : p;
  }
};

//! w_v = max(0, p_v - min(p_v, q_v / a)), NaN for unusable entries (sampling/residual.hpp).
template <class T>
struct block_residual_weight {
  const T* p;
  const T* q;
  block_accepted_mass mass;
  __device__ double operator()(std::size_t v) const {
    return specdec::detail::residual_weight(static_cast<double>(p[v]), static_cast<double>(q[v]), mass);
  }
};

//! The whole-row operations of `walk_block`, done by the request's block.
template <class T>
struct block_request_ops {
  const block_kernel_args<T>& a;
  const chain_request& r;
  request_shared& sh;
  double* masses;

  __device__ const T* target(std::int32_t i) const { return a.target + static_cast<std::size_t>(r.target_row0 + i) * a.vocab; }
  __device__ const T* draft(std::int32_t i) const { return a.draft + static_cast<std::size_t>(r.draft_row0 + i) * a.vocab; }
  __device__ bool target_normalised(std::int32_t i) {
    return !a.check_normalisation || block_normalised(row_weight<T>{target(i)}, a.vocab, a.tolerance, sh);
  }
  __device__ bool draft_normalised(std::int32_t i) {
    return !a.check_normalisation || block_normalised(row_weight<T>{draft(i)}, a.vocab, a.tolerance, sh);
  }
  __device__ double target_at(std::int32_t i, token_id x) const { return static_cast<double>(target(i)[x]); }
  __device__ double draft_at(std::int32_t i, token_id x) const { return static_cast<double>(draft(i)[x]); }
  __device__ bool draft_has_mass(std::int32_t i) { return block_any_positive(row_weight<T>{draft(i)}, a.vocab); }
  __device__ located sample_target(std::int32_t i, double u) {
    return block_sample(row_weight<T>{target(i)}, a.vocab, u, masses, sh);
  }
  __device__ residual_pass residual_mass(std::int32_t i, double inverse) {
    const bool usable = block_tile_masses(block_residual_weight<T>{target(i), draft(i), {inverse}}, a.vocab, masses);
    return {usable, tiles_total(masses, a.vocab)};
  }
  __device__ residual_draw locate_residual(std::int32_t i, double inverse, double u, bool usable) {
    const located s = block_locate(block_residual_weight<T>{target(i), draft(i), {inverse}}, a.vocab, masses, usable, u, sh);
    if (s.status == row_status::no_mass) return {sample_target(i, u), true};
    return {s, false};
  }
  __device__ void barrier() { __syncthreads(); }
};

//! One block per request: the walk, then the request's output row.
template <class T>
__global__ void __launch_bounds__(block_threads) block_verify_kernel(block_kernel_args<T> a) {
  __shared__ request_shared sh;
  const std::size_t b = blockIdx.x;
  const chain_request r = a.requests[b];
  block_request_ops<T> ops{a, r, sh, a.tile_mass + b * a.tiles};
  const token_id* drafts = a.drafts + r.draft_row0;
  const block_walk_result res =
      walk_block(ops, drafts, r.num_drafts, a.vocab, r.stream, a.weights + b * a.weight_stride, threadIdx.x == 0);
  token_id* row = a.out_tokens + b * a.out_stride;
  for (std::size_t j = threadIdx.x; j < a.out_stride; j += blockDim.x) row[j] = block_output_token(drafts, res, j);
  if (threadIdx.x == 0) {
    a.out_accepted[b] = res.accepted;
    a.out_status[b] = res.status;
  }
}

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
  detail::block_kernel_args<T> a;
  a.target = batch.target_rows.data();
  a.draft = batch.draft_rows.data();
  a.drafts = batch.draft_tokens.data();
  a.vocab = batch.vocab_size;
  a.tiles = parts.tiles;
  a.weight_stride = parts.weight_stride;
  a.requests = w.requests;
  a.tile_mass = w.tile_mass;
  a.weights = w.weights;
  a.check_normalisation = options.check_normalisation;
  a.tolerance = options.normalisation_tolerance;
  a.out_tokens = out.tokens.data();
  a.out_accepted = out.num_accepted.data();
  a.out_status = out.status.data();
  a.out_stride = batch.layout.max_drafts() + 1;
  detail::block_verify_kernel<T><<<static_cast<unsigned>(parts.batch), detail::block_threads, 0, stream>>>(a);
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
