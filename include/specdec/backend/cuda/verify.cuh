//! \file backend/cuda/verify.cuh
//! \brief Chain verification on the GPU: every rule, ragged batches, per-request streams, the output
//! format and status flags of seq (backend/seq/verify.hpp), and the same tokens for the same streams.
//!
//! Rejection rules (strict, lenient, any rule with __host__ __device__ `accepts`/`accepted_mass`):
//!  1. `plan_rejection`: one thread per request walks its drafts on two gathered scalars per
//!     position (p(x), q(x)), with the accept uniform of stream (position, accept); it records where
//!     the request stops and whether a residual or a bonus is needed. No row is read whole.
//!  2. `residual_tiles`: the one row pair per request that is needed, split into tiles of 2048 with
//!     one warp per tile over as many blocks as there are tiles (so B = 1 still fills the GPU): the
//!     residual's tile masses, p's tile masses (the zero-residual fallback costs no second read) and
//!     flags, in the order of the sampling contract (sampling/categorical.hpp, rules 2-3).
//!  3. `locate_rejection`: one warp per request locates u * Z (rules 4-6) re-reading one tile, and
//!     writes the tokens, the accepted count and the status.
//! Greedy and sample-and-match need the target's argmax or sample at every position up to the first
//! mismatch; the GPU computes them for all n_b + 1 positions at once (one read of every target row,
//! where seq stops at the mismatch), then one thread per request walks the results.
//! `verify_options::check_normalisation` adds one pass summing every row (any order: the tolerance
//! dwarfs the rounding).
//! Memory: `verify_workspace_bytes` then a caller-owned device workspace (CUB's two-phase pattern),
//! or the overload that allocates on the stream. Inputs and outputs (the spans of `chain_batch` and
//! `chain_outputs`) are device memory; the layout and the streams are host objects, uploaded once.
//! Kernels never trap: bad rows and ids become status flags, and no id outside [0, V) is written.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/cuda/categorical.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/warp.cuh"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::cuda {

namespace detail {

inline constexpr int tile_warps_per_block = 4;  //!< pass 1: warps (tiles) per block

//! A request as the kernels see it.
struct request_desc {
  std::int64_t draft_row0 = 0;   //!< its first draft row
  std::int64_t target_row0 = 0;  //!< its first target row
  std::int32_t num_drafts = 0;
  std::int32_t first_job = 0;    //!< its first row job (greedy, sample-and-match: n_b + 1 jobs)
  random::request_stream stream;
};

//! A row job of greedy and sample-and-match: target row i of request b.
struct job_desc {
  std::int32_t request = 0;
  std::int32_t position = 0;
};

//! What a rejection-rule request needs after its scalar walk.
enum class stop_kind : std::uint8_t { none, residual, residual_q_zero, bonus };

struct request_plan {
  std::int32_t stop = 0;  //!< the position of the correction or bonus (= accepted drafts)
  verify_status status = verify_status::ok;
  stop_kind kind = stop_kind::none;
};

//! Per-tile flags of pass 1.
enum tile_flag : std::uint32_t {
  weights_usable = 1u,  //!< every weight of the tile is >= 0 and finite
  q_positive = 2u,      //!< some q_v > 0 (residual jobs)
  p_positive = 4u,      //!< some p_v > 0 (greedy jobs)
};

//! The result of one row job (greedy: argmax; sample-and-match: the target's sample).
struct job_result {
  token_id token = no_token;
  row_status status = row_status::no_mass;
};

//! Everything the kernels read and write, by value.
template <class T>
struct verify_view {
  const T* target = nullptr;
  const T* draft = nullptr;
  const token_id* draft_tokens = nullptr;
  std::size_t vocab = 0;
  std::size_t tiles = 0;
  std::int32_t batch = 0;
  std::int32_t jobs = 0;
  const request_desc* requests = nullptr;
  const job_desc* job_list = nullptr;
  request_plan* plans = nullptr;
  double* tile_mass = nullptr;    //!< [jobs][tiles]
  double* p_tile_mass = nullptr;  //!< [jobs][tiles], rejection rules: p's masses for the fallback
  std::uint32_t* tile_flags = nullptr;
  arg_best* tile_best = nullptr;  //!< [jobs][tiles], greedy
  job_result* results = nullptr;  //!< [jobs]
  const double* row_sums = nullptr;  //!< [target rows + draft rows] when normalisation is checked
  std::int64_t num_target_rows = 0;
  double tolerance = 0.0;
  token_id* out_tokens = nullptr;
  std::int32_t* out_accepted = nullptr;
  verify_status* out_status = nullptr;
  std::size_t out_stride = 0;

