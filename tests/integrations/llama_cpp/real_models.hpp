//! \file tests/integrations/llama_cpp/real_models.hpp
//! \brief Test support for the real GGUF models (scripts/get-models.sh puts them in
//! $SPECDEC_REAL_MODELS): their paths, a grounded prompt, and greedy decoding on the step decoder with
//! a drafter stage.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <span>
#include <sstream>
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

// Greedy decoding of `prompt` for `n` tokens, one token per forward (as `greedy_decode` without a
// drafter), with each step's margin: its largest logit minus the next largest.
struct greedy_reference {
  std::vector<token_id> tokens;
  std::vector<float> margins;
};
inline greedy_reference greedy_with_margins(const lc::model& m, const std::vector<token_id>& prompt, std::size_t n) {
  lc::context ctx(m, {.context_per_sequence = 1024, .sequences = 1, .threads = 2});
  lc::sequence_model seq(ctx);
  std::vector<float> row(m.vocab_size());
  std::vector<token_id> next = prompt;
  greedy_reference out;
  for (std::size_t i = 0; i < n; ++i) {
    const specdec::sequence_append a{.sequence = 0, .tokens = next, .rows = 1};
    seq.forward(std::span(&a, 1), row);
    std::size_t best = 0;
    for (std::size_t v = 1; v < row.size(); ++v)
      if (row[v] > row[best]) best = v;
    float second = -std::numeric_limits<float>::infinity();
    for (std::size_t v = 0; v < row.size(); ++v)
      if (v != best && row[v] > second) second = row[v];
    out.tokens.push_back(static_cast<token_id>(best));
    out.margins.push_back(row[best] - second);
    next = {static_cast<token_id>(best)};
  }
  return out;
}

// Empty when `got` is `ref`'s greedy decoding wherever the arithmetic of a forward of several tokens
// cannot decide it: equal to `ref` up to their first difference, which falls where `ref`'s top two
// logits are within `tolerance` (llama.cpp computes a k-token forward with other kernels than a
// one-token forward, AVX-512's among them, so near-ties may go either way); else what differs.
inline std::string differs_beyond_near_ties(const std::vector<token_id>& got, const greedy_reference& ref,
                                            float tolerance = 0.5f) {
  std::ostringstream why;
  if (got.size() != ref.tokens.size()) {
    why << got.size() << " tokens, not " << ref.tokens.size();
    return why.str();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == ref.tokens[i]) continue;
    if (ref.margins[i] < tolerance) return {};  // a near-tie: the continuations may part here
    why << "token " << i << ": " << got[i] << ", greedy decoding's " << ref.tokens[i] << " by a margin of " << ref.margins[i];
    return why.str();
  }
  return {};
}

}  // namespace specdec_test::llama
