//! \file draft/beam.hpp
//! \brief Beam drafts for MTAD (seed 003, section 2.1 and Algorithm 1 line 3): W beams grown for
//! gamma steps over the draft model's warped joint distribution, in three modes, returning the
//! chosen draft and the joint log-probabilities log q(x_{1:j}) of its prefixes.
//!
//! **The joint.** Each beam's next-token row is warped per row with `beam_params::warp` (temperature,
//! then top-k, then top-p: appendix F's defaults are top-20 then 0.9, `mtad_default_warp`), giving
//! q~(. | x_{1:t-1}); the joint of a prefix is the product of its warped conditionals,
//! log q~(x_{1:t}) = sum_i log q~(x_i | x_{1:i-1}), accumulated in double (never underflows: a
//! prefix of 10^4 tokens of probability 10^-30 each is about -7 10^5). Warp the target side with the
//! same parameters so that the verifier compares like with like (appendix F warps p and q alike).
//! The warp is applied to each conditional row, not a second time to the joint p_beam of eq. (2).
//!
//! **One step** (t = 1..gamma). The B live beams I_{t-1} (B = 1, the empty prefix, at t = 1) are
//! scored in one `batch_next_logits` call (B draft-model evaluations; one batched forward when the
//! model is a `BatchedModel`). The candidates are the pairs (beam i, token v) with q~(v | beam i) > 0,
//! with score s(i, v) = log q~(x^(i)_{1:t-1}) + log q~(v | x^(i)_{1:t-1}) = log of the numerator of
//! p_beam in eq. (2). Then, by `beam_mode`:
//! - `search`: the W candidates with the largest scores (deterministic beam search, the last sentence
//!   of section 2.1); ties go to the lower beam index, then the lower token id;
//! - `sample`: W independent draws from p_beam (eq. (2)), i.e. with replacement; a pair may be drawn
//!   twice, and then both copies live on as separate (identical) beams;
//! - `sample_without_replacement`: W distinct pairs drawn one after another without replacement, each
//!   draw proportional to p_beam over the pairs not yet drawn (Plackett-Luce / successive sampling).
//!   Implemented in one pass by Gumbel-top-k (Vieira 2014; Kool et al. 2019): the top W of
//!   s(i, v) + G(i, v), G i.i.d. standard Gumbel; the beams keep the order of their draws.
//! Fewer than W candidates keep them all (B may stay below W). Selection never sorts the W x V
//! candidates: `top_w_indices` (nth_element, then a sort of W).
//!
//! **The chosen draft.** After gamma steps the beams are ordered by their joint log q~ (descending;
//! ties keep the earlier beam) and the draft is the first: the highest joint likelihood under the
//! warped draft, the beam that approximates arg max q(x_{1:gamma}) (Lemma 3.4, eq. (5)).
//!
//! **Cost.** One draft-model evaluation per live beam per step: 1 + (gamma - 1) W at most, in gamma
//! batched calls. Copies: every step copies the context into each beam's buffer (O(W (L + gamma))).
//!
//! **Randomness.** Step t reads the stream (position t - 1, purpose beam) of the request's step:
//! `sample` draws W uniforms, `sample_without_replacement` one Gumbel per candidate, in candidate
//! order (beam, then token id). `search` draws nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/top_w.hpp"

