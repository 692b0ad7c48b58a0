//! \file backend/cuda/kernels/verify.cuh
//! \brief The kernels of verify.cuh: the request and job descriptors, the rejection passes (`plan_rejection`,
//! `residual_tiles`, `locate_rejection`), the target passes (`target_tiles`, `locate_targets`, `walk_targets`), the
//! row sums and the fused path's softmax statistics and filter results. `plan_rejection` and `walk_targets` run the
//! chain walk seq runs (backend/walks/chain.hpp) through `plan_ops` and `target_walk_ops`; the kernels after the
//! plan draw the residual or bonus it asks for.
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
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/backend/walks/chain.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::cuda::detail {

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

using walks::chain_stop;

//! What a rejection-rule request needs after its walk (`walks::walk_rejection`).
struct request_plan {
  std::int32_t stop = 0;  //!< the position of the correction or bonus (= accepted drafts)
  verify_status status = verify_status::ok;
  chain_stop kind = chain_stop::none;  //!< none, residual, residual_q_zero or bonus
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
  //! A row's check from its usability and its sum: `invalid_row`, then `not_normalised` (seq's order).
  __device__ verify_status check_row(bool usable, std::int64_t sum_index) const {
    if (!usable) return verify_status::invalid_row;
    return normalised(sum_index) ? verify_status::ok : verify_status::not_normalised;
  }
  __device__ verify_status check_target(const request_desc& r, std::int32_t i) const {
    return check_row(rows.target_usable(r.target_row0 + i), r.target_row0 + i);
  }
  __device__ verify_status check_draft(const request_desc& r, std::int32_t i) const {
    return check_row(rows.draft_usable(r.draft_row0 + i), num_target_rows + r.draft_row0 + i);
  }
};

__device__ inline bool usable_scalar(double v) { return specdec::detail::usable_weight(v); }

// ---- rejection rules ------------------------------------------------------------------------------

//! The operations of `walks::walk_rejection` (backend/walks/chain.hpp) on one thread: the row checks
//! from the row flags and sums of the earlier passes, and the scalars p(x_i), q(x_i), gathered `chunk`
//! positions at a time so that their loads overlap (the walk itself is sequential). The correction or
//! bonus is drawn by `residual_tiles` and `locate_rejection`.
template <class Rows>
struct plan_ops {
  static constexpr std::int32_t chunk = 8;
  const verify_view<Rows>& view;
  const request_desc& r;
  double pxs[chunk], qxs[chunk];  // filled by `target_at` at every chunk's first position

  __device__ plan_ops(const verify_view<Rows>& v, const request_desc& req) : view(v), r(req) {}
  __device__ walks::row_scalar target_at(std::int32_t i, token_id) {
    const verify_status flags = view.check_target(r, i);
    if (flags != verify_status::ok) return {flags};
    if (i % chunk == 0) {
#pragma unroll
      for (std::int32_t k = 0; k < chunk; ++k)
        if (i + k < r.num_drafts) {
          const auto y = static_cast<std::size_t>(view.draft_tokens[r.draft_row0 + i + k]);
          pxs[k] = view.rows.target_row(r.target_row0 + i + k)(y);
          qxs[k] = view.rows.draft_row(r.draft_row0 + i + k)(y);
        }
    }
    return {verify_status::ok, pxs[i % chunk]};
  }
  //! \pre `target_at(i, x)` was the last scalar read
  __device__ walks::row_scalar draft_at(std::int32_t i, token_id) const {
    const verify_status flags = view.check_draft(r, i);
    if (flags != verify_status::ok) return {flags};
    return {verify_status::ok, qxs[i % chunk]};
  }
  __device__ verify_status check_bonus(std::int32_t n) const { return view.check_target(r, n); }
};

//! Step 1: the rejection rule's chain walk (`walks::walk_rejection`, the one seq runs), one thread per request.
template <class Rule, class Rows>
__global__ void plan_rejection(Rule rule, verify_view<Rows> view) {
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= view.batch) return;
  const request_desc r = view.requests[b];
  plan_ops<Rows> ops{view, r};
  const walks::chain_walk_result w =
      walks::walk_rejection(rule, ops, view.draft_tokens + r.draft_row0, r.num_drafts, view.vocab, r.stream);
  view.plans[b] = request_plan{w.stop, w.status, w.kind};
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
__global__ void residual_tiles(Rule rule, verify_view<Rows> view) {
  const tile_task task = tile_task::of(view.tiles);
  if (task.tile >= view.tiles) return;  // the whole warp leaves together
  const request_plan plan = view.plans[task.job];
  if (plan.kind == chain_stop::none) return;
  const request_desc r = view.requests[task.job];
  const auto p = view.rows.target_row(r.target_row0 + plan.stop);
  const tile_range tile = tile_range::of(task.tile, view.vocab);
  const std::size_t at = static_cast<std::size_t>(task.job) * view.tiles + task.tile;
  bool usable = true;
  if (plan.kind == chain_stop::bonus) {
    const double m = warp_tile_mass(p, tile, usable);
    usable = warp_all(usable);
    if (lane_id() == 0) {
      view.tile_mass[at] = m;
      view.tile_flags[at] = usable ? weights_usable : 0u;
    }
    return;
  }
  const auto q = view.rows.draft_row(r.draft_row0 + plan.stop);
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
    view.tile_mass[at] = m;
    view.p_tile_mass[at] = pm;
    view.tile_flags[at] = (usable ? weights_usable : 0u) | (q_has_mass ? q_positive : 0u);
  }
}

