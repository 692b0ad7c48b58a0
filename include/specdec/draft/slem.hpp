//! \file draft/slem.hpp
//! \brief SLEM, string-level exact match: speculative decoding with a draft whose vocabulary is not the
//! target's (Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms
//! for Heterogeneous Vocabularies", ICML 2025, arXiv 2502.05202, Alg. 2), as a drafter stage of the
//! step decoder.
//!
//! Each round: the draft, reading the target's text in its own tokens (vocab/retokenized_context.hpp),
//! drafts `draft_tokens` tokens (gamma when 0) from its warped rows; their text s is re-tokenized by the
//! target's tokenizer with a look-behind window (`slem_realign`): the pieces of the last
//! `target_lookbehind` emitted target tokens, W, are encoded together with s, and the tokens after the
//! point where the encoding has spelled exactly W are the target drafts (at most gamma of them). When
//! re-tokenization re-spells the window (["a", "b"] as ["ab"]) those tokens are only the encoding's view:
//! emitted tokens are never changed; when one token straddles the end of W ("a" + "bc" as ["ab", "c"]),
//! s is encoded alone. The next round rolls the draft's state back to the text the target accepted.
//!
//! Guarantee: verify with greedy or sample-and-match (exact match against the target's own argmax or
//! samples): every emitted token is the target's own, so the output law is exactly the target's, however
//! the drafts were chosen. With `one_hot_vocab` the stage also writes one-hot q rows, for strict or
//! lenient 1: the one-hot rule is exact for any proposal drawn without the target's coins (accept x
//! with p(x), else sample p without x: p(y) = r(y) p(y) + sum_{x != y} r(x) p(y) for any draft law r).
//! The drafts' own law is not handed over (SLRS, the paper's Alg. 3, would need its push-forward
//! through re-tokenization; not built).
//! \throws specdec::numerical_error (the request ends with `invalid_row`) when the draft's row is
//!         unusable; specdec::error when a tokenizer cannot carry the text (the step decoder ends
//!         only that request, with `stage_error`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/cross_vocab.hpp"
#include "specdec/draft/model_free.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/vocab/retokenized_context.hpp"
#include "specdec/vocab/text_tokenizer.hpp"

namespace specdec {

//! SLEM's own options.
struct slem_options {
  std::size_t target_lookbehind = 4;  //!< emitted target tokens whose text is encoded with the draft's
  std::size_t draft_tokens = 0;       //!< draft tokens drafted per round (0: the round's gamma)
  std::size_t one_hot_vocab = 0;      //!< V of the target: write one-hot q rows (strict, lenient); 0: none
};

//! The target drafts of a draft text after an emitted window (`slem_realign`).
struct slem_alignment {
  std::vector<token_id> drafts;  //!< target tokens that continue the emitted text with the draft's
  bool respelled = false;        //!< the encoding spelled the window with other tokens (left as emitted)
  bool straddled = false;        //!< a token straddled the window's end: the draft text was encoded alone
};

//! Target drafts for `draft_text` after the emitted target tokens `window` (file comment): encode
//! text(window) + draft_text; the tokens after the point where exactly text(window) is spelled are the
//! drafts; if no token ends there, encode `draft_text` alone. The window itself is never changed.
//! \throws specdec::error when the tokenizer cannot encode the text or its pieces do not spell it.
template <TextTokenizer T>
slem_alignment slem_realign(const T& target_tokenizer, std::span<const token_id> window, std::string_view draft_text) {
  slem_alignment a;
  std::string text;
  append_text(target_tokenizer, window, text);
  const std::size_t boundary = text.size();
  text.append(draft_text);
  const std::vector<token_id> r = encode_checked(target_tokenizer, text, "specdec::slem_realign");
  std::size_t spelled = 0, j = 0;
  while (j < r.size() && spelled < boundary) spelled += std::string(target_tokenizer.piece(r[j++])).size();
  if (spelled == boundary) {
    a.drafts.assign(r.begin() + static_cast<std::ptrdiff_t>(j), r.end());
    // The window's tokens with text (special tokens spell nothing) against the encoding's.
    std::size_t k = 0;
    for (const token_id t : window) {
      if (std::string(target_tokenizer.piece(t)).empty()) continue;
      a.respelled = a.respelled || k >= j || r[k] != t;
      ++k;
    }
    a.respelled = a.respelled || k != j;
  } else {
    a.straddled = true;
    a.drafts = encode_checked(target_tokenizer, draft_text, "specdec::slem_realign");
  }
  return a;
}

//! Counters of a SLEM drafter.
struct slem_stats {
  std::size_t rounds = 0;     //!< rounds drafted
  std::size_t respelled = 0;  //!< rounds whose window the encoding spelled otherwise
  std::size_t straddled = 0;  //!< rounds where a token straddled the window's end
};

//! SLEM (file comment) over a draft `StatefulModel` of the draft's vocabulary, one per request; call it
//! as a drafter stage (`slem_stage`). The tokenizers and what `Draft` refers to must outlive it.
template <StatefulModel Draft, TextTokenizer TargetTokenizer, TextTokenizer DraftTokenizer>
class slem_drafter {
 public:
  //! \throws specdec::error when the draft tokenizer's vocabulary is not the draft model's, when
  //!         `one_hot_vocab` is neither 0 nor the target's, or on invalid warp parameters.
  slem_drafter(Draft draft, const TargetTokenizer& target_tokenizer, const DraftTokenizer& draft_tokenizer,
               cross_vocab_options options = {}, slem_options slem = {})
      : target_tok_(&target_tokenizer),
        draft_tok_(&draft_tokenizer),
        params_(options.draft_params),
        slem_(slem),
        context_(std::move(draft), target_tokenizer, draft_tokenizer, std::move(options.context)) {
    validate(params_);
    SPECDEC_EXPECTS(draft_tokenizer.vocab_size() == context_.model().vocab_size(),
                    "specdec::slem_drafter: the draft tokenizer's vocabulary is not the draft model's");
    SPECDEC_EXPECTS(slem.one_hot_vocab == 0 || slem.one_hot_vocab == target_tokenizer.vocab_size(),
                    "specdec::slem_drafter: one_hot_vocab must be 0 or the target's vocabulary size");
  }

