// Decoding across vocabularies on real GGUF models (integrations/llama_cpp/vocabulary.hpp,
// draft/tli.hpp, draft/slem.hpp): the map between SmolLM2 135M's 49,152 tokens and Gemma 3 270M's
// 262,144, and greedy TLI and SLEM with SmolLM2 drafting for Gemma (its own KV cache, one llama.cpp
// sequence rolled back as the text is re-tokenized) give greedy target-only decoding's tokens over 128
// tokens, up to a near-tie (real_models.hpp, `differs_beyond_near_ties`). Without the models the cases report a skip.
// SPECDEC_TEST_LABELS: real_models
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "integrations/llama_cpp/real_models.hpp"
#include "specdec/draft/slem.hpp"
#include "specdec/draft/tli.hpp"
#include "specdec/integrations/llama_cpp.hpp"
#include "specdec/integrations/llama_cpp/vocabulary.hpp"
#include "specdec/model/sequence_state.hpp"
#include "support/skip.hpp"

namespace {
namespace lc = specdec::llama_cpp;
using specdec::token_id;
using specdec_test::llama::real_model;
}  // namespace

TEST_CASE("SmolLM2 drafting for Gemma 3: greedy TLI and SLEM are greedy target decoding", "[real_models][cross_vocab]") {
  const auto target_path = real_model("gemma-3-270m-q4_k_m.gguf"), draft_path = real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (target_path.empty() || draft_path.empty()) {
    SPECDEC_SKIP("no Gemma 3 270M or SmolLM2 135M in $SPECDEC_REAL_MODELS (scripts/get-models.sh)");
    return;
  }
  lc::quiet_logs();
  const lc::model target(target_path), draft(draft_path);
  const auto map = lc::map_vocabularies(draft, target);
  const auto& o = map.overlap();
  INFO("shared strings " << o.shared_strings << ", draft mapped " << o.draft_mapped << " of " << o.draft_tokens
                         << ", target mapped " << o.target_mapped << " of " << o.target_tokens);
  CHECK(map.draft_size() == 49152);
  CHECK(map.target_size() == 262144);
  CHECK(o.shared_strings > 10000);
  for (token_id d = 0; d < 49152; d += 97)  // round trips on the overlap (representatives)
    if (map.to_target(d) != specdec::no_token && map.to_draft(map.to_target(d)) == d)
      CHECK(lc::token_piece(draft, d) == lc::token_piece(target, map.to_target(d)));

  const lc::text_tokenizer target_tok(target), draft_tok(draft);
  const std::vector<token_id> prompt = lc::tokenize(target, specdec_test::llama::grounded_prompt);
  constexpr std::size_t n = 128;
  const auto ref = specdec_test::llama::greedy_with_margins(target, prompt, n);
  REQUIRE(ref.tokens == specdec_test::llama::greedy_decode(target, prompt, n, {}));

  lc::context draft_ctx(draft, {.context_per_sequence = 1024, .sequences = 1, .threads = 2});
  lc::sequence_model draft_seq(draft_ctx);
  specdec::cross_vocab_options options{.draft_params = {.temperature = 0.0}, .context = {}};
  if (llama_vocab_get_add_bos(draft.vocab())) options.context.draft_prefix = {llama_vocab_bos(draft.vocab())};
  for (const bool tli : {true, false}) {
    specdec::sequence_state<lc::sequence_model> state(draft_seq, 0);
    const auto stage = tli ? specdec::tli_stage(state, map, target_tok, draft_tok, options)
                           : specdec::slem_stage(state, target_tok, draft_tok, options);
    std::size_t drafted = 0, accepted = 0;
    const auto out = specdec_test::llama::greedy_decode(target, prompt, n, stage, &drafted, &accepted);
    INFO((tli ? "TLI" : "SLEM") << ": drafted " << drafted << ", accepted " << accepted);
    CHECK(drafted > 0);
    CHECK(accepted > 0);
    CHECK(specdec_test::llama::differs_beyond_near_ties(out, ref) == std::string());
  }
}
