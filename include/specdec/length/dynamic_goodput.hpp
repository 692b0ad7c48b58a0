//! \file length/dynamic_goodput.hpp
//! \brief vLLM's dynamic speculative decoding (vllm/v1/spec_decode/dynamic/manager.py, PR #32374) and
//! SmartSpec (arXiv 2406.14066): every step, one draft length for the whole batch,
//!   k* = argmax_{0 <= k <= k_max} (1 + sum_{i<k} a_i) / ITL(B, k),
//! a_i = accepted_at[i] / drafted_at[i] the acceptance of position i (the rounds that accepted it over
//! those that drafted it, so sum_{i<k} a_i is the expected accepted drafts of a k-round), counted over
//! every round of every request the stage has seen (as vLLM's global counters; a position never drafted
//! counts as accepted until it is, so it gets tried), and ITL(B, k) the latency of a step of B requests with k drafts
//! each, profiled offline per (batch size, k) and interpolated linearly in B. Before `warmup` steps the
//! stage leaves every length at its maximum (vLLM waits 10). A batch length stage
//! (`batch_decoder::set_batch_length_stage`): the choice uses past rounds only, so strict verification
//! stays exact.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! ITL(B, k): the latency of one step of B requests drafting k tokens each, from rows profiled at a few
//! batch sizes (`latency[r][k]` at `batch_sizes[r]`, k = 0..k_max), linear in B between them and
//! clamped outside.
class step_latency_table {
 public:
  //! \throws specdec::error on an empty table, batch sizes not increasing or not > 0, rows of
  //!         different lengths, or a latency that is not finite and > 0.
  step_latency_table(std::vector<double> batch_sizes, std::vector<std::vector<double>> latency)
      : sizes_(std::move(batch_sizes)), latency_(std::move(latency)) {
    SPECDEC_EXPECTS(!sizes_.empty() && sizes_.size() == latency_.size() && !latency_[0].empty(),
                    "specdec::step_latency_table: one non-empty row per batch size");
    for (std::size_t r = 0; r < sizes_.size(); ++r) {
      SPECDEC_EXPECTS(sizes_[r] > 0.0 && (r == 0 || sizes_[r] > sizes_[r - 1]),
                      "specdec::step_latency_table: batch sizes must increase");
      SPECDEC_EXPECTS(latency_[r].size() == latency_[0].size(), "specdec::step_latency_table: rows of different lengths");
      for (const double t : latency_[r])
        SPECDEC_EXPECTS(std::isfinite(t) && t > 0.0, "specdec::step_latency_table: latencies must be finite and > 0");
    }
  }
  //! The longest draft the table covers.
  std::size_t max_drafts() const noexcept { return latency_[0].size() - 1; }
  //! ITL(B, k). \pre k <= max_drafts().
  double operator()(double batch, std::size_t k) const {
    SPECDEC_EXPECTS(k <= max_drafts(), "specdec::step_latency_table: k beyond the table");
    if (batch <= sizes_.front()) return latency_.front()[k];
    if (batch >= sizes_.back()) return latency_.back()[k];
    const std::size_t r = static_cast<std::size_t>(std::upper_bound(sizes_.begin(), sizes_.end(), batch) - sizes_.begin());
    const double w = (batch - sizes_[r - 1]) / (sizes_[r] - sizes_[r - 1]);
    return (1.0 - w) * latency_[r - 1][k] + w * latency_[r][k];
  }

 private:
  std::vector<double> sizes_;
  std::vector<std::vector<double>> latency_;
};

//! The goodput-optimal batch-wide draft length over running per-position acceptance.
class dynamic_goodput_length {
 public:
  //! The stage with the latency table `itl`, leaving every length at its maximum for the first `warmup` steps.
  explicit dynamic_goodput_length(step_latency_table itl, std::size_t warmup = 10) : itl_(std::move(itl)), warmup_(warmup) {}

  //! The stage (`batch_length_stage`).
  void operator()(std::span<const length_request> requests, std::span<std::size_t> lengths) {
    accumulate(requests);
    if (steps_++ < warmup_ || requests.empty()) return;
    std::size_t k_max = 0;
    for (const auto& r : requests) k_max = std::max(k_max, r.max_length);
    k_max = std::min(k_max, itl_.max_drafts());
    double best = -1.0, expected = 1.0;
    std::size_t best_k = 0;
    for (std::size_t k = 0; k <= k_max; ++k) {
      if (k > 0) expected += acceptance_at(k - 1);
      const double goodput = expected / itl_(static_cast<double>(requests.size()), k);
      if (goodput > best) {
        best = goodput;
        best_k = k;
      }
    }
    last_ = best_k;
    for (auto& n : lengths) n = std::min(n, best_k);
  }
  //! The length chosen by the last step after the warm-up.
  std::size_t last_choice() const noexcept { return last_; }
  //! a_i over every round seen so far (1 for a position never drafted).
  double acceptance_at(std::size_t i) const noexcept {
    return i < drafted_.size() && drafted_[i] > 0 ? double(accepted_[i]) / double(drafted_[i]) : 1.0;
  }

 private:
  // Adds what each request counted since the stage last saw it to the global per-position counters.
  void accumulate(std::span<const length_request> requests) {
    next_seen_.clear();
    for (const auto& r : requests) {
      const decode_stats& s = *r.stats;
      const auto it = seen_.find(r.request);
      const decode_stats* before = it == seen_.end() ? nullptr : &it->second;
      for (std::size_t i = 0; i < s.drafted_at.size(); ++i) {
        if (drafted_.size() <= i) drafted_.resize(i + 1, 0), accepted_.resize(i + 1, 0);
        const auto old_d = before && i < before->drafted_at.size() ? before->drafted_at[i] : 0;
        const auto old_a = before && i < before->accepted_at.size() ? before->accepted_at[i] : 0;
        drafted_[i] += s.drafted_at[i] - old_d;
        accepted_[i] += (i < s.accepted_at.size() ? s.accepted_at[i] : 0) - old_a;
      }
      decode_stats& kept = next_seen_[r.request];
      kept.drafted_at = s.drafted_at;
      kept.accepted_at = s.accepted_at;
    }
    seen_.swap(next_seen_);  // requests that finished are forgotten
  }

  step_latency_table itl_;
  std::size_t warmup_;
  std::size_t steps_ = 0, last_ = 0;
  std::vector<std::size_t> drafted_, accepted_;
  std::unordered_map<std::uint64_t, decode_stats> seen_, next_seen_;
};

}  // namespace specdec