  __device__ const T* target_row(std::int64_t row) const { return target + static_cast<std::size_t>(row) * vocab; }
  __device__ const T* draft_row(std::int64_t row) const { return draft + static_cast<std::size_t>(row) * vocab; }
  __device__ bool normalised(std::int64_t sum_index) const {
    return row_sums == nullptr || fabs(row_sums[sum_index] - 1.0) <= tolerance;
  }
  //! Some drafted id of request b lies outside [0, V) (seq refuses the whole request).
  __device__ bool has_bad_draft(const request_desc& r) const {
    for (std::int32_t i = 0; i < r.num_drafts; ++i)
      if (!in_vocabulary(draft_tokens[r.draft_row0 + i], vocab)) return true;
    return false;
  }
};

__device__ inline bool usable_scalar(double v) { return specdec::detail::usable_weight(v); }

// ---- rejection rules ------------------------------------------------------------------------------

//! Step 1: the scalar walk of seq's verify_one, one thread per request.
template <class Rule, class T>
__global__ void plan_rejection(Rule rule, verify_view<T> a) {
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= a.batch) return;
  const request_desc r = a.requests[b];
  request_plan plan;
  if (a.has_bad_draft(r)) {
    plan.status = verify_status::bad_draft_token;
    a.plans[b] = plan;
    return;
  }
  // The scalars p(x_i), q(x_i) are gathered `chunk` positions at a time, so that their loads overlap
  // (the walk itself is sequential).
  constexpr std::int32_t chunk = 8;
  double pxs[chunk], qxs[chunk];
  for (std::int32_t i = 0;; ++i) {
    plan.stop = i;
    if (!a.normalised(r.target_row0 + i)) {
      plan.status |= verify_status::not_normalised;
      break;
    }
    if (i == r.num_drafts) {
      plan.kind = stop_kind::bonus;
      break;
    }
    if (!a.normalised(a.num_target_rows + r.draft_row0 + i)) {
      plan.status |= verify_status::not_normalised;
      break;
    }
    if (i % chunk == 0) {
#pragma unroll
      for (std::int32_t k = 0; k < chunk; ++k)
        if (i + k < r.num_drafts) {
          const token_id y = a.draft_tokens[r.draft_row0 + i + k];
          pxs[k] = static_cast<double>(a.target_row(r.target_row0 + i + k)[y]);
          qxs[k] = static_cast<double>(a.draft_row(r.draft_row0 + i + k)[y]);
        }
    }
    const double px = pxs[i % chunk], qx = qxs[i % chunk];
    if (!usable_scalar(px) || !usable_scalar(qx)) {
      plan.status |= verify_status::invalid_row;
      break;
    }
    if (qx == 0.0) {  // rejected; the residual pass checks that q has mass at all
      plan.status |= verify_status::draft_prob_zero;
      plan.kind = stop_kind::residual_q_zero;
      break;
    }
    const auto pos = static_cast<std::uint32_t>(i);
    if (!rule.accepts(px, qx, r.stream.open(pos, random::purpose::accept).uniform())) {
      plan.kind = stop_kind::residual;
      break;
    }
  }
  a.plans[b] = plan;
}

//! The warp and tile a pass-1 thread works on: blocks of `tile_warps_per_block` warps, grouped by job.
struct tile_task {
  std::int32_t job;
  std::size_t tile;
  __device__ static tile_task of(std::size_t tiles) {
    const std::size_t blocks_per_job = (tiles + tile_warps_per_block - 1) / tile_warps_per_block;
    const std::size_t warp = threadIdx.x / warp_size;
    return {static_cast<std::int32_t>(blockIdx.x / blocks_per_job), (blockIdx.x % blocks_per_job) * tile_warps_per_block + warp};
  }
};

