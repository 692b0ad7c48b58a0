//! \file vocab/text_tokenizer.hpp
//! \brief What decoding across vocabularies asks of a tokenizer (`TextTokenizer`): text to ids, and the
//! piece of text each id spells, so that the text of a token sequence is the concatenation of its
//! pieces. The cross-vocabulary drafters (draft/tli.hpp, draft/slem.hpp) move between a target's and a
//! draft's tokens through text and check that contract on every text they encode.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

//! A tokenizer for decoding across vocabularies:
//! - `t.vocab_size()`: V;
//! - `t.piece(id)`: the text token `id` spells (bytes; empty for special tokens such as BOS);
//! - `t.encode(text)`: ids whose pieces concatenate to exactly `text`, no special token added.
//!   It throws `specdec::error` with the reason when it cannot encode `text` (a byte no token spells
//!   and no byte fallback).
template <class T>
concept TextTokenizer = requires(const T& t, std::string_view text, token_id id) {
  { t.vocab_size() } -> std::convertible_to<std::size_t>;
  { t.piece(id) } -> std::convertible_to<std::string>;
  { t.encode(text) } -> std::same_as<std::vector<token_id>>;
};

//! Appends the text of `tokens` (their pieces, concatenated) to `out`.
//! \throws whatever `piece` throws for an id outside the vocabulary.
template <TextTokenizer T>
void append_text(const T& tokenizer, std::span<const token_id> tokens, std::string& out) {
  for (const token_id t : tokens) out += tokenizer.piece(t);
}

//! `tokenizer.encode(text)`, checked: the pieces of the result spell `text`.
//! \throws specdec::error (naming `who`) when they do not, or what `encode` throws.
template <TextTokenizer T>
std::vector<token_id> encode_checked(const T& tokenizer, std::string_view text, const char* who) {
  std::vector<token_id> tokens = tokenizer.encode(text);
  std::string spelled;
  append_text(tokenizer, std::span<const token_id>(tokens), spelled);
  if (spelled != text) {
    const auto excerpt = [](std::string_view s) { return std::string(s.substr(0, 40)) + (s.size() > 40 ? "..." : ""); };
    throw error(std::string(who) + ": the tokenizer's pieces do not spell the text it encoded (\"" + excerpt(text) +
                "\" came back as \"" + excerpt(spelled) +
                "\"); a cross-vocabulary drafter needs pieces that concatenate to the text");
  }
  return tokens;
}

}  // namespace specdec
