// The vocabulary map of decoding across tokenizers (vocab/vocab_map.hpp): round trips on the overlap,
// special tokens left out (and mapped on request), both space-marker conventions and GPT-2's byte-level
// alphabet, byte-fallback tokens, duplicate strings (lowest id), no overlap (a clear error), malformed
// strings and ids outside a vocabulary; the map of two word vocabularies of the n-gram reference
// models (models/tokenizer.hpp), built from text.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "specdec/models/tokenizer.hpp"
#include "specdec/vocab/vocab_map.hpp"

namespace {
using specdec::no_token;
using specdec::token_id;
using specdec::token_kind;
using specdec::token_list;
using kind = specdec::token_kind;
using Catch::Matchers::Contains;

token_list list(std::vector<std::string> strings, std::vector<token_kind> kinds = {},
                specdec::text_convention c = specdec::text_convention::markers) {
  return token_list{std::move(strings), std::move(kinds), c};
}
}  // namespace

TEST_CASE("vocab_map: ids of equal strings, round trips on the overlap, no_token elsewhere", "[vocab]") {
  const auto draft = list({"a", "b", "ab", "x", "yz"});
  const auto target = list({"b", "c", "a", "ab", "zz", "q"});
  const auto m = specdec::vocab_map::build(draft, target);
  CHECK(m.draft_size() == 5);
  CHECK(m.target_size() == 6);
  CHECK(m.to_target(0) == 2);
  CHECK(m.to_target(1) == 0);
  CHECK(m.to_target(2) == 3);
  CHECK(m.to_target(3) == no_token);
  CHECK(m.to_draft(1) == no_token);
  for (token_id d = 0; d < 5; ++d)
    if (m.to_target(d) != no_token) CHECK(m.to_draft(m.to_target(d)) == d);
  for (token_id t = 0; t < 6; ++t)
    if (m.to_draft(t) != no_token) CHECK(m.to_target(m.to_draft(t)) == t);
  const auto& o = m.overlap();
  CHECK(o.shared_strings == 3);
  CHECK(o.draft_mapped == 3);
  CHECK(o.target_mapped == 3);
  CHECK(o.draft_fraction() == Approx(0.6));
  CHECK(o.target_fraction() == Approx(0.5));
  CHECK(m.draft_to_target().size() == 5);
  CHECK(m.target_to_draft().size() == 6);
}

TEST_CASE("vocab_map: special tokens are left out unless asked for", "[vocab]") {
  const auto draft = list({"</s>", "a", "<s>"}, {kind::special, kind::normal, kind::special});
  const auto target = list({"<s>", "</s>", "a"}, {kind::special, kind::special, kind::normal});
  const auto m = specdec::vocab_map::build(draft, target);
  CHECK(m.to_target(0) == no_token);
  CHECK(m.to_target(2) == no_token);
  CHECK(m.to_target(1) == 2);
  CHECK(m.overlap().draft_special == 2);
  CHECK(m.overlap().target_special == 2);
  const auto with = specdec::vocab_map::build(draft, target, {.include_special = true});
  CHECK(with.to_target(0) == 1);
  CHECK(with.to_target(2) == 0);
  // A special-only overlap is no overlap.
  CHECK_THROWS_WITH(specdec::vocab_map::build(list({"</s>", "x"}, {kind::special, kind::normal}),
                                              list({"</s>", "y"}, {kind::special, kind::normal})),
                    Contains("share no token string"));
}

