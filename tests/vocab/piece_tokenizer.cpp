// The reference piece tokenizer (vocab/piece_tokenizer.hpp): greedy longest match, byte fallback, a
// clear error for a byte it cannot spell; and a draft's view of a target context through two
// tokenizers (vocab/retokenized_context.hpp): re-tokenization across the old end within the
// look-behind, the draft's state rolled back to what the new view shares, a context that does not
// extend the last one, and bad input.
#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <vector>

#include "specdec/model/adapters.hpp"
#include "specdec/vocab/piece_tokenizer.hpp"
#include "specdec/vocab/retokenized_context.hpp"

namespace {
using specdec::token_id;
using tokens = std::vector<token_id>;
using Catch::Matchers::Contains;
}  // namespace

TEST_CASE("piece_tokenizer: greedy longest match, pieces spell the text", "[vocab][tokenizer]") {
  const auto t = specdec::piece_tokenizer::of_pieces({"a", "b", "c", "ab", "abc", "ca"});
  static_assert(specdec::TextTokenizer<specdec::piece_tokenizer>);
  CHECK(t.vocab_size() == 6);
  CHECK(t.encode("abcab") == tokens{4, 3});
  CHECK(t.encode("cab") == tokens{5, 1});  // "ca" first, then "b": greedy, not the fewest tokens
  CHECK(t.encode("") == tokens{});
  CHECK(t.piece(4) == "abc");
  std::string text;
  specdec::append_text(t, std::span<const token_id>(t.encode("bacab")), text);
  CHECK(text == "bacab");
  CHECK_THROWS_WITH(t.encode("abd"), Contains("byte 0x64 at offset 2"));
  CHECK_THROWS_WITH(t.piece(6), Contains("outside the vocabulary"));
}

TEST_CASE("piece_tokenizer: byte fallback for bytes no piece spells; special tokens spell nothing", "[vocab][tokenizer]") {
  using kind = specdec::token_kind;
  const specdec::piece_tokenizer t(specdec::token_list{{"<s>",
                                                        "\xE2\x96\x81"
                                                        "a",
                                                        "b", "<0x64>", "<0x62>"},
                                                       {kind::special, kind::normal, kind::normal, kind::byte, kind::byte},
                                                       specdec::text_convention::sentencepiece});
  CHECK(t.encode(" abd") == tokens{1, 2, 3});  // "b" is a piece: its byte token is not used
  CHECK(t.piece(0).empty());
  CHECK(t.piece(3) == "d");
  CHECK_THROWS_WITH(t.encode("e"), Contains("no byte fallback"));
}

namespace {
// A draft model that records nothing itself: the stateful adapter's state is what is checked.
auto flat_model(std::size_t vocab) {
  return specdec::make_model(vocab, [](std::span<const token_id>, std::span<float> out) {
    for (float& x : out) x = 0.0f;
  });
}
}  // namespace

