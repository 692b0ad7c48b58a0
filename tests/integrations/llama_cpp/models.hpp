//! \file tests/integrations/llama_cpp/models.hpp
//! \brief Test support for the llama.cpp integration: the test models (written by the CTest fixture
//! integrations/llama_cpp/make_models into $SPECDEC_LLAMA_MODELS, scripts/make-llama-test-models.py),
//! llama.cpp's own greedy decoding and a fresh context's next-token logits as references, and the
//! decoder runs the tests share.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "specdec/decode/batch_decoder.hpp"
#include "specdec/integrations/llama_cpp.hpp"

namespace specdec_test::llama {

namespace lc = specdec::llama_cpp;
using specdec::token_id;

//! The path of a test model, e.g. model_path("target").
inline std::filesystem::path model_path(const std::string& name) {
  const char* dir = std::getenv("SPECDEC_LLAMA_MODELS");
  REQUIRE(dir != nullptr);  // set by CTest (tests/CMakeLists.txt)
  return std::filesystem::path(dir) / (name + ".gguf");
}

//! A test model, loaded once per process.
inline const lc::model& model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<lc::model>> loaded;
  auto& m = loaded[name];
  if (!m) {
    lc::quiet_logs();
    m = std::make_unique<lc::model>(model_path(name));
  }
  return *m;
}

inline const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p{"Once upon a time", "The quick brown fox jumps over", "In 1969, the crew of"};
  return p;
}

//! llama.cpp's own greedy decoding of `m` (no specdec code): one llama_decode per token on a fresh
//! context, the token chosen by llama.cpp's greedy sampler.
inline std::vector<token_id> llama_greedy(const lc::model& m, std::vector<token_id> prompt, std::size_t n) {
  lc::context ctx(m, {.context_per_sequence = 512, .sequences = 1, .threads = 1});
  llama_sampler* greedy = llama_sampler_init_greedy();
  std::vector<token_id> out;
  llama_batch batch = llama_batch_get_one(prompt.data(), static_cast<std::int32_t>(prompt.size()));
  token_id next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(llama_decode(ctx.get(), batch) == 0);
    next = llama_sampler_sample(greedy, ctx.get(), -1);
    out.push_back(next);
    batch = llama_batch_get_one(&next, 1);
  }
  llama_sampler_free(greedy);
  return out;
}

//! The next-token logits after `tokens`, from a fresh context.
inline std::vector<float> fresh_logits(const lc::model& m, std::vector<token_id> tokens) {
  lc::context ctx(m, {.context_per_sequence = 512, .sequences = 1, .threads = 1});
  lc::sequence_model seq(ctx);
  std::vector<float> row(m.vocab_size());
  const specdec::sequence_append a{.sequence = 0, .tokens = tokens, .rows = 1};
  seq.forward(std::span(&a, 1), row);
  return row;
}

//! Largest |a - b| over |b|'s largest entry.
inline double relative_difference(std::span<const float> a, std::span<const float> b) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

//! Steps `decoder` until no request is active; returns the tokens of each request of `handles`
//! (consecutive handles, in order) and adds each one's decode_stats to `stats` when given.
template <class Decoder>
std::vector<std::vector<token_id>> run_to_end(Decoder& decoder, const std::vector<specdec::request_handle>& handles,
                                              specdec::decode_stats* stats = nullptr) {
  std::vector<std::vector<token_id>> out(handles.size());
  while (decoder.active() > 0)
    for (const auto& e : decoder.step())
      if (e.finished != specdec::finish_reason::none) {
        const auto t = decoder.tokens(e.request);
        out[e.request - handles.front()].assign(t.begin(), t.end());
        if (stats != nullptr) stats->merge(decoder.stats(e.request));
      }
  return out;
}

//! Decodes `requests` (each with its own acceptance stage; the default is strict) in one target and
//! one draft context, a sequence each, with the simd backend when it is built (seq otherwise); returns
//! every request's tokens in order.
inline std::vector<std::vector<token_id>> decode_all(const lc::model& target_model, const lc::model& draft_model,
                                                     std::vector<specdec::request_options> requests) {
  const auto n = static_cast<std::uint32_t>(requests.size());
  lc::context target_ctx(target_model, {.context_per_sequence = 256, .sequences = n, .threads = 1});
  lc::context draft_ctx(draft_model, {.context_per_sequence = 256, .sequences = n, .threads = 1});
  lc::sequence_model target(target_ctx), draft(draft_ctx);
#if SPECDEC_ENABLE_SIMD
  specdec::batch_decoder decoder(specdec::exec::simd, target, draft, specdec::strict);  // seq's tokens, faster warping
#else
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
#endif
  std::vector<specdec::request_handle> handles;
  for (auto& r : requests) handles.push_back(decoder.add(std::move(r)));
  return run_to_end(decoder, handles);
}

}  // namespace specdec_test::llama