//! Step 2: one warp per tile of each request's residual (or bonus) row pair.
template <class Rule, class T>
__global__ void residual_tiles(Rule rule, verify_view<T> a) {
  const tile_task task = tile_task::of(a.tiles);
  if (task.tile >= a.tiles) return;  // the whole warp leaves together
  const request_plan plan = a.plans[task.job];
  if (plan.kind == stop_kind::none) return;
  const request_desc r = a.requests[task.job];
  const T* p = a.target_row(r.target_row0 + plan.stop);
  const tile_range tile = tile_range::of(task.tile, a.vocab);
  const std::size_t at = static_cast<std::size_t>(task.job) * a.tiles + task.tile;
  bool usable = true;
  if (plan.kind == stop_kind::bonus) {
    const double m = warp_tile_mass(row_weight<T>{p}, tile, usable);
    usable = warp_all(usable);
    if (lane_id() == 0) {
      a.tile_mass[at] = m;
      a.tile_flags[at] = usable ? weights_usable : 0u;
    }
    return;
  }
  const T* q = a.draft_row(r.draft_row0 + plan.stop);
  const residual_weight_of<T, Rule> residual{p, q, {rule}};
  double residual_acc = 0.0, p_acc = 0.0;
  bool q_has_mass = false;
  for_lane_entries(tile, [&](std::size_t v) {
    const double w = residual(v);
    usable = usable & specdec::detail::usable_weight(w);
    residual_acc += w;
    p_acc += static_cast<double>(p[v]);
    q_has_mass = q_has_mass | (static_cast<double>(q[v]) > 0.0);
  });
  const double m = reduce_lanes(residual_acc), pm = reduce_lanes(p_acc);
  usable = warp_all(usable);
  q_has_mass = warp_any(q_has_mass);
  if (lane_id() == 0) {
    a.tile_mass[at] = m;
    a.p_tile_mass[at] = pm;
    a.tile_flags[at] = (usable ? weights_usable : 0u) | (q_has_mass ? q_positive : 0u);
  }
}

//! The union (`any`) or intersection (!any) of a flag over a job's tiles.
template <class T>
__device__ bool tile_flag_over(const verify_view<T>& a, std::int32_t job, std::uint32_t flag, bool any) {
  bool result = !any;
  for (std::size_t t = 0; t < a.tiles; ++t) {
    const bool set = (a.tile_flags[static_cast<std::size_t>(job) * a.tiles + t] & flag) != 0;
    result = any ? (result || set) : (result && set);
  }
  return result;
}

//! Writes request b's output row: its accepted drafts, then `correction` at `stop`, then -1.
template <class T>
__device__ void write_outputs(const verify_view<T>& a, std::int32_t b, const request_desc& r, std::int32_t stop,
                              token_id correction, verify_status status) {
  token_id* row = a.out_tokens + static_cast<std::size_t>(b) * a.out_stride;
  for (std::size_t j = static_cast<std::size_t>(lane_id()); j < a.out_stride; j += warp_size) {
    const auto i = static_cast<std::int32_t>(j);
    row[j] = i < stop ? a.draft_tokens[r.draft_row0 + i] : (i == stop ? correction : no_token);
  }
  if (lane_id() == 0) {
    a.out_accepted[b] = stop;
    a.out_status[b] = status;
  }
}

//! Step 3: one warp per request locates its correction or bonus token.
template <class Rule, class T>
__global__ void locate_rejection(Rule rule, verify_view<T> a) {
  __shared__ double shared[locate_shared_doubles];
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x);
  const request_desc r = a.requests[b];
  const request_plan plan = a.plans[b];
  verify_status status = plan.status;
  token_id token = no_token;
  if (plan.kind != stop_kind::none) {
    const T* p = a.target_row(r.target_row0 + plan.stop);
    const double* masses = a.tile_mass + static_cast<std::size_t>(b) * a.tiles;
    const bool usable = tile_flag_over(a, b, weights_usable, false);
    const double u = r.stream.open(static_cast<std::uint32_t>(plan.stop), random::purpose::resample).uniform();
    located found;
    if (plan.kind == stop_kind::bonus) {
      found = warp_locate(row_weight<T>{p}, a.vocab, masses, usable, u, shared);
    } else if (plan.kind == stop_kind::residual_q_zero && !tile_flag_over(a, b, q_positive, true)) {
      found.status = row_status::not_finite;  // q has no mass at all: an unusable row (status.hpp)
    } else {
      const T* q = a.draft_row(r.draft_row0 + plan.stop);
      found = warp_locate(residual_weight_of<T, Rule>{p, q, {rule}}, a.vocab, masses, usable, u, shared);
      if (found.status == row_status::no_mass) {  // p == q up to rounding: sample p itself (flagged)
        status |= verify_status::residual_fallback;
        found = warp_locate(row_weight<T>{p}, a.vocab, a.p_tile_mass + static_cast<std::size_t>(b) * a.tiles, true, u, shared);
      }
    }
    if (found.status == row_status::ok && in_vocabulary(found.token, a.vocab))
      token = found.token;
    else
      status |= verify_status::invalid_row;
  }
  write_outputs(a, b, r, plan.stop, token, status);
}

