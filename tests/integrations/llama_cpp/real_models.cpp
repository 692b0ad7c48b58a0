// Real quantized GGUF models on llama.cpp (scripts/get-models.sh puts them in $SPECDEC_REAL_MODELS):
// Gemma 3 270M Q4_K_M and SmolLM2 135M Instruct Q4_1 decode (the build without AMX kernels runs
// quantized products on every x86-64 machine: a SIGILL fails the test), target-only greedy decoding
// through specdec's decoder is llama.cpp's own greedy decoding, and greedy speculative decoding with
// each model-free drafter (n-gram prompt lookup, suffix chains, suffix trees verified as trees on
// llama.cpp's KV cache) gives greedy target-only decoding's tokens over 128 tokens, up to a near-tie
// (top two logits within 0.5: llama.cpp's kernels for a forward of several tokens sum in another order
// than a one-token forward's, AVX-512's visibly; a change where the margin is larger must be reported); SmolLM2 drafting
// for itself (the one same-vocabulary pair here) under SPRINTER with a verifier that accepts nothing
// and under SV (SmolLM2 its own companion, the estimator profiled first) gives them over 64. Without the models
// (SPECDEC_REAL_MODELS=0 in scripts/test.sh, or no download) the cases report a skip.
// SPECDEC_TEST_LABELS: real_models
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "integrations/llama_cpp/gated.hpp"
#include "integrations/llama_cpp/models.hpp"
#include "integrations/llama_cpp/real_models.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/draft/prompt_lookup.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/integrations/llama_cpp.hpp"
#include "support/skip.hpp"

namespace {
namespace lc = specdec::llama_cpp;
using specdec::token_id;
using specdec_test::llama::differs_beyond_near_ties;
using specdec_test::llama::greedy_decode;
using specdec_test::llama::grounded_prompt;
using specdec_test::llama::real_model;

// The real model `file`; without it, a CTest skip and an empty path.
std::filesystem::path model_or_skip(const std::string& file) {
  auto path = real_model(file);
  if (path.empty()) SPECDEC_SKIP("no " << file << " in $SPECDEC_REAL_MODELS (scripts/get-models.sh)");
  return path;
}

void check_model(const std::string& file) {
  const auto path = model_or_skip(file);
  if (path.empty()) return;
  lc::quiet_logs();
  const lc::model m(path);
  const std::vector<token_id> prompt = lc::tokenize(m, grounded_prompt);
  constexpr std::size_t n = 128;
  const auto plain = greedy_decode(m, prompt, n, {});
  REQUIRE(plain.size() == n);
  // specdec's target-only greedy decoding is llama.cpp's own (one llama_decode per token).
  CHECK(plain == specdec_test::llama::llama_greedy(m, prompt, n));
  const auto ref = specdec_test::llama::greedy_with_margins(m, prompt, n);
  REQUIRE(ref.tokens == plain);
  {  // control: a token changed where greedy decoding is not a near-tie must be reported
    auto wrong = plain;
    std::size_t i = 0;
    while (i < n && ref.margins[i] < 0.5f) ++i;
    REQUIRE(i < n);
    wrong[i] = wrong[i] == 0 ? 1 : 0;
    CHECK(differs_beyond_near_ties(wrong, ref) != std::string());
  }

  std::size_t drafted = 0, accepted = 0;
  const auto lookup =
      greedy_decode(m, prompt, n, specdec::prompt_lookup_stage({.min_n = 1, .max_n = 3, .k = 8}), &drafted, &accepted);
  INFO(file << ", prompt lookup: drafted " << drafted << ", accepted " << accepted);
  CHECK(drafted > 0);
  CHECK(differs_beyond_near_ties(lookup, ref) == std::string());
  const auto suffix = greedy_decode(m, prompt, n, specdec::suffix_stage({.max_spec = 8}), &drafted, &accepted);
  INFO(file << ", suffix tree: drafted " << drafted << ", accepted " << accepted);
  CHECK(drafted > 0);
  CHECK(differs_beyond_near_ties(suffix, ref) == std::string());
  // Suffix trees, verified as trees on llama.cpp's KV cache (a sequence id per root-to-leaf path).
  const auto tree =
      greedy_decode(m, prompt, n, specdec::suffix_stage({.max_spec = 8, .factor = 2.0, .tree = true}), &drafted, &accepted, true);
  INFO(file << ", suffix trees: drafted " << drafted << ", accepted " << accepted);
  CHECK(drafted > 0);
  CHECK(differs_beyond_near_ties(tree, ref) == std::string());
}
}  // namespace

TEST_CASE("Gemma 3 270M Q4_K_M: decodes; greedy with model-free drafts is greedy target decoding", "[real_models][gemma]") {
  check_model("gemma-3-270m-q4_k_m.gguf");
}

TEST_CASE("SmolLM2 135M Q4_1: decodes; greedy with model-free drafts is greedy target decoding", "[real_models][smollm2]") {
  check_model("SmolLM2-135M-Instruct.Q4_1.gguf");
}

TEST_CASE("A truncated GGUF file is an error, not a crash", "[real_models][bad_input]") {
  const auto path = model_or_skip("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) return;
  const auto truncated = std::filesystem::temp_directory_path() / "specdec-truncated.gguf";
  std::filesystem::copy_file(path, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(path) / 3);
  lc::quiet_logs();
  CHECK_THROWS_AS(lc::model(truncated), specdec::engine_error);
  std::filesystem::remove(truncated);
}

TEST_CASE("SmolLM2 135M drafting for itself: greedy SPRINTER and SV are greedy target decoding", "[real_models][smollm2]") {
  const auto path = model_or_skip("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) return;
  lc::quiet_logs();
  const lc::model m(path);
  const std::vector<token_id> prompt = lc::tokenize(m, grounded_prompt);
  constexpr std::size_t n = 64;
  const auto ref = specdec_test::llama::greedy_with_margins(m, prompt, n);

  // SPRINTER with a verifier that accepts nothing: every draft goes to the target's check.
  specdec::request_options r;
  r.prompt = prompt;
  r.max_new_tokens = n;
  r.gamma = 20;
  r.target_params = r.draft_params = specdec_test::llama::greedy_warp;
  r.acceptance = specdec::last_token;
  auto never = specdec_test::llama::constant_gate(0.0, 20);
  specdec::decode_stats stats;
  const auto sprinter = specdec_test::llama::decode_stages(m, m, {r}, never.factory(), &stats, 1024);
  CHECK(differs_beyond_near_ties(sprinter.front(), ref) == std::string());
  CHECK(stats.target_calls == n);

  specdec::sv_stats sv;
  const auto got = specdec_test::llama::greedy_sv(m, m, m, {prompt}, n, 4, 32, sv);
  INFO("SV: mean verified length " << sv.mean_verified_length() << ", " << sv.dropped << " of " << sv.drafted << " dropped");
  CHECK(differs_beyond_near_ties(got.front(), ref) == std::string());
  CHECK(sv.companion_calls > 0);
}
