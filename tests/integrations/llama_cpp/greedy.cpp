// Greedy speculative decoding through llama.cpp equals llama.cpp's own greedy decoding of the target,
// token for token over 64 tokens, for several prompts and draft models (every prompt a sequence of
// one batched context on specdec's side, one token per llama_decode on llama.cpp's).
// SPECDEC_TEST_LABELS: llama_cpp
#include "integrations/llama_cpp/models.hpp"

namespace t = specdec_test::llama;

TEST_CASE("greedy SD through llama.cpp gives llama.cpp's greedy tokens", "[llama_cpp]") {
  const auto& target = t::model("target");
  std::vector<std::vector<specdec::token_id>> reference;
  for (const auto& p : t::prompts()) reference.push_back(t::llama_greedy(target, t::lc::tokenize(target, p), 64));

  for (const char* draft_name : {"draft-layers1", "draft-noise-0.2", "draft-noise-0.5"}) {
    for (const std::size_t gamma : {std::size_t{3}, std::size_t{6}}) {
      std::vector<specdec::request_options> requests;
      for (const auto& p : t::prompts()) {
        specdec::request_options r;
        r.prompt = t::lc::tokenize(target, p);
        r.gamma = gamma;
        r.max_new_tokens = 64;
        r.target_params.temperature = 0.0;
        r.draft_params.temperature = 0.0;
        requests.push_back(std::move(r));
      }
      const auto tokens = t::decode_all(target, t::model(draft_name), std::move(requests), specdec::greedy);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        INFO("draft " << draft_name << ", gamma " << gamma << ", prompt " << i);
        CHECK(tokens[i] == reference[i]);
      }
    }
  }
}
