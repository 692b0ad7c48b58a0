//! \file tests/integrations/llama_cpp/gated.hpp
//! \brief Test support for SPRINTER and SV on llama.cpp: requests decoded with drafter stages over
//! prefix_cached_model lanes (a draft lane and a lane of a second target context each), SPRINTER's
//! stages with a given feature extractor and verifier (a constant one among them), and greedy SV with
//! its estimator profiled on the pair.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "integrations/llama_cpp/models.hpp"
#include "specdec/acceptance/last_token.hpp"
#include "specdec/decode/sv.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"
#include "specdec/integrations/llama_cpp/sv_profile.hpp"
#include "specdec/model/prefix_cached_model.hpp"

namespace specdec_test::llama {

inline const specdec::warp_params greedy_warp{.temperature = 0.0};

//! A llama.cpp sequence model read as a stateless Model through lanes.
using view = specdec::prefix_cached_model<lc::sequence_model>;
//! Request i's drafter stage over its draft lane (and, for the oracle, its target lane).
using stage_factory = std::function<specdec::draft_stage(const view& draft, const view& target, std::size_t i)>;

//! Decodes `requests` on one target context (a sequence each, `positions` long) with the drafter
//! stages `make` gives, each over a lane of the draft's context and a lane of a second target
//! context; returns each request's tokens and adds its decode_stats to `stats`.
inline std::vector<std::vector<token_id>> decode_stages(const lc::model& target_model, const lc::model& draft_model,
                                                        std::vector<specdec::request_options> requests, const stage_factory& make,
                                                        specdec::decode_stats* stats = nullptr, std::uint32_t positions = 128) {
  const auto n = static_cast<std::uint32_t>(requests.size());
  const lc::context_options params{.context_per_sequence = positions, .sequences = n, .threads = 1};
  lc::context target_ctx(target_model, params), draft_ctx(draft_model, params), oracle_ctx(target_model, params);
  lc::sequence_model target(target_ctx), draft(draft_ctx), oracle(oracle_ctx);
  specdec::no_sequence_model none(target.vocab_size());
  specdec::batch_decoder decoder(specdec::exec::seq, target, none, specdec::strict);
  std::vector<std::unique_ptr<view>> lanes;
  std::vector<specdec::request_handle> handles;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    lanes.push_back(std::make_unique<view>(draft, 1, i));
    lanes.push_back(std::make_unique<view>(oracle, 1, i));
    requests[i].drafter = make(*lanes[2 * i], *lanes[2 * i + 1], i);
    handles.push_back(decoder.add(std::move(requests[i])));
  }
  return run_to_end(decoder, handles, stats);
}

//! SPRINTER's stages: a verifier-gated drafter per request over its draft lane, warped with `warp`,
//! features and verifier from `gate(target lane)`; the drafters live in `keep`.
template <class Features, class V>
struct sprinter_stages {
  using drafter = specdec::verifier_gated_drafter<view, Features, V>;
  std::function<std::pair<Features, V>(const view& target)> gate;
  specdec::warp_params warp;
  specdec::gating_params gating;
  specdec::sprinter_stats stats{};
  std::vector<std::unique_ptr<drafter>> keep{};

  stage_factory factory() {
    return [this](const view& draft, const view& target, std::size_t) {
      auto [features, verifier] = gate(target);
      keep.push_back(std::make_unique<drafter>(draft, warp, std::move(features), std::move(verifier), gating));
      return specdec::gated_stage(*keep.back(), &stats);
    };
  }
};

//! A verifier of draft_row_features that returns `score` whatever it reads.
inline auto constant_verifier(double score) {
  return specdec::make_verifier(specdec::draft_row_features::size, [score](std::span<const float>) { return score; });
}

//! Greedy SPRINTER stages whose verifier scores every draft `score`, runs of at most `max_run`.
inline sprinter_stages<specdec::draft_row_features, decltype(constant_verifier(0.0))> constant_gate(double score,
                                                                                                    std::size_t max_run) {
  return {.gate =
              [score](const view&) {
                return std::pair{specdec::draft_row_features{}, constant_verifier(score)};
              },
          .warp = greedy_warp,
          .gating = {.tau = 0.5, .max_run = max_run}};
}

