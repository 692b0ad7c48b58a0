//! \file draft/model_free.hpp
//! \brief What model-free drafters (n-gram prompt lookup, suffix trees) share: writing a draft that
//! came from no probability model into a drafter stage's block, and the one-hot q that lets a rule
//! reading q (strict, lenient, block) verify it.
//!
//! Why one-hot: a deterministic proposal (the drafts are a function of the context) is drawn from
//! the law that puts all its mass on the drafted token, so strict acceptance with that q keeps
//! min(1, p(x)) and resamples from p without x: exactly the target's law. Frequencies or scores a
//! drafter ranked its candidates by are not that law and are never handed to a rule as q.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Writes one-hot q rows over `vocab` tokens for the chain a stage drafted (`out.tokens`), so that a
//! rule reading q can verify a model-free draft.
//! \throws specdec::error when a draft is outside the vocabulary.
inline void write_one_hot_q(std::size_t vocab, stage_draft& out) {
  out.q_rows.assign(out.tokens.size() * vocab, 0.0f);
  for (std::size_t j = 0; j < out.tokens.size(); ++j) {
    SPECDEC_EXPECTS(in_vocabulary(out.tokens[j], vocab), "specdec::write_one_hot_q: a draft is outside the vocabulary");
    out.q_rows[j * vocab + static_cast<std::size_t>(out.tokens[j])] = 1.0f;
  }
}

//! Writes a model-free chain draft into a stage's block: the tokens, and one-hot q rows over
//! `one_hot_vocab` tokens when it is not 0. No model call, no draft step charged.
inline void write_model_free_chain(std::span<const token_id> tokens, std::size_t one_hot_vocab, stage_draft& out) {
  out.tokens.assign(tokens.begin(), tokens.end());
  out.q_rows.clear();
  if (one_hot_vocab > 0) write_one_hot_q(one_hot_vocab, out);
  out.model_calls = 0;
  out.charged_steps = 0;
}

namespace detail {
//! The call of `with_one_hot_q`: `stage`'s drafts, then one-hot q rows over `vocab` tokens.
inline auto one_hot_q_call(draft_stage stage, std::size_t vocab) {
  return [stage = std::move(stage), vocab](std::span<const token_id> context, std::size_t gamma,
                                           const random::request_stream& stream, stage_draft& out) {
    stage(context, gamma, stream, out);
    write_one_hot_q(vocab, out);
  };
}
}  // namespace detail

//! A model-free chain stage whose drafts a rule reading q verifies: `stage`'s drafts with one-hot q
//! rows over `vocab` tokens (V floats per draft).
inline draft_stage with_one_hot_q(draft_stage stage, std::size_t vocab) {
  const draft_output output = stage.output();
  return draft_stage(output, detail::one_hot_q_call(std::move(stage), vocab));
}

//! `with_one_hot_q` of a stage whose output is part of its type, keeping it.
template <draft_output Output>
draft_stage_of<Output> with_one_hot_q(draft_stage_of<Output> stage, std::size_t vocab) {
  return draft_stage_of<Output>(detail::one_hot_q_call(std::move(stage), vocab));
}

}  // namespace specdec