TEST_CASE("vocab_map: SentencePiece's and byte-level BPE's space markers are both spaces", "[vocab]") {
  // U+2581 "▁" and U+0120 "Ġ".
  const auto sp = list({"\xE2\x96\x81the", "\xE2\x96\x81", "cat", "<0x0A>"},
                       {kind::normal, kind::normal, kind::normal, kind::byte}, specdec::text_convention::sentencepiece);
  const auto bpe = list({"\xC4\xA0", "cat", "\xC4\xA0the", "\xC4\x8A"}, {}, specdec::text_convention::byte_level);
  const auto m = specdec::vocab_map::build(sp, bpe);
  CHECK(m.to_target(0) == 2);  // "▁the" = "Ġthe" = " the"
  CHECK(m.to_target(1) == 0);  // " "
  CHECK(m.to_target(2) == 1);
  CHECK(m.to_target(3) == 3);  // byte fallback <0x0A> = byte-level "Ċ" (U+010A) = "\n"
  // The default convention takes both markers (and leaves U+010A alone).
  const auto mixed = specdec::vocab_map::build(list({"\xE2\x96\x81the", "\xC4\x8A"}), list({"\xC4\xA0the", "\n"}));
  CHECK(mixed.to_target(0) == 0);
  CHECK(mixed.to_target(1) == no_token);
  // Under sentencepiece, U+0120 is a letter, not a space.
  const auto strict_sp = specdec::vocab_map::build(list({"\xC4\xA0the", "x"}, {}, specdec::text_convention::sentencepiece),
                                                   list({" the", "x"}, {}, specdec::text_convention::raw));
  CHECK(strict_sp.to_target(0) == no_token);
  CHECK(specdec::normalise_token("\xC4\xA0the", kind::normal, specdec::text_convention::byte_level) == " the");
  // Printable Latin-1 stands for its own byte in the byte-level alphabet: "Ã©" is the UTF-8 of "é".
  CHECK(specdec::normalise_token("\xC3\x83\xC2\xA9", kind::normal, specdec::text_convention::byte_level) == "\xC3\xA9");
  CHECK_THROWS_WITH(specdec::normalise_token("\xE4\xB8\x80", kind::normal, specdec::text_convention::byte_level),
                    Contains("outside the byte-level alphabet"));
  CHECK_THROWS_WITH(specdec::normalise_token("\xC4", kind::normal, specdec::text_convention::byte_level), Contains("UTF-8"));
}

TEST_CASE("vocab_map: byte-fallback tokens are their byte", "[vocab]") {
  const auto draft = list({"<0x41>", "b", "<0xe9>"}, {kind::byte, kind::normal, kind::byte});
  const auto target = list({"A", "b", "\xE9"}, {}, specdec::text_convention::raw);
  const auto m = specdec::vocab_map::build(draft, target);
  CHECK(m.to_target(0) == 0);
  CHECK(m.to_target(2) == 2);
  CHECK_THROWS_WITH(specdec::vocab_map::build(list({"<0xZZ>", "b"}, {kind::byte, kind::normal}), target), Contains("<0xNN>"));
  CHECK_THROWS_WITH(specdec::vocab_map::build(list({"<0x4>", "b"}, {kind::byte, kind::normal}), target), Contains("<0xNN>"));
}

TEST_CASE("vocab_map: duplicate strings map to the lowest id of the other side", "[vocab]") {
  // Draft ids 0 and 2 both spell "A" (a piece and a byte fallback); target ids 1 and 3 both spell "b".
  const auto draft = list({"A", "b", "<0x41>", "c"}, {kind::normal, kind::normal, kind::byte, kind::normal});
  const auto target = list({"A", "b", "c",
                            "\xE2\x96\x81"
                            "b",
                            "b"});
  const auto m = specdec::vocab_map::build(draft, target);
  CHECK(m.to_target(0) == 0);
  CHECK(m.to_target(2) == 0);  // many-to-one
  CHECK(m.to_draft(0) == 0);   // the lowest draft id
  CHECK(m.to_target(1) == 1);  // the lowest target id with "b"
  CHECK(m.to_draft(4) == 1);
  CHECK(m.to_draft(3) == no_token);  // " b" is not "b"
  CHECK(m.overlap().draft_duplicates == 1);
  CHECK(m.overlap().target_duplicates == 1);
  CHECK(m.overlap().shared_strings == 3);
  CHECK(m.overlap().draft_mapped == 4);
  // Round trips hold for the representatives.
  CHECK(m.to_draft(m.to_target(0)) == 0);
  CHECK(m.to_draft(m.to_target(2)) == 0);
}

