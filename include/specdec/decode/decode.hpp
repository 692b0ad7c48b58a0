//! \file decode/decode.hpp
//! \brief The generation loop: drafter x length policy x acceptance rule (DESIGN.md §5).
//!
//! Each round: the length policy picks gamma, the drafter proposes gamma tokens and their q rows,
//! the target scores context + drafts in one call (gamma + 1 rows), the rows are warped with the
//! request's parameters, and `verify_chain` accepts a prefix and adds one correction or bonus token.
//! `decode_target_only` is the baseline: one target call per token.
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
#include "specdec/acceptance/verify.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/stats.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/errors.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/length/fixed.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! Options of a generation.
struct decode_options {
  std::size_t max_new_tokens = 64;
  warp_params target_params{};            //!< how the target's rows are warped before verification
  std::uint64_t seed = 0;
  std::uint32_t request_id = 0;
  std::optional<token_id> stop_token{};   //!< generation ends after emitting it
  cost_model cost{};
};

//! The generated tokens (prompt excluded), the counters, and the status of the last verification.
struct decode_result {
  std::vector<token_id> tokens;
  decode_stats stats;
  verify_status status = verify_status::ok;
};

namespace detail {
inline bool finish(decode_result& r, const decode_options& o) {
  if (r.tokens.size() > o.max_new_tokens) r.tokens.resize(o.max_new_tokens);
  if (o.stop_token)
    for (std::size_t i = 0; i < r.tokens.size(); ++i)
      if (r.tokens[i] == *o.stop_token) {
        r.tokens.resize(i + 1);
        return true;
      }
  return r.tokens.size() >= o.max_new_tokens;
}

//! Warps `rows` logit rows of width V into probabilities.
//! \throws specdec::numerical_error for a row without usable mass.
inline void warp_rows(std::span<const float> logits, std::span<float> probs, std::size_t V, const warp_params& w) {
  for (std::size_t i = 0; i * V < logits.size(); ++i)
    if (warp_logits(logits.subspan(i * V, V), probs.subspan(i * V, V), w) != row_status::ok)
      throw numerical_error("specdec::decode: the target returned a row without usable mass");
}

//! One verification call of the target: scores context + drafts (drafts.size() + 1 rows of V logits),
//! warps every row into `p_rows` with the request's parameters, and counts the call and its positions.
template <Model Target>
void score_drafts(const Target& target, std::span<const token_id> context, std::span<const token_id> drafts,
                  const warp_params& params, std::vector<float>& logits, std::vector<float>& p_rows, decode_stats& stats) {
  const std::size_t V = target.vocab_size(), rows = drafts.size() + 1;
  logits.resize(rows * V);
  p_rows.resize(rows * V);
  score(target, context, drafts, std::span<float>(logits));
  warp_rows(logits, p_rows, V, params);
  ++stats.target_calls;
  stats.target_positions += rows;
}
}  // namespace detail