namespace specdec {

//! How the W beams of the next step are picked from the W x V candidates.
enum class beam_mode : std::uint8_t {
  search,                      //!< deterministic: the W highest joint scores
  sample,                      //!< W draws from p_beam of eq. (2), with replacement
  sample_without_replacement,  //!< W distinct draws from p_beam, without replacement (Gumbel-top-k)
};

//! The warping of MTAD's experiments (appendix F): top-20, then top-p 0.9, temperature 1.
inline constexpr warp_params mtad_default_warp{.temperature = 1.0, .top_k = 20, .top_p = 0.9, .min_p = 0.0};

//! Parameters of a beam draft. Defaults: W = 8 (Table 15), sampling without replacement, the
//! warping of appendix F.
struct beam_params {
  std::size_t width = 8;                                   //!< W >= 1
  beam_mode mode = beam_mode::sample_without_replacement;  //!< how the W beams are picked
  warp_params warp = mtad_default_warp;                    //!< applied to every q row (use the target's too)
};

//! Checks a beam_params.
//! \throws specdec::error when width < 1, the mode is not a beam_mode, or the warp is invalid.
inline void validate(const beam_params& b) {
  SPECDEC_EXPECTS(b.width >= 1, "the beam width W must be >= 1");
  SPECDEC_EXPECTS(b.mode == beam_mode::search || b.mode == beam_mode::sample || b.mode == beam_mode::sample_without_replacement,
                  "unknown beam_mode");
  validate(b.warp);
}

//! What a beam draft wrote.
struct beam_block {
  std::vector<token_id> tokens;       //!< the chosen draft x_1..x_gamma (the best beam)
  std::vector<double> log_q;          //!< log_q[j - 1] = log q~(x_{1:j}), j = 1..gamma (non-increasing)
  std::size_t beam_count = 0;         //!< beams alive at the end, <= W
  std::vector<token_id> beam_tokens;  //!< [beam_count][gamma], best beam first
  std::vector<double> beam_log_q;     //!< [beam_count]: each beam's joint log q~(x_{1:gamma})
  std::size_t model_calls = 0;        //!< draft-model evaluations (rows): sum over steps of the live beams
  std::size_t batched_calls = 0;      //!< batch_next_logits calls: gamma
};

namespace detail {
//! A candidate (beam, token) of one step and its joint score log q~(prefix, token).
struct beam_candidate {
  std::uint32_t beam;
  token_id token;
  double score;
};

//! Draws `w` candidates i.i.d. with probability proportional to exp(score) (eq. (2)), by one pass
//! of prefix sums and a binary search per uniform. Writes candidate indices into `out`.
inline void draw_with_replacement(std::span<const beam_candidate> c, std::size_t w, random::philox_stream rng,
                                  std::vector<double>& cumulative, std::vector<std::size_t>& out) {
  double max = -std::numeric_limits<double>::infinity();
  for (const auto& x : c) max = std::max(max, x.score);
  cumulative.resize(c.size());
  double total = 0.0;
  for (std::size_t i = 0; i < c.size(); ++i) cumulative[i] = total += std::exp(c[i].score - max);
  out.clear();
  for (std::size_t k = 0; k < w; ++k) {
    const double goal = rng.uniform() * total;  // in [0, total)
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), goal);
    out.push_back(std::min(static_cast<std::size_t>(it - cumulative.begin()), c.size() - 1));
  }
}
}  // namespace detail

//! Drafts with W beams from any `Model` (see the file comment for the algorithm and guarantees).
//! Holds a pointer to the model (it must outlive the drafter) and reusable buffers.
template <Model DraftModel>
class beam_drafter {
 public:
  //! \throws specdec::error on invalid parameters (validate(beam_params)).
  beam_drafter(const DraftModel& model, beam_params params) : model_(&model), params_(params) { validate(params_); }

  //! The draft model's vocabulary size V.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! The parameters.
  const beam_params& params() const noexcept { return params_; }

