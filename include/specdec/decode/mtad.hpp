//! \file decode/mtad.hpp
//! \brief MTAD (seed 003, Algorithm 1 repeated) as one request on the step decoder
//! (decode/batch_decoder.hpp): the beam drafter as drafter stage x fixed gamma x the joint-likelihood
//! rule, with the counters of core/decode_stats.hpp plus block efficiency (Table 5) and
//! the output's log-likelihood and perplexity under the target (eq. (1)).
//!
//! Two entry points: `decode_mtad(policy, target, drafter, length, rule[, draft_cost], prompt, options[,
//! cost])` composes the pieces (a `beam_drafter`, any `LengthPolicy`, an `mtad_rule`) like `decode` does
//! for chain methods; `decode_mtad(policy, target, draft, mtad_options, prompt, options[, cost])` builds
//! them from MTAD's parameters (fixed gamma). Each iteration r (randomness: request_stream{seed, request_id, step = r}):
//! 1. `beam_drafter` grows W beams for gamma' = min(gamma, tokens still wanted - 1) steps over the
//!    draft model, its rows warped with `decode_options::target_params` (one warper for both sides, as
//!    appendix F warps p and q alike), and returns the best beam x_{1:gamma'} with log q(x_{1:j});
//! 2. the target scores context + x_{1:gamma'} in one call (gamma' + 1 rows), warped with the same
//!    parameters;
//! 3. `mtad_verify` accepts the longest prefix with min(1, p(x_{1:j}) / q(x_{1:j})) > tau and samples
//!    one token from the target row after it.
//! The log-likelihood of each emitted token is read from the same raw target rows (unwarped
//! log-softmax, as decode/likelihood.hpp), so it costs no extra call.
//!
//! **Simulated time** (decode/cost_model.hpp): the target call costs t_target(gamma' + 1). The draft
//! costs, by `mtad_draft_cost`: `per_step` (default) gamma' t_draft, i.e. the W beams of a step run as
//! one batched forward whose cost does not grow with W (the memory-bound regime of the paper's Table 2,
//! and how a chain drafter is charged); `per_beam` t_draft per beam evaluation (1 + (gamma' - 1) W),
//! the pessimistic bound for a draft model that cannot batch. `decode_stats::draft_calls` always counts
//! beam evaluations.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/mtad.hpp"
#include "specdec/contracts.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/decode/likelihood.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/draft/beam.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/length/fixed.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/theory/mtad.hpp"

namespace specdec {

//! MTAD's parameters. Defaults are the paper's (Table 15): gamma = 4, W = 8, tau = 0.1.
struct mtad_options {
  std::size_t gamma = 4;                                   //!< draft length, >= 1
  std::size_t width = 8;                                   //!< beams W, >= 1
  beam_mode mode = beam_mode::sample_without_replacement;  //!< how beams are picked (draft/beam.hpp)
  double tau = 0.1;                                        //!< acceptance threshold in [0, 1]
  mtad_draft_cost draft_cost = mtad_draft_cost::per_step;  //!< how the simulated clock charges drafting
};

//! Checks an mtad_options.
//! \throws specdec::error when gamma < 1, width < 1, tau outside [0, 1] or NaN, or an enum is unknown.
inline void validate(const mtad_options& m) {
  SPECDEC_EXPECTS(m.gamma >= 1, "the draft length gamma must be >= 1");
  SPECDEC_EXPECTS(m.tau >= 0.0 && m.tau <= 1.0, "tau must be in [0, 1]");
  SPECDEC_EXPECTS(m.draft_cost == mtad_draft_cost::per_step || m.draft_cost == mtad_draft_cost::per_beam,
                  "unknown mtad_draft_cost");
  validate(beam_params{.width = m.width, .mode = m.mode, .warp = {}});
}

//! An MTAD generation: the tokens, counters and status of decode_result, plus the output's quality.
struct mtad_result : decode_result {
  std::vector<double> token_log_probs;  //!< log p(x_t | prompt, x_{1:t-1}) under the unwarped target
  double log_likelihood = 0.0;          //!< their sum: log p(x_{1:N} | prompt)
  //! exp(-log_likelihood / N) (eq. (1)); NaN when no token was generated, +inf if one has p = 0.
  double perplexity = std::numeric_limits<double>::quiet_NaN();