  //! Drafts at most gamma target tokens after `context` (the drafter stage's call; draft token j is
  //! drawn at stream position j, purpose draft).
  void operator()(std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream, stage_draft& out) {
    out.clear();
    context_.sync(context);
    if (gamma == 0) return;
    const std::size_t vd = draft_tok_->vocab_size(), n = slem_.draft_tokens > 0 ? slem_.draft_tokens : gamma;
    logits_.resize(vd);
    q_.resize(vd);
    text_.clear();
    for (std::size_t j = 0; j < n; ++j) {
      context_.model().next_logits(std::span<float>(logits_));
      ++out.model_calls;
      if (warp_logits(std::span<const float>(logits_), std::span<float>(q_), params_) != row_status::ok)
        throw numerical_error("specdec::slem_drafter: the draft model returned a row without usable mass");
      const auto x = sample_categorical(std::span<const float>(q_),
                                        stream.open(static_cast<std::uint32_t>(j), random::purpose::draft).uniform());
      text_ += draft_tok_->piece(x.token);
      context_.append_draft(x.token);
    }
    const std::size_t w = std::min(slem_.target_lookbehind, context.size());
    slem_alignment a = slem_realign(*target_tok_, context.last(w), text_);
    if (a.drafts.size() > gamma) a.drafts.resize(gamma);
    ++stats_.rounds;
    stats_.respelled += a.respelled ? 1 : 0;
    stats_.straddled += a.straddled ? 1 : 0;
    const std::size_t calls = out.model_calls;
    write_model_free_chain(std::span<const token_id>(a.drafts), slem_.one_hot_vocab, out);
    out.model_calls = out.charged_steps = calls;
  }

  //! The drafter's counters so far.
  const slem_stats& stats() const noexcept { return stats_; }
  //! The draft's view of the target's text.
  const retokenized_context<Draft, TargetTokenizer, DraftTokenizer>& context() const noexcept { return context_; }

 private:
  const TargetTokenizer* target_tok_;
  const DraftTokenizer* draft_tok_;
  warp_params params_;
  slem_options slem_;
  retokenized_context<Draft, TargetTokenizer, DraftTokenizer> context_;
  std::vector<float> logits_, q_;
  std::string text_;
  slem_stats stats_;
};

//! SLEM over `draft` as a drafter stage of the step decoder (one per request). \throws what
//! `slem_drafter`'s constructor throws.
template <StatefulModel Draft, TextTokenizer TargetTokenizer, TextTokenizer DraftTokenizer>
draft_stage_of<draft_output::chain> slem_stage(Draft draft, const TargetTokenizer& target_tokenizer,
                                               const DraftTokenizer& draft_tokenizer, cross_vocab_options options = {},
                                               slem_options slem = {}) {
  return shared_stage<draft_output::chain>(std::make_shared<slem_drafter<Draft, TargetTokenizer, DraftTokenizer>>(
      std::move(draft), target_tokenizer, draft_tokenizer, std::move(options), slem));
}

}  // namespace specdec
