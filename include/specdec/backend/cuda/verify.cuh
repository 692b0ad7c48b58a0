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

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/cuda/categorical.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
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
  std::int32_t first_job = 0;  //!< its first row job (greedy, sample-and-match: n_b + 1 jobs)
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

//! Rows given as probabilities: the weight of entry v is the entry itself.
template <class T>
struct probability_rows {
  const T* target = nullptr;
  const T* draft = nullptr;
  std::size_t vocab = 0;
  __device__ row_weight<T> target_row(std::int64_t row) const { return {target + static_cast<std::size_t>(row) * vocab}; }
  __device__ row_weight<T> draft_row(std::int64_t row) const { return {draft + static_cast<std::size_t>(row) * vocab}; }
  __device__ bool target_usable(std::int64_t) const { return true; }
  __device__ bool draft_usable(std::int64_t) const { return true; }
};

//! A logit row's top-k / top-p / min-p result in the fused path (a few scalars per row, never a
//! row): filter.cuh's threshold key and 1 / kept mass, as `warp_logits` computes them.
struct row_filter {
  std::uint32_t filtered = 0;  //!< 1: the row's request sets a filter (and T > 0)
  std::uint32_t tau = 0;       //!< keep the float probabilities whose key is >= tau
  double inv_kept = 0.0;       //!< 1 / (the mass kept), `kept_inverse`
};

//! The probability of entry v of a logit row softmaxed at temperature T, computed exactly as
//! softmax.cuh writes it (`softmax_entry`, U(U(e_v) * (1 / S)), rounded to the row type as seq's
//! scratch row is); T = 0 is the one-hot row on the argmax (filters ignored, as seq). A filtered row
//! gives w_v = `filtered_prob(p_v, tau, 1 / kept)` on p_v = `softmax_entry<float>`: the float
//! probability `warp_logits` (filter.cuh) writes for it. Never stored: the fused path of
//! `verify_from_logits`.
template <class T>
struct softmax_weight {
  const T* x;
  softmax_row stats;
  double temperature;
  row_filter filter;
  double inv_t, inv_sum;  //!< 1 / T and 1 / S, once per row (`of`)
  __device__ static softmax_weight of(const T* x, const softmax_row& stats, double temperature, const row_filter& filter) {
    return {x, stats, temperature, filter, 1.0 / temperature, 1.0 / stats.sum};
  }
  __device__ double operator()(std::size_t v) const {
    if (temperature == 0.0) return static_cast<long long>(v) == stats.argmax ? 1.0 : 0.0;
    if (filter.filtered == 0) return static_cast<double>(softmax_entry<T>(x[v], stats.max, temperature, inv_t, inv_sum));
    const float p = softmax_entry<float>(x[v], stats.max, temperature, inv_t, inv_sum);
    return static_cast<double>(filtered_prob(p, filter.tau, filter.inv_kept));
  }
};

//! Rows given as logits, with each row's softmax statistics, temperature and filter result from the
//! first passes.
template <class T>
struct logit_rows {
  const T* target = nullptr;
  const T* draft = nullptr;
  std::size_t vocab = 0;
  const softmax_row* target_stats = nullptr;
  const softmax_row* draft_stats = nullptr;
  const double* target_temperature = nullptr;
  const double* draft_temperature = nullptr;
  const row_filter* target_filter = nullptr;
  const row_filter* draft_filter = nullptr;
  __device__ softmax_weight<T> target_row(std::int64_t row) const {
    return softmax_weight<T>::of(target + static_cast<std::size_t>(row) * vocab, target_stats[row], target_temperature[row],
                                 target_filter[row]);
  }
  __device__ softmax_weight<T> draft_row(std::int64_t row) const {
    return softmax_weight<T>::of(draft + static_cast<std::size_t>(row) * vocab, draft_stats[row], draft_temperature[row],
                                 draft_filter[row]);
  }
  __device__ bool target_usable(std::int64_t row) const { return target_stats[row].status == row_status::ok; }
  __device__ bool draft_usable(std::int64_t row) const { return draft_stats[row].status == row_status::ok; }
};

