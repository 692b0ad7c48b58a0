//! \file integrations/llama_cpp/tokenizer.hpp
//! \brief Text to tokens and back with a llama.cpp model's vocabulary.
#pragma once

#include <llama.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"
#include "specdec/integrations/llama_cpp/handles.hpp"

namespace specdec::llama_cpp {

//! The tokens of `text`, with the vocabulary's BOS in front when it adds one (`add_special`).
//! \throws specdec::engine_error when llama.cpp cannot tokenize the text.
inline std::vector<token_id> tokenize(const model& m, std::string_view text, bool add_special = true) {
  const auto length = static_cast<std::int32_t>(text.size());
  std::vector<llama_token> tokens(text.size() + 2);
  std::int32_t n = llama_tokenize(m.vocab(), text.data(), length, tokens.data(), static_cast<std::int32_t>(tokens.size()),
                                  add_special, /*parse_special=*/false);
  if (n < 0) {  // -n tokens needed
    tokens.resize(static_cast<std::size_t>(-n));
    n = llama_tokenize(m.vocab(), text.data(), length, tokens.data(), static_cast<std::int32_t>(tokens.size()), add_special,
                       false);
  }
  if (n < 0) throw engine_error("specdec::llama_cpp::tokenize: llama.cpp could not tokenize the text");
  tokens.resize(static_cast<std::size_t>(n));
  return {tokens.begin(), tokens.end()};
}

//! The text of one token (special tokens such as BOS render as nothing).
inline std::string piece(const model& m, token_id t) {
  char buffer[256];
  const std::int32_t n = llama_token_to_piece(m.vocab(), t, buffer, sizeof buffer, 0, /*special=*/false);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
}

//! The text of `tokens`, piece by piece.
inline std::string detokenize(const model& m, const std::vector<token_id>& tokens) {
  std::string text;
  for (const token_id t : tokens) text += piece(m, t);
  return text;
}

}  // namespace specdec::llama_cpp