//! SV's acceptance estimator profiled on the pair (llama_cpp::profile_sv_estimator: standard SD at
//! temperature 1 from every prompt, `profile_tokens` each, gamma drafts a round, seed 7, 4 x 4 adaptive
//! bins; greedy's acceptances would all be 0 or 1), the companion read through a lane of its own context.
inline specdec::estimate::acceptance_estimator profile_sv_pair(const lc::model& target_model, const lc::model& draft_model,
                                                               const lc::model& companion_model,
                                                               const std::vector<std::vector<token_id>>& prompts,
                                                               std::size_t gamma, std::size_t profile_tokens) {
  const lc::context_options one{.context_per_sequence = 512, .sequences = 1, .threads = 1};
  lc::context target_ctx(target_model, one), draft_ctx(draft_model, one), companion_ctx(companion_model, one);
  lc::sequence_model target(target_ctx), draft(draft_ctx), companion(companion_ctx);
  const view companion_lane(companion, 1);
  auto profile = lc::profile_sv_estimator(specdec::exec::seq, target, draft, companion_lane, prompts,
                                          {.gamma = gamma, .tokens_per_prompt = profile_tokens, .bins = 4, .seed = 7});
  REQUIRE(profile.gain.samples >= prompts.size() * profile_tokens / 2);  // at least gamma drafts per gamma + 1 tokens
  return std::move(profile.estimator);
}

//! SV on the step decoder (exact mode, the batch scheduler, the decoder's rule strict unless a request
//! sets its own) with `estimator`, a target whose cost grows with the positions it scores (so that low
//! estimates shorten the verified prefix), the companion read through a lane per request. Returns each
//! request's tokens; SV's counters go to `sv`.
inline std::vector<std::vector<token_id>> sv_decode(const lc::model& target_model, const lc::model& draft_model,
                                                    const lc::model& companion_model,
                                                    const specdec::estimate::acceptance_estimator& estimator,
                                                    std::vector<specdec::request_options> requests, std::size_t gamma,
                                                    specdec::sv_stats& sv) {
  const auto b = static_cast<std::uint32_t>(requests.size());
  const lc::context_options all{.context_per_sequence = 512, .sequences = b, .threads = 1};
  lc::context companion_ctx(companion_model, all), target_ctx(target_model, all), draft_ctx(draft_model, all);
  lc::sequence_model companion_seq(companion_ctx), target(target_ctx), draft(draft_ctx);
  const view companion(companion_seq, b);
  const auto latency = [](int positions) { return 1.0 + 0.5 * static_cast<double>(positions); };
  const specdec::sv_setup setup{companion, estimator, latency};
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
  decoder.set_verify_length_stage(specdec::sv_batch_lengths(specdec::exec::seq, setup, {.gamma_max = gamma}));
  std::vector<specdec::request_handle> handles;
  for (auto& r : requests) {
    r.gamma = gamma;
    handles.push_back(decoder.add(std::move(r)));
  }
  std::vector<std::vector<token_id>> got(handles.size());
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      if (!e.target_logits.empty()) sv.record(e.drafted, e.verified, e.drafted > 0);
      if (e.finished != specdec::finish_reason::none) {
        const auto tokens = decoder.tokens(e.request);
        got[e.request - handles.front()].assign(tokens.begin(), tokens.end());
      }
    }
  return got;
}

//! Greedy SV (`sv_decode`) with its estimator profiled on the pair from `prompts`: each prompt's `n`
//! tokens.
inline std::vector<std::vector<token_id>> greedy_sv(const lc::model& target_model, const lc::model& draft_model,
                                                    const lc::model& companion_model,
                                                    const std::vector<std::vector<token_id>>& prompts, std::size_t n,
                                                    std::size_t gamma, std::size_t profile_tokens, specdec::sv_stats& sv) {
  const auto estimator = profile_sv_pair(target_model, draft_model, companion_model, prompts, gamma, profile_tokens);
  std::vector<specdec::request_options> requests;
  for (const auto& p : prompts) {
    specdec::request_options r;
    r.prompt = p;
    r.max_new_tokens = n;
    r.target_params = r.draft_params = greedy_warp;
    requests.push_back(std::move(r));
  }
  return sv_decode(target_model, draft_model, companion_model, estimator, std::move(requests), gamma, sv);
}

}  // namespace specdec_test::llama