  //! Block efficiency (Table 5): tokens emitted per iteration (per target call), draft tokens and the
  //! target's own token included: the gamma_bar of Theorems 3.5 and 3.6.
  double block_efficiency() const noexcept { return stats.tokens_per_target_call(); }
};

//! Multi-token assisted decoding of one request from its pieces (docs/design.md, 'Decode'): one request on
//! the step decoder with the beam drafter as its drafter stage, any length policy (MTAD uses
//! fixed_length) and the joint rule. The drafter's warp should be `options.target_params` (appendix F
//! warps p and q alike); nothing enforces it. A model's unusable row ends the generation with
//! `invalid_row` in `status`.
//! \pre target and drafter share the vocabulary.
//! \throws specdec::error on bad options, vocabulary mismatch or an empty prompt.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, LengthPolicy L>
mtad_result decode_mtad(const Policy& policy, const Target& target, beam_drafter<Draft>& drafter, const L& length,
                        const mtad_rule& rule, mtad_draft_cost draft_cost, std::span<const token_id> prompt,
                        const decode_options& options, const cost_model& cost = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::decode_mtad");
  SPECDEC_EXPECTS(draft_cost == mtad_draft_cost::per_step || draft_cost == mtad_draft_cost::per_beam, "unknown mtad_draft_cost");
  const std::size_t V = target.vocab_size();
  SPECDEC_EXPECTS(drafter.vocab_size() == V, "the target and the draft must share the vocabulary");
  recomputing_sequence_model<Target> t(target);
  no_sequence_model none(V);
  batch_decoder decoder(policy, t, none, strict);
  request_options o = detail::request_of(prompt, options);
  o.set_stages(beam_stage(drafter, draft_cost), rule);
  o.length = length_stage(length);
  mtad_result r;
  // Emitted token k of a round was predicted by the round's target row k (unwarped log-softmax).
  detail::run_request(decoder, std::move(o), cost, r, [&](const step_event& e) {
    for (std::size_t k = 0; k < e.tokens.size(); ++k) try {
        r.token_log_probs.push_back(log_softmax_at(e.target_logits.subspan(k * V, V), e.tokens[k]));
      } catch (const numerical_error&) {  // a row with NaN elsewhere: the request ends with invalid_row
        r.token_log_probs.push_back(std::numeric_limits<double>::quiet_NaN());
      }
  });
  r.token_log_probs.resize(r.tokens.size());
  for (const double lp : r.token_log_probs) r.log_likelihood += lp;
  if (!r.tokens.empty()) r.perplexity = theory::mtad::perplexity_from_log_probs(std::span<const double>(r.token_log_probs));
  return r;
}

//! The overload above with drafting charged `mtad_draft_cost::per_step`.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, LengthPolicy L>
mtad_result decode_mtad(const Policy& policy, const Target& target, beam_drafter<Draft>& drafter, const L& length,
                        const mtad_rule& rule, std::span<const token_id> prompt, const decode_options& options,
                        const cost_model& cost = {}) {
  return decode_mtad(policy, target, drafter, length, rule, mtad_draft_cost::per_step, prompt, options, cost);
}

//! Multi-token assisted decoding of one request with MTAD's parameters: W beams of `mtad.mode` over
//! `draft`, warped with `options.target_params` like the target, fixed gamma, threshold tau.
//! \pre target and draft share the vocabulary.
//! \throws specdec::error on bad options or vocabulary mismatch; specdec::numerical_error when a model
//!         returns an unusable row.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft>
mtad_result decode_mtad(const Policy& policy, const Target& target, const Draft& draft, const mtad_options& mtad,
                        std::span<const token_id> prompt, const decode_options& options, const cost_model& cost = {}) {
  validate(mtad);
  validate(options.target_params);
  beam_drafter<Draft> drafter(draft, beam_params{.width = mtad.width, .mode = mtad.mode, .warp = options.target_params});
  return decode_mtad(policy, target, drafter, fixed_length{mtad.gamma}, mtad_rule(mtad.tau), mtad.draft_cost, prompt, options,
                     cost);
}

}  // namespace specdec
