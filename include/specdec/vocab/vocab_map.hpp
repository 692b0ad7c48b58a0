//! \file vocab/vocab_map.hpp
//! \brief The map between two vocabularies by token string: which draft token spells the same text as
//! which target token, what lossless decoding across tokenizers is built on (TLI, draft/tli.hpp;
//! Timor et al., "Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
//! Heterogeneous Vocabularies", ICML 2025, arXiv 2502.05202, Alg. 4).
//!
//! **Strings.** Each vocabulary is a `token_list`: a string and a `token_kind` per id, and the
//! `text_convention` its strings are written in. Before comparing, a string is normalised to the bytes
//! it stands for (`normalise_token`): SentencePiece's space marker U+2581 and byte-level BPE's U+0120
//! become ' ' (`markers`, the default, accepts both); `byte_level` decodes GPT-2's whole byte-to-unicode
//! table (U+0120 ' ', U+010A '\n', ...); a byte-fallback token `<0xNN>` is the byte NN; `raw` strings
//! (pieces already decoded, as llama.cpp's `llama_token_to_piece` returns them) are kept as they are.
//! Special and control tokens are left out unless `include_special` (their strings name no text);
//! tokens whose string is empty are always left out.
//!
//! **Duplicates.** Several ids of one vocabulary may normalise to one string (a byte-fallback `<0x41>`
//! and "A"; "▁a" and "Ġa" in a merged vocabulary). Each of them maps to the *lowest* id of the other
//! side with that string, so draft -> target may be many-to-one; round trips hold for the lowest id of
//! each shared string (its representative). `vocab_overlap` counts the ids left out and the duplicates.
//!
//! \throws specdec::error when the two vocabularies share no string (`vocab_map::build`): TLI would
//! have nothing to propose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/errors.hpp"

namespace specdec {

//! What a token of a vocabulary is.
enum class token_kind : std::uint8_t {
  normal,   //!< a piece of text
  special,  //!< a special or control token (BOS, EOS, chat markers): left out of the map by default
  byte,     //!< a byte-fallback token, written `<0xNN>`: the single byte NN
};

//! How a vocabulary writes its token strings.
enum class text_convention : std::uint8_t {
  markers,        //!< U+2581 (SentencePiece) and U+0120 (byte-level BPE) are spaces; nothing else changes
  sentencepiece,  //!< U+2581 is a space
  byte_level,     //!< GPT-2's byte-to-unicode alphabet: every character is one byte (U+0120 ' ', U+010A '\n')
  raw,            //!< the strings are the text already
};

//! A vocabulary's token strings: `strings[id]`, `kinds[id]` (empty: every token `normal`).
struct token_list {
  std::vector<std::string> strings;                       //!< the string of each id
  std::vector<token_kind> kinds;                          //!< the kind of each id, or empty (all normal)
  text_convention convention = text_convention::markers;  //!< how the strings are written

  //! V, the number of ids.
  std::size_t size() const noexcept { return strings.size(); }
  //! The kind of `id`.
  token_kind kind(std::size_t id) const noexcept { return kinds.empty() ? token_kind::normal : kinds[id]; }
};

//! Options of `vocab_map::build`.
struct vocab_map_options {
  bool include_special = false;  //!< map special tokens too (by their strings)
};

namespace detail {
//! Throws specdec::error with `message` unless `ok`: a check on data, made under every contract mode.
inline void check_data(bool ok, const char* message) {
  if (!ok) throw error(message);
}

//! The length of the whole UTF-8 character `s` starts with (1 to 4 bytes: a lead byte and its
//! continuation bytes), or 0 when it starts with none (or is empty).
inline std::size_t utf8_length(std::string_view s) noexcept {
  if (s.empty()) return 0;
  const auto c = static_cast<unsigned char>(s[0]);
  const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) return 0;
  return n;
}

//! Reads the UTF-8 code point at `s[i]`, advancing i. \throws specdec::error on invalid UTF-8.
inline std::uint32_t read_utf8(std::string_view s, std::size_t& i) {
  const std::size_t n = utf8_length(s.substr(i));
  detail::check_data(n > 0, "specdec::normalise_token: a byte-level token is not valid UTF-8");
  const auto byte = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[k])); };
  std::uint32_t cp = n == 1 ? byte(i) : byte(i) & (0x7Fu >> n);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (byte(i + k) & 0x3F);
  i += n;
  return cp;
}

