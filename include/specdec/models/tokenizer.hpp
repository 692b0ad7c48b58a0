//! \file models/tokenizer.hpp
//! \brief A word-level tokenizer and vocabulary for the reference n-gram language model.
//!
//! **Tokenization rule** (`tokenize`), byte by byte, no locale:
//! - ASCII letters are lower-cased; other bytes are kept as they are;
//! - a *word character* is an ASCII letter or digit, `_`, or any byte >= 0x80 (so UTF-8 sequences stay
//!   inside words);
//! - a word is a maximal run of word characters, where a single `'` or `-` between two word characters
//!   stays inside the word ("don't", "third-party"), and a single `.` or `,` between two digits does too
//!   ("2.0", "1,000");
//! - whitespace (space, `\t`, `\n`, `\v`, `\f`, `\r`) separates tokens; other control bytes are dropped;
//! - every other byte (ASCII punctuation and symbols) is a token of its own.
//!
//! **Vocabulary.** Ids 0, 1 and 2 are the special tokens `<unk>` (any word outside the vocabulary),
//! `<s>` (start of a paragraph) and `</s>` (end of a paragraph); the words follow, most frequent first,
//! ties broken by the word (byte order). A cap keeps only the most frequent words.
//!
//! **Decoding** joins tokens with single spaces, except: no space before `. , ; : ! ? ) ] } %`, no space
//! after `( [ {`; `<s>` is dropped and `</s>` becomes a line break. So `decode(encode(s)) == s` for
//! lower-case text whose tokens are written with these conventions (e.g. "the license (gpl), version 2.0.").
//!
//! **Across vocabularies.** `vocabulary::tokens()` is its token list for `vocab_map::build`
//! (vocab/vocab_map.hpp): two word vocabularies map by word, the three special tokens left out. The
//! vocabulary is not a `TextTokenizer` (its decoding puts spaces between tokens, so the text of a
//! token sequence is not the concatenation of its words): the map is all decoding across word
//! vocabularies gets.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>
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
namespace detail {

inline bool is_word_byte(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}
inline bool is_digit_byte(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
inline bool is_space_byte(unsigned char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
inline char lower_byte(unsigned char c) noexcept { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); }

//! Calls `emit(std::string)` for each token of `text` (rule in the file comment).
template <class Emit>
void for_each_token(std::string_view text, Emit&& emit) {
  const std::size_t n = text.size();
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = at(i);
    if (is_word_byte(c)) {
      std::string word;
      while (i < n) {
        const unsigned char d = at(i);
        if (is_word_byte(d)) {
          word.push_back(lower_byte(d));
          ++i;
        } else if (i + 1 < n && ((is_word_byte(at(i + 1)) && (d == '\'' || d == '-') && !word.empty()) ||
                                 ((d == '.' || d == ',') && is_digit_byte(at(i - 1)) && is_digit_byte(at(i + 1))))) {
          // an inner apostrophe or hyphen (don't, well-known), or a decimal point or separator (3.5, 1,000)
          word.push_back(static_cast<char>(d));
          ++i;
        } else {
          break;
        }
      }
      emit(std::move(word));
    } else if (is_space_byte(c) || c < 0x20 || c == 0x7f) {
      ++i;
    } else {
      emit(std::string(1, static_cast<char>(c)));
      ++i;
    }
  }
}

//! Hash for heterogeneous lookup of `std::string` keys by `std::string_view`.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace detail

//! Splits `text` into its tokens as strings (rule in the file comment).
inline std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> out;
  detail::for_each_token(text, [&](std::string&& t) { out.push_back(std::move(t)); });
  return out;
}

//! Splits `text` into paragraphs: maximal runs of lines separated by blank lines (lines holding only
//! whitespace). Paragraphs without any non-whitespace byte are dropped. The views point into `text`.
inline std::vector<std::string_view> split_paragraphs(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0, pos = 0;
  bool has_content = false;
  auto flush = [&](std::size_t end) {
    if (has_content) out.push_back(text.substr(start, end - start));
    has_content = false;
  };
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    const bool blank =
        std::all_of(line.begin(), line.end(), [](char c) { return detail::is_space_byte(static_cast<unsigned char>(c)); });
    if (blank) {
      flush(pos);
      start = eol + 1;
    } else {
      if (!has_content) start = pos;
      has_content = true;
    }
    pos = eol + 1;
  }
  flush(text.size());
  return out;
}

