//! \file tests/integrations/llama_cpp/real_models.hpp
//! \brief Test support for the real GGUF models (scripts/get-models.sh puts them in
//! $SPECDEC_REAL_MODELS): their paths, a grounded prompt, and greedy decoding on the step decoder with
//! a drafter stage.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/integrations/llama_cpp.hpp"

namespace specdec_test::llama {

namespace lc = specdec::llama_cpp;
using specdec::token_id;

// The model file, or empty when the real models were not fetched.
inline std::filesystem::path real_model(const std::string& file) {
  const char* dir = std::getenv("SPECDEC_REAL_MODELS");
  if (dir == nullptr || *dir == '\0') return {};
  const std::filesystem::path p = std::filesystem::path(dir) / file;
  return std::filesystem::exists(p) ? p : std::filesystem::path{};
}

// A grounded prompt: a passage to copy with a small edit, the workload model-free drafts are for.
inline const char* grounded_prompt =
    "Rewrite the passage below, word for word, but in the past tense.\n\n"
    "Passage: The river runs through the valley. Every morning the farmers walk to the fields, and the "
    "children follow them to the water. The old mill turns slowly, and the baker sells bread at the bridge. "
    "In the evening the lamps are lit, the doors are closed, and the valley is quiet.\n\nRewritten passage:";

// Greedy decoding of `prompt` for `n` tokens on the decoder, drafting with `drafter` (empty: none).
inline std::vector<token_id> greedy_decode(const lc::model& m, const std::vector<token_id>& prompt, std::size_t n,
                                           specdec::draft_stage drafter, std::size_t* drafted = nullptr,
                                           std::size_t* accepted = nullptr, bool trees = false) {
  lc::context ctx(m, {.context_per_sequence = 1024, .sequences = 1, .threads = 2, .tree_paths = trees ? 8u : 0u});
  lc::sequence_model target(ctx);
  specdec::no_sequence_model none(m.vocab_size());
  specdec::batch_decoder decoder(specdec::exec::seq, target, none, specdec::greedy);
  specdec::request_options o;
  o.prompt = prompt;
  o.max_new_tokens = n;
  o.gamma = drafter ? 8 : 0;
  o.target_params.temperature = 0.0;
  o.drafter = std::move(drafter);
  if (trees) o.acceptance = specdec::tree_acceptance{specdec::greedy};  // the drafter's trees, verified as trees
  const auto h = decoder.add(o);
  while (decoder.active() > 0) decoder.step();
  if (drafted != nullptr) *drafted = decoder.stats(h).drafted;
  if (accepted != nullptr) *accepted = decoder.stats(h).accepted;
  const auto t = decoder.tokens(h);
  return {t.begin(), t.end()};
}

}  // namespace specdec_test::llama