// ---- greedy and sample-and-match ------------------------------------------------------------------

//! Pass 1 of the row jobs: tile masses of p (sample-and-match) or the tile's argmax and flags (greedy).
template <rule_family Family, class T>
__global__ void target_tiles(verify_view<T> a) {
  const tile_task task = tile_task::of(a.tiles);
  if (task.tile >= a.tiles || task.job >= a.jobs) return;
  const job_desc job = a.job_list[task.job];
  const T* p = a.target_row(a.requests[job.request].target_row0 + job.position);
  const tile_range tile = tile_range::of(task.tile, a.vocab);
  const std::size_t at = static_cast<std::size_t>(task.job) * a.tiles + task.tile;
  bool usable = true;
  if constexpr (Family == rule_family::sample_and_match) {
    const double m = warp_tile_mass(row_weight<T>{p}, tile, usable);
    usable = warp_all(usable);
    if (lane_id() == 0) {
      a.tile_mass[at] = m;
      a.tile_flags[at] = usable ? weights_usable : 0u;
    }
  } else {
    arg_best best{0.0, -1};
    bool positive = false;
    for_lane_entries(tile, [&](std::size_t v) {
      const double x = static_cast<double>(p[v]);
      usable = usable & usable_scalar(x);  // seq's greedy_usable: no NaN, inf or negative entry
      positive = positive | (x > 0.0);
      best = better(best, arg_best{x, static_cast<long long>(v)});
    });
    best = warp_argmax(best);
    usable = warp_all(usable);
    positive = warp_any(positive);
    if (lane_id() == 0) {
      a.tile_best[at] = best;
      a.tile_flags[at] = (usable ? weights_usable : 0u) | (positive ? p_positive : 0u);
    }
  }
}

//! Pass 2 of the row jobs, one warp per job: the target's sample or argmax of that row.
template <rule_family Family, class T>
__global__ void locate_targets(verify_view<T> a) {
  __shared__ double shared[locate_shared_doubles];
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x);
  const job_desc job = a.job_list[j];
  const request_desc r = a.requests[job.request];
  job_result result;
  const bool usable = tile_flag_over(a, j, weights_usable, false);
  if constexpr (Family == rule_family::sample_and_match) {
    const double u = r.stream.open(static_cast<std::uint32_t>(job.position), random::purpose::target_sample).uniform();
    const located found = warp_locate(row_weight<T>{a.target_row(r.target_row0 + job.position)}, a.vocab,
                                      a.tile_mass + static_cast<std::size_t>(j) * a.tiles, usable, u, shared);
    result = {found.token, found.status};
  } else {
    arg_best best{0.0, -1};
    for (std::size_t t = 0; t < a.tiles; ++t) best = better(best, a.tile_best[static_cast<std::size_t>(j) * a.tiles + t]);
    if (usable && tile_flag_over(a, j, p_positive, true))
      result = {static_cast<token_id>(best.index), row_status::ok};
    else
      result = {no_token, row_status::not_finite};
  }
  if (lane_id() == 0) a.results[j] = result;
}

//! The walk of greedy and sample-and-match over the row results, one warp per request.
template <rule_family Family, class T>
__global__ void walk_targets(verify_view<T> a) {
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x);
  const request_desc r = a.requests[b];
  verify_status status = verify_status::ok;
  token_id correction = no_token;
  std::int32_t stop = 0;
  if (a.has_bad_draft(r)) {
    status = verify_status::bad_draft_token;
  } else {
    for (;; ++stop) {
      if (!a.normalised(r.target_row0 + stop)) {
        status |= verify_status::not_normalised;
        break;
      }
      const job_result y = a.results[r.first_job + stop];
      const bool bonus = stop == r.num_drafts;
      const bool ok = y.status == row_status::ok && in_vocabulary(y.token, a.vocab);
      if (Family == rule_family::greedy && !ok) {  // greedy: an unusable row stops the walk
        status |= verify_status::invalid_row;
        break;
      }
      if (!bonus && ok && y.token == a.draft_tokens[r.draft_row0 + stop]) continue;
      if (ok)
        correction = y.token;
      else
        status |= verify_status::invalid_row;
      break;
    }
  }
  write_outputs(a, b, r, stop, correction, status);
}

