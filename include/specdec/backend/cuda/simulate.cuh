//! \file backend/cuda/simulate.cuh
//! \brief The Monte-Carlo simulators of specdec/simulate/ on the GPU, with the CPU simulators'
//! Philox streams and per-draw code, so that the same seeds give identical counts:
//!   - `simulate_sd_chain` (Leviathan eq. (1) and its position-dependent form), `simulate_sv_accepted`
//!     (SV's N, appendix D eq. (3)), `simulate_sprinter_chain` (SPRINTER Theorem 3.3): the Bernoulli
//!     chain `simulate::detail::run_chain_draw`;
//!   - `simulate_sd_token_process` and `simulate_sprinter_token_process`: the per-draw steps
//!     `sd_token_iteration` and `sprinter_position` over `table_rows`, which look up the tokens that
//!     sample_categorical / sample_residual give (simulate/detail/sampling_table.hpp; the tables are
//!     built on the host and uploaded).
//!
//! **Kernel.** One thread per draw (grid-stride loop over draws first .. first + draws - 1): the
//! thread opens draw i's stream (`simulate::draw_stream`) and calls the same host/device function as
//! the CPU loop. Outcomes are integers, tallied with atomic increments: the first histogram's first
//! `simulate_shared_bins` bins in shared memory per block (the chains' accepted counts), every other
//! bin in global memory; sums (trials, acceptances, fallbacks) reduced per warp, then one atomic add.
//! Integer addition is associative, so the counts do not depend on the schedule. A value beyond a
//! histogram (only the chains' counts, >= count_tally::histogram_limit) is written as a record
//! (draw, value); the host adds records in draw order, as the CPU loop does; if more records arrive
//! than the buffer holds, the run is repeated once with a buffer of the size reported (the draws
//! are deterministic, so the repeat sees the same values).
//!
//! **Host side.** Inputs are host objects (the rows p, q and the profile a[] are uploaded); the work
//! runs on the given stream and the call returns after it, with the same result types as the CPU
//! simulators (histograms with the same sizes, since `count_tally::add(v, n)` grows them as the CPU
//! loop's adds do). Scratch memory is allocated on the stream (stream-ordered) and freed.
//!
//! Reached through the policy entries of simulate/with_policy.hpp (`simulate::sd::chain(exec::cuda,
//! ...)` and the others), which dispatch here (backend/cuda/algorithms.cuh).
//!
//! Throughput target: >= 10^9 simulated draft tokens per second on an H100 (bench/cuda_simulate_top_w_indicators.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/backend/cuda/kernels/simulate.cuh"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/chain.hpp"
#include "specdec/simulate/detail/sampling_table.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/simulate/sv.hpp"
#include "specdec/simulate/tally.hpp"

namespace specdec::backend::cuda::detail {

//! What a tally run brings back: each histogram up to its largest value, the sums, and the
//! records (sorted by histogram, then draw).
template <int H, int C>
struct tally_result {
  std::array<std::vector<unsigned long long>, H> counts;
  std::array<unsigned long long, C> sums{};
  std::vector<overflow_record> records;
};

//! The number of blocks for `draws` draws: enough to fill the device, no more than the draws need.
inline unsigned simulate_grid(std::uint64_t draws) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const std::uint64_t wanted = (draws + simulate_threads - 1) / simulate_threads;
  const std::uint64_t cap = static_cast<std::uint64_t>(sms) * simulate_blocks_per_sm;
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(wanted, cap)));
}

