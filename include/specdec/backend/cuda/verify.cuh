//! \file backend/cuda/verify.cuh
//! \brief Chain verification on the GPU: every rule, ragged batches, per-request streams, the output
//! format and status flags of seq (backend/seq/verify.hpp), and the same tokens for the same streams.
//!
//! Rejection rules (strict, lenient, any rule with __host__ __device__ `accepts`/`accepted_mass`):
//!  1. `plan_rejection`: one thread per request runs seq's chain walk (`walks::walk_rejection`,
//!     backend/walks/chain.hpp) on two gathered scalars per position (p(x), q(x)), with the accept
//!     uniform of stream (position, accept); it records where the request stops and whether a
//!     residual or a bonus is needed. No row is read whole.
//!  2. `residual_tiles`: the one row pair per request that is needed, split into tiles of 2048 with
//!     one warp per tile over as many blocks as there are tiles (so B = 1 still fills the GPU): the
//!     residual's tile masses, p's tile masses (the zero-residual fallback costs no second read) and
//!     flags, in the order of the sampling contract (sampling/categorical.hpp, rules 2-3).
//!  3. `locate_rejection`: one warp per request locates u * Z (rules 4-6) re-reading one tile, and
//!     writes the tokens, the accepted count and the status.
//! Greedy and sample-and-match need the target's argmax or sample at every position up to the first
//! mismatch; the GPU computes them for all n_b + 1 positions at once (one read of every target row,
//! where seq stops at the mismatch), then one warp per request runs seq's chain walk
//! (`walks::walk_target_choice`) on the results.
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

#include "specdec/backend/cuda/kernels/verify.cuh"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::cuda {

namespace detail {

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
             const chain_outputs& out, const verify_parts& parts, const verify_parts::pointers& w, verify_view<Rows>& view) {
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
  view.draft_tokens = batch.draft_tokens.data();
  view.vocab = batch.vocab_size;
  view.tiles = parts.tiles;
  view.batch = static_cast<std::int32_t>(B);
  view.jobs = static_cast<std::int32_t>(parts.jobs);
  view.requests = w.requests;
  view.job_list = w.jobs;
  view.plans = w.plans;
  view.tile_mass = w.tile_mass;
  view.p_tile_mass = w.p_tile_mass;
  view.tile_flags = w.tile_flags;
  view.tile_best = w.tile_best;
  view.results = w.results;
  view.row_sums = w.row_sums;
  view.num_target_rows = static_cast<std::int64_t>(parts.target_rows);
  view.out_tokens = out.tokens.data();
  view.out_accepted = out.num_accepted.data();
  view.out_status = out.status.data();
  view.out_stride = batch.layout.max_drafts() + 1;
}

//! Launches the kernels of `Rule`'s family on the prepared view.
template <class Rule, class Rows>
void launch(cudaStream_t stream, const Rule& rule, const verify_parts& parts, const verify_view<Rows>& view) {
  const std::size_t tile_blocks = (parts.tiles + tile_warps_per_block - 1) / tile_warps_per_block;
  const auto pass1_grid = static_cast<unsigned>(tile_blocks * parts.jobs);
  constexpr unsigned pass1_block = tile_warps_per_block * warp_size;
  const auto B = static_cast<unsigned>(parts.batch);
  if constexpr (Rule::family == rule_family::rejection) {
    plan_rejection<<<(B + 127) / 128, 128, 0, stream>>>(rule, view);
    check_launch("plan_rejection");
    residual_tiles<<<pass1_grid, pass1_block, 0, stream>>>(rule, view);
    check_launch("residual_tiles");
    locate_rejection<<<B, warp_size, 0, stream>>>(rule, view);
    check_launch("locate_rejection");
  } else {
    target_tiles<Rule::family><<<pass1_grid, pass1_block, 0, stream>>>(view);
    check_launch("target_tiles");
    locate_targets<Rule::family><<<static_cast<unsigned>(parts.jobs), warp_size, 0, stream>>>(view);
    check_launch("locate_targets");
    walk_targets<Rule::family><<<B, warp_size, 0, stream>>>(view);
    check_launch("walk_targets");
  }
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
  detail::verify_view<detail::probability_rows<T>> view;
  view.rows = {batch.target_rows.data(), batch.draft_rows.data(), batch.vocab_size};
  view.tolerance = options.normalisation_tolerance;
  detail::prepare(stream, batch, streams, out, parts, w, view);
  if (parts.sum_rows > 0) {
    detail::row_sums<<<static_cast<unsigned>(parts.sum_rows), 256, 0, stream>>>(view.rows.target, view.num_target_rows,
                                                                                view.rows.draft, view.vocab, w.row_sums);
    check_launch("row_sums");
  }
  detail::launch(stream, rule, parts, view);
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

  detail::verify_view<detail::logit_rows<T>> view;
  view.rows = {logits_batch.target_rows.data(),
               logits_batch.draft_rows.data(),
               V,
               w.stats,
               w.stats + parts.target_rows,
               w.temperatures,
               w.temperatures + parts.target_rows,
               w.filters,
               w.filters + parts.target_rows};
  detail::prepare(stream, logits_batch, streams, out, parts, w, view);
  detail::launch(stream, rule, parts, view);
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
