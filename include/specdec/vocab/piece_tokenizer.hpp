//! \file vocab/piece_tokenizer.hpp
//! \brief A reference tokenizer over a list of pieces: greedy longest match, left to right, with
//! byte fallback. Small and exact, for tests and studies of decoding across vocabularies (two
//! piece lists over one alphabet give a character-level target and a draft with merges).
//!
//! **Encoding.** At each position the longest normal piece that matches the text there is taken (the
//! lowest id among equal pieces); where no piece matches, the byte-fallback token of that byte
//! (`token_kind::byte`, written `<0xNN>`); where there is none either, `encode` throws. Special tokens
//! are never produced. Greedy longest match is not injective: a text spelled by pieces ["a", "b"] is
//! encoded as ["ab"] when "ab" is a piece, which is what makes re-tokenization change tokens.
//! **Pieces.** A token's piece is its normalised string (vocab/vocab_map.hpp, `normalise_token`):
//! the byte of a byte token, "" for a special token.
//! Cost: O(n * longest piece) hash lookups to encode n bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"
#include "specdec/vocab/vocab_map.hpp"

namespace specdec {

//! Greedy longest-match tokenizer over a token list (see the file comment); a `TextTokenizer`.
class piece_tokenizer {
 public:
  //! The tokenizer of `tokens`. \throws specdec::error on a malformed list (normalise_token) or an
  //! empty vocabulary.
  explicit piece_tokenizer(token_list tokens) : tokens_(std::move(tokens)) {
    SPECDEC_EXPECTS(tokens_.size() > 0, "specdec::piece_tokenizer: the vocabulary is empty");
    SPECDEC_EXPECTS(tokens_.kinds.empty() || tokens_.kinds.size() == tokens_.size(),
                    "specdec::piece_tokenizer: a token list needs a kind per string (or none)");
    pieces_.resize(tokens_.size());
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      const token_kind kind = tokens_.kind(id);
      if (kind == token_kind::special) continue;
      pieces_[id] = normalise_token(tokens_.strings[id], kind, tokens_.convention);
      const auto t = static_cast<token_id>(id);
      if (kind == token_kind::byte) {
        bytes_.emplace(static_cast<unsigned char>(pieces_[id][0]), t);  // the lowest id wins
      } else if (!pieces_[id].empty()) {
        index_.emplace(pieces_[id], t);
        longest_ = std::max(longest_, pieces_[id].size());
      }
    }
  }
  //! A tokenizer of normal pieces written as text (`text_convention::raw`).
  static piece_tokenizer of_pieces(std::vector<std::string> pieces) {
    return piece_tokenizer(token_list{std::move(pieces), {}, text_convention::raw});
  }

  //! V.
  std::size_t vocab_size() const noexcept { return pieces_.size(); }
  //! The text token `id` spells. \throws specdec::error for an id outside the vocabulary.
  const std::string& piece(token_id id) const {
    SPECDEC_EXPECTS(in_vocabulary(id, pieces_.size()), "specdec::piece_tokenizer::piece: an id outside the vocabulary");
    return pieces_[static_cast<std::size_t>(id)];
  }
  //! The token list it was built from (for `vocab_map::build`).
  const token_list& tokens() const noexcept { return tokens_; }

  //! Greedy longest match (file comment).
  //! \throws specdec::error naming the byte and its offset when no piece and no byte token spells it.
  std::vector<token_id> encode(std::string_view text) const {
    std::vector<token_id> out;
    for (std::size_t i = 0; i < text.size();) {
      std::size_t len = std::min(longest_, text.size() - i);
      for (; len > 0; --len) {
        const auto it = index_.find(std::string(text.substr(i, len)));
        if (it == index_.end()) continue;
        out.push_back(it->second);
        break;
      }
      if (len > 0) {
        i += len;
        continue;
      }
      const auto byte = static_cast<unsigned char>(text[i]);
      const auto fallback = bytes_.find(byte);
      if (fallback == bytes_.end()) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(byte));
        throw error("specdec::piece_tokenizer::encode: no token spells byte " + std::string(hex) + " at offset " +
                    std::to_string(i) + " and the vocabulary has no byte fallback for it");
      }
      out.push_back(fallback->second);
      ++i;
    }
    return out;
  }

 private:
  token_list tokens_;
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, token_id> index_;  // normal piece -> lowest id
  std::unordered_map<unsigned char, token_id> bytes_;
  std::size_t longest_ = 0;
};

}  // namespace specdec