TEST_CASE("retokenized_context: the draft reads the target's text in its own tokens, rolled back where it changed",
          "[vocab][tokenizer]") {
  const auto target = specdec::piece_tokenizer::of_pieces({"a", "b", "c"});
  const auto draft = specdec::piece_tokenizer::of_pieces({"ab", "c", "a", "bc", "b"});
  const auto model = flat_model(draft.vocab_size());
  specdec::retokenized_context ctx(specdec::make_stateful(model), target, draft, {.draft_prefix = {}, .lookbehind = 2});
  ctx.sync(tokens{0});  // "a"
  CHECK(ctx.text() == "a");
  CHECK(std::vector<token_id>(ctx.view().begin(), ctx.view().end()) == tokens{2});
  ctx.append_draft(3);  // the draft drafted "bc"
  CHECK(ctx.model().tokens().size() == 2);
  // The target emitted "b": the text "ab" re-tokenizes to ["ab"]; the state drops "a" and "bc".
  ctx.sync(tokens{0, 1});
  CHECK(std::vector<token_id>(ctx.view().begin(), ctx.view().end()) == tokens{0});
  CHECK(std::vector<token_id>(ctx.model().tokens().begin(), ctx.model().tokens().end()) == tokens{0});
  CHECK(ctx.rolled_back() == 2);
  // A draft the text confirms stays: "c" drafted, "c" emitted.
  ctx.append_draft(1);
  ctx.sync(tokens{0, 1, 2});
  CHECK(std::vector<token_id>(ctx.model().tokens().begin(), ctx.model().tokens().end()) == tokens{0, 1});
  CHECK(ctx.rolled_back() == 2);
  // Nothing new: nothing changes.
  ctx.sync(tokens{0, 1, 2});
  CHECK(ctx.model().tokens().size() == 2);
  // A context that does not extend the last one starts over.
  ctx.sync(tokens{1, 2});
  CHECK(ctx.text() == "bc");
  CHECK(std::vector<token_id>(ctx.model().tokens().begin(), ctx.model().tokens().end()) == tokens{3});
}

TEST_CASE("retokenized_context: the look-behind window re-encodes only the tail, the prefix stays", "[vocab][tokenizer]") {
  const auto target = specdec::piece_tokenizer::of_pieces({"a", "b"});
  const auto draft = specdec::piece_tokenizer::of_pieces({"<s>", "a", "b", "ab"});
  const auto model = flat_model(draft.vocab_size());
  specdec::retokenized_context ctx(specdec::make_stateful(model), target, draft, {.draft_prefix = {0}, .lookbehind = 1});
  tokens context;
  std::string text;
  for (int i = 0; i < 12; ++i) {
    const token_id t = (i * 7) % 3 == 0 ? 1 : 0;
    context.push_back(t);
    text += t == 0 ? "a" : "b";
    ctx.sync(std::span<const token_id>(context));
    // The windowed view equals encoding the whole text (greedy longest match restarts at a boundary).
    CHECK(std::vector<token_id>(ctx.view().begin(), ctx.view().end()) == draft.encode(text));
    CHECK(ctx.model().tokens()[0] == 0);
  }
}

TEST_CASE("retokenized_context: bad input", "[vocab][tokenizer][bad_input]") {
  const auto target = specdec::piece_tokenizer::of_pieces({"a", "b", "d"});
  const auto draft = specdec::piece_tokenizer::of_pieces({"a", "b"});
  const auto model = flat_model(draft.vocab_size());
  specdec::retokenized_context ctx(specdec::make_stateful(model), target, draft, {});
  // The draft's tokenizer cannot spell the target's "d".
  CHECK_THROWS_WITH(ctx.sync(tokens{0, 2}), Contains("no token spells byte 0x64"));
  // No text and no prefix: the draft would have no context.
  const auto with_special =
      specdec::piece_tokenizer(specdec::token_list{{"<s>", "a"}, {specdec::token_kind::special, specdec::token_kind::normal}});
  specdec::retokenized_context empty(specdec::make_stateful(model), with_special, draft, {});
  CHECK_THROWS_WITH(empty.sync(tokens{0}), Contains("draft_prefix"));
  CHECK_THROWS_WITH(specdec::retokenized_context(specdec::make_stateful(model), target, draft, {.draft_prefix = {7}}),
                    Contains("outside the draft's vocabulary"));
  // A tokenizer whose pieces do not spell what it encoded.
  struct lying_tokenizer {
    std::size_t vocab_size() const { return 2; }
    std::string piece(token_id t) const { return t == 0 ? "a" : "b"; }
    std::vector<token_id> encode(std::string_view text) const { return tokens(text.size(), 0); }
  };
  const lying_tokenizer liar;
  specdec::retokenized_context lied(specdec::make_stateful(model), target, liar, {});
  CHECK_THROWS_WITH(lied.sync(tokens{1}), Contains("do not spell"));
}
