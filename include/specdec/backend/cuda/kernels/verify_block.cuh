//! \file backend/cuda/kernels/verify_block.cuh
//! \brief The kernel of verify_block.cuh: the block walk of one request per thread block (`walk_block`,
//! `block_verify_kernel`), shared with the host replay tests.
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
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec::backend::cuda::detail {

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
  const block_kernel_args<T>& args;
  const chain_request& r;
  request_shared& sh;
  double* masses;

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
  __device__ double target_at(std::int32_t i, token_id x) const { return static_cast<double>(target(i)[x]); }
  __device__ double draft_at(std::int32_t i, token_id x) const { return static_cast<double>(draft(i)[x]); }
  __device__ bool draft_has_mass(std::int32_t i) { return block_any_positive(row_weight<T>{draft(i)}, args.vocab); }
  __device__ located sample_target(std::int32_t i, double u) {
    return block_sample(row_weight<T>{target(i)}, args.vocab, u, masses, sh);
  }
  __device__ residual_pass residual_mass(std::int32_t i, double inverse) {
    const bool usable = block_tile_masses(block_residual_weight<T>{target(i), draft(i), {inverse}}, args.vocab, masses);
    return {usable, tiles_total(masses, args.vocab)};
  }
  __device__ residual_draw locate_residual(std::int32_t i, double inverse, double u, bool usable) {
    const located s = block_locate(block_residual_weight<T>{target(i), draft(i), {inverse}}, args.vocab, masses, usable, u, sh);
    if (s.status == row_status::no_mass) return {sample_target(i, u), true};
    return {s, false};
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
