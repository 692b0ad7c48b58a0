//! \file vocab/retokenized_context.hpp
//! \brief A draft model's own view of a target's context when their vocabularies differ: the text of
//! the target's tokens, re-tokenized by the draft's tokenizer, held in the draft's state (a
//! `StatefulModel`, e.g. a KV cache) and kept in step round after round. No target token is ever
//! mapped to an "unknown" draft token: the draft reads the same text the target wrote.
//!
//! Each round (`sync`), the pieces of the target tokens emitted since the last round are appended to
//! the text; the draft tokens of the last `lookbehind` tokens' text plus the new text are encoded
//! again (re-tokenization may merge across the old end: "a" + "b" -> "ab"), the earlier ones are kept;
//! the draft's state is rolled back to its longest common prefix with that view (the drafts it appended
//! last round and any token the new encoding changed) and the rest appended. A context that does not
//! extend the last one starts over. The window is exact for tokenizers whose encoding of a text, from a
//! token boundary on, does not depend on what came before it (greedy longest match, BPE over
//! pre-tokenized words whose boundary lies in the window).
//! \throws specdec::error when the draft's tokenizer cannot encode the text or its pieces do not spell
//!         it (vocab/text_tokenizer.hpp), or the draft would have no context at all (empty text and no
//!         `draft_prefix`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/vocab/text_tokenizer.hpp"

namespace specdec {

//! Options of a draft's view of a target context.
struct retokenize_options {
  std::vector<token_id> draft_prefix;  //!< draft tokens in front of the text (its BOS, when it wants one)
  std::size_t lookbehind = 8;          //!< draft tokens encoded again with each round's new text
};

//! The draft's tokens of a target context's text, in the draft's state (file comment).
template <StatefulModel Draft, TextTokenizer TargetTokenizer, TextTokenizer DraftTokenizer>
class retokenized_context {
 public:
  //! The view of `draft` (its state is reset to the prefix) through the two tokenizers, which must
  //! outlive it. \throws specdec::error when a prefix token is outside the draft's vocabulary.
  retokenized_context(Draft draft, const TargetTokenizer& target_tokenizer, const DraftTokenizer& draft_tokenizer,
                      retokenize_options options)
      : draft_(std::move(draft)), target_tok_(&target_tokenizer), draft_tok_(&draft_tokenizer), options_(std::move(options)) {
    for ([[maybe_unused]] const token_id t : options_.draft_prefix)
      SPECDEC_EXPECTS(in_vocabulary(t, draft_tok_->vocab_size()),
                      "specdec::retokenized_context: a prefix token is outside the draft's vocabulary");
    start_over();
  }

  //! Brings the view and the draft's state to `target_context` (prompt and emitted tokens).
  void sync(std::span<const token_id> target_context) {
    if (target_context.size() < seen_.size() || !std::equal(seen_.begin(), seen_.end(), target_context.begin())) start_over();
    const std::size_t before = text_.size();
    append_text(*target_tok_, target_context.subspan(seen_.size()), text_);
    seen_.assign(target_context.begin(), target_context.end());
    if (text_.size() > before) {
      // Encode again from `lookbehind` tokens back: the last tokens may merge with the new text.
      const std::size_t keep = view_.size() - std::min(options_.lookbehind, view_.size());
      const std::size_t from = keep == 0 ? 0 : ends_[keep - 1];
      const std::vector<token_id> tail =
          encode_checked(*draft_tok_, std::string_view(text_).substr(from), "specdec::retokenized_context");
      view_.resize(keep);
      ends_.resize(keep);
      std::size_t end = from;
      for (const token_id t : tail) {
        view_.push_back(t);
        ends_.push_back(end += std::string(draft_tok_->piece(t)).size());
      }
    }
    SPECDEC_EXPECTS(
        !options_.draft_prefix.empty() || !view_.empty(),
        "specdec::retokenized_context: the draft has no context (empty text): give it a draft_prefix such as its BOS");
    // Roll the state back to what it shares with prefix + view, then append the rest.
    wanted_.assign(options_.draft_prefix.begin(), options_.draft_prefix.end());
    wanted_.insert(wanted_.end(), view_.begin(), view_.end());
    const std::size_t common = static_cast<std::size_t>(
        std::mismatch(state_.begin(), state_.end(), wanted_.begin(), wanted_.end()).first - state_.begin());
    draft_.rollback(state_.size() - common);
    draft_.append(std::span<const token_id>(wanted_).subspan(common));
    rolled_back_ += state_.size() - common;
    state_.swap(wanted_);
  }

  //! Appends a drafted token to the draft's state (the next `sync` rolls it back unless the target's
  //! text re-tokenizes to it).
  void append_draft(token_id d) {
    draft_.append(std::span<const token_id>(&d, 1));
    state_.push_back(d);
  }

  //! The draft model (its state: prefix, view, then this round's drafts).
  Draft& model() noexcept { return draft_; }
  //! The text of the target context of the last `sync`.
  const std::string& text() const noexcept { return text_; }
  //! The draft's tokens of that text (prefix excluded).
  std::span<const token_id> view() const noexcept { return view_; }
  //! Draft tokens rolled back out of the state so far (drafts and re-tokenized ones).
  std::size_t rolled_back() const noexcept { return rolled_back_; }

 private:
  void start_over() {
    seen_.clear();
    text_.clear();
    view_.clear();
    ends_.clear();
    draft_.reset(std::span<const token_id>(options_.draft_prefix));
    state_ = options_.draft_prefix;
  }

  Draft draft_;
  const TargetTokenizer* target_tok_;
  const DraftTokenizer* draft_tok_;
  retokenize_options options_;
  std::vector<token_id> seen_;            // the target context of the last sync
  std::string text_;                      // its text
  std::vector<token_id> view_;            // the draft's tokens of text_
  std::vector<std::size_t> ends_;         // ends_[i]: where view_[i]'s piece ends in text_
  std::vector<token_id> state_, wanted_;  // what the draft's state holds; scratch
  std::size_t rolled_back_ = 0;
};

}  // namespace specdec
