// A llama.cpp vocabulary's tokenizer across vocabularies (integrations/llama_cpp/vocabulary.hpp) on
// the test models: target.gguf's SentencePiece vocabulary adds a space before the text, which
// `text_tokenizer` strips (its pieces then spell the text; after the first token the encoding is
// llama.cpp's own), and other-vocab.gguf's byte-level BPE does not. With the prefix stripped, greedy
// TLI and SLEM in both directions (SentencePiece target drafted for by the BPE model, and the reverse)
// give llama.cpp's own greedy tokens.
// SPECDEC_TEST_LABELS: llama_cpp
#include <algorithm>
#include <string>
#include <vector>

#include "integrations/llama_cpp/models.hpp"
#include "integrations/llama_cpp/real_models.hpp"
#include "specdec/draft/slem.hpp"
#include "specdec/draft/tli.hpp"
#include "specdec/integrations/llama_cpp/vocabulary.hpp"
#include "specdec/model/sequence_state.hpp"

namespace t = specdec_test::llama;
namespace lc = specdec::llama_cpp;
using specdec::token_id;

TEST_CASE("llama_cpp::text_tokenizer strips a SentencePiece space prefix: its pieces spell the text",
          "[llama_cpp][cross_vocab]") {
  const auto& spm = t::model("target");
  const auto& bpe = t::model("other-vocab");
  const lc::text_tokenizer spm_tok(spm), bpe_tok(bpe);
  CHECK(spm_tok.space_prefix());
  CHECK_FALSE(bpe_tok.space_prefix());
  // llama.cpp itself encodes " " + text: what the drafters refused before.
  std::string spelled;
  for (const token_id id : lc::tokenize(spm, "Once upon", false)) spelled += spm_tok.piece(id);
  CHECK(spelled == " Once upon");
  for (const std::string text :
       {"Once upon a time", " upon a time", "  two spaces", "1969, the crew", "a", " ", "x\n y", "caf\xC3\xA9 \xE2\x82\xAC"}) {
    INFO("text \"" << text << "\"");
    // encode_checked throws unless the pieces spell the text.
    const std::vector<token_id> ids = specdec::encode_checked(spm_tok, text, "test");
    const std::vector<token_id> own = lc::tokenize(spm, text, false);
    REQUIRE(!own.empty());
    REQUIRE(ids.size() + 1 >= own.size());
    CHECK(std::equal(own.begin() + 1, own.end(), ids.end() - static_cast<std::ptrdiff_t>(own.size() - 1)));
    CHECK(specdec::encode_checked(bpe_tok, text, "test") == lc::tokenize(bpe, text, false));
  }
  CHECK(spm_tok.encode("").empty());
  // Bytes that are no whole UTF-8 character (a cut "\xC3\xA9", a lone continuation byte): a token each,
  // between llama.cpp's encodings of the whole characters.
  for (const lc::text_tokenizer* tok : {&spm_tok, &bpe_tok}) {
    for (const std::string text : {"caf\xC3", "x \x89y", "\xE2\x82", "\xC3\xA9\x89\xC3\xA9"}) {
      INFO("text \"" << text << "\", space prefix " << tok->space_prefix());
      const std::vector<token_id> ids = specdec::encode_checked(*tok, text, "test");
      CHECK(ids.size() <= text.size());
    }
  }
}

TEST_CASE("across vocabularies with a space-prefix tokenizer: greedy TLI and SLEM are llama.cpp's greedy decoding",
          "[llama_cpp][cross_vocab]") {
  const auto& spm = t::model("target");
  const auto& bpe = t::model("other-vocab");
  constexpr std::size_t n = 32;
  for (const bool spm_target : {true, false}) {
    const lc::model& target = spm_target ? spm : bpe;
    const lc::model& draft = spm_target ? bpe : spm;
    const auto map = lc::map_vocabularies(draft, target);
    const lc::text_tokenizer target_tok(target), draft_tok(draft);
    const std::vector<token_id> prompt = lc::tokenize(target, t::prompts()[0]);
    const std::vector<token_id> reference = t::llama_greedy(target, prompt, n);
    lc::context draft_ctx(draft, {.context_per_sequence = 512, .sequences = 1, .threads = 1});
    lc::sequence_model draft_seq(draft_ctx);
    specdec::cross_vocab_options options{.draft_params = {.temperature = 0.0}, .context = {}};
    if (llama_vocab_get_add_bos(draft.vocab())) options.context.draft_prefix = {llama_vocab_bos(draft.vocab())};
    for (const bool tli : {true, false}) {
      INFO((spm_target ? "SentencePiece target, " : "BPE target, ") << (tli ? "TLI" : "SLEM"));
      specdec::sequence_state<lc::sequence_model> state(draft_seq, 0);
      const auto inner = tli ? specdec::tli_stage(state, map, target_tok, draft_tok, options)
                             : specdec::slem_stage(state, target_tok, draft_tok, options);
      std::string failure;  // why the stage threw, if it did (the decoder keeps only stage_error)
      const specdec::draft_stage stage = [&](std::span<const token_id> context, std::size_t gamma,
                                             const specdec::random::request_stream& stream, specdec::stage_draft& block) {
        try {
          inner(context, gamma, stream, block);
        } catch (const specdec::error& e) {
          failure = e.what();
          throw;
        }
      };
      std::size_t drafted = 0, accepted = 0;
      const auto out = t::greedy_decode(target, prompt, n, stage, &drafted, &accepted);
      INFO("drafted " << drafted << ", accepted " << accepted << "; stage error: " << failure);
      CHECK(drafted > 0);
      CHECK(out == reference);  // all n tokens: a request whose tokenizer failed would end early
    }
  }
}