//! Speculative decoding of one request.
//! \pre target and drafter share the vocabulary; \throws specdec::error on bad options,
//! specdec::numerical_error when a model returns an unusable row.
template <exec::ExecutionPolicy Policy, Model Target, Drafter D, LengthPolicy L, AcceptanceRule Rule>
decode_result decode(const Policy& policy, const Target& target, D& drafter, const L& length, const Rule& rule,
                     std::span<const token_id> prompt, const decode_options& options) {
  validate(options.target_params);
  validate(options.cost);
  const std::size_t V = target.vocab_size();
  const auto start = std::chrono::steady_clock::now();
  decode_result r;
  if (options.max_new_tokens == 0) return r;
  std::vector<token_id> context(prompt.begin(), prompt.end());
  draft_block block;
  std::vector<float> logits, p_rows;
  while (true) {
    const std::size_t remaining = options.max_new_tokens - r.tokens.size();
    const std::size_t gamma = std::min(length.next_length(r.stats), remaining - 1);
    const random::request_stream stream{options.seed, options.request_id, static_cast<std::uint32_t>(r.stats.iterations)};
    r.stats.draft_calls += drafter.draft(context, gamma, stream, block);
    SPECDEC_EXPECTS(block.tokens.size() == gamma && block.q_rows.size() == gamma * V, "the drafter's block does not match gamma and V");

    detail::score_drafts(target, std::span<const token_id>(context), std::span<const token_id>(block.tokens),
                         options.target_params, logits, p_rows, r.stats);
    r.stats.simulated_time += static_cast<double>(gamma) * options.cost.t_draft + options.cost.target_time(gamma + 1);

    const chain_result c = verify_chain(policy, rule, std::span<const token_id>(block.tokens), std::span<const float>(block.q_rows),
                                        std::span<const float>(p_rows), V, stream);
    r.stats.record_round(gamma, static_cast<std::size_t>(c.num_accepted));
    r.status |= c.status;
    r.tokens.insert(r.tokens.end(), c.tokens.begin(), c.tokens.end());
    context.insert(context.end(), c.tokens.begin(), c.tokens.end());
    if (!is_valid(c.status) || detail::finish(r, options)) break;
  }
  r.stats.emitted = r.tokens.size();
  r.stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

//! Speculative decoding with a chain drafter over `draft` (warped with `draft_params`) and a fixed
//! gamma: one request on the step decoder (decode/batch_decoder.hpp, over recomputing adapters of the
//! two models), so the same tokens as the loop above with `chain_drafter` and `fixed_length`. There a
//! model's unusable row ends the generation with `invalid_row` in `status` instead of an exception.
//! An empty prompt, or the cuda policy (whose verification reads device memory), takes the loop above.
//! \throws specdec::error on bad options.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, AcceptanceRule Rule>
decode_result decode(const Policy& policy, const Target& target, const Draft& draft, const warp_params& draft_params,
                     std::size_t gamma, const Rule& rule, std::span<const token_id> prompt, const decode_options& options) {
  if constexpr (exec::backend_of<Policy> != exec::backend::cuda) {
    if (!prompt.empty()) {
      validate(options.target_params);
      validate(options.cost);
      const auto start = std::chrono::steady_clock::now();
      decode_result r;
      if (options.max_new_tokens == 0) return r;
      recomputing_sequence_model<Target> t(target);
      recomputing_sequence_model<Draft> q(draft);
      batch_decoder decoder(policy, t, q, rule, options.cost);
      request_options o;
      o.prompt.assign(prompt.begin(), prompt.end());
      o.seed = options.seed;
      o.request_id = options.request_id;
      o.target_params = options.target_params;
      o.draft_params = draft_params;
      o.gamma = gamma;
      o.max_new_tokens = options.max_new_tokens;
      if (options.stop_token) o.stop_tokens.push_back(*options.stop_token);
      const request_handle h = decoder.add(std::move(o));
      while (decoder.active() > 0)
        for (const step_event& e : decoder.step()) {
          r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
          r.status = e.status;
          if (e.finished != finish_reason::none) r.stats = decoder.stats(h);
        }
      r.stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return r;
    }
  }
  chain_drafter<Draft> drafter(draft, draft_params);
  return decode(policy, target, drafter, fixed_length{gamma}, rule, prompt, options);
}

//! The baseline: one target call per token, sampled from the warped target row (purpose target_sample).
template <Model Target>
decode_result decode_target_only(const Target& target, std::span<const token_id> prompt, const decode_options& options) {
  validate(options.target_params);
  validate(options.cost);
  const std::size_t V = target.vocab_size();
  const auto start = std::chrono::steady_clock::now();
  decode_result r;
  std::vector<token_id> context(prompt.begin(), prompt.end());
  std::vector<float> logits(V), probs(V);
  while (r.tokens.size() < options.max_new_tokens) {
    const random::request_stream stream{options.seed, options.request_id, static_cast<std::uint32_t>(r.stats.iterations)};
    target.next_logits(std::span<const token_id>(context), std::span<float>(logits));
    detail::warp_rows(logits, probs, V, options.target_params);
    const auto x = sample_categorical(std::span<const float>(probs), stream.open(0, random::purpose::target_sample).uniform());
    ++r.stats.iterations;
    ++r.stats.target_calls;
    ++r.stats.target_positions;
    r.stats.simulated_time += options.cost.target_time(1);
    r.tokens.push_back(x.token);
    context.push_back(x.token);
    if (detail::finish(r, options)) break;
  }
  r.stats.emitted = r.tokens.size();
  r.stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

//! Simulated speedup of a speculative run over target-only decoding of the same number of tokens
//! under the same cost model: emitted * t_target(1) / simulated_time.
inline double simulated_speedup(const decode_stats& s, const cost_model& c) {
  return s.simulated_time > 0.0 ? static_cast<double>(s.emitted) * c.target_time(1) / s.simulated_time : 0.0;
}

}  // namespace specdec