//! Whether byte b stands for itself in GPT-2's byte-to-unicode table (printable Latin-1).
constexpr bool byte_level_printable(std::uint32_t b) noexcept {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

//! The byte that code point `cp` stands for in GPT-2's byte-to-unicode table (the bytes that are not
//! printable are U+0100 + their rank among them). \throws specdec::error for a code point outside it.
inline unsigned char byte_level_byte(std::uint32_t cp) {
  if (cp < 256 && byte_level_printable(cp)) return static_cast<unsigned char>(cp);
  detail::check_data(cp >= 256 && cp < 256 + 68, "specdec::normalise_token: a character outside the byte-level alphabet");
  std::uint32_t rank = cp - 256;
  for (std::uint32_t b = 0; b < 256; ++b)
    if (!byte_level_printable(b) && rank-- == 0) return static_cast<unsigned char>(b);
  return 0;  // unreachable: 68 bytes are not printable
}

//! `s` with every occurrence of `marker` replaced by a space (a copy; no in-place replace, which
//! GCC 12's -Wrestrict misreads at -O3).
inline std::string replace_marker(std::string_view s, std::string_view marker) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s.substr(i, marker.size()) == marker) {
      out.push_back(' ');
      i += marker.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}
}  // namespace detail

//! The bytes a token string stands for (see the file comment): a byte token `<0xNN>` is the byte NN;
//! other strings are decoded by `convention`.
//! \throws specdec::error for a byte token not written `<0xNN>`, or a byte-level string that is not.
inline std::string normalise_token(std::string_view s, token_kind kind, text_convention convention) {
  if (kind == token_kind::byte) {
    const auto hex = [](char c) -> int {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    detail::check_data(s.size() == 6 && s.substr(0, 3) == "<0x" && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0,
                       "specdec::normalise_token: a byte token must be written <0xNN>");
    return std::string(1, static_cast<char>(hex(s[3]) * 16 + hex(s[4])));
  }
  static constexpr std::string_view sentencepiece_space = "\xE2\x96\x81", byte_level_space = "\xC4\xA0";
  switch (convention) {
    case text_convention::markers:
      return detail::replace_marker(detail::replace_marker(s, sentencepiece_space), byte_level_space);
    case text_convention::sentencepiece: return detail::replace_marker(s, sentencepiece_space);
    case text_convention::byte_level: {
      std::string out;
      for (std::size_t i = 0; i < s.size();) out.push_back(static_cast<char>(detail::byte_level_byte(detail::read_utf8(s, i))));
      return out;
    }
    case text_convention::raw: break;
  }
  return std::string(s);
}

//! How much two vocabularies share (`vocab_map::overlap`).
struct vocab_overlap {
  std::size_t draft_tokens = 0;       //!< V of the draft
  std::size_t target_tokens = 0;      //!< V of the target
  std::size_t shared_strings = 0;     //!< distinct normalised strings in both
  std::size_t draft_mapped = 0;       //!< draft ids with a target id (duplicates included)
  std::size_t target_mapped = 0;      //!< target ids with a draft id (duplicates included)
  std::size_t draft_special = 0;      //!< draft ids left out as special (or empty)
  std::size_t target_special = 0;     //!< target ids left out as special (or empty)
  std::size_t draft_duplicates = 0;   //!< draft ids whose string a lower draft id already has
  std::size_t target_duplicates = 0;  //!< target ids whose string a lower target id already has

  //! The fraction of draft ids that map (what TLI can propose).
  double draft_fraction() const noexcept {
    return draft_tokens == 0 ? 0.0 : static_cast<double>(draft_mapped) / static_cast<double>(draft_tokens);
  }
  //! The fraction of target ids that map.
  double target_fraction() const noexcept {
    return target_tokens == 0 ? 0.0 : static_cast<double>(target_mapped) / static_cast<double>(target_tokens);
  }
};

//! The draft <-> target id maps of two vocabularies by normalised string (see the file comment);
//! `no_token` where a token has no counterpart.
class vocab_map {
 public:
  //! The map of `draft` to `target`.
  //! \throws specdec::error on a `kinds` list whose size is not V, a malformed string (normalise_token),
  //!         or when no string is shared.
  static vocab_map build(const token_list& draft, const token_list& target, vocab_map_options options = {}) {
    vocab_map m;
    m.overlap_.draft_tokens = draft.size();
    m.overlap_.target_tokens = target.size();
    std::unordered_map<std::string, token_id> target_ids;  // normalised string -> lowest target id
    const auto keys = [&](const token_list& list, std::size_t& special, std::size_t& duplicates,
                          std::unordered_map<std::string, token_id>& first) {
      SPECDEC_EXPECTS(list.kinds.empty() || list.kinds.size() == list.size(),
                      "specdec::vocab_map::build: a token list needs a kind per string (or none)");
      std::vector<std::string> out(list.size());
      for (std::size_t id = 0; id < list.size(); ++id) {
        if (list.kind(id) == token_kind::special && !options.include_special) {
          ++special;
          continue;
        }
        out[id] = normalise_token(list.strings[id], list.kind(id), list.convention);
        if (out[id].empty()) {
          ++special;
          continue;
        }
        if (!first.emplace(out[id], static_cast<token_id>(id)).second) ++duplicates;
      }
      return out;
    };
    std::unordered_map<std::string, token_id> draft_ids;
    const std::vector<std::string> target_keys =
        keys(target, m.overlap_.target_special, m.overlap_.target_duplicates, target_ids);
    const std::vector<std::string> draft_keys = keys(draft, m.overlap_.draft_special, m.overlap_.draft_duplicates, draft_ids);
    const auto fill = [](const std::vector<std::string>& from_keys, const std::unordered_map<std::string, token_id>& to_ids,
                         std::vector<token_id>& out, std::size_t& mapped) {
      out.assign(from_keys.size(), no_token);
      for (std::size_t id = 0; id < from_keys.size(); ++id) {
        if (from_keys[id].empty()) continue;
        const auto it = to_ids.find(from_keys[id]);
        if (it == to_ids.end()) continue;
        out[id] = it->second;
        ++mapped;
      }
    };
    fill(draft_keys, target_ids, m.to_target_, m.overlap_.draft_mapped);
    fill(target_keys, draft_ids, m.to_draft_, m.overlap_.target_mapped);
    for (const auto& [key, id] : draft_ids) m.overlap_.shared_strings += target_ids.count(key);
    if (m.overlap_.shared_strings == 0)
      throw error("specdec::vocab_map::build: the draft and target vocabularies share no token string (" +
                  std::to_string(draft.size()) + " and " + std::to_string(target.size()) +
                  " tokens): check the text conventions, or the draft cannot serve this target");
    return m;
  }

  //! V of the draft.
  std::size_t draft_size() const noexcept { return to_target_.size(); }
  //! V of the target.
  std::size_t target_size() const noexcept { return to_draft_.size(); }
  //! The target id spelling draft token `d`, or `no_token`. \throws specdec::error for d outside the draft's vocabulary.
  token_id to_target(token_id d) const {
    SPECDEC_EXPECTS(in_vocabulary(d, to_target_.size()), "specdec::vocab_map::to_target: a draft id outside the vocabulary");
    return to_target_[static_cast<std::size_t>(d)];
  }
  //! The draft id spelling target token `t`, or `no_token`. \throws specdec::error for t outside the target's vocabulary.
  token_id to_draft(token_id t) const {
    SPECDEC_EXPECTS(in_vocabulary(t, to_draft_.size()), "specdec::vocab_map::to_draft: a target id outside the vocabulary");
    return to_draft_[static_cast<std::size_t>(t)];
  }
  //! Draft id -> target id (`no_token` where absent), [V_draft].
  std::span<const token_id> draft_to_target() const noexcept { return to_target_; }
  //! Target id -> draft id (`no_token` where absent), [V_target].
  std::span<const token_id> target_to_draft() const noexcept { return to_draft_; }
  //! What the vocabularies share.
  const vocab_overlap& overlap() const noexcept { return overlap_; }

 private:
  vocab_map() = default;
  std::vector<token_id> to_target_, to_draft_;
  vocab_overlap overlap_;
};

}  // namespace specdec
