//! \file decode/decode.hpp
//! \brief Single-request generation: thin wrappers that run one request on the step decoder
//! (decode/batch_decoder.hpp, the library's one loop) over recomputing adapters of `Model`s, and
//! return its tokens, counters and status. `decode` composes a drafter, a length policy and an
//! acceptance rule (docs/design.md, 'Decode'); `decode_target_only` is the baseline (one target call per token).
//! Every research entry point (`decode`, `decode_target_only`, `decode_tree`, `decode_mtad`,
//! `decode_sprinter`, `decode_sv`, `decode_sv_batch`) takes its arguments in one order: (policy, target,
//! drafting, method options, prompt(s), options[, cost]), where `options` is a `decode_options` and
//! `cost` the `cost_model` the simulated clock charges (`decode_stats::simulated_time`).
//! Randomness: round r uses request_stream{seed, request_id, step = r}; drafts, accept tests and
//! residuals use distinct purposes, so runs are reproducible and comparable across methods.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/errors.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/length/fixed.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! Options of a generation: the fields of `request_options` (decode/batch_decoder.hpp) that a single
//! generation sets, with the same names, types and meanings. The cost model of the simulated clock is
//! the research entry points' last argument, not an option of the request.
struct decode_options {
  std::size_t max_new_tokens = 64;      //!< the most tokens generated (fewer after a stop token)
  warp_params target_params{};          //!< how the target's rows are warped before verification
  std::uint64_t seed = 0;               //!< with `request_id`, names the request's random streams
  std::uint32_t request_id = 0;         //!< with `seed`, names the request's random streams
  std::vector<token_id> stop_tokens{};  //!< generation ends after emitting one of them
};

//! The generated tokens (prompt excluded), the counters, and the status of the last verification.
struct decode_result {
  std::vector<token_id> tokens;              //!< the generated tokens, prompt excluded
  decode_stats stats;                        //!< the generation's counters
  verify_status status = verify_status::ok;  //!< the status of the last verification
};

