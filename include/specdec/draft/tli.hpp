//! \file draft/tli.hpp
//! \brief TLI, token-level intersection: speculative decoding with a draft whose vocabulary is not the
//! target's (Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms
//! for Heterogeneous Vocabularies", ICML 2025, arXiv 2502.05202, Alg. 4), as a drafter stage of the
//! step decoder.
//!
//! Each drafted position: the draft's logits over its own vocabulary are restricted to the tokens whose
//! string the target also has (`vocab_map`: the others set to -inf) and warped with the stage's
//! `draft_params`, which renormalises: q' = q restricted to the intersection I and renormalised (with
//! temperature alone, exactly q|_I / q(I); top-k, top-p and min-p then act inside I, so a greedy draft
//! drafts the most likely shared token). x ~ q' is sampled in draft ids, handed over as the target id
//! spelling it, with q' scattered to target ids as its q row (draft ids with one string add up).
//! The draft reads its own tokens: the target's text re-tokenized by its tokenizer
//! (vocab/retokenized_context.hpp), then its drafts.
//!
//! Guarantee: q' is a distribution over target ids and x is drawn from it, so every chain rule that is
//! exact for a draft that hands over the law it sampled from stays exact: strict keeps min(1, p/q'),
//! block verification, greedy and sample-and-match too, on the step decoder's batches like any stage.
//! Handing over q|_I without renormalising, or q' indexed by draft ids, is biased (tests/decode/
//! cross_vocab.cpp shows both fail the exact-law test).
//! A row with no mass on the intersection (every shared token at -inf; the mask comes before the warp,
//! so a filter never empties it) ends the round's drafting there: the target verifies the drafts so
//! far (none: a target-only step), and `empty_rows` counts it.
//! \throws specdec::numerical_error (the decoder ends the request with `invalid_row`) when the draft's
//!         row is unusable (NaN, +inf, no mass at all); specdec::error when the tokenizers cannot
//!         carry the text (retokenized_context; the step decoder ends only that request, with
//!         `stage_error`).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/cross_vocab.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/vocab/retokenized_context.hpp"
#include "specdec/vocab/text_tokenizer.hpp"
#include "specdec/vocab/vocab_map.hpp"

namespace specdec {

//! The mass the draft's row puts on the map's intersection at the draft's temperature (before top-k,
//! top-p, min-p): softmax(logits / T) summed over draft ids with a target id; under T = 0, 1 when the
//! row's maximum is reached inside the intersection, else 0. What TLI's renormalisation divides by.
//! \pre the row is usable (checked by the caller).
template <class T>
double intersection_mass(std::span<const T> logits, std::span<const T> masked, double temperature) {
  if (temperature == 0.0) {
    double full = 0.0, shared = 0.0;
    detail::logit_row_max(logits, full);
    detail::logit_row_max(masked, shared);
    return shared == full ? 1.0 : 0.0;
  }
  return std::exp(log_sum_exp(masked, temperature) - log_sum_exp(logits, temperature));
}

//! TLI (file comment) over a draft `StatefulModel` of the draft's vocabulary, one per request; call it
//! as a drafter stage (`tli_stage`). The map, the tokenizers and what `Draft` refers to must outlive it.
template <StatefulModel Draft, TextTokenizer TargetTokenizer, TextTokenizer DraftTokenizer>
class tli_drafter {
 public:
  //! \throws specdec::error when the map's sizes are not the tokenizers' and the draft's vocabularies
  //!         (a draft whose vocabulary is not what its metadata says), or on invalid warp parameters.
  tli_drafter(Draft draft, const vocab_map& map, const TargetTokenizer& target_tokenizer, const DraftTokenizer& draft_tokenizer,
              cross_vocab_options options = {})
      : map_(&map),
        params_(options.draft_params),
        context_(std::move(draft), target_tokenizer, draft_tokenizer, std::move(options.context)) {
    validate(params_);
    SPECDEC_EXPECTS(map.draft_size() == draft_tokenizer.vocab_size() && map.draft_size() == context_.model().vocab_size(),
                    "specdec::tli_drafter: the map's draft vocabulary is not the draft model's or its tokenizer's");
    SPECDEC_EXPECTS(map.target_size() == target_tokenizer.vocab_size(),
                    "specdec::tli_drafter: the map's target vocabulary is not the target tokenizer's");
  }