//! Runs the tally kernel over the draws of `o` with histograms of the given sizes and brings the
//! counts back (see the file comment). Synchronises `stream`.
//! `capacity` is the first size of the record buffer (tests pass a small one to exercise the repeat).
template <int H, int C, class Step>
tally_result<H, C> run_tally(cudaStream_t stream, const simulate::run_options& o, const Step& step,
                             const std::array<std::uint64_t, H>& sizes, std::size_t capacity = simulate_record_capacity) {
  tally_layout<H> layout{};
  unsigned long long bins = 0;
  for (int h = 0; h < H; ++h) {
    layout.size[h] = sizes[static_cast<std::size_t>(h)];
    layout.offset[h] = bins;
    bins += layout.size[h];
  }
  layout.shared_bins = static_cast<unsigned>(std::min<unsigned long long>(layout.size[0], simulate_shared_bins));
  for (;;) {
    const auto carve = [&](workspace_plan& plan) {
      tally_sinks<H, C> s{};
      s.counts = plan.take<unsigned long long>(bins);
      s.sums = plan.take<unsigned long long>(C);
      s.max_value = plan.take<unsigned long long>(H);
      s.record_count = plan.take<unsigned long long>(1);
      s.records = plan.take<overflow_record>(capacity);
      s.capacity = capacity;
      return s;
    };
    workspace_plan counting;
    carve(counting);
    const device_buffer buffer(counting.bytes(), stream);
    workspace_plan plan(buffer.span());
    const tally_sinks<H, C> sinks = carve(plan);
    check(cudaMemsetAsync(buffer.span().data(), 0, buffer.span().size(), stream), "cudaMemsetAsync");
    if (o.draws > 0) {
      tally_kernel<H, C, Step>
          <<<simulate_grid(o.draws), simulate_threads, layout.shared_bins * sizeof(unsigned long long), stream>>>(o, step, layout,
                                                                                                                  sinks);
      check_launch("specdec::simulate (cuda): tally_kernel");
    }
    tally_result<H, C> r;
    std::array<unsigned long long, H> largest{};
    unsigned long long offered = 0;
    check(cudaMemcpyAsync(r.sums.data(), sinks.sums, C * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaMemcpyAsync(largest.data(), sinks.max_value, H * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaMemcpyAsync(&offered, sinks.record_count, sizeof offered, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (offered > capacity) {  // the records did not fit: run again with room for all of them
      capacity = static_cast<std::size_t>(offered);
      continue;
    }
    for (int h = 0; h < H; ++h) {
      auto& c = r.counts[static_cast<std::size_t>(h)];
      c.resize(static_cast<std::size_t>(std::min<unsigned long long>(layout.size[h], largest[h] + 1)));
      check(cudaMemcpyAsync(c.data(), sinks.counts + layout.offset[h], c.size() * sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
    }
    r.records.resize(static_cast<std::size_t>(offered));
    check(cudaMemcpyAsync(r.records.data(), sinks.records, r.records.size() * sizeof(overflow_record), cudaMemcpyDeviceToHost,
                          stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::sort(r.records.begin(), r.records.end(), [](const overflow_record& a, const overflow_record& b) {
      return a.histogram != b.histogram ? a.histogram < b.histogram : a.draw < b.draw;
    });
    return r;
  }
}

//! Histogram h of a tally run as a count_tally with the CPU simulator's `reserve`: the bins in
//! increasing value, then the records in draw order (the CPU loop's order for the overflow moments).
template <int H, int C>
simulate::count_tally to_count_tally(const tally_result<H, C>& r, int h, std::size_t reserve) {
  simulate::count_tally t(reserve);
  const auto& c = r.counts[static_cast<std::size_t>(h)];
  for (std::size_t v = 0; v < c.size(); ++v) t.add(v, c[v]);
  for (const overflow_record& rec : r.records)
    if (rec.histogram == static_cast<unsigned long long>(h)) t.add(rec.value);
  return t;
}

//! The bins of a histogram that must hold the values 0..largest (capped: beyond the cap, records).
inline std::uint64_t bins_for(std::uint64_t largest) {
  return largest >= simulate::count_tally::histogram_limit ? simulate::count_tally::histogram_limit : largest + 1;
}

//! One chain run per draw (`run_chain_draw`): histogram 0 = successes, sum 0 = trials.
template <class Prob>
struct chain_step {
  std::uint64_t limit;
  Prob prob;
  __device__ draw_tally<1, 1> operator()(random::philox_stream s) const {
    const simulate::detail::chain_draw d = simulate::detail::run_chain_draw(s, limit, prob);
    return {{d.successes}, {d.trials}};
  }
};

//! Runs the chain on the GPU and returns the CPU simulator's raw counts.
template <class Prob>
simulate::detail::chain_counts run_chain(cudaStream_t stream, std::uint64_t limit, const Prob& prob,
                                         const simulate::run_options& o, std::size_t reserve,
                                         std::size_t capacity = simulate_record_capacity) {
  const auto r = run_tally<1, 1>(stream, o, chain_step<Prob>{limit, prob}, {bins_for(limit)}, capacity);
  return {to_count_tally(r, 0, reserve), r.sums[0]};
}

//! One SD iteration on tokens per draw (`sd_token_iteration`): histograms accepted, first token,
//! bonus token; sums drafts examined, first accepted, fallbacks.
template <class Rule>
struct sd_token_step {
  simulate::detail::table_rows<Rule> rows;
  std::size_t gamma;
  __device__ draw_tally<3, 3> operator()(random::philox_stream s) const {
    const simulate::detail::sd_token_draw d = simulate::detail::sd_token_iteration(rows, gamma, s);
    return {{d.accepted, d.first_token, d.bonus ? static_cast<unsigned long long>(d.bonus_token) : no_bin},
            {d.examined, d.first_accepted ? 1ull : 0ull, d.fallbacks}};
  }
};

//! One SPRINTER position per draw (`sprinter_position`): histogram token; sums kept, verifier
//! accepted, fallbacks.
struct sprinter_token_step {
  simulate::detail::table_rows<strict_rule> rows;
  double eta_tp, eta_fp;
  __device__ draw_tally<1, 3> operator()(random::philox_stream s) const {
    const simulate::detail::sprinter_token_draw d = simulate::detail::sprinter_position(rows, eta_tp, eta_fp, s);
    return {{d.token}, {d.kept ? 1ull : 0ull, d.verifier_accepted ? 1ull : 0ull, d.fallback ? 1ull : 0ull}};
  }
};

//! The device parts of one sampling table.
struct table_parts {
  double* tile_end;
  double* strip_end;
  double* entry_end;
  token_id* tile_last;
  static table_parts take(workspace_plan& plan, const simulate::detail::sampling_table& t) {
    table_parts d{};
    d.tile_end = plan.take<double>(t.tile_end().size());
    d.strip_end = plan.take<double>(t.strip_end().size());
    d.entry_end = plan.take<double>(t.entry_end().size());
    d.tile_last = plan.take<token_id>(t.tile_last().size());
    return d;
  }
};

//! The rows p, q and the three sampling tables of a pair, in device memory (one allocation on the
//! stream, freed in stream order when this object goes).
template <class Rule>
class device_pair_tables {
 public:
  device_pair_tables(const Rule& rule, std::span<const double> p, std::span<const double> q, cudaStream_t stream)
      : host_(simulate::detail::make_pair_tables(rule, p, q)),
        buffer_(carve(workspace_plan{}, p.size()).bytes, stream),
        rows_(upload(rule, p, q, stream)) {}
  const simulate::detail::table_rows<Rule>& rows() const noexcept { return rows_; }

 private:
  struct parts {
    double* p;
    double* q;
    table_parts tables[3];  // p, q, residual
    std::size_t bytes;
  };
  // The same sequence of takes counts the bytes (no buffer) and hands out the pointers.
  parts carve(workspace_plan plan, std::size_t v) const {
    parts d{};
    d.p = plan.take<double>(v);
    d.q = plan.take<double>(v);
    d.tables[0] = table_parts::take(plan, host_.p);
    d.tables[1] = table_parts::take(plan, host_.q);
    d.tables[2] = table_parts::take(plan, host_.residual);
    d.bytes = plan.bytes();
    return d;
  }
  simulate::detail::table_rows<Rule> upload(const Rule& rule, std::span<const double> p, std::span<const double> q,
                                            cudaStream_t stream) const {
    const parts d = carve(workspace_plan(buffer_.span()), p.size());
    copy_to_device(d.p, p.data(), p.size(), stream);
    copy_to_device(d.q, q.data(), q.size(), stream);
    const simulate::detail::sampling_table* host[3] = {&host_.p, &host_.q, &host_.residual};
    simulate::detail::sampling_table_view views[3];
    for (int k = 0; k < 3; ++k) {
      const auto& t = *host[k];
      const table_parts& dev = d.tables[k];
      copy_to_device(dev.tile_end, t.tile_end().data(), t.tile_end().size(), stream);
      copy_to_device(dev.strip_end, t.strip_end().data(), t.strip_end().size(), stream);
      copy_to_device(dev.entry_end, t.entry_end().data(), t.entry_end().size(), stream);
      copy_to_device(dev.tile_last, t.tile_last().data(), t.tile_last().size(), stream);
      views[k] = t.view_with(dev.tile_end, dev.strip_end, dev.entry_end, dev.tile_last);
    }
    return {rule, d.p, d.q, views[0], views[1], views[2]};
  }

  simulate::detail::pair_tables host_;
  device_buffer buffer_;
  simulate::detail::table_rows<Rule> rows_;
};

//! The token histograms hold every token id: V bins each, at most count_tally's histogram limit.
inline void check_token_vocabulary(std::size_t v) {
  SPECDEC_EXPECTS(v <= simulate::count_tally::histogram_limit,
                  "the cuda token simulators need V <= count_tally::histogram_limit (2^20)");
}

}  // namespace specdec::backend::cuda::detail

namespace specdec::backend::cuda {

//! `simulate::sd::chain(alpha, gamma, options)` on the GPU (see backend/cuda/simulate.cuh): the same result for
//! the same options, computed on `stream`; returns when it is done.
//! \pre as the CPU overload. \throws specdec::error as the CPU overload; specdec::cuda_error on CUDA errors.
inline simulate::sd::iteration_tally simulate_sd_chain(cudaStream_t stream, double alpha, std::size_t gamma,
                                                       const simulate::run_options& options) {
  simulate::detail::check_sd_chain(alpha, options);
  auto c = detail::run_chain(stream, gamma, simulate::detail::constant_probability{alpha}, options, gamma + 1);
  return {gamma, std::move(c.successes), c.trials};
}

//! `simulate::sd::chain(alphas, options)` on the GPU; `alphas` is host memory (uploaded).
//! \pre as the CPU overload. \throws specdec::error as the CPU overload; specdec::cuda_error on CUDA errors.
inline simulate::sd::iteration_tally simulate_sd_chain(cudaStream_t stream, std::span<const double> alphas,
                                                       const simulate::run_options& options) {
  simulate::detail::check_sd_chain(alphas, options);
  const device_buffer table(alphas.size() * sizeof(double), stream);
  auto* device_alphas = reinterpret_cast<double*>(table.span().data());
  copy_to_device(device_alphas, alphas.data(), alphas.size(), stream);
  auto c =
      detail::run_chain(stream, alphas.size(), simulate::detail::table_probability{device_alphas}, options, alphas.size() + 1);
  return {alphas.size(), std::move(c.successes), c.trials};
}

//! `simulate::sd::token_process(rule, p, q, gamma, options)` on the GPU: the same counts for the same options.
//! `p` and `q` are host memory; the rule's `accepts` must be host/device code (strict, lenient).
//! \pre as the CPU overload, and V <= count_tally::histogram_limit.
//! \throws specdec::error otherwise; specdec::cuda_error on CUDA errors.
template <RejectionRule Rule>
simulate::sd::token_process_result simulate_sd_token_process(cudaStream_t stream, const Rule& rule, std::span<const double> p,
                                                             std::span<const double> q, std::size_t gamma,
                                                             const simulate::run_options& options) {
  simulate::detail::check_sd_token_process(p, q, gamma, options);
  detail::check_token_vocabulary(p.size());
  const detail::device_pair_tables<Rule> tables(rule, p, q, stream);
  const auto r = detail::run_tally<3, 3>(stream, options, detail::sd_token_step<Rule>{tables.rows(), gamma},
                                         {detail::bins_for(gamma), p.size(), p.size()});
  simulate::sd::token_process_result out;
  out.chain.gamma = gamma;
  out.chain.accepted = detail::to_count_tally(r, 0, gamma + 1);
  out.chain.draft_tokens = r.sums[0];
  out.first_token = detail::to_count_tally(r, 1, p.size());
  out.bonus_token = detail::to_count_tally(r, 2, p.size());
  out.first_accepted = r.sums[1];
  out.fallbacks = r.sums[2];
  return out;
}

//! `simulate::sv::accepted(a, gamma, options)` (SV's N) on the GPU: the same histogram for the same options.
//! \pre as the CPU overload. \throws specdec::error as the CPU overload; specdec::cuda_error on CUDA errors.
inline simulate::sd::iteration_tally simulate_sv_accepted(cudaStream_t stream, std::span<const double> a, std::size_t gamma,
                                                          const simulate::run_options& options) {
  SPECDEC_EXPECTS(gamma <= a.size(), "gamma must be <= a.size()");
  return simulate_sd_chain(stream, a.first(gamma), options);
}

//! `simulate::sprinter::verifier_chain(eta_tp, eta_fp, r, options)` on the GPU: the same histogram for the same options.
//! \pre as the CPU overload. \throws specdec::error as the CPU overload; specdec::cuda_error on CUDA errors.
inline simulate::sprinter::run_tally simulate_sprinter_chain(cudaStream_t stream, double eta_tp, double eta_fp, int r,
                                                             const simulate::run_options& options) {
  simulate::detail::check_verifier_chain(eta_tp, eta_fp, r, options);
  auto c = detail::run_chain(stream, ~std::uint64_t{0},
                             simulate::detail::two_phase_probability{eta_tp, eta_fp, static_cast<std::uint64_t>(r)}, options,
                             static_cast<std::size_t>(r) + 16);
  return {eta_tp, eta_fp, r, std::move(c.successes), c.trials};
}

//! `simulate::sprinter::token_process(p, q, eta_tp, eta_fp, options)` on the GPU: the same counts for the same options.
//! `p` and `q` are host memory. \pre as the CPU overload, and V <= count_tally::histogram_limit.
//! \throws specdec::error otherwise; specdec::cuda_error on CUDA errors.
inline simulate::sprinter::token_process_result simulate_sprinter_token_process(cudaStream_t stream, std::span<const double> p,
                                                                                std::span<const double> q, double eta_tp,
                                                                                double eta_fp,
                                                                                const simulate::run_options& options) {
  simulate::detail::check_sprinter_token_process(p, q, eta_tp, eta_fp, options);
  detail::check_token_vocabulary(p.size());
  const detail::device_pair_tables<strict_rule> tables(specdec::strict, p, q, stream);
  const auto r = detail::run_tally<1, 3>(stream, options, detail::sprinter_token_step{tables.rows(), eta_tp, eta_fp}, {p.size()});
  simulate::sprinter::token_process_result out;
  out.token = detail::to_count_tally(r, 0, p.size());
  out.kept = r.sums[0];
  out.verifier_accepted = r.sums[1];
  out.fallbacks = r.sums[2];
  return out;
}

}  // namespace specdec::backend::cuda
