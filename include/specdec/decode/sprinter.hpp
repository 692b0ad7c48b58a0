//! \file decode/sprinter.hpp
//! \brief SPRINTER (Zhong, Teku and Tandon, "Speeding up Speculative Decoding via Sequential Approximate Verification",
//! Algorithm 1 and Algorithm 2 of appendix A.5) as one request on the step decoder: draft while a low-cost verifier accepts
//! (draft/verifier_gated.hpp, as a drafter stage), then ONE target call that checks only the last
//! token (acceptance/last_token.hpp).
//!
//! Each run (draft/verifier_gated.hpp): the drafter proposes x_1, x_2, ... and the verifier keeps
//! them while V(s(x, prefix)) >= tau. Verifier-accepted tokens are emitted without any target check.
//! When the verifier rejects x_j (or the run reaches its cap), the target is called once on
//! context + x_1..x_{j-1} and checks x_j with the standard rule min(1, p/q) (`strict_rule`, u from
//! purpose::accept); on rejection it emits a token from norm(max(0, p - q)) (`sample_residual`,
//! purpose::resample). No bonus token (Algorithm 2 returns Prefix + t).
//!
//! **Guarantee**: Theorem 3.1, stated with the rule in acceptance/last_token.hpp (with
//! `sprinter_token_distribution`, the exact law of one token); tests/decode/sprinter.cpp checks it at
//! the sequence level.
//!
//! **Honest counting.** The target never saw the verifier-accepted tokens, so the call that checks
//! x_j must process them: it scores j positions (the previous run's last token and x_1..x_{j-1} as
//! inputs; only the last row is used). `target_positions` counts those j, the simulated time charges
//! `cost.target_time(j)`; with t_target_per_token = 0 this is the paper's "call M_p once" (eq. (6)),
//! otherwise it is the KV-cached catch-up of theory::sprinter::flops_sprinter_catch_up. Over the
//! recomputing adapter of a stateless reference model wall time is not the honest measure; simulated
//! time is. A run that ends at the generation budget with every token
//! accepted by the verifier makes no target call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/last_token.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/contracts.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! SPRINTER's extra cost parameter: the entry points' `cost_model` has the draft and target times.
struct sprinter_options {
  double t_verifier = 0.0;  //!< simulated time of one verifier call (t_v <= t_d in the paper)
};

//! A SPRINTER generation: a `decode_result` (tokens, decode_stats, status) plus `sprinter_stats`.
struct sprinter_result : decode_result {
  sprinter_stats sprinter;  //!< SPRINTER's own counters
};

//! SPRINTER decoding of one request with a `verifier_gated_drafter` (Algorithm 2, repeated until
//! `options.max_new_tokens` tokens or the stop token): one request on the step decoder with the drafter
//! as its drafter stage (`gated_stage`) and the `last_token` rule, verified on `policy` (exec::seq or
//! exec::simd). Run r uses request_stream{seed, request_id, r}. A model's unusable row, or a verifier's
//! NaN or out-of-range score, ends the generation with `invalid_row` in `status`.
//! \pre the drafter and the target share the vocabulary.
//! \throws specdec::error on bad options (warp, cost, t_verifier < 0 or not finite) or an empty prompt.
template <exec::ExecutionPolicy Policy, Model Target, Model DraftModel, FeatureExtractor Features, Verifier V>
sprinter_result decode_sprinter(const Policy& policy, const Target& target,
                                verifier_gated_drafter<DraftModel, Features, V>& drafter, const sprinter_options& sprinter,
                                std::span<const token_id> prompt, const decode_options& options, const cost_model& cost = {}) {
  SPECDEC_EXPECTS(std::isfinite(sprinter.t_verifier) && sprinter.t_verifier >= 0.0, "t_verifier must be finite and >= 0");
  const std::size_t Vn = static_cast<std::size_t>(target.vocab_size());
  SPECDEC_EXPECTS(drafter.vocab_size() == Vn, "the draft and target vocabularies differ");
  recomputing_sequence_model<Target> t(target);
  no_sequence_model none(Vn);
  batch_decoder decoder(policy, t, none, strict);
  sprinter_result r;
  request_options o = detail::request_of(prompt, options);
  o.set_stages(gated_stage(drafter, &r.sprinter), last_token);
  o.gamma = std::numeric_limits<std::size_t>::max();  // a run is capped by max_run and the budget
  detail::run_request(decoder, std::move(o), cost, r,
                      [&](const step_event& e) { r.sprinter.target_checks += !e.target_logits.empty(); });
  // Every run's drafts are kept by the verifier or judged by the target's check (decode_stats::accepted).
  r.sprinter.target_kept = r.stats.accepted - r.sprinter.verifier_accepted;
  r.stats.simulated_time += static_cast<double>(r.sprinter.verifier_calls) * sprinter.t_verifier;
  return r;
}

//! The overload above on exec::seq with SPRINTER's default options.
template <Model Target, Model DraftModel, FeatureExtractor Features, Verifier V>
sprinter_result decode_sprinter(const Target& target, verifier_gated_drafter<DraftModel, Features, V>& drafter,
                                std::span<const token_id> prompt, const decode_options& options, const cost_model& cost = {}) {
  return decode_sprinter(exec::seq, target, drafter, sprinter_options{}, prompt, options, cost);
}

//! SPRINTER with a drafter built from `draft` (warped with `draft_params`), the feature extractor
//! `features`, the verifier `verifier` and the gating parameters `gating` (tau, max_run).
//! \throws as the constructor of `verifier_gated_drafter` and the first overload.
template <exec::ExecutionPolicy Policy, Model Target, Model DraftModel, FeatureExtractor Features, Verifier V>
sprinter_result decode_sprinter(const Policy& policy, const Target& target, const DraftModel& draft,
                                const warp_params& draft_params, Features features, V verifier, const gating_params& gating,
                                const sprinter_options& sprinter, std::span<const token_id> prompt, const decode_options& options,
                                const cost_model& cost = {}) {
  verifier_gated_drafter<DraftModel, Features, V> drafter(draft, draft_params, std::move(features), std::move(verifier), gating);
  return decode_sprinter(policy, target, drafter, sprinter, prompt, options, cost);
}

}  // namespace specdec
