// The word tokenizer, paragraph splitting and the vocabulary (encode/decode).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "specdec/models/tokenizer.hpp"

using specdec::token_id;
using specdec::vocabulary;
using strings = std::vector<std::string>;

TEST_CASE("tokenize: lower-cased words and punctuation tokens", "[models][tokenizer]") {
  CHECK(specdec::tokenize("The Quick brown FOX.") == strings{"the", "quick", "brown", "fox", "."});
  CHECK(specdec::tokenize("Don't stop, third-party GPL-2.0 v1.2 costs 1,000 (ok)!") ==
        strings{"don't", "stop", ",", "third-party", "gpl-2.0", "v1.2", "costs", "1,000", "(", "ok", ")", "!"});
  // apostrophes and hyphens not between word characters are punctuation; "--" splits
  CHECK(specdec::tokenize("licensors' rights -- 'quoted'") == strings{"licensors", "'", "rights", "-", "-", "'", "quoted", "'"});
  // a dot between a letter and a digit, or at the end, is punctuation
  CHECK(specdec::tokenize("e.g. section 3.") == strings{"e", ".", "g", ".", "section", "3", "."});
  // whitespace of every kind separates; control bytes are dropped; UTF-8 stays inside words
  CHECK(specdec::tokenize("a\tb\r\nc\fd\x01 caf\xc3\xa9") == strings{"a", "b", "c", "d", "caf\xc3\xa9"});
  CHECK(specdec::tokenize("").empty());
  CHECK(specdec::tokenize(" \n\t ").empty());
  CHECK(specdec::tokenize("snake_case <s>") == strings{"snake_case", "<", "s", ">"});
}

TEST_CASE("split_paragraphs: blank lines separate", "[models][tokenizer]") {
  const std::string text = "first line\nsecond line\n\n   \t\nthird\n\n\nfourth";
  const auto ps = specdec::split_paragraphs(text);
  REQUIRE(ps.size() == 3);
  CHECK(specdec::tokenize(ps[0]) == strings{"first", "line", "second", "line"});
  CHECK(specdec::tokenize(ps[1]) == strings{"third"});
  CHECK(specdec::tokenize(ps[2]) == strings{"fourth"});
  CHECK(specdec::split_paragraphs("").empty());
  CHECK(specdec::split_paragraphs("\n \n\n").empty());
  CHECK(specdec::split_paragraphs("one").size() == 1);
  CHECK(specdec::split_paragraphs("a\r\n\r\nb").size() == 2);  // CRLF blank lines too
}

TEST_CASE("vocabulary: specials first, then words by frequency, ties by word", "[models][tokenizer]") {
  const strings texts{"b a c a. b a!", "c d"};
  const auto v = vocabulary::build(texts);
  // counts: a 3, b 2, c 2, . 1, ! 1, d 1
  REQUIRE(v.size() == 3 + 6);
  CHECK(v.word(vocabulary::unk) == "<unk>");
  CHECK(v.word(vocabulary::bos) == "<s>");
  CHECK(v.word(vocabulary::eos) == "</s>");
  CHECK(v.word(3) == "a");
  CHECK(v.word(4) == "b");
  CHECK(v.word(5) == "c");
  CHECK(v.word(6) == "!");
  CHECK(v.word(7) == ".");
  CHECK(v.word(8) == "d");
  CHECK(v.id("c") == 5);
  CHECK(v.id("zebra") == vocabulary::unk);
  CHECK(v.id("<s>") == vocabulary::unk);  // the specials' texts are not words
  CHECK(v.contains("d"));
  CHECK_FALSE(v.contains("<unk>"));
  CHECK_THROWS_AS(v.word(9), specdec::error);
  CHECK_THROWS_AS(v.word(-1), specdec::error);

  const auto capped = vocabulary::build(texts, 2);
  REQUIRE(capped.size() == 5);
  CHECK(capped.word(4) == "b");
  CHECK(capped.encode("a b c") == std::vector<token_id>{3, 4, vocabulary::unk});

  CHECK_THROWS_AS(vocabulary(strings{"x", "x"}), specdec::error);
  CHECK_THROWS_AS(vocabulary(strings{""}), specdec::error);
  CHECK(vocabulary().size() == 3);
}

TEST_CASE("vocabulary: encode/decode round trip", "[models][tokenizer]") {
  const std::string text =
      "the licensor (you) grants rights, subject to section 2.1: copy, modify [and] share! don't worry; it's "
      "third-party code? yes.";
  const auto v = vocabulary::build(strings{text});
  const auto ids = v.encode(text);
  CHECK(ids.size() == specdec::tokenize(text).size());
  for (token_id t : ids) CHECK(t != vocabulary::unk);
  CHECK(v.decode(ids) == text);
  // upper case is folded, spacing normalised
  CHECK(v.decode(v.encode("The   licensor ,GRANTS rights .")) == "the licensor, grants rights.");
  // boundaries: <s> dropped, </s> is a line break; unknown words decode as <unk>
  std::vector<token_id> with_bounds{vocabulary::bos, v.id("the"),     v.id("code"), v.id("."),
                                    vocabulary::eos, vocabulary::bos, v.id("yes"),  vocabulary::unk};
  CHECK(v.decode(with_bounds) == "the code.\nyes <unk>");
  const std::vector<token_id> bad{static_cast<token_id>(v.size())};
  CHECK_THROWS_AS(v.decode(bad), specdec::error);
}