  //! Grows the beams for gamma steps after `context` and writes the chosen draft and every beam into
  //! `out`. Returns the number of draft-model evaluations (`out.model_calls`).
  //! \pre gamma >= 1; the context ids are in the vocabulary (checked by the model).
  //! \throws specdec::error when gamma < 1; specdec::numerical_error when the draft model returns a
  //!         row without usable mass (after warping).
  std::size_t draft(std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream, beam_block& out) {
    SPECDEC_EXPECTS(gamma >= 1, "the draft length gamma must be >= 1");
    const std::size_t V = model_->vocab_size();
    const std::size_t L = context.size();
    out = beam_block{};
    // Beam b's tokens (context included) live in contexts_[b]; its prefix log q~ in log_q_[b] (gamma entries).
    contexts_.assign(1, std::vector<token_id>(context.begin(), context.end()));
    log_q_.assign(1, std::vector<double>{});
    for (std::size_t t = 0; t < gamma; ++t) {
      const std::size_t B = contexts_.size();
      spans_.assign(contexts_.begin(), contexts_.end());
      logits_.resize(B * V);
      q_.resize(V);
      batch_next_logits(*model_, std::span<const std::span<const token_id>>(spans_), std::span<float>(logits_));
      out.model_calls += B;
      ++out.batched_calls;

      candidates_.clear();
      for (std::size_t b = 0; b < B; ++b) {
        if (warp_logits(std::span<const float>(logits_).subspan(b * V, V), std::span<double>(q_), params_.warp) != row_status::ok)
          throw numerical_error("specdec::beam_drafter::draft: the draft model returned a row without usable mass");
        const double prefix = t == 0 ? 0.0 : log_q_[b].back();
        for (std::size_t v = 0; v < V; ++v)
          if (q_[v] > 0.0)
            candidates_.push_back({static_cast<std::uint32_t>(b), static_cast<token_id>(v), prefix + std::log(q_[v])});
      }
      select(t, stream);

      next_contexts_.clear();
      next_log_q_.clear();
      for (const std::size_t i : chosen_) {
        const detail::beam_candidate& c = candidates_[i];
        next_contexts_.push_back(contexts_[c.beam]);
        next_contexts_.back().push_back(c.token);
        next_log_q_.push_back(log_q_[c.beam]);
        next_log_q_.back().push_back(c.score);
      }
      contexts_.swap(next_contexts_);
      log_q_.swap(next_log_q_);
    }

    // Best beam first: joint log q~ descending, ties keep the earlier beam.
    order_.resize(contexts_.size());
    for (std::size_t b = 0; b < order_.size(); ++b) order_[b] = b;
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::size_t a, std::size_t b) { return log_q_[a].back() > log_q_[b].back(); });
    out.beam_count = order_.size();
    for (const std::size_t b : order_) {
      out.beam_tokens.insert(out.beam_tokens.end(), contexts_[b].begin() + static_cast<std::ptrdiff_t>(L), contexts_[b].end());
      out.beam_log_q.push_back(log_q_[b].back());
    }
    const std::size_t best = order_.front();
    out.tokens.assign(contexts_[best].begin() + static_cast<std::ptrdiff_t>(L), contexts_[best].end());
    out.log_q = log_q_[best];
    return out.model_calls;
  }

 private:
  // Fills chosen_ with the candidate indices of the next beams, in beam order.
  void select(std::size_t t, const random::request_stream& stream) {
    const std::size_t W = params_.width;
    const auto draws = stream.open(static_cast<std::uint32_t>(t), random::purpose::beam);
    keys_.resize(candidates_.size());
    switch (params_.mode) {
      case beam_mode::search:
        for (std::size_t i = 0; i < candidates_.size(); ++i) keys_[i] = candidates_[i].score;
        top_w_indices(std::span<const double>(keys_), W, chosen_);
        break;
      case beam_mode::sample_without_replacement: {
        auto g = draws;
        for (std::size_t i = 0; i < candidates_.size(); ++i) keys_[i] = candidates_[i].score + g.gumbel();
        top_w_indices(std::span<const double>(keys_), W, chosen_);
        break;
      }
      case beam_mode::sample: detail::draw_with_replacement(candidates_, W, draws, keys_, chosen_); break;
    }
  }

  const DraftModel* model_;
  beam_params params_;
  std::vector<std::vector<token_id>> contexts_, next_contexts_;
  std::vector<std::vector<double>> log_q_, next_log_q_;
  std::vector<std::span<const token_id>> spans_;
  std::vector<float> logits_;
  std::vector<double> q_, keys_;
  std::vector<detail::beam_candidate> candidates_;
  std::vector<std::size_t> chosen_, order_;
};

//! How the simulated clock charges a beam draft of gamma steps (cost_model::t_draft per unit).
enum class mtad_draft_cost : std::uint8_t {
  per_step,  //!< gamma units: the W beams of a step run as one batched forward (MTAD's Table 2 regime)
  per_beam,  //!< one unit per beam evaluation (1 + (gamma - 1) W): a draft model that cannot batch
};

//! A `beam_drafter` as a drafter stage of the step decoder (draft/stage.hpp): the best beam and its
//! joint log q~ of every prefix (for MTAD's joint rule), no q rows; a round of gamma = 0 drafts
//! nothing. The stage refers to `drafter`, which must outlive it.
template <Model DraftModel>
draft_stage_of<draft_output::joint> beam_stage(beam_drafter<DraftModel>& drafter,
                                               mtad_draft_cost charge = mtad_draft_cost::per_step) {
  return draft_stage_of<draft_output::joint>(
      [d = &drafter, charge, block = beam_block{}](std::span<const token_id> context, std::size_t gamma,
                                                   const random::request_stream& stream, stage_draft& out) mutable {
        if (gamma == 0) return;
        d->draft(context, gamma, stream, block);
        out.tokens.swap(block.tokens);
        out.log_q.swap(block.log_q);
        out.model_calls = block.model_calls;
        out.charged_steps = charge == mtad_draft_cost::per_step ? out.tokens.size() : block.model_calls;
      });
}

//! One beam draft of length gamma after `context` (a `beam_drafter` used once).
//! \pre gamma >= 1. \throws specdec::error on invalid parameters or gamma < 1;
//!      specdec::numerical_error when the draft model returns a row without usable mass.
template <Model DraftModel>
beam_block draft_beams(const DraftModel& model, std::span<const token_id> context, std::size_t gamma, const beam_params& params,
                       const random::request_stream& stream) {
  beam_drafter<DraftModel> drafter(model, params);
  beam_block out;
  drafter.draft(context, gamma, stream, out);
  return out;
}

}  // namespace specdec
