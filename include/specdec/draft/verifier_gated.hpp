//! \file draft/verifier_gated.hpp
//! \brief SPRINTER's drafter (seed 000, Algorithm 1 and Algorithm 2 of appendix A.5): draft one token
//! at a time from q and ask the verifier after each one; keep drafting while V(s(x, prefix)) >= tau.
//!
//! A run drafts x_1, x_2, ... and ends at the first of:
//! - the verifier rejects x_j (V < tau): x_j goes to the target, which checks it with min(1, p/q)
//!   (decode/sprinter.hpp);
//! - the run reaches the cap `max_run` (default 20): x_cap is NOT shown to the verifier and goes to
//!   the target (a forced check), so the target is called at least once every max_run tokens (a
//!   bound the paper's unbounded Algorithm 2 lacks; it is exact SD for that token, its law is p);
//! - the generation budget `budget < max_run` is reached and the verifier accepted x_budget: the run
//!   ends with no token to check (the generation is over).
//! Tokens x_1..x_{j-1} before the last one were accepted by the verifier and are kept without any
//! target check. Randomness: draft j uses (position j, purpose::draft) of the run's stream, and the
//! verifier sees (position j, purpose::verifier) through its query.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! SPRINTER's gating parameters.
struct gating_params {
  double tau = 0.5;          //!< inference threshold: keep drafting while V(s) >= tau (A.5 uses 0.5)
  std::size_t max_run = 20;  //!< cap on the tokens of one run; the cap-th token is target-checked
};

//! \throws specdec::error unless tau in [0, 1] and max_run >= 1.
inline void validate(const gating_params& g) {
  validate_threshold(g.tau);
  SPECDEC_EXPECTS(g.max_run >= 1, "max_run must be >= 1");
}

//! How a run ended (see the file comment). Tokens [0, verifier_accepted) were accepted by the verifier;
//! when `needs_check()`, the last token goes to the target.
struct gated_run {
  std::size_t verifier_calls = 0;     //!< verifier evaluations in this run
  std::size_t verifier_accepted = 0;  //!< leading tokens the verifier accepted
  bool verifier_rejected = false;     //!< the last token was rejected by the verifier
  bool forced_check = false;          //!< the run reached max_run; its last token was not shown to the verifier
  //! Whether the last drafted token must be checked by the target.
  constexpr bool needs_check() const noexcept { return verifier_rejected || forced_check; }
};

//! What SPRINTER counts beyond `decode_stats` (`gated_stage` fills the run counters, decode_sprinter
//! the target's). In the `decode_stats` of a SPRINTER result:
//! iterations = runs; drafted = draft tokens; accepted = draft tokens kept (by the verifier, or by the
//! target's check), so acceptance_rate() is Theorem A.4's beta_SPRINTER (forced checks included);
//! draft_calls = drafted; target_positions as in the file comment.
struct sprinter_stats {
  std::size_t verifier_calls = 0;        //!< verifier evaluations
  std::size_t verifier_accepted = 0;     //!< tokens kept on the verifier's word alone
  std::size_t target_checks = 0;         //!< last tokens checked by the target (= target calls)
  std::size_t target_kept = 0;           //!< checked tokens the target kept (the rest were resampled)
  std::size_t forced_checks = 0;         //!< runs that reached max_run
  std::size_t budget_ends = 0;           //!< runs that ended at the budget with no target call
  std::vector<std::size_t> run_lengths;  //!< N of each run: its verifier-accepted tokens (Theorem 3.3)

  //! Mean verifier-accepted tokens per run, the empirical E[N_SPRINTER] (Theorem 3.3).
  double mean_verifier_run() const noexcept {
    if (run_lengths.empty()) return 0.0;
    double s = 0.0;
    for (const std::size_t n : run_lengths) s += static_cast<double>(n);
    return s / static_cast<double>(run_lengths.size());
  }
  //! Accepted over evaluated by the verifier.
  double verifier_accept_rate() const noexcept {
    return verifier_calls ? double(verifier_accepted) / double(verifier_calls) : 0.0;
  }
};

//! SPRINTER's verifier-gated drafter over a draft `Model`, warped with `draft_params`. Also a
//! `Drafter` (draft/chain.hpp): `draft(context, budget, stream, out)` drops the run record.
//! Stores a reference to the model and copies of the extractor and the verifier.
template <Model DraftModel, FeatureExtractor Features, Verifier V>
class verifier_gated_drafter {
 public:
  //! \throws specdec::error on invalid warp or gating parameters, or when the extractor's and the
  //! verifier's feature sizes differ.
  verifier_gated_drafter(const DraftModel& model, warp_params draft_params, Features features, V verifier,
                         gating_params gating = {})
      : model_(&model), params_(draft_params), features_(std::move(features)), verifier_(std::move(verifier)), gating_(gating) {
    validate(params_);
    validate(gating_);
    SPECDEC_EXPECTS(static_cast<std::size_t>(features_.feature_size()) == static_cast<std::size_t>(verifier_.feature_size()),
                    "the feature extractor and the verifier disagree on the number of features");
  }