//! The union (`any`) or intersection (!any) of a flag over a job's tiles, in every lane; called by
//! all 32 lanes of a warp (each lane reads every 32nd tile's flags, then a vote: one round of loads,
//! not one per tile).
template <class Rows>
__device__ bool tile_flag_over(const verify_view<Rows>& view, std::int32_t job, std::uint32_t flag, bool any) {
  bool result = !any;
  for (std::size_t t = static_cast<std::size_t>(lane_id()); t < view.tiles; t += warp_size) {
    const bool set = (view.tile_flags[static_cast<std::size_t>(job) * view.tiles + t] & flag) != 0;
    result = any ? (result || set) : (result && set);
  }
  return any ? warp_any(result) : warp_all(result);
}

//! Writes request b's output row: its accepted drafts, then `correction` at `stop`, then -1.
template <class Rows>
__device__ void write_outputs(const verify_view<Rows>& view, std::int32_t b, const request_desc& r, std::int32_t stop,
                              token_id correction, verify_status status) {
  token_id* row = view.out_tokens + static_cast<std::size_t>(b) * view.out_stride;
  for (std::size_t j = static_cast<std::size_t>(lane_id()); j < view.out_stride; j += warp_size)
    row[j] = walks::chain_output_token(view.draft_tokens + r.draft_row0, stop, correction, j);
  if (lane_id() == 0) {
    view.out_accepted[b] = stop;
    view.out_status[b] = status;
  }
}

//! Step 3: one warp per request locates its correction or bonus token.
template <class Rule, class Rows>
__global__ void locate_rejection(Rule rule, verify_view<Rows> view) {
  __shared__ double shared[locate_shared_doubles];
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x);
  const request_desc r = view.requests[b];
  const request_plan plan = view.plans[b];
  verify_status status = plan.status;
  token_id token = no_token;
  if (plan.kind != chain_stop::none) {
    const auto p = view.rows.target_row(r.target_row0 + plan.stop);
    const double* masses = view.tile_mass + static_cast<std::size_t>(b) * view.tiles;
    const bool usable = tile_flag_over(view, b, weights_usable, false);
    const double u = r.stream.open(static_cast<std::uint32_t>(plan.stop), random::purpose::resample).uniform();
    located found;
    if (plan.kind == chain_stop::bonus) {
      found = warp_locate(p, view.vocab, masses, usable, u, shared);
    } else if (plan.kind == chain_stop::residual_q_zero && !tile_flag_over(view, b, q_positive, true)) {
      found.status = row_status::not_finite;  // q has no mass at all: an unusable row (status.hpp)
    } else {
      const auto q = view.rows.draft_row(r.draft_row0 + plan.stop);
      found =
          warp_locate(residual_weight_of<decltype(p), decltype(q), Rule>{p, q, {rule}}, view.vocab, masses, usable, u, shared);
      if (found.status == row_status::no_mass) {  // p == q up to rounding: sample p itself (flagged)
        status |= verify_status::residual_fallback;
        found = warp_locate(p, view.vocab, view.p_tile_mass + static_cast<std::size_t>(b) * view.tiles, true, u, shared);
      }
    }
    if (found.status == row_status::ok && in_vocabulary(found.token, view.vocab))
      token = found.token;
    else
      status |= verify_status::invalid_row;
  }
  write_outputs(view, b, r, plan.stop, token, status);
}