TEST_CASE("vocab_map: bad input is a clear error", "[vocab][bad_input]") {
  CHECK_THROWS_WITH(specdec::vocab_map::build(list({"a", "b"}), list({"c", "d"})), Contains("share no token string"));
  CHECK_THROWS_WITH(specdec::vocab_map::build(list({}), list({"c"})), Contains("share no token string"));
  CHECK_THROWS_WITH(specdec::vocab_map::build(list({"a", "b"}, {kind::normal}), list({"a"})), Contains("a kind per string"));
  // Empty strings map to nothing.
  const auto m = specdec::vocab_map::build(list({"", "a"}), list({"a", ""}));
  CHECK(m.to_target(0) == no_token);
  CHECK(m.to_draft(1) == no_token);
  CHECK_THROWS_WITH(m.to_target(2), Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(m.to_target(-1), Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(m.to_draft(5), Contains("outside the vocabulary"));
}

TEST_CASE("vocab_map: two word vocabularies map by word; <unk>, <s> and </s> are left out", "[vocab][tokenizer]") {
  // The draft knows fewer words, in another frequency order; "fox" and "cat" are only the target's,
  // "hen" only the draft's.
  const std::vector<std::string> draft_text{"the dog and the hen. the dog ran"};
  const std::vector<std::string> target_text{"a fox saw the cat, and the dog saw a fox. the end"};
  const auto draft = specdec::vocabulary::build(draft_text);
  const auto target = specdec::vocabulary::build(target_text);
  const auto m = specdec::vocab_map::build(draft.tokens(), target.tokens());
  REQUIRE(m.draft_size() == draft.size());
  REQUIRE(m.target_size() == target.size());
  // Round trips on the overlap, and a mapped id spells the same word.
  std::size_t shared = 0;
  for (std::size_t d = specdec::vocabulary::special_count; d < draft.size(); ++d) {
    const auto id = static_cast<token_id>(d);
    const token_id t = m.to_target(id);
    CHECK(target.contains(draft.word(id)) == (t != no_token));
    if (t == no_token) continue;
    ++shared;
    CHECK(target.word(t) == draft.word(id));
    CHECK(m.to_draft(t) == id);
  }
  CHECK(shared == 4);  // the, dog, and, "."
  CHECK(m.to_target(draft.id("hen")) == no_token);
  CHECK(m.to_draft(target.id("fox")) == no_token);
  CHECK(m.to_target(draft.id("dog")) == target.id("dog"));
  // The special tokens: both have "<s>" and "</s>", neither maps; on request they do, by id.
  for (token_id s = 0; s < 3; ++s) {
    CHECK(m.to_target(s) == no_token);
    CHECK(m.to_draft(s) == no_token);
  }
  CHECK(m.overlap().draft_special == 3);
  CHECK(m.overlap().target_special == 3);
  CHECK(m.overlap().shared_strings == shared);
  const auto with = specdec::vocab_map::build(draft.tokens(), target.tokens(), {.include_special = true});
  CHECK(with.to_target(specdec::vocabulary::bos) == specdec::vocabulary::bos);
  CHECK(with.to_target(specdec::vocabulary::eos) == specdec::vocabulary::eos);
  CHECK(with.overlap().shared_strings == shared + 3);
}

TEST_CASE("vocab_map: a capped word vocabulary inside the full one; no shared word is an error", "[vocab][tokenizer]") {
  // The n-gram models' setting: a draft with a capped vocabulary of the target's text. Word k of 40
  // appears 40 - k times, so the 20 most frequent are w0 ... w19 in that order.
  std::string text;
  for (int k = 0; k < 40; ++k)
    for (int n = k; n < 40; ++n) text += "w" + std::to_string(k) + " ";
  const std::vector<std::string> texts{text};
  const auto full = specdec::vocabulary::build(texts);
  const auto capped = specdec::vocabulary::build(texts, 20);
  REQUIRE(full.size() == 43);
  REQUIRE(capped.size() == 23);
  const auto m = specdec::vocab_map::build(capped.tokens(), full.tokens());
  // Same text, same order: every word of the capped vocabulary is the full one's word with its id.
  CHECK(m.overlap().draft_mapped == 20);
  CHECK(m.overlap().target_mapped == 20);
  for (token_id d = 3; d < 23; ++d) CHECK(m.to_target(d) == d);
  CHECK(m.to_draft(full.id("w39")) == no_token);

  // No word in common: the map's error, with both sizes.
  const std::vector<std::string> a{"alpha beta"}, b{"gamma delta epsilon"};
  CHECK_THROWS_WITH(specdec::vocab_map::build(specdec::vocabulary::build(a).tokens(), specdec::vocabulary::build(b).tokens()),
                    Contains("share no token string") && Contains("(5 and 6 tokens)"));
  // Only the special tokens in common is no overlap either.
  CHECK_THROWS_WITH(specdec::vocab_map::build(specdec::vocabulary().tokens(), specdec::vocabulary().tokens()),
                    Contains("share no token string"));
}
