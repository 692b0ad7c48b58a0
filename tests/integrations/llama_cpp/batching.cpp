// Batching: requests decoded together, as sequences of one llama.cpp context, give the tokens each
// gives alone (specdec's randomness is addressed by request, and each sequence attends only to its own
// KV cache).
// SPECDEC_TEST_LABELS: llama_cpp
#include "integrations/llama_cpp/models.hpp"

namespace t = specdec_test::llama;

TEST_CASE("requests batched in one llama.cpp context give their tokens alone", "[llama_cpp]") {
  const auto& target = t::model("target");
  const auto& draft = t::model("draft-noise-0.2");
  std::vector<specdec::request_options> requests;
  for (std::uint32_t i = 0; i < 6; ++i) {
    specdec::request_options r;
    r.prompt = t::lc::tokenize(target, t::prompts()[i % t::prompts().size()]);
    r.seed = 2026 + i / 3;  // two seeds, and the same prompt under different request ids
    r.request_id = i;
    r.gamma = 2 + i % 3;
    r.max_new_tokens = 24 + 4 * i;
    r.target_params = {.temperature = 0.7 + 0.1 * (i % 3), .top_p = 0.95};
    r.draft_params = r.target_params;
    r.acceptance =
        i % 2 == 0 ? specdec::request_acceptance{specdec::strict} : specdec::request_acceptance{specdec::sample_and_match};
    requests.push_back(std::move(r));
  }
  const auto together = t::decode_all(target, draft, requests, specdec::strict);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto alone = t::decode_all(target, draft, {requests[i]}, specdec::strict);
    INFO("request " << i);
    REQUIRE(together[i].size() == requests[i].max_new_tokens);
    CHECK(alone[0] == together[i]);
  }
}