//! A word vocabulary: ids for `<unk>`, `<s>`, `</s>` and words, with `encode` and `decode`
//! (rules in the file comment).
class vocabulary {
 public:
  static constexpr token_id unk = 0;               //!< id of `<unk>`, for words outside the vocabulary
  static constexpr token_id bos = 1;               //!< id of `<s>`, the start of a paragraph
  static constexpr token_id eos = 2;               //!< id of `</s>`, the end of a paragraph
  static constexpr std::size_t special_count = 3;  //!< the number of special tokens

  //! A vocabulary holding only the three special tokens.
  vocabulary() : words_{"<unk>", "<s>", "</s>"} {}

  //! A vocabulary of the special tokens followed by `words`, in that order (id 3 is `words[0]`).
  //! \pre the words are distinct and non-empty. \throws specdec::error otherwise.
  explicit vocabulary(std::vector<std::string> words) : vocabulary() {
    words_.reserve(special_count + words.size());
    for (std::string& w : words) {
      SPECDEC_EXPECTS(!w.empty(), "a vocabulary word is empty");
      const bool inserted = index_.emplace(w, static_cast<token_id>(words_.size())).second;
      if (!inserted) throw error("specdec::vocabulary: the word \"" + w + "\" appears twice");
      words_.push_back(std::move(w));
    }
  }

  //! Builds the vocabulary of `texts`: every token of `tokenize(text)`, most frequent first, ties broken by
  //! the word; with `max_words > 0` only the `max_words` most frequent words are kept (others become
  //! `<unk>` when encoded). Deterministic.
  static vocabulary build(std::span<const std::string> texts, std::size_t max_words = 0) {
    std::unordered_map<std::string, std::size_t, detail::string_hash, std::equal_to<>> counts;
    for (const std::string& text : texts) detail::for_each_token(text, [&](std::string&& t) { ++counts[std::move(t)]; });
    std::vector<std::pair<std::string, std::size_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    if (max_words > 0 && sorted.size() > max_words) sorted.resize(max_words);
    std::vector<std::string> words;
    words.reserve(sorted.size());
    for (auto& [w, c] : sorted) words.push_back(std::move(w));
    return vocabulary(std::move(words));
  }

  //! The number of tokens, specials included.
  std::size_t size() const noexcept { return words_.size(); }
  //! The text of token `id`. \pre `id` is in the vocabulary. \throws specdec::error otherwise.
  const std::string& word(token_id id) const {
    SPECDEC_EXPECTS(in_vocabulary(id, words_.size()), "token id outside the vocabulary");
    return words_[static_cast<std::size_t>(id)];
  }
  //! All token texts, by id.
  std::span<const std::string> words() const noexcept { return words_; }
  //! Its token list for `vocab_map::build`: the words as they are (`text_convention::raw`), `<unk>`,
  //! `<s>` and `</s>` of kind `special` (left out of a map unless `include_special`). A copy.
  token_list tokens() const {
    std::vector<token_kind> kinds(words_.size(), token_kind::normal);
    std::fill_n(kinds.begin(), special_count, token_kind::special);
    return token_list{words_, std::move(kinds), text_convention::raw};
  }
  //! True when `word` is a (non-special) word of the vocabulary.
  bool contains(std::string_view word) const { return index_.find(word) != index_.end(); }
  //! The id of `word`, or `unk` when it is not in the vocabulary (the special tokens' texts are not words).
  token_id id(std::string_view word) const {
    const auto it = index_.find(word);
    return it == index_.end() ? unk : it->second;
  }

  //! Tokenizes `text` and maps each token to its id (`unk` for words outside the vocabulary). No boundary
  //! tokens are added.
  std::vector<token_id> encode(std::string_view text) const {
    std::vector<token_id> out;
    detail::for_each_token(text, [&](std::string&& t) { out.push_back(id(t)); });
    return out;
  }

  //! Turns ids back into text (spacing rule in the file comment).
  //! \pre every id is in the vocabulary. \throws specdec::error otherwise.
  std::string decode(std::span<const token_id> tokens) const {
    std::string out;
    bool glue = true;  // no space before the next token (start of text, after a line break or an opener)
    for (token_id t : tokens) {
      SPECDEC_EXPECTS(in_vocabulary(t, words_.size()), "token id outside the vocabulary");
      if (t == bos) continue;
      if (t == eos) {
        out.push_back('\n');
        glue = true;
        continue;
      }
      const std::string& w = words_[static_cast<std::size_t>(t)];
      const bool closer = w.size() == 1 && std::string_view(".,;:!?)]}%").find(w[0]) != std::string_view::npos;
      if (!glue && !closer) out.push_back(' ');
      out += w;
      glue = w.size() == 1 && (w[0] == '(' || w[0] == '[' || w[0] == '{');
    }
    return out;
  }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, token_id, detail::string_hash, std::equal_to<>> index_;
};

}  // namespace specdec
