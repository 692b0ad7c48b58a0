//! \file integrations/llama_cpp/vocabulary.hpp
//! \brief A llama.cpp model's vocabulary for decoding across tokenizers (vocab/vocab_map.hpp,
//! draft/tli.hpp, draft/slem.hpp): its token list (each token's piece as llama.cpp renders it, control,
//! unknown and unused tokens marked special), its tokenizer as a `TextTokenizer`, and the map between a
//! draft's and a target's vocabularies (what `check_same_vocabulary` refuses, served by string).
#pragma once

#include <llama.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"
#include "specdec/integrations/llama_cpp/handles.hpp"
#include "specdec/integrations/llama_cpp/tokenizer.hpp"
#include "specdec/vocab/text_tokenizer.hpp"
#include "specdec/vocab/vocab_map.hpp"

namespace specdec::llama_cpp {

//! The bytes token `t` spells, as llama.cpp renders it without special tokens (a byte-fallback token is
//! its byte, a space marker a space; control tokens render as nothing), at any length.
inline std::string token_piece(const model& m, token_id t) {
  std::string out(64, '\0');
  auto n = llama_token_to_piece(m.vocab(), t, out.data(), static_cast<std::int32_t>(out.size()), 0, /*special=*/false);
  if (n < 0) {  // -n bytes needed
    out.resize(static_cast<std::size_t>(-n));
    n = llama_token_to_piece(m.vocab(), t, out.data(), static_cast<std::int32_t>(out.size()), 0, false);
  }
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

//! Whether llama.cpp marks token `t` as control, unknown or unused (left out of a vocabulary map).
inline bool is_special_token(const model& m, token_id t) {
  const auto attr = static_cast<std::uint32_t>(llama_vocab_get_attr(m.vocab(), t));
  return (attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN | LLAMA_TOKEN_ATTR_UNUSED)) != 0;
}

//! The model's vocabulary as a token list: rendered pieces (`text_convention::raw`), control, unknown
//! and unused tokens `special`.
inline token_list token_list_of(const model& m) {
  token_list list;
  list.convention = text_convention::raw;
  list.strings.reserve(m.vocab_size());
  list.kinds.reserve(m.vocab_size());
  for (std::size_t t = 0; t < m.vocab_size(); ++t) {
    const auto id = static_cast<token_id>(t);
    list.strings.push_back(token_piece(m, id));
    list.kinds.push_back(is_special_token(m, id) ? token_kind::special : token_kind::normal);
  }
  return list;
}

//! The map between a draft's and a target's vocabularies by rendered piece.
//! \throws specdec::error when they share no piece.
inline vocab_map map_vocabularies(const model& draft, const model& target, vocab_map_options options = {}) {
  return vocab_map::build(token_list_of(draft), token_list_of(target), options);
}

//! A llama.cpp model's tokenizer as a `TextTokenizer`: pieces rendered once (`token_piece`); `encode`
//! adds no BOS and reads special-token text as text. The model must outlive it.
class text_tokenizer {
 public:
  //! The tokenizer of `m`.
  explicit text_tokenizer(const model& m) : model_(&m) {
    pieces_.reserve(m.vocab_size());
    for (std::size_t t = 0; t < m.vocab_size(); ++t) pieces_.push_back(token_piece(m, static_cast<token_id>(t)));
  }
  //! V.
  std::size_t vocab_size() const noexcept { return pieces_.size(); }
  //! The bytes token `t` spells. \throws specdec::error for an id outside the vocabulary.
  const std::string& piece(token_id t) const {
    if (!in_vocabulary(t, pieces_.size())) throw error("specdec::llama_cpp::text_tokenizer::piece: an id outside the vocabulary");
    return pieces_[static_cast<std::size_t>(t)];
  }
  //! The tokens of `text` (no BOS). \throws specdec::engine_error when llama.cpp cannot tokenize it.
  std::vector<token_id> encode(std::string_view text) const { return tokenize(*model_, text, /*add_special=*/false); }
  //! The model.
  const model& owner() const noexcept { return *model_; }

 private:
  const model* model_;
  std::vector<std::string> pieces_;
};

static_assert(TextTokenizer<text_tokenizer>);

}  // namespace specdec::llama_cpp