  //! Drafts at most gamma target tokens after `context` with their q' rows over the target's
  //! vocabulary (the drafter stage's call; draw j: stream position j, purpose draft).
  void operator()(std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream, stage_draft& out) {
    out.clear();
    masses_.clear();
    context_.sync(context);
    const std::size_t vd = map_->draft_size(), vt = map_->target_size();
    const std::span<const token_id> to_target = map_->draft_to_target();
    logits_.resize(vd);
    masked_.resize(vd);
    q_.resize(vd);
    for (std::size_t j = 0; j < gamma; ++j) {
      context_.model().next_logits(std::span<float>(logits_));
      ++out.model_calls;
      for (std::size_t d = 0; d < vd; ++d)
        masked_[d] = to_target[d] == no_token ? -std::numeric_limits<float>::infinity() : logits_[d];
      if (warp_logits(std::span<const float>(masked_), std::span<float>(q_), params_) != row_status::ok) {
        if (warp_logits(std::span<const float>(logits_), std::span<float>(q_), params_) != row_status::ok)
          throw numerical_error("specdec::tli_drafter: the draft model returned a row without usable mass");
        ++empty_rows_;  // no mass on the intersection: the round drafts no further
        break;
      }
      masses_.push_back(intersection_mass(std::span<const float>(logits_), std::span<const float>(masked_), params_.temperature));
      const auto x = sample_categorical(std::span<const float>(q_),
                                        stream.open(static_cast<std::uint32_t>(j), random::purpose::draft).uniform());
      out.tokens.push_back(to_target[static_cast<std::size_t>(x.token)]);
      out.q_rows.resize((j + 1) * vt, 0.0f);
      float* row = out.q_rows.data() + j * vt;
      for (std::size_t d = 0; d < vd; ++d)
        if (q_[d] > 0.0f) row[static_cast<std::size_t>(to_target[d])] += q_[d];  // q_ is 0 off the intersection
      context_.append_draft(x.token);
    }
    out.charged_steps = out.model_calls;
  }

  //! The intersection mass of each row the last round drafted from (`intersection_mass`).
  std::span<const double> masses() const noexcept { return masses_; }
  //! Rows so far that had no mass on the intersection (each ended its round's drafting).
  std::size_t empty_rows() const noexcept { return empty_rows_; }
  //! The draft's view of the target's text.
  const retokenized_context<Draft, TargetTokenizer, DraftTokenizer>& context() const noexcept { return context_; }

 private:
  const vocab_map* map_;
  warp_params params_;
  retokenized_context<Draft, TargetTokenizer, DraftTokenizer> context_;
  std::vector<float> logits_, masked_, q_;
  std::vector<double> masses_;
  std::size_t empty_rows_ = 0;
};

//! TLI over `draft` as a drafter stage of the step decoder (one per request: it holds the request's
//! draft state). \throws what `tli_drafter`'s constructor throws.
template <StatefulModel Draft, TextTokenizer TargetTokenizer, TextTokenizer DraftTokenizer>
draft_stage_of<draft_output::chain> tli_stage(Draft draft, const vocab_map& map, const TargetTokenizer& target_tokenizer,
                                              const DraftTokenizer& draft_tokenizer, cross_vocab_options options = {}) {
  return shared_stage<draft_output::chain>(std::make_shared<tli_drafter<Draft, TargetTokenizer, DraftTokenizer>>(
      std::move(draft), map, target_tokenizer, draft_tokenizer, std::move(options)));
}

}  // namespace specdec