//! Everything the kernels read and write, by value; `Rows` gives the weight of each row's entries.
template <class Rows>
struct verify_view {
  Rows rows;
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
  arg_best* tile_best = nullptr;     //!< [jobs][tiles], greedy
  job_result* results = nullptr;     //!< [jobs]
  const double* row_sums = nullptr;  //!< [target rows + draft rows] when normalisation is checked
  std::int64_t num_target_rows = 0;
  double tolerance = 0.0;
  token_id* out_tokens = nullptr;
  std::int32_t* out_accepted = nullptr;
  verify_status* out_status = nullptr;
  std::size_t out_stride = 0;

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
template <class Rule, class Rows>
__global__ void plan_rejection(Rule rule, verify_view<Rows> a) {
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
    if (!a.rows.target_usable(r.target_row0 + i)) {
      plan.status |= verify_status::invalid_row;
      break;
    }
    if (!a.normalised(r.target_row0 + i)) {
      plan.status |= verify_status::not_normalised;
      break;
    }
    if (i == r.num_drafts) {
      plan.kind = stop_kind::bonus;
      break;
    }
    if (!a.rows.draft_usable(r.draft_row0 + i)) {
      plan.status |= verify_status::invalid_row;
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
          pxs[k] = a.rows.target_row(r.target_row0 + i + k)(static_cast<std::size_t>(y));
          qxs[k] = a.rows.draft_row(r.draft_row0 + i + k)(static_cast<std::size_t>(y));
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
template <class Rule, class Rows>
__global__ void residual_tiles(Rule rule, verify_view<Rows> a) {
  const tile_task task = tile_task::of(a.tiles);
  if (task.tile >= a.tiles) return;  // the whole warp leaves together
  const request_plan plan = a.plans[task.job];
  if (plan.kind == stop_kind::none) return;
  const request_desc r = a.requests[task.job];
  const auto p = a.rows.target_row(r.target_row0 + plan.stop);
  const tile_range tile = tile_range::of(task.tile, a.vocab);
  const std::size_t at = static_cast<std::size_t>(task.job) * a.tiles + task.tile;
  bool usable = true;
  if (plan.kind == stop_kind::bonus) {
    const double m = warp_tile_mass(p, tile, usable);
    usable = warp_all(usable);
    if (lane_id() == 0) {
      a.tile_mass[at] = m;
      a.tile_flags[at] = usable ? weights_usable : 0u;
    }
    return;
  }
  const auto q = a.rows.draft_row(r.draft_row0 + plan.stop);
  const residual_weight_of<decltype(p), decltype(q), Rule> residual{p, q, {rule}};
  double residual_acc = 0.0, p_acc = 0.0;
  bool q_has_mass = false;
  struct pair {
    double p, q;
  };
  for_lane_loaded(
      tile,
      [&](std::size_t v) {
        return pair{p(v), q(v)};
      },
      [&](std::size_t, pair x) {
        const double w = specdec::detail::residual_weight(x.p, x.q, residual.mass);  // = residual(v)
        usable = usable & specdec::detail::usable_weight(w);
        residual_acc += w;
        p_acc += x.p;
        q_has_mass = q_has_mass | (x.q > 0.0);
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

//! The union (`any`) or intersection (!any) of a flag over a job's tiles, in every lane; called by
//! all 32 lanes of a warp (each lane reads every 32nd tile's flags, then a vote: one round of loads,
//! not one per tile).
template <class Rows>
__device__ bool tile_flag_over(const verify_view<Rows>& a, std::int32_t job, std::uint32_t flag, bool any) {
  bool result = !any;
  for (std::size_t t = static_cast<std::size_t>(lane_id()); t < a.tiles; t += warp_size) {
    const bool set = (a.tile_flags[static_cast<std::size_t>(job) * a.tiles + t] & flag) != 0;
    result = any ? (result || set) : (result && set);
  }
  return any ? warp_any(result) : warp_all(result);
}

//! Writes request b's output row: its accepted drafts, then `correction` at `stop`, then -1.
template <class Rows>
__device__ void write_outputs(const verify_view<Rows>& a, std::int32_t b, const request_desc& r, std::int32_t stop,
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
template <class Rule, class Rows>
__global__ void locate_rejection(Rule rule, verify_view<Rows> a) {
  __shared__ double shared[locate_shared_doubles];
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x);
  const request_desc r = a.requests[b];
  const request_plan plan = a.plans[b];
  verify_status status = plan.status;
  token_id token = no_token;
  if (plan.kind != stop_kind::none) {
    const auto p = a.rows.target_row(r.target_row0 + plan.stop);
    const double* masses = a.tile_mass + static_cast<std::size_t>(b) * a.tiles;
    const bool usable = tile_flag_over(a, b, weights_usable, false);
    const double u = r.stream.open(static_cast<std::uint32_t>(plan.stop), random::purpose::resample).uniform();
    located found;
    if (plan.kind == stop_kind::bonus) {
      found = warp_locate(p, a.vocab, masses, usable, u, shared);
    } else if (plan.kind == stop_kind::residual_q_zero && !tile_flag_over(a, b, q_positive, true)) {
      found.status = row_status::not_finite;  // q has no mass at all: an unusable row (status.hpp)
    } else {
      const auto q = a.rows.draft_row(r.draft_row0 + plan.stop);
      found = warp_locate(residual_weight_of<decltype(p), decltype(q), Rule>{p, q, {rule}}, a.vocab, masses, usable, u, shared);
      if (found.status == row_status::no_mass) {  // p == q up to rounding: sample p itself (flagged)
        status |= verify_status::residual_fallback;
        found = warp_locate(p, a.vocab, a.p_tile_mass + static_cast<std::size_t>(b) * a.tiles, true, u, shared);
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
template <rule_family Family, class Rows>
__global__ void target_tiles(verify_view<Rows> a) {
  const tile_task task = tile_task::of(a.tiles);
  if (task.tile >= a.tiles || task.job >= a.jobs) return;
  const job_desc job = a.job_list[task.job];
  const auto p = a.rows.target_row(a.requests[job.request].target_row0 + job.position);
  const tile_range tile = tile_range::of(task.tile, a.vocab);
  const std::size_t at = static_cast<std::size_t>(task.job) * a.tiles + task.tile;
  bool usable = true;
  if constexpr (Family == rule_family::sample_and_match) {
    const double m = warp_tile_mass(p, tile, usable);
    usable = warp_all(usable);
    if (lane_id() == 0) {
      a.tile_mass[at] = m;
      a.tile_flags[at] = usable ? weights_usable : 0u;
    }
  } else {
    arg_best best{0.0, -1};
    bool positive = false;
    for_lane_loaded(tile, p, [&](std::size_t v, double x) {
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
template <rule_family Family, class Rows>
__global__ void locate_targets(verify_view<Rows> a) {
  __shared__ double shared[locate_shared_doubles];
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x);
  const job_desc job = a.job_list[j];
  const request_desc r = a.requests[job.request];
  job_result result;
  const bool usable = tile_flag_over(a, j, weights_usable, false);
  if constexpr (Family == rule_family::sample_and_match) {
    const double u = r.stream.open(static_cast<std::uint32_t>(job.position), random::purpose::target_sample).uniform();
    const located found = warp_locate(a.rows.target_row(r.target_row0 + job.position), a.vocab,
                                      a.tile_mass + static_cast<std::size_t>(j) * a.tiles, usable, u, shared);
    result = {found.token, found.status};
  } else {
    arg_best best{0.0, -1};  // `better` keeps the lower index on ties: any reduction order gives seq's argmax
    for (std::size_t t = static_cast<std::size_t>(lane_id()); t < a.tiles; t += warp_size)
      best = better(best, a.tile_best[static_cast<std::size_t>(j) * a.tiles + t]);
    best = warp_argmax(best);
    if (usable && tile_flag_over(a, j, p_positive, true))
      result = {static_cast<token_id>(best.index), row_status::ok};
    else
      result = {no_token, row_status::not_finite};
  }
  if (lane_id() == 0) a.results[j] = result;
}

//! The walk of greedy and sample-and-match over the row results, one warp per request.
template <rule_family Family, class Rows>
__global__ void walk_targets(verify_view<Rows> a) {
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x);
  const request_desc r = a.requests[b];
  verify_status status = verify_status::ok;
  token_id correction = no_token;
  std::int32_t stop = 0;
  if (a.has_bad_draft(r)) {
    status = verify_status::bad_draft_token;
  } else {
    for (;; ++stop) {
      if (!a.rows.target_usable(r.target_row0 + stop)) {
        status |= verify_status::invalid_row;
        break;
      }
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

//! The fused path searches the thresholds of at most this many filtered rows at a time, so that its
//! search histograms (2 x 24 KiB per row, filter.cuh) are a fixed scratch, not a per-row cost.
inline constexpr std::size_t filter_group_rows = 256;

//! The workspace parts of one verification, taken in a fixed order from a `workspace_plan`.
struct verify_parts {
  std::size_t batch = 0, jobs = 0, tiles = 0, sum_rows = 0, target_rows = 0, draft_rows = 0, chunks = 0;
  std::size_t group_rows = 0;     //!< the fused path: rows of a filter group (`filter_group_rows` at most)
  std::size_t filter_chunks = 0;  //!< the fused path: float chunks of a row (filter.cuh's kept sums)
  bool rejection = false, greedy = false;
  bool logits = false;  //!< the fused path: per-row temperatures, softmax partials and statistics, filters

  template <class T>
  static verify_parts of(const chain_batch<T>& batch, rule_family family, const verify_options& options, bool logits) {
    verify_parts p;
    p.batch = batch.layout.batch_size();
    p.rejection = family == rule_family::rejection;
    p.greedy = family == rule_family::greedy;
    p.logits = logits;
    for (std::size_t b = 0; b < p.batch; ++b) p.jobs += p.rejection ? 1 : batch.layout.num_drafts(b) + 1;
    p.tiles = specdec::detail::tile_count(batch.vocab_size);
    p.target_rows = batch.layout.num_target_rows();
    p.draft_rows = batch.draft_rows.empty() ? 0 : batch.layout.num_draft_rows();
    // Warped rows are normalised by construction, so the fused path has nothing to check.
    p.sum_rows = options.check_normalisation && !logits ? p.target_rows + p.draft_rows : 0;
    p.chunks = logits ? chunk_count<T>(batch.vocab_size) : 0;
    // Filters are per request and the byte count must not depend on them: room for a full group.
    p.group_rows = logits ? std::min(filter_group_rows, p.target_rows + p.draft_rows) : 0;
    p.filter_chunks = logits ? chunk_count<float>(batch.vocab_size) : 0;
    return p;
  }
  //! Where the parts went (null pointers while counting).
  struct pointers {
    request_desc* requests;
    job_desc* jobs;
    request_plan* plans;
    double *tile_mass, *p_tile_mass, *row_sums, *temperatures;
    std::uint32_t* tile_flags;
    arg_best* tile_best;
    job_result* results;
    softmax_partial* partials;
    softmax_row* stats;
    row_filter* filters;         //!< [target rows + draft rows]
    std::int64_t* group_row_of;  //!< [group_rows]: the logit row of each search row of a group
    select_parts select;         //!< a group's search states and histograms
    double* kept;                //!< [group_rows][filter_chunks]: a group's kept mass per chunk
  };
  pointers take(workspace_plan& plan) const {
    pointers w{};
    w.requests = plan.take<request_desc>(batch);
    w.jobs = rejection ? nullptr : plan.take<job_desc>(jobs);
    w.plans = rejection ? plan.take<request_plan>(batch) : nullptr;
    w.tile_mass = greedy ? nullptr : plan.take<double>(jobs * tiles);
    w.p_tile_mass = rejection ? plan.take<double>(jobs * tiles) : nullptr;
    w.tile_flags = plan.take<std::uint32_t>(jobs * tiles);
    w.tile_best = greedy ? plan.take<arg_best>(jobs * tiles) : nullptr;
    w.results = rejection ? nullptr : plan.take<job_result>(jobs);
    w.row_sums = sum_rows > 0 ? plan.take<double>(sum_rows) : nullptr;
    if (logits) {
      w.temperatures = plan.take<double>(target_rows + draft_rows);
      w.partials = plan.take<softmax_partial>((target_rows + draft_rows) * chunks);
      w.stats = plan.take<softmax_row>(target_rows + draft_rows);
      w.filters = plan.take<row_filter>(target_rows + draft_rows);
      w.group_row_of = plan.take<std::int64_t>(group_rows);
      w.select = select_parts(plan, group_rows);
      w.kept = plan.take<double>(group_rows * filter_chunks);
    }
    return w;
  }
  std::size_t bytes() const {
    workspace_plan plan;
    (void)take(plan);
    return plan.bytes();
  }
};

//! Uploads the request table (and the row jobs) and fills the fields of `a` every path shares.
template <class Rows, class T>
void prepare(cudaStream_t stream, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
             const chain_outputs& out, const verify_parts& parts, const verify_parts::pointers& w, verify_view<Rows>& a) {
  const std::size_t B = parts.batch;
  std::vector<request_desc> host_requests(B);
  std::vector<job_desc> host_jobs;
  for (std::size_t b = 0; b < B; ++b) {
    const auto n = static_cast<std::int32_t>(batch.layout.num_drafts(b));
    host_requests[b] = {static_cast<std::int64_t>(batch.layout.draft_row(b, 0)),
                        static_cast<std::int64_t>(batch.layout.target_row(b, 0)), n, static_cast<std::int32_t>(host_jobs.size()),
                        streams[b]};
    if (!parts.rejection)
      for (std::int32_t i = 0; i <= n; ++i) host_jobs.push_back({static_cast<std::int32_t>(b), i});
  }
  copy_to_device(w.requests, host_requests.data(), B, stream);
  copy_to_device(w.jobs, host_jobs.data(), host_jobs.size(), stream);
  a.draft_tokens = batch.draft_tokens.data();
  a.vocab = batch.vocab_size;
  a.tiles = parts.tiles;
  a.batch = static_cast<std::int32_t>(B);
  a.jobs = static_cast<std::int32_t>(parts.jobs);
  a.requests = w.requests;
  a.job_list = w.jobs;
  a.plans = w.plans;
  a.tile_mass = w.tile_mass;
  a.p_tile_mass = w.p_tile_mass;
  a.tile_flags = w.tile_flags;
  a.tile_best = w.tile_best;
  a.results = w.results;
  a.row_sums = w.row_sums;
  a.num_target_rows = static_cast<std::int64_t>(parts.target_rows);
  a.out_tokens = out.tokens.data();
  a.out_accepted = out.num_accepted.data();
  a.out_status = out.status.data();
  a.out_stride = batch.layout.max_drafts() + 1;
}

//! Launches the kernels of `Rule`'s family on the prepared view.
template <class Rule, class Rows>
void launch(cudaStream_t stream, const Rule& rule, const verify_parts& parts, const verify_view<Rows>& a) {
  const std::size_t tile_blocks = (parts.tiles + tile_warps_per_block - 1) / tile_warps_per_block;
  const auto pass1_grid = static_cast<unsigned>(tile_blocks * parts.jobs);
  constexpr unsigned pass1_block = tile_warps_per_block * warp_size;
  const auto B = static_cast<unsigned>(parts.batch);
  if constexpr (Rule::family == rule_family::rejection) {
    plan_rejection<<<(B + 127) / 128, 128, 0, stream>>>(rule, a);
    check_launch("plan_rejection");
    residual_tiles<<<pass1_grid, pass1_block, 0, stream>>>(rule, a);
    check_launch("residual_tiles");
    locate_rejection<<<B, warp_size, 0, stream>>>(rule, a);
    check_launch("locate_rejection");
  } else {
    target_tiles<Rule::family><<<pass1_grid, pass1_block, 0, stream>>>(a);
    check_launch("target_tiles");
    locate_targets<Rule::family><<<static_cast<unsigned>(parts.jobs), warp_size, 0, stream>>>(a);
    check_launch("locate_targets");
    walk_targets<Rule::family><<<B, warp_size, 0, stream>>>(a);
    check_launch("walk_targets");
  }
}

//! The fused path's first pass: the softmax statistics of `rows` rows of logits at their temperatures
//! (softmax.cuh's partials, combined by one warp per row in its fixed order).
template <class T>
__global__ void softmax_stats(const softmax_partial* partials, std::size_t chunks, const double* temperature, std::size_t rows,
                              softmax_row* stats) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (row >= rows) return;  // whole warps
  const softmax_row r = combine_partials(partials + row * chunks, chunks, temperature[row]);
  if (lane_id() == 0) stats[row] = r;
}

template <class T>
void launch_softmax_stats(cudaStream_t stream, const T* logits, std::size_t rows, std::size_t vocab, const double* temperature,
                          softmax_partial* partials, softmax_row* stats) {
  if (rows == 0) return;
  softmax_partials_kernel<T>
      <<<row_chunk_grid<T>(rows, vocab), block_threads, 0, stream>>>(logits, vocab, chunk_count<T>(vocab), temperature, partials);
  check_launch("softmax_partials_kernel");
  constexpr unsigned warps = 8;
  softmax_stats<T><<<static_cast<unsigned>((rows + warps - 1) / warps), warps * warp_size, 0, stream>>>(
      partials, chunk_count<T>(vocab), temperature, rows, stats);
  check_launch("softmax_stats");
}

//! The fused path's filter results of one group of `rows` searched rows: one warp per row writes
//! filters[row_of[f]] = {1, tau, 1 / kept} (inv_kept 0 for a row the search found unusable: its
//! softmax status is not ok either, so its weights are never used). (A template, so that several
//! units may include this header.)
template <class Search>
__global__ void filter_results(const Search* search, const double* kept, std::size_t chunks, std::size_t rows,
                               const std::int64_t* row_of, row_filter* filters) {
  const std::size_t f = static_cast<std::size_t>(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (f >= rows) return;  // whole warps
  const Search r = search[f];
  const bool ok = r.status == row_status::ok && r.passthrough == 0;
  const double inv = ok ? kept_inverse(kept + f * chunks, chunks) : 0.0;  // (warp-uniform branch)
  if (lane_id() == 0) filters[row_of[f]] = row_filter{1u, ok ? r.tau : 0u, inv};
}

//! Host: the fused path's filters. Each row whose request sets top-k (k < V), top-p or min-p at a
//! temperature > 0 is searched as `warp_logits` searches it, reading its softmax probabilities on the
//! fly (`softmax_source`), in groups of `filter_group_rows`; `filters` gets every row's result.
template <class T>
void launch_filters(cudaStream_t stream, const softmax_source<T>& source, std::size_t vocab, const verify_parts& parts,
                    const verify_parts::pointers& w, std::span<const std::int64_t> row_of, std::span<const select_row> searches,
                    std::span<const row_filter> filters) {
  copy_to_device(w.filters, filters.data(), filters.size(), stream);
  for (std::size_t g = 0; g < row_of.size(); g += parts.group_rows) {
    const std::size_t n = std::min(parts.group_rows, row_of.size() - g);
    copy_to_device(w.group_row_of, row_of.data() + g, n, stream);
    run_select(stream, source, n, vocab, w.select, searches.subspan(g, n));
    run_kept_sum(stream, source, n, vocab, w.select.rows, w.kept);
    constexpr unsigned warps = 8;
    filter_results<<<static_cast<unsigned>((n + warps - 1) / warps), warps * warp_size, 0, stream>>>(
        w.select.rows, w.kept, parts.filter_chunks, n, w.group_row_of, w.filters);
    check_launch("filter_results");
  }
}

}  // namespace detail

//! Device bytes `verify` needs for this batch shape, rule family and options.
template <AcceptanceRule Rule, class T>
std::size_t verify_workspace_bytes(const Rule&, const chain_batch<T>& batch, const verify_options& options = {}) {
  return detail::verify_parts::of(batch, Rule::family, options, false).bytes();
}

//! Chain verification on `stream` with a caller-owned device `workspace` of at least
//! `verify_workspace_bytes(rule, batch, options)` bytes. The spans of `batch` and `out` are device
//! memory; `streams` (one per request) and the layout are host memory. Asynchronous: the outputs are
//! ready when the stream is.
//! \throws specdec::error on shape mismatches or a small workspace; specdec::cuda_error on CUDA errors.
template <AcceptanceRule Rule, class T>
void verify(cudaStream_t stream, const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, std::span<std::byte> workspace, const verify_options& options = {}) {
  seq::detail::check_shapes(batch, reads_draft_distribution<Rule>, streams, out);
  const auto parts = detail::verify_parts::of(batch, Rule::family, options, false);
  if (parts.batch == 0) return;
  workspace_plan plan(workspace);
  const auto w = parts.take(plan);
  detail::verify_view<detail::probability_rows<T>> a;
  a.rows = {batch.target_rows.data(), batch.draft_rows.data(), batch.vocab_size};
  a.tolerance = options.normalisation_tolerance;
  detail::prepare(stream, batch, streams, out, parts, w, a);
  if (parts.sum_rows > 0) {
    detail::row_sums<<<static_cast<unsigned>(parts.sum_rows), 256, 0, stream>>>(a.rows.target, a.num_target_rows, a.rows.draft,
                                                                                a.vocab, w.row_sums);
    check_launch("row_sums");
  }
  detail::launch(stream, rule, parts, a);
}

//! `verify` with a workspace allocated (and freed) on `stream`.
template <AcceptanceRule Rule, class T>
void verify(cudaStream_t stream, const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, const verify_options& options = {}) {
  seq::detail::check_shapes(batch, reads_draft_distribution<Rule>, streams, out);  // before allocating
  device_buffer workspace(verify_workspace_bytes(rule, batch, options), stream);
  verify(stream, rule, batch, streams, out, workspace.span(), options);
}

//! Device bytes `verify_from_logits` needs.
template <AcceptanceRule Rule, class T>
std::size_t verify_from_logits_workspace_bytes(const Rule&, const chain_batch<T>& logits_batch,
                                               const verify_options& options = {}) {
  return detail::verify_parts::of(logits_batch, Rule::family, options, true).bytes();
}

//! Chain verification from logits, fused: one pass computes every row's softmax statistics (maximum,
//! sum, argmax; a few doubles per row), and the verification then computes each probability it needs
//! on the fly from the logit, so no [rows][V] probabilities are ever written. Per-request
//! temperatures (T = 0: greedy's one-hot row, filters ignored as in seq) and filters: for a row whose
//! request sets top-k (k < V), top-p < 1 or min-p > 0 at T > 0, filter.cuh's radix select runs on the
//! row's float softmax probabilities read through `softmax_source` (groups of `filter_group_rows`
//! rows, fixed scratch) and leaves the row its threshold key and 1 / kept mass; its weights are then
//! exactly the float probabilities `backend::cuda::warp_logits` writes, so such rows give the tokens
//! of `warp_logits` followed by `verify` bit for bit (for float and double logits alike: filtered
//! rows of double logits are filtered and weighted in float, as `warp_logits` does). Rows without a
//! filter keep the softmax probabilities in the logit type, without `warp_logits`' renormalisation.
//! Agreement with seq: the probabilities are softmax.cuh's within its stated bound of seq's (filtered
//! rows: filter.cuh's bound, whose masks agree unless seq's probabilities sit within that bound of a
//! boundary; double logits with a filter add float rounding, 2^-24 relative, which can also tie or
//! cross a boundary), so tokens agree with seq except where a uniform, a cumulative sum or a filter
//! boundary falls within those bounds (tests/backend/cuda_verify.cu measures the agreement).
//! `check_normalisation` has nothing to check (warped rows are normalised by construction).
//! Otherwise as `verify`.
//! \throws specdec::error on shapes, invalid parameters (`specdec::validate`), or a small workspace.
template <AcceptanceRule Rule, class T>
void verify_from_logits(cudaStream_t stream, const Rule& rule, const chain_batch<T>& logits_batch,
                        std::span<const warp_params> target_params, std::span<const warp_params> draft_params,
                        std::span<const random::request_stream> streams, const chain_outputs& out, std::span<std::byte> workspace,
                        const verify_options& options = {}) {
  static_assert(detail::float_or_double<T>, "cuda verify_from_logits: float or double logits");
  seq::detail::check_shapes(logits_batch, reads_draft_distribution<Rule>, streams, out);
  const std::size_t B = logits_batch.layout.batch_size(), V = logits_batch.vocab_size;
  SPECDEC_EXPECTS(target_params.size() == B, "one warp_params per request is required");
  SPECDEC_EXPECTS(draft_params.empty() || draft_params.size() == B,
                  "draft_params must be empty (same as target) or one per request");
  for (const auto& w : target_params) validate(w);
  for (const auto& w : draft_params) validate(w);
  const auto parts = detail::verify_parts::of(logits_batch, Rule::family, options, true);
  if (B == 0) return;
  workspace_plan plan(workspace);
  const auto w = parts.take(plan);

  // One temperature and one filter entry per row: target rows first, then draft rows (padding rows
  // get T = 1 and no filter). Rows to search: T > 0 and some filter on (draft rows only when the rule
  // reads them).
  const std::size_t rows = parts.target_rows + parts.draft_rows;
  std::vector<double> temperatures(rows, 1.0);
  std::vector<detail::row_filter> filters(rows);
  std::vector<std::int64_t> searched;
  std::vector<detail::select_row> searches;
  const auto set_row = [&](std::size_t row, const warp_params& p, bool search) {
    temperatures[row] = p.temperature;
    const detail::select_row r = detail::select_row_for(p, V);
    if (!search || p.temperature == 0.0 || (r.top_k == 0 && r.top_p >= 1.0 && r.min_p <= 0.0)) return;
    filters[row].filtered = 1;
    searched.push_back(static_cast<std::int64_t>(row));
    searches.push_back(r);
  };
  for (std::size_t b = 0; b < B; ++b) {
    const warp_params& tp = target_params[b];
    const warp_params& dp = draft_params.empty() ? tp : draft_params[b];
    for (std::size_t i = 0; i <= logits_batch.layout.num_drafts(b); ++i) set_row(logits_batch.layout.target_row(b, i), tp, true);
    if (parts.draft_rows > 0)
      for (std::size_t i = 0; i < logits_batch.layout.num_drafts(b); ++i)
        set_row(parts.target_rows + logits_batch.layout.draft_row(b, i), dp, reads_draft_distribution<Rule>);
  }
  copy_to_device(w.temperatures, temperatures.data(), temperatures.size(), stream);
  detail::launch_softmax_stats(stream, logits_batch.target_rows.data(), parts.target_rows, V, w.temperatures, w.partials,
                               w.stats);
  detail::launch_softmax_stats(stream, logits_batch.draft_rows.data(), parts.draft_rows, V, w.temperatures + parts.target_rows,
                               w.partials + parts.target_rows * parts.chunks, w.stats + parts.target_rows);
  const detail::softmax_source<T> source{logits_batch.target_rows.data(),
                                         logits_batch.draft_rows.data(),
                                         static_cast<std::int64_t>(parts.target_rows),
                                         w.group_row_of,
                                         w.stats,
                                         w.temperatures};
  detail::launch_filters(stream, source, V, parts, w, searched, searches, filters);

  detail::verify_view<detail::logit_rows<T>> a;
  a.rows = {logits_batch.target_rows.data(),
            logits_batch.draft_rows.data(),
            V,
            w.stats,
            w.stats + parts.target_rows,
            w.temperatures,
            w.temperatures + parts.target_rows,
            w.filters,
            w.filters + parts.target_rows};
  detail::prepare(stream, logits_batch, streams, out, parts, w, a);
  detail::launch(stream, rule, parts, a);
}

//! `verify_from_logits` with a workspace allocated (and freed) on `stream`.
template <AcceptanceRule Rule, class T>
void verify_from_logits(cudaStream_t stream, const Rule& rule, const chain_batch<T>& logits_batch,
                        std::span<const warp_params> target_params, std::span<const warp_params> draft_params,
                        std::span<const random::request_stream> streams, const chain_outputs& out,
                        const verify_options& options = {}) {
  seq::detail::check_shapes(logits_batch, reads_draft_distribution<Rule>, streams, out);  // before allocating
  device_buffer workspace(verify_from_logits_workspace_bytes(rule, logits_batch, options), stream);
  verify_from_logits(stream, rule, logits_batch, target_params, draft_params, streams, out, workspace.span(), options);
}

}  // namespace specdec::backend::cuda