// ---- greedy and sample-and-match ------------------------------------------------------------------

//! Pass 1 of the row jobs: tile masses of p (sample-and-match) or the tile's argmax and flags (greedy).
template <rule_family Family, class Rows>
__global__ void target_tiles(verify_view<Rows> view) {
  const tile_task task = tile_task::of(view.tiles);
  if (task.tile >= view.tiles || task.job >= view.jobs) return;
  const job_desc job = view.job_list[task.job];
  const auto p = view.rows.target_row(view.requests[job.request].target_row0 + job.position);
  const tile_range tile = tile_range::of(task.tile, view.vocab);
  const std::size_t at = static_cast<std::size_t>(task.job) * view.tiles + task.tile;
  bool usable = true;
  if constexpr (Family == rule_family::sample_and_match) {
    const double m = warp_tile_mass(p, tile, usable);
    usable = warp_all(usable);
    if (lane_id() == 0) {
      view.tile_mass[at] = m;
      view.tile_flags[at] = usable ? weights_usable : 0u;
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
      view.tile_best[at] = best;
      view.tile_flags[at] = (usable ? weights_usable : 0u) | (positive ? p_positive : 0u);
    }
  }
}

//! Pass 2 of the row jobs, one warp per job: the target's sample or argmax of that row.
template <rule_family Family, class Rows>
__global__ void locate_targets(verify_view<Rows> view) {
  __shared__ double shared[locate_shared_doubles];
  const std::int32_t j = static_cast<std::int32_t>(blockIdx.x);
  const job_desc job = view.job_list[j];
  const request_desc r = view.requests[job.request];
  job_result result;
  const bool usable = tile_flag_over(view, j, weights_usable, false);
  if constexpr (Family == rule_family::sample_and_match) {
    const double u = r.stream.open(static_cast<std::uint32_t>(job.position), random::purpose::target_sample).uniform();
    const located found = warp_locate(view.rows.target_row(r.target_row0 + job.position), view.vocab,
                                      view.tile_mass + static_cast<std::size_t>(j) * view.tiles, usable, u, shared);
    result = {found.token, found.status};
  } else {
    arg_best best{0.0, -1};  // `better` keeps the lower index on ties: any reduction order gives seq's argmax
    for (std::size_t t = static_cast<std::size_t>(lane_id()); t < view.tiles; t += warp_size)
      best = better(best, view.tile_best[static_cast<std::size_t>(j) * view.tiles + t]);
    best = warp_argmax(best);
    if (usable && tile_flag_over(view, j, p_positive, true))
      result = {static_cast<token_id>(best.index), row_status::ok};
    else
      result = {no_token, row_status::not_finite};
  }
  if (lane_id() == 0) view.results[j] = result;
}

//! The operations of `walks::walk_target_choice` (backend/walks/chain.hpp) over the row jobs' results:
//! the target's argmax (greedy) or sample (sample-and-match, drawn by `locate_targets` with the walk's
//! uniform) of each row, after the row's checks.
template <class Rows>
struct target_walk_ops {
  const verify_view<Rows>& view;
  const request_desc& r;

  __device__ job_result result(std::int32_t i) const { return view.results[r.first_job + i]; }
  __device__ verify_status check_target(std::int32_t i) const { return view.check_target(r, i); }
  __device__ walks::greedy_row greedy(std::int32_t i) const {
    const job_result y = result(i);
    const bool ok = y.status == row_status::ok && in_vocabulary(y.token, view.vocab);
    return {ok, ok ? y.token : no_token};
  }
  __device__ walks::row_draw<job_result> sample_target(std::int32_t i, double) const {
    const verify_status flags = check_target(i);
    if (flags != verify_status::ok) return {flags};
    return {verify_status::ok, result(i)};
  }
};

//! The walk of greedy and sample-and-match over the row results (`walks::walk_target_choice`, the one
//! seq runs), one warp per request.
template <rule_family Family, class Rows>
__global__ void walk_targets(verify_view<Rows> view) {
  const std::int32_t b = static_cast<std::int32_t>(blockIdx.x);
  const request_desc r = view.requests[b];
  target_walk_ops<Rows> ops{view, r};
  const walks::chain_walk_result w =
      walks::walk_target_choice<Family>(ops, view.draft_tokens + r.draft_row0, r.num_drafts, view.vocab, r.stream);
  write_outputs(view, b, r, w.stop, w.emitted, w.status);
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

}  // namespace specdec::backend::cuda::detail