namespace detail {
//! Warps `rows` logit rows of width V into probabilities.
//! \throws specdec::numerical_error for a row without usable mass.
inline void warp_rows(std::span<const float> logits, std::span<float> probs, std::size_t V, const warp_params& w) {
  for (std::size_t i = 0; i * V < logits.size(); ++i)
    if (warp_logits(logits.subspan(i * V, V), probs.subspan(i * V, V), w) != row_status::ok)
      throw numerical_error("specdec::decode: the target returned a row without usable mass");
}

//! The step decoder's request for a single generation: `prompt` and the fields of `options`.
inline request_options request_of(std::span<const token_id> prompt, const decode_options& options) {
  return {.prompt = {prompt.begin(), prompt.end()},
          .seed = options.seed,
          .request_id = options.request_id,
          .target_params = options.target_params,
          .max_new_tokens = options.max_new_tokens,
          .stop_tokens = options.stop_tokens};
}

//! Runs one request on `decoder` to its end into `r` (tokens, counters, status, wall time, and the
//! simulated time of its rounds under `cost`: a `simulated_clock` observing the step events), calling
//! `on_step(event)` after every step.
template <class Decoder, class OnStep>
void run_request(Decoder& decoder, request_options o, const cost_model& cost, decode_result& r, OnStep&& on_step) {
  validate(cost);
  const auto start = std::chrono::steady_clock::now();
  simulated_clock simulated{cost};
  const request_handle h = decoder.add(std::move(o));
  while (decoder.active() > 0)
    for (const step_event& e : decoder.step()) {
      simulated(e);
      on_step(e);
      r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
      r.status = e.status;
      if (e.finished != finish_reason::none) r.stats = decoder.stats(h);
    }
  r.stats.simulated_time = simulated.time;
  r.stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
template <class Decoder>
void run_request(Decoder& decoder, request_options o, const cost_model& cost, decode_result& r) {
  run_request(decoder, std::move(o), cost, r, [](const step_event&) {});
}
}  // namespace detail

//! Speculative decoding of one request with any `Drafter` (as a drafter stage), a length policy and a
//! chain rule: one request on the step decoder (decode/batch_decoder.hpp) over a recomputing adapter
//! of the target. A model's unusable row, or a drafter's `numerical_error`, ends the generation with
//! `invalid_row` in `status`.
//! \pre target and drafter share the vocabulary. \throws specdec::error on bad options or an empty
//!      prompt (a BOS token starts an unconditional generation).
template <exec::ExecutionPolicy Policy, Model Target, Drafter D, LengthPolicy L, AcceptanceRule Rule>
decode_result decode(const Policy& policy, const Target& target, D& drafter, const L& length, const Rule& rule,
                     std::span<const token_id> prompt, const decode_options& options, const cost_model& cost = {}) {
  validate(options.target_params);
  recomputing_sequence_model<Target> t(target);
  no_sequence_model none(target.vocab_size());
  batch_decoder decoder(policy, t, none, rule);
  request_options o = detail::request_of(prompt, options);
  o.drafter = drafter_stage(drafter);
  o.length = length_stage(length);
  decode_result r;
  detail::run_request(decoder, std::move(o), cost, r);
  return r;
}

//! Speculative decoding with chain drafting on `draft` (warped with `draft_params`) and a fixed gamma:
//! one request on the step decoder over recomputing adapters of the two models (the decoder's batched
//! chain drafting: q is the row each draft was sampled from, verified from logits).
//! A model's unusable row ends the generation with `invalid_row` in `status`.
//! \throws specdec::error on bad options (the cost model included) or an empty prompt.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, AcceptanceRule Rule>
decode_result decode(const Policy& policy, const Target& target, const Draft& draft, const warp_params& draft_params,
                     std::size_t gamma, const Rule& rule, std::span<const token_id> prompt, const decode_options& options,
                     const cost_model& cost = {}) {
  recomputing_sequence_model<Target> t(target);
  recomputing_sequence_model<Draft> q(draft);
  batch_decoder decoder(policy, t, q, rule);
  request_options o = detail::request_of(prompt, options);
  o.draft_params = draft_params;
  o.gamma = gamma;
  decode_result r;
  detail::run_request(decoder, std::move(o), cost, r);
  return r;
}

//! The baseline: one target call per token, sampled from the warped target row (purpose
//! target_sample at position 0): the step decoder with no drafts and the sample-and-match rule, on
//! `policy` (exec::seq or exec::simd: the same tokens).
//! \throws specdec::error on bad options (the cost model included) or an empty prompt.
template <exec::ExecutionPolicy Policy, Model Target>
decode_result decode_target_only(const Policy& policy, const Target& target, std::span<const token_id> prompt,
                                 const decode_options& options, const cost_model& cost = {}) {
  recomputing_sequence_model<Target> t(target);
  no_sequence_model none(target.vocab_size());
  batch_decoder decoder(policy, t, none, sample_and_match);
  request_options o = detail::request_of(prompt, options);
  o.gamma = 0;
  decode_result r;
  detail::run_request(decoder, std::move(o), cost, r);
  return r;
}
//! `decode_target_only` on exec::seq.
template <Model Target>
decode_result decode_target_only(const Target& target, std::span<const token_id> prompt, const decode_options& options,
                                 const cost_model& cost = {}) {
  return decode_target_only(exec::seq, target, prompt, options, cost);
}

//! Simulated speedup of a speculative run over target-only decoding of the same number of tokens
//! under the same cost model: emitted * t_target(1) / simulated_time.
inline double simulated_speedup(const decode_stats& s, const cost_model& c) {
  return s.simulated_time > 0.0 ? static_cast<double>(s.emitted) * c.target_time(1) / s.simulated_time : 0.0;
}

}  // namespace specdec