// ---- normalisation check --------------------------------------------------------------------------

//! Sums every target row, then every draft row (one block per row), for `check_normalisation`.
template <class T>
__global__ void row_sums(const T* target, std::int64_t target_rows, const T* draft, std::size_t vocab, double* sums) {
  __shared__ double partial[warp_size];
  const std::int64_t row = blockIdx.x;
  const T* x = row < target_rows ? target + static_cast<std::size_t>(row) * vocab
                                 : draft + static_cast<std::size_t>(row - target_rows) * vocab;
  double s = 0.0;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) s += static_cast<double>(x[v]);
  s = reduce_lanes(s);
  if (lane_id() == 0) partial[threadIdx.x / warp_size] = s;
  __syncthreads();
  if (threadIdx.x < warp_size) {
    s = threadIdx.x < blockDim.x / warp_size ? partial[threadIdx.x] : 0.0;
    s = reduce_lanes(s);
    if (threadIdx.x == 0) sums[row] = s;
  }
}

// ---- host side ------------------------------------------------------------------------------------

//! The workspace parts of one verification, taken in a fixed order from a `workspace_plan`.
template <class T>
struct verify_parts {
  std::size_t batch, jobs, tiles, rows;
  bool rejection, greedy, check;

  static verify_parts of(const chain_batch<T>& batch, rule_family family, const verify_options& options) {
    const std::size_t B = batch.layout.batch_size();
    const bool rejection = family == rule_family::rejection;
    std::size_t row_jobs = 0;  // greedy, sample-and-match: n_b + 1 per request
    for (std::size_t b = 0; b < B; ++b) row_jobs += batch.layout.num_drafts(b) + 1;
    return {B,
            rejection ? B : row_jobs,
            specdec::detail::tile_count(batch.vocab_size),
            batch.layout.num_target_rows() + (batch.draft_rows.empty() ? 0 : batch.layout.num_draft_rows()),
            rejection,
            family == rule_family::greedy,
            options.check_normalisation};
  }
  //! Takes the parts (null pointers while counting) into `view`.
  void take(workspace_plan& plan, verify_view<T>& view, request_desc*& requests, job_desc*& job_list) const {
    requests = plan.take<request_desc>(batch);
    job_list = rejection ? nullptr : plan.take<job_desc>(jobs);
    view.plans = rejection ? plan.take<request_plan>(batch) : nullptr;
    view.tile_mass = greedy ? nullptr : plan.take<double>(jobs * tiles);
    view.p_tile_mass = rejection ? plan.take<double>(jobs * tiles) : nullptr;
    view.tile_flags = plan.take<std::uint32_t>(jobs * tiles);
    view.tile_best = greedy ? plan.take<arg_best>(jobs * tiles) : nullptr;
    view.results = rejection ? nullptr : plan.take<job_result>(jobs);
    view.row_sums = check ? plan.take<double>(rows) : nullptr;
  }
};

}  // namespace detail

//! Device bytes `verify` needs for this batch shape, rule family and options.
template <AcceptanceRule Rule, class T>
std::size_t verify_workspace_bytes(const Rule&, const chain_batch<T>& batch, const verify_options& options = {}) {
  workspace_plan plan;
  detail::verify_view<T> view;
  detail::request_desc* requests = nullptr;
  detail::job_desc* jobs = nullptr;
  detail::verify_parts<T>::of(batch, Rule::family, options).take(plan, view, requests, jobs);
  return plan.bytes();
}