  //! V, the draft model's vocabulary size.
  std::size_t vocab_size() const { return static_cast<std::size_t>(model_->vocab_size()); }
  //! The warp applied to every draft row.
  const warp_params& params() const noexcept { return params_; }
  //! The gating parameters.
  const gating_params& gating() const noexcept { return gating_; }
  //! The verifier that gates the drafts.
  const V& verifier() const noexcept { return verifier_; }
  //! The feature extractor (mutable: an extractor may keep buffers or state).
  Features& features() noexcept { return features_; }

  //! Drafts one run after `context`, at most min(max_run, budget) tokens; writes the tokens and their q
  //! rows to `out` and how the run ended to `run`; returns the number of draft-model calls.
  //! \pre budget >= 1. \throws specdec::error when it is 0; specdec::numerical_error when the draft
  //! model returns a row without usable mass or the verifier returns NaN or a score outside [0, 1].
  std::size_t draft(std::span<const token_id> context, std::size_t budget, const random::request_stream& stream, draft_block& out,
                    gated_run& run) {
    SPECDEC_EXPECTS(budget >= 1, "a run needs a budget of at least one token");
    const std::size_t Vn = vocab_size();
    const std::size_t limit = std::min(gating_.max_run, budget);
    out.tokens.clear();
    out.q_rows.clear();
    run = gated_run{};
    context_.assign(context.begin(), context.end());
    logits_.resize(Vn);
    feature_buffer_.resize(static_cast<std::size_t>(verifier_.feature_size()));
    for (std::size_t j = 0; j < limit; ++j) {
      const auto pos = static_cast<std::uint32_t>(j);
      out.q_rows.resize((j + 1) * Vn);
      const std::span<float> q(out.q_rows.data() + j * Vn, Vn);
      model_->next_logits(std::span<const token_id>(context_), std::span<float>(logits_));
      if (warp_logits(std::span<const float>(logits_), q, params_) != row_status::ok)
        throw numerical_error("specdec::verifier_gated_drafter::draft: the draft model returned a row without usable mass");
      const token_id x = sample_categorical(std::span<const float>(q), stream.open(pos, random::purpose::draft).uniform()).token;
      out.tokens.push_back(x);
      if (j + 1 == gating_.max_run) {  // the cap: a forced target check, no verifier call
        run.forced_check = true;
        break;
      }
      const verifier_query query{std::span<const token_id>(context_), x, std::span<const float>(q), stream, pos};
      features_.extract(query, std::span<float>(feature_buffer_));
      ++run.verifier_calls;
      if (!(checked_score(verifier_, std::span<const float>(feature_buffer_)) >= gating_.tau)) {
        run.verifier_rejected = true;
        break;
      }
      ++run.verifier_accepted;
      context_.push_back(x);
    }
    return out.tokens.size();
  }

  //! The `Drafter` form: one run with budget `budget`, the run record dropped.
  std::size_t draft(std::span<const token_id> context, std::size_t budget, const random::request_stream& stream,
                    draft_block& out) {
    gated_run run;
    return draft(context, budget, stream, out, run);
  }

 private:
  const DraftModel* model_;
  warp_params params_;
  Features features_;
  V verifier_;
  gating_params gating_;
  std::vector<token_id> context_;
  std::vector<float> logits_;
  std::vector<float> feature_buffer_;
};

//! A `verifier_gated_drafter` as a drafter stage of the step decoder (draft/stage.hpp), for requests
//! with the `last_token` rule: one run of at most min(max_run, gamma) tokens (give the request a gamma
//! of at least max_run), `kept` = the tokens its verifier accepted, `check_last` when the last one goes
//! to the target. With `stats`, adds each run's verifier counters, forced checks and budget ends to it.
//! The stage refers to `drafter` (and `stats`), which must outlive it.
template <Model DraftModel, FeatureExtractor Features, Verifier V>
draft_stage_of<draft_output::marked_run> gated_stage(verifier_gated_drafter<DraftModel, Features, V>& drafter,
                                                     sprinter_stats* stats = nullptr) {
  return draft_stage_of<draft_output::marked_run>(
      [d = &drafter, stats, block = draft_block{}](std::span<const token_id> context, std::size_t gamma,
                                                   const random::request_stream& stream, stage_draft& out) mutable {
        gated_run run;
        out.model_calls = d->draft(context, gamma, stream, block, run);
        out.tokens.swap(block.tokens);
        out.q_rows.swap(block.q_rows);
        out.charged_steps = out.tokens.size();
        out.kept = run.verifier_accepted;
        out.check_last = run.needs_check();
        if (stats == nullptr) return;
        stats->verifier_calls += run.verifier_calls;
        stats->verifier_accepted += run.verifier_accepted;
        stats->run_lengths.push_back(run.verifier_accepted);
        stats->forced_checks += run.forced_check;
        stats->budget_ends += !run.needs_check();
      });
}

}  // namespace specdec
