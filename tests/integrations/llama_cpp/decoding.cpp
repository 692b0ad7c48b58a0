// The llama.cpp integration decoding: greedy speculative decoding equals llama.cpp's own greedy
// decoding; rollback leaves the state of the kept tokens; requests batched as sequences of one context
// give the tokens each gives alone.
//
// Greedy: token for token over 64 tokens, for several prompts and draft models (every prompt a
// sequence of one batched context on specdec's side, one token per llama_decode on llama.cpp's).
// Rollback: after rejected drafts are removed from llama.cpp's KV cache, the target's next-token
// logits equal those of a fresh context fed only the committed tokens. Tolerance: 1e-4 of the row's
// largest |logit| (the same positions computed in batches of different shapes differ by float
// rounding only).
// Batching: specdec's randomness is addressed by request, and each sequence attends only to its own
// KV cache.
// SPECDEC_TEST_LABELS: llama_cpp
#include "integrations/llama_cpp/models.hpp"

namespace t = specdec_test::llama;
using specdec::token_id;

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
        r.acceptance = specdec::greedy;
        requests.push_back(std::move(r));
      }
      const auto tokens = t::decode_all(target, t::model(draft_name), std::move(requests));
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        INFO("draft " << draft_name << ", gamma " << gamma << ", prompt " << i);
        CHECK(tokens[i] == reference[i]);
      }
    }
  }
}

TEST_CASE("llama_cpp::sequence_model rollback leaves the state of the kept tokens", "[llama_cpp]") {
  const auto& m = t::model("target");
  t::lc::context ctx(m, {.context_per_sequence = 128, .sequences = 2, .threads = 1});
  t::lc::sequence_model seq(ctx);
  const std::size_t V = m.vocab_size();
  std::vector<token_id> prompt = t::lc::tokenize(m, "Once upon a time");
  const std::vector<token_id> drafts{100, 200, 300, 400, 500};
  std::vector<token_id> appended = prompt;
  appended.insert(appended.end(), drafts.begin(), drafts.end());

  std::vector<float> rows((drafts.size() + 1) * V);
  const specdec::sequence_append a{.sequence = 7, .tokens = appended, .rows = drafts.size() + 1};
  seq.forward(std::span(&a, 1), rows);
  REQUIRE(seq.length(7) == appended.size());
  seq.rollback(7, 3);  // keep two drafts
  REQUIRE(seq.length(7) == prompt.size() + 2);

  const std::vector<token_id> correction{4242};
  std::vector<float> after(V);
  const specdec::sequence_append b{.sequence = 7, .tokens = correction, .rows = 1};
  seq.forward(std::span(&b, 1), after);

  std::vector<token_id> committed = prompt;
  committed.insert(committed.end(), {drafts[0], drafts[1], correction[0]});
  CHECK(t::relative_difference(after, t::fresh_logits(m, committed)) < 1e-4);
  // The rows before the rollback point were right too.
  std::vector<token_id> two = prompt;
  two.insert(two.end(), {drafts[0], drafts[1]});
  CHECK(t::relative_difference(std::span<const float>(rows).subspan(2 * V, V), t::fresh_logits(m, two)) < 1e-4);
}

TEST_CASE("after the step decoder's rejections, the target's rows are a fresh context's", "[llama_cpp]") {
  // Strict SD with a poor draft rejects often; each step's first target row is the next-token row after
  // everything emitted before that step.
  const auto& target_model = t::model("target");
  const auto& draft_model = t::model("draft-noise-0.5");
  t::lc::context target_ctx(target_model, {.context_per_sequence = 256, .sequences = 1, .threads = 1});
  t::lc::context draft_ctx(draft_model, {.context_per_sequence = 256, .sequences = 1, .threads = 1});
  t::lc::sequence_model target(target_ctx), draft(draft_ctx);
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
  specdec::request_options r;
  r.prompt = t::lc::tokenize(target_model, "The quick brown fox jumps over");
  r.seed = 11;
  r.gamma = 4;
  r.max_new_tokens = 40;
  const auto h = decoder.add(r);
  std::vector<token_id> emitted;
  std::size_t checked = 0, rejections = 0;
  const std::size_t V = target_model.vocab_size();
  while (decoder.active() > 0) {
    for (const auto& e : decoder.step()) {
      REQUIRE(e.request == h);
      if (e.target_logits.size() >= V && rejections > 0 && checked < 6) {  // a step after a rejection
        std::vector<token_id> context = r.prompt;
        context.insert(context.end(), emitted.begin(), emitted.end());
        CHECK(t::relative_difference(e.target_logits.first(V), t::fresh_logits(target_model, context)) < 1e-4);
        ++checked;
      }
      if (e.tokens.size() < e.verified + 1) ++rejections;
      emitted.insert(emitted.end(), e.tokens.begin(), e.tokens.end());
    }
  }
  CHECK(rejections > 0);
  CHECK(checked == 6);
}

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
  const auto together = t::decode_all(target, draft, requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto alone = t::decode_all(target, draft, {requests[i]});
    INFO("request " << i);
    REQUIRE(together[i].size() == requests[i].max_new_tokens);
    CHECK(alone[0] == together[i]);
  }
}
