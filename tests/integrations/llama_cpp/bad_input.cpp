// Bad input to the llama.cpp integration gives a clear error, never a crash: a missing or corrupt GGUF
// file, a draft with another vocabulary, a prompt longer than the context, more sequences than the
// context holds, a token outside the vocabulary. A refused forward leaves the sequences as they were.
// SPECDEC_TEST_LABELS: llama_cpp
#include <fstream>

#include "integrations/llama_cpp/models.hpp"

namespace t = specdec_test::llama;
using Catch::Matchers::Contains;
using specdec::token_id;

TEST_CASE("a missing or corrupt GGUF file is an engine_error naming it", "[llama_cpp]") {
  t::lc::quiet_logs();
  CHECK_THROWS_WITH(t::lc::model(t::model_path("no-such-model")), Contains("cannot open") && Contains("no-such-model"));
  const auto corrupt = std::filesystem::temp_directory_path() / "specdec-corrupt.gguf";
  {
    std::ofstream out(corrupt, std::ios::binary);
    out << "GGUF";  // the magic, then garbage
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 37) & 0xff));
  }
  CHECK_THROWS_AS(t::lc::model(corrupt), specdec::engine_error);
  CHECK_THROWS_WITH(t::lc::model(corrupt), Contains("not a GGUF model"));
  std::filesystem::remove(corrupt);
}

TEST_CASE("a draft with another vocabulary is refused", "[llama_cpp]") {
  const auto& target = t::model("target");
  const auto& other = t::model("other-vocab");
  CHECK_THROWS_AS(t::lc::check_same_vocabulary(target, other), specdec::error);
  CHECK_THROWS_WITH(t::lc::check_same_vocabulary(target, other), Contains("tokens"));
  CHECK_NOTHROW(t::lc::check_same_vocabulary(target, t::model("draft-layers1")));
  // The step decoder refuses the pair as well.
  t::lc::context a(target, {.context_per_sequence = 64, .threads = 1});
  t::lc::context b(other, {.context_per_sequence = 64, .threads = 1});
  t::lc::sequence_model ta(a), tb(b);
  CHECK_THROWS_AS(specdec::batch_decoder(specdec::exec::seq, ta, tb, specdec::strict), specdec::error);
}

TEST_CASE("a sequence longer than the context is refused before decoding", "[llama_cpp]") {
  const auto& m = t::model("target");
  t::lc::context ctx(m, {.context_per_sequence = 32, .sequences = 2, .threads = 1});
  t::lc::sequence_model seq(ctx);
  const std::size_t V = m.vocab_size();
  std::vector<token_id> tokens(20, 1000);
  std::vector<float> row(V);
  const specdec::sequence_append a{.sequence = 1, .tokens = tokens, .rows = 1};
  seq.forward(std::span(&a, 1), row);
  // 20 + 20 > 32: refused, and the sequence keeps its 20 positions.
  CHECK_THROWS_WITH(seq.forward(std::span(&a, 1), row), Contains("more than the context's 32 per sequence"));
  CHECK(seq.length(1) == 20);
  // A batch that includes the long append is refused whole: the other sequence is not started.
  const specdec::sequence_append both[] = {{.sequence = 2, .tokens = std::span(tokens).first(4), .rows = 0}, a};
  std::vector<float> one_row(V);
  CHECK_THROWS_AS(seq.forward(both, one_row), specdec::engine_error);
  CHECK(seq.length(2) == 0);
  // Room left: the next forward works and continues the sequence.
  const specdec::sequence_append c{.sequence = 1, .tokens = std::span(tokens).first(12), .rows = 1};
  seq.forward(std::span(&c, 1), row);
  CHECK(seq.length(1) == 32);

  // Through the step decoder: the error comes out of step(), naming the context.
  t::lc::context target_ctx(m, {.context_per_sequence = 32, .threads = 1});
  t::lc::context draft_ctx(m, {.context_per_sequence = 32, .threads = 1});
  t::lc::sequence_model target(target_ctx), draft(draft_ctx);
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
  specdec::request_options r;
  r.prompt.assign(40, 1000);
  decoder.add(r);
  CHECK_THROWS_WITH(decoder.step(), Contains("per sequence"));
}

TEST_CASE("more live sequences than the context holds, and tokens outside the vocabulary", "[llama_cpp]") {
  const auto& m = t::model("target");
  t::lc::context ctx(m, {.context_per_sequence = 16, .sequences = 2, .threads = 1});
  t::lc::sequence_model seq(ctx);
  const std::vector<token_id> tokens{5, 6, 7};
  std::vector<float> none;
  for (specdec::sequence_id s : {1u, 2u}) {
    const specdec::sequence_append a{.sequence = s, .tokens = tokens, .rows = 0};
    seq.forward(std::span(&a, 1), none);
  }
  const specdec::sequence_append third{.sequence = 3, .tokens = tokens, .rows = 0};
  CHECK_THROWS_WITH(seq.forward(std::span(&third, 1), none), Contains("more live sequences"));
  seq.release(1);  // frees a slot
  CHECK_NOTHROW(seq.forward(std::span(&third, 1), none));
  CHECK(seq.length(3) == 3);

  const std::vector<token_id> bad{5, static_cast<token_id>(m.vocab_size())};
  const specdec::sequence_append b{.sequence = 3, .tokens = bad, .rows = 0};
  CHECK_THROWS_AS(seq.forward(std::span(&b, 1), none), specdec::error);
  CHECK(seq.length(3) == 3);
  const std::vector<token_id> negative{-1};
  const specdec::sequence_append n{.sequence = 3, .tokens = negative, .rows = 0};
  CHECK_THROWS_AS(seq.forward(std::span(&n, 1), none), specdec::error);
  CHECK_THROWS_AS(seq.rollback(3, 4), specdec::error);
}