//! Chain verification on `stream` with a caller-owned device `workspace` of at least
//! `verify_workspace_bytes(rule, batch, options)` bytes. The spans of `batch` and `out` are device
//! memory; `streams` (one per request) and the layout are host memory. Asynchronous: the outputs are
//! ready when the stream is.
//! \throws specdec::error on shape mismatches or a small workspace; specdec::cuda_error on CUDA errors.
template <AcceptanceRule Rule, class T>
void verify(cudaStream_t stream, const Rule& rule, const chain_batch<T>& batch,
            std::span<const random::request_stream> streams, const chain_outputs& out, std::span<std::byte> workspace,
            const verify_options& options = {}) {
  seq::detail::check_shapes(batch, reads_draft_distribution<Rule>, streams, out);
  const std::size_t B = batch.layout.batch_size();
  if (B == 0) return;
  const auto parts = detail::verify_parts<T>::of(batch, Rule::family, options);
  workspace_plan plan(workspace);
  detail::verify_view<T> a;
  detail::request_desc* requests = nullptr;
  detail::job_desc* job_list = nullptr;
  parts.take(plan, a, requests, job_list);

  // The per-request table (and the row jobs), built on the host and uploaded once.
  std::vector<detail::request_desc> host_requests(B);
  std::vector<detail::job_desc> host_jobs;
  for (std::size_t b = 0; b < B; ++b) {
    const auto n = static_cast<std::int32_t>(batch.layout.num_drafts(b));
    host_requests[b] = {static_cast<std::int64_t>(batch.layout.draft_row(b, 0)),
                        static_cast<std::int64_t>(batch.layout.target_row(b, 0)), n,
                        static_cast<std::int32_t>(host_jobs.size()), streams[b]};
    if (!parts.rejection)
      for (std::int32_t i = 0; i <= n; ++i) host_jobs.push_back({static_cast<std::int32_t>(b), i});
  }
  copy_to_device(requests, host_requests.data(), B, stream);
  copy_to_device(job_list, host_jobs.data(), host_jobs.size(), stream);

  a.target = batch.target_rows.data();
  a.draft = batch.draft_rows.data();
  a.draft_tokens = batch.draft_tokens.data();
  a.vocab = batch.vocab_size;
  a.tiles = parts.tiles;
  a.batch = static_cast<std::int32_t>(B);
  a.jobs = static_cast<std::int32_t>(parts.jobs);
  a.requests = requests;
  a.job_list = job_list;
  a.num_target_rows = static_cast<std::int64_t>(batch.layout.num_target_rows());
  a.tolerance = options.normalisation_tolerance;
  a.out_tokens = out.tokens.data();
  a.out_accepted = out.num_accepted.data();
  a.out_status = out.status.data();
  a.out_stride = batch.layout.max_drafts() + 1;

  if (options.check_normalisation) {
    detail::row_sums<<<static_cast<unsigned>(parts.rows), 256, 0, stream>>>(a.target, a.num_target_rows, a.draft,
                                                                             a.vocab, const_cast<double*>(a.row_sums));
    check_launch("row_sums");
  }
  const std::size_t tile_blocks = (parts.tiles + detail::tile_warps_per_block - 1) / detail::tile_warps_per_block;
  const auto pass1_grid = static_cast<unsigned>(tile_blocks * parts.jobs);
  constexpr unsigned pass1_block = detail::tile_warps_per_block * detail::warp_size;
  if constexpr (Rule::family == rule_family::rejection) {
    detail::plan_rejection<<<static_cast<unsigned>((B + 127) / 128), 128, 0, stream>>>(rule, a);
    check_launch("plan_rejection");
    detail::residual_tiles<<<pass1_grid, pass1_block, 0, stream>>>(rule, a);
    check_launch("residual_tiles");
    detail::locate_rejection<<<static_cast<unsigned>(B), detail::warp_size, 0, stream>>>(rule, a);
    check_launch("locate_rejection");
  } else {
    detail::target_tiles<Rule::family><<<pass1_grid, pass1_block, 0, stream>>>(a);
    check_launch("target_tiles");
    detail::locate_targets<Rule::family><<<static_cast<unsigned>(parts.jobs), detail::warp_size, 0, stream>>>(a);
    check_launch("locate_targets");
    detail::walk_targets<Rule::family><<<static_cast<unsigned>(B), detail::warp_size, 0, stream>>>(a);
    check_launch("walk_targets");
  }
}

//! `verify` with a workspace allocated (and freed) on `stream`.
template <AcceptanceRule Rule, class T>
void verify(cudaStream_t stream, const Rule& rule, const chain_batch<T>& batch,
            std::span<const random::request_stream> streams, const chain_outputs& out, const verify_options& options = {}) {
  device_buffer workspace(verify_workspace_bytes(rule, batch, options), stream);
  verify(stream, rule, batch, streams, out, workspace.span(), options);
}

}  // namespace specdec::backend::cuda
