// Rollback: after rejected drafts are removed from llama.cpp's KV cache, the target's next-token
// logits equal those of a fresh context fed only the committed tokens. Tolerance: 1e-4 of the row's
// largest |logit| (the same positions computed in batches of different shapes differ by float
// rounding only).
// SPECDEC_TEST_LABELS: llama_cpp
#include "integrations/llama_cpp/models.hpp"

namespace t = specdec_test::llama;
using specdec::token_id;

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
