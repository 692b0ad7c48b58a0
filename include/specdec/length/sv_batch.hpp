//! \file length/sv_batch.hpp
//! \brief SV's batch scheduler (Kim et al., SV, section 5; optimize/batch_scheduler.hpp) as the step
//! decoder's batch length stage (decode/batch_decoder.hpp, `set_batch_length_stage`): every round, the
//! draft lengths n_b of all running requests maximise the batch goodput
//!   sum_b (E_b(n_b) + 1) / (L(K) + t_draft * max_b n_b),  K = sum_b n_b,
//! with E_b(n) = sum_{j<=n} prod_{i<=j} a_{b,i} (SV eq. (3)) and L the latency of one batched
//! verification of K drafted tokens. Each request's acceptance is one rate a_{b,i} = alpha_b for every
//! position (Leviathan's i.i.d. model), estimated from its own counters at position 0, which every
//! drafting round reaches: alpha_b = (accepted_at[0] + w a0) / (drafted_at[0] + w), a prior a0 of
//! weight w (running acceptance rates, as SmartSpec and vLLM's dynamic SD use); SV's companion-model
//! estimator (decode/sv.hpp) is not used here. The schedule depends only on past rounds, so strict
//! verification stays exact (the round's lengths are fixed before its drafts are drawn).
//! Draft time: the drafting rounds of a step run one batched draft forward per position, so a step
//! drafts for max_b n_b forwards; the stage takes the greedy schedule of `optimize::schedule_batch`
//! for each cap c = 0..max on every n_b and keeps the cap with the best goodput including the draft
//! time (the scheduler alone would ignore it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/optimize/batch_scheduler.hpp"

namespace specdec {

//! SV's batch scheduler over running acceptance estimates; `Latency` is a `theory::LatencyProfile`
//! read at K = the round's drafted tokens verified (put the per-request bonus positions in it).
template <theory::LatencyProfile Latency>
struct sv_batch_length {
  Latency latency;            //!< L(K): the latency of a target call verifying K drafted tokens
  double t_draft = 0.0;       //!< time of one batched draft forward, >= 0
  double prior = 0.7;         //!< a0: the acceptance assumed at a position never drafted
  double prior_weight = 2.0;  //!< w: how many rounds the prior counts for

  //! The stage (`batch_length_stage`). \throws specdec::error on invalid parameters.
  void operator()(std::span<const length_request> requests, std::span<std::size_t> lengths) const {
    SPECDEC_EXPECTS(prior >= 0.0 && prior <= 1.0 && prior_weight > 0.0 && t_draft >= 0.0,
                    "specdec::sv_batch_length: prior in [0, 1], prior_weight > 0, t_draft >= 0");
    std::vector<double> a;
    std::vector<std::size_t> cap_lengths(requests.size());
    std::size_t widest = 0;
    for (const auto& r : requests) widest = std::max(widest, r.max_length);
    double best = -1.0;
    for (std::size_t cap = 0; cap <= widest; ++cap) {
      a.clear();
      for (std::size_t b = 0; b < requests.size(); ++b) {
        cap_lengths[b] = std::min(cap, requests[b].max_length);
        const decode_stats& s = *requests[b].stats;
        // Position 0 is drafted in every round that drafts: its rate is the per-token acceptance.
        const double drafted = s.drafted_at.empty() ? 0.0 : static_cast<double>(s.drafted_at[0]);
        const double accepted = s.accepted_at.empty() ? 0.0 : static_cast<double>(s.accepted_at[0]);
        const double alpha = (accepted + prior_weight * prior) / (drafted + prior_weight);
        a.insert(a.end(), cap_lengths[b], alpha);
      }
      const optimize::batch_schedule plan =
          optimize::schedule_batch(std::span<const double>(a), std::span<const std::size_t>(cap_lengths), latency,
                                   {optimize::token_counting::with_target_token, optimize::stop_rule::best_prefix});
      std::size_t drafted_rounds = 0;
      for (const auto n : plan.lengths) drafted_rounds = std::max(drafted_rounds, n);
      const double time = plan.latency + t_draft * static_cast<double>(drafted_rounds);
      const double goodput = time > 0.0 ? plan.expected_tokens / time : 0.0;
      if (goodput > best) {  // (plan.lengths[b] <= cap_lengths[b] <= the incoming lengths[b])
        best = goodput;
        std::copy(plan.lengths.begin(), plan.lengths.end(), lengths.begin());
      }
    }
  }
};

}  // namespace specdec
