//! \file integrations/llama_cpp/sv_profile.hpp
//! \brief `llama_cpp::profile_sv_estimator`: SV's acceptance estimator P(accept | S, A) (Kim et al.,
//! section 7.4; estimate/acceptance_estimator.hpp) profiled on llama.cpp models.
//!
//! `profile_sv_indicators` (decode/sv.hpp) runs standard SD (strict rule, `gamma` drafts a round,
//! `tokens_per_prompt` tokens from every prompt) with the target and the draft read through one
//! `prefix_cached_model` lane each (sequence 0 of their sequence models, released after) and the
//! companion through the caller's lanes, and records S, A and x = min(1, p/q) of every drafted
//! position; the estimator is fitted on `bins` x `bins` adaptive bins of those samples, and the
//! information gain I(X; S, A) on the same bins says how much the indicators tell.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/decode/sv.hpp"
#include "specdec/errors.hpp"
#include "specdec/estimate/acceptance_estimator.hpp"
#include "specdec/estimate/binning.hpp"
#include "specdec/estimate/information_gain.hpp"
#include "specdec/integrations/llama_cpp/sequence_model.hpp"
#include "specdec/model/prefix_cached_model.hpp"

namespace specdec::llama_cpp {

//! Options of `profile_sv_estimator`.
struct sv_estimator_options {
  std::size_t gamma = 4;               //!< drafts per round, during profiling as at inference
  std::size_t tokens_per_prompt = 64;  //!< tokens generated from every profiling prompt
  std::size_t bins = 5;                //!< adaptive bins per indicator (bins x bins cells)
  warp_params draft_params{};          //!< how the draft's logits become q
  warp_params target_params{};         //!< how the target's logits become p
  std::uint64_t seed = 0;              //!< the profiling decode's seed (its random streams)
};

//! What `profile_sv_estimator` fitted and measured.
struct sv_estimator_profile {
  estimate::acceptance_estimator estimator;  //!< fitted on the samples over their adaptive bins
  estimate::information_gain_result gain;    //!< I(X; S, A) on the estimator's bins (`gain.samples`: the drafted positions)
};

//! SV's acceptance estimator profiled on `target` and `draft` (sequence 0 of each is used, then
//! released) with `companion` (lanes of the companion's sequence model) from every prompt (file
//! comment). \pre the three models share the vocabulary. \throws specdec::error when the profile drew
//! no drafted token (too few tokens per prompt), or as `profile_sv_indicators`.
template <exec::ExecutionPolicy Policy>
sv_estimator_profile profile_sv_estimator(const Policy& policy, sequence_model& target, sequence_model& draft,
                                          const prefix_cached_model<sequence_model>& companion,
                                          std::span<const std::vector<token_id>> prompts, const sv_estimator_options& o) {
  std::vector<estimate::indicator_sample> samples;
  {
    const prefix_cached_model<sequence_model> target_lane(target, 1), draft_lane(draft, 1);
    samples = profile_sv_indicators(policy, target_lane, draft_lane, o.draft_params, companion,
                                    sv_profile_options{.gamma = o.gamma, .tokens_per_prompt = o.tokens_per_prompt}, prompts,
                                    decode_options{.target_params = o.target_params, .seed = o.seed});
    target.release(0);
    draft.release(0);
  }
  if (samples.empty())
    throw error("specdec::llama_cpp::profile_sv_estimator: SV's profile drew no drafted token (too few tokens per prompt?)");
  auto bins = estimate::binning::adaptive(samples, o.bins, o.bins);
  auto gain = estimate::information_gain(samples, bins);
  return {estimate::acceptance_estimator::fit(samples, std::move(bins)), std::move(gain)};
}

}  // namespace specdec::llama_cpp
