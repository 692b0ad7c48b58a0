//! \file model/sequence_state.hpp
//! \brief One sequence of a `SequenceModel` (a KV-cached engine, model/sequence.hpp) as a
//! `StatefulModel` (model/concepts.hpp): what a drafter that keeps its own state needs (the
//! cross-vocabulary drafters, draft/tli.hpp and draft/slem.hpp, run their draft this way on llama.cpp).
//!
//! Appends are lazy: tokens wait until `next_logits`, which appends them in one forward and asks for
//! the last row; `rollback` drops waiting tokens first, then cached positions. When the state has no
//! waiting token and its last row is not known (after a rollback), the last token is dropped from the
//! cache and appended again, so every row comes from the engine.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec {

//! Sequence `id` of `model` (which must outlive it) as a `StatefulModel` (see the file comment).
template <SequenceModel M>
class sequence_state {
 public:
  //! The view of sequence `id`, released first (its state starts empty).
  sequence_state(M& model, sequence_id id) : model_(&model), id_(id) { model_->release(id_); }

  //! V.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! Makes `tokens` the whole state. \throws specdec::error for a token outside the vocabulary.
  void reset(std::span<const token_id> tokens) {
    model_->release(id_);
    tokens_.clear();
    cached_ = 0;
    row_known_ = false;
    append(tokens);
  }
  //! Appends `tokens` (decoded at the next `next_logits`). \throws specdec::error for a token outside
  //! the vocabulary.
  void append(std::span<const token_id> tokens) {
    for ([[maybe_unused]] const token_id t : tokens)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_size()), "specdec::sequence_state::append: a token outside the vocabulary");
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    row_known_ = row_known_ && tokens.empty();
  }
  //! Removes the last n tokens. \throws specdec::error when n exceeds the length.
  void rollback(std::size_t n) {
    SPECDEC_EXPECTS(n <= tokens_.size(), "specdec::sequence_state::rollback: past the start of the sequence");
    if (n == 0) return;
    tokens_.resize(tokens_.size() - n);
    if (cached_ > tokens_.size()) {
      model_->rollback(id_, cached_ - tokens_.size());
      cached_ = tokens_.size();
    }
    row_known_ = false;
  }
  //! The number of tokens in the state.
  std::size_t length() const noexcept { return tokens_.size(); }
  //! The state, oldest token first.
  std::span<const token_id> tokens() const noexcept { return tokens_; }
  //! The next-token logits after the state. \pre the state is not empty; `logits.size() == vocab_size()`.
  //! \throws specdec::error otherwise, and what the model's forward throws.
  void next_logits(std::span<float> logits) {
    SPECDEC_EXPECTS(!tokens_.empty(), "specdec::sequence_state::next_logits: the state is empty");
    SPECDEC_EXPECTS(logits.size() == vocab_size(), "specdec::sequence_state::next_logits: logits.size() != vocab_size()");
    if (!row_known_) {
      if (cached_ == tokens_.size()) {  // every token cached: decode the last one again for its row
        model_->rollback(id_, 1);
        --cached_;
      }
      row_.resize(vocab_size());
      const sequence_append a{id_, std::span<const token_id>(tokens_).subspan(cached_), 1};
      model_->forward(std::span<const sequence_append>(&a, 1), std::span<float>(row_));
      cached_ = tokens_.size();
      row_known_ = true;
    }
    std::copy(row_.begin(), row_.end(), logits.begin());
  }

 private:
  M* model_;
  sequence_id id_;
  std::vector<token_id> tokens_;  // the state
  std::size_t cached_ = 0;        // its first cached_ tokens are in the model's sequence
  std::vector<float> row_;        // the row after the state, when row_known_
  bool row_known_ = false;
};

}  // namespace specdec
