//! \file integrations/llama_cpp/vocabulary.hpp
//! \brief A llama.cpp model's vocabulary for decoding across tokenizers (vocab/vocab_map.hpp,
//! draft/tli.hpp, draft/slem.hpp): its token list (each token's piece as llama.cpp renders it, control,
//! unknown and unused tokens marked special), its tokenizer as a `TextTokenizer`, and the map between a
//! draft's and a target's vocabularies (what `check_same_vocabulary` refuses, served by string).
//!
//! **Space prefix.** SentencePiece vocabularies with `add_space_prefix` (Llama 2's, the llama.cpp
//! test models') encode " " + text, so their pieces do not spell the text, which the cross-vocabulary
//! drafters need (vocab/text_tokenizer.hpp). `text_tokenizer` finds out when it is made (the pieces
//! of "a" spell " a") and strips the space: the first token of the encoding spells " " + head, and is
//! replaced by head's greedy longest match over the vocabulary's pieces (vocab/piece_tokenizer.hpp;
//! normal tokens before byte fallback; nothing when head is empty). The other tokens are llama.cpp's.
//! The text re-tokenized is always a suffix of the context, from a token boundary: a lone first
//! token is what SentencePiece spells there too when the head is one piece ("Once" for " Once").
//!
//! **Bytes that are not UTF-8.** A model's text may hold bytes that are no whole UTF-8 character: a
//! character cut by the end of the text (its byte tokens are not all emitted yet) or bytes a model
//! emitted that never form one. llama.cpp reads them as U+FFFD, which spells other bytes. `encode`
//! hands llama.cpp only the runs of whole characters and spells each other byte by the lowest token
//! whose piece is that byte (a byte-fallback token, or a byte-level BPE token); a vocabulary without
//! one is an error naming the byte.
#pragma once

#include <llama.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"
#include "specdec/integrations/llama_cpp/handles.hpp"
#include "specdec/integrations/llama_cpp/tokenizer.hpp"
#include "specdec/vocab/piece_tokenizer.hpp"
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
//! adds no BOS, reads special-token text as text, and strips a SentencePiece space prefix (file
//! comment). The model must outlive it.
class text_tokenizer {
 public:
  //! The tokenizer of `m`.
  explicit text_tokenizer(const model& m) : model_(&m) {
    pieces_.reserve(m.vocab_size());
    bytes_.fill(no_token);
    for (std::size_t t = 0; t < m.vocab_size(); ++t) {
      pieces_.push_back(token_piece(m, static_cast<token_id>(t)));
      auto& byte = bytes_[static_cast<unsigned char>(pieces_.back().empty() ? 0 : pieces_.back()[0])];
      if (pieces_.back().size() == 1 && byte == no_token) byte = static_cast<token_id>(t);
    }
    std::string probe;
    for (const token_id t : tokenize(m, "a", /*add_special=*/false)) probe += piece(t);
    if (probe != " a") return;
    // The pieces for re-spelling a first token's head: byte tokens as byte fallback, written <0xNN>.
    token_list list{{}, {}, text_convention::raw};
    for (std::size_t t = 0; t < pieces_.size(); ++t) {
      const auto id = static_cast<token_id>(t);
      const auto attr = static_cast<std::uint32_t>(llama_vocab_get_attr(m.vocab(), id));
      const bool byte = (attr & LLAMA_TOKEN_ATTR_BYTE) != 0 && pieces_[t].size() == 1;
      char hex[8];
      if (byte) std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(pieces_[t][0])));
      list.strings.push_back(byte ? std::string(hex) : pieces_[t]);
      list.kinds.push_back(is_special_token(m, id) ? token_kind::special : byte ? token_kind::byte : token_kind::normal);
    }
    respell_.emplace(std::move(list));
  }
  //! V.
  std::size_t vocab_size() const noexcept { return pieces_.size(); }
  //! The bytes token `t` spells. \throws specdec::error for an id outside the vocabulary.
  const std::string& piece(token_id t) const {
    if (!in_vocabulary(t, pieces_.size())) throw error("specdec::llama_cpp::text_tokenizer::piece: an id outside the vocabulary");
    return pieces_[static_cast<std::size_t>(t)];
  }
  //! The tokens of `text` (no BOS): llama.cpp's of each run of whole UTF-8 characters, the space
  //! prefix stripped, and a token per other byte (file comment).
  //! \throws specdec::engine_error when llama.cpp cannot tokenize a run; specdec::error naming the
  //!         byte and its offset when no token spells a byte that is not UTF-8 (or one of a
  //!         prefixed first token's head).
  std::vector<token_id> encode(std::string_view text) const {
    std::vector<token_id> out;
    for (std::size_t i = 0; i < text.size();) {
      std::size_t run = 0, n = 0;
      while ((n = specdec::detail::utf8_length(text.substr(i + run))) > 0) run += n;
      if (run > 0) {
        encode_run(text.substr(i, run), out);
        i += run;
        continue;
      }
      const token_id byte = bytes_[static_cast<unsigned char>(text[i])];
      if (byte == no_token) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(text[i])));
        throw error("specdec::llama_cpp::text_tokenizer::encode: byte " + std::string(hex) + " at offset " + std::to_string(i) +
                    " is no UTF-8 character and no token spells it alone");
      }
      out.push_back(byte);
      ++i;
    }
    return out;
  }
  //! Whether the vocabulary adds a space before the text, which `encode` strips.
  bool space_prefix() const noexcept { return respell_.has_value(); }
  //! The model.
  const model& owner() const noexcept { return *model_; }

 private:
  //! Appends llama.cpp's tokens of `run` (whole characters), the space prefix stripped.
  void encode_run(std::string_view run, std::vector<token_id>& out) const {
    const std::vector<token_id> own = tokenize(*model_, run, /*add_special=*/false);
    auto from = own.begin();
    if (respell_ && from != own.end()) {
      const std::string& first = piece(*from);
      if (!first.empty() && first.front() == ' ') {  // otherwise not the prefix: encode_checked reports it
        const std::vector<token_id> head = respell_->encode(std::string_view(first).substr(1));
        out.insert(out.end(), head.begin(), head.end());
        ++from;
      }
    }
    out.insert(out.end(), from, own.end());
  }

  const model* model_;
  std::vector<std::string> pieces_;
  std::array<token_id, 256> bytes_{};       // the lowest token whose piece is that byte alone
  std::optional<piece_tokenizer> respell_;  // set when the vocabulary adds a space prefix
};

static_assert(TextTokenizer<text_tokenizer>);

}  // namespace specdec::llama_cpp
