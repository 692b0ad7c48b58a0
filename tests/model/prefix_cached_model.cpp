// prefix_cached_model: a SequenceModel as a stateless Model / BatchedModel. Its rows are the wrapped
// model's for every context, whatever the order and branching of the calls and however many contexts a
// call has; a context that extends or branches off a lane's tokens costs only the tokens after the
// shared prefix; `score` gives a continuation's rows from one forward of one lane, `score_batch` B
// contexts' from one forward per `lanes` of them; beam drafting (MTAD)
// on it drafts exactly what it drafts on the plain model.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "specdec/draft/beam.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/prefix_cached_model.hpp"
#include "specdec/model/score.hpp"
#include "specdec/model/sequence.hpp"

namespace {
using specdec::token_id;

// A row that depends on every token and its position: logit[t] = sin(sum_i (i + 1) * (c_i + 1) + 0.7 t).
void positional_logits(std::span<const token_id> ctx, std::span<float> logits) {
  double s = 0.0;
  for (std::size_t i = 0; i < ctx.size(); ++i) s += double(i + 1) * double(ctx[i] + 1);
  for (std::size_t t = 0; t < logits.size(); ++t) logits[t] = static_cast<float>(std::sin(0.013 * s + 0.7 * double(t)));
}

constexpr std::size_t V = 7;
}  // namespace

TEST_CASE("prefix_cached_model gives the wrapped model's rows for any sequence of calls", "[model]") {
  const auto m = specdec::make_model(V, positional_logits);
  specdec::recomputing_sequence_model engine(m);
  const specdec::prefix_cached_model cached(engine, 3, 100);
  static_assert(specdec::Model<decltype(cached)> && specdec::BatchedModel<decltype(cached)>);
  std::mt19937_64 rng(5);
  std::vector<std::vector<token_id>> contexts{{1, 2, 3}};
  std::size_t rows = 0;
  for (int call = 0; call < 300; ++call) {
    // A batch of 1..5 contexts (more than the 3 lanes sometimes): extensions, branches and new ones.
    const std::size_t b = std::uniform_int_distribution<std::size_t>(1, 5)(rng);
    std::vector<std::vector<token_id>> batch;
    for (std::size_t k = 0; k < b; ++k) {
      std::vector<token_id> c = contexts[std::uniform_int_distribution<std::size_t>(0, contexts.size() - 1)(rng)];
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      if (kind == 0 && c.size() > 1)
        c.resize(std::uniform_int_distribution<std::size_t>(1, c.size() - 1)(rng));        // a branch point
      if (kind <= 1) c.push_back(std::uniform_int_distribution<token_id>(0, V - 1)(rng));  // extend
      if (kind == 3) c = {std::uniform_int_distribution<token_id>(0, V - 1)(rng)};         // unrelated
      batch.push_back(c);
      contexts.push_back(c);
    }
    std::vector<std::span<const token_id>> spans(batch.begin(), batch.end());
    std::vector<float> got(b * V), want(V);
    cached.next_logits_batch(spans, got);
    for (std::size_t k = 0; k < b; ++k) {
      m.next_logits(batch[k], want);
      REQUIRE(std::vector<float>(got.begin() + static_cast<std::ptrdiff_t>(k * V),
                                 got.begin() + static_cast<std::ptrdiff_t>((k + 1) * V)) == want);
      ++rows;
    }
  }
  CHECK(cached.stats().contexts == rows);
  CHECK(cached.stats().appended_positions == engine.stats().appended_positions);  // the adapter counts what the engine did
  CHECK(cached.stats().reused_positions > 0);                                     // some contexts came from a lane's cache

  // Bad input: an empty context, a wrong row size, no lanes.
  std::vector<float> row(V), short_row(V - 1);
  CHECK_THROWS_WITH(cached.next_logits({}, row), Catch::Matchers::Contains("empty context"));
  CHECK_THROWS_AS(cached.next_logits(contexts[0], short_row), specdec::error);
  CHECK_THROWS_AS(specdec::prefix_cached_model(engine, 0), specdec::error);
}

TEST_CASE("prefix_cached_model: extending a context by one token appends one token", "[model]") {
  const auto m = specdec::make_model(V, positional_logits);
  specdec::recomputing_sequence_model engine(m);
  const specdec::prefix_cached_model cached(engine, 1);
  std::vector<token_id> context{3, 1, 4, 1, 5};
  std::vector<float> row(V);
  cached.next_logits(context, row);
  CHECK(cached.stats().appended_positions == context.size());
  for (int k = 0; k < 20; ++k) {
    context.push_back(static_cast<token_id>(static_cast<std::size_t>(k) % V));
    cached.next_logits(context, row);
  }
  CHECK(cached.stats().appended_positions == 5 + 20);
  // The same context again re-appends its last token only; a branch re-sends what follows the branch.
  cached.next_logits(context, row);
  CHECK(cached.stats().appended_positions == 26);
  context.resize(10);
  context.push_back(6);
  cached.next_logits(context, row);
  CHECK(cached.stats().appended_positions == 27);
  CHECK(engine.length(0) == context.size());
}

TEST_CASE("prefix_cached_model: score gives a continuation's rows in one forward", "[model]") {
  const auto m = specdec::make_model(V, positional_logits);
  specdec::recomputing_sequence_model engine(m);
  const specdec::prefix_cached_model cached(engine, 2);
  static_assert(specdec::ParallelScoringModel<decltype(cached)>);
  std::vector<token_id> context{3, 1, 4}, continuation{1, 5, 2};
  std::vector<float> rows((continuation.size() + 1) * V), want(rows.size());
  for (int round = 0; round < 3; ++round) {  // a fresh lane, then the same context again (its last token re-sent), then longer
    const std::size_t forwards = cached.stats().forwards;
    cached.score(context, continuation, rows);
    CHECK(cached.stats().forwards == forwards + 1);
    specdec::score(m, context, continuation, want);  // m has no score: one next_logits per row
    CHECK(rows == want);
    context.push_back(continuation[0]);
  }
  // Every row asked for was appended: after the first call, a context that extends the lane's tokens
  // re-sends the continuation and its context's last token only.
  CHECK(cached.stats().appended_positions == 6 + 4 + 4);
  std::vector<float> wrong(continuation.size() * V);
  CHECK_THROWS_WITH(cached.score(context, continuation, wrong), Catch::Matchers::Contains("continuation.size() + 1 rows"));
  CHECK_THROWS_WITH(cached.score({}, continuation, rows), Catch::Matchers::Contains("empty context"));
}

TEST_CASE("prefix_cached_model: contexts served one call at a time keep their own lanes", "[model]") {
  // Three requests that open alike (a shared system prompt: 1, 2) scored one call each per round, as a
  // companion serving requests one by one does: after the first round each call appends only its
  // context's last token and the new continuation; a lane holding another request's context is not
  // taken for the shared opening while a lane is free (that would re-send whole contexts every round).
  const auto m = specdec::make_model(V, positional_logits);
  specdec::recomputing_sequence_model engine(m);
  const specdec::prefix_cached_model cached(engine, 3);
  std::vector<std::vector<token_id>> contexts{{1, 2, 3, 4}, {1, 2, 5, 6}, {1, 2, 3}};
  const std::vector<token_id> continuation{4, 5};
  std::vector<float> rows(3 * V), want(3 * V);
  for (int round = 0; round < 6; ++round) {
    const std::size_t before = cached.stats().appended_positions;
    std::size_t first_round = 0;
    for (auto& c : contexts) {
      first_round += c.size() + continuation.size();
      cached.score(c, continuation, rows);
      specdec::score(m, c, continuation, want);
      REQUIRE(rows == want);
      c.insert(c.end(), continuation.begin(), continuation.end());  // both drafts accepted
    }
    CAPTURE(round);
    CHECK(cached.stats().appended_positions - before == (round == 0 ? first_round : 3 * (1 + continuation.size())));
  }
}

TEST_CASE("prefix_cached_model: score_batch scores every context's continuation, one forward per lanes", "[model]") {
  const auto m = specdec::make_model(V, positional_logits);
  specdec::recomputing_sequence_model engine(m);
  const specdec::prefix_cached_model cached(engine, 3);
  static_assert(specdec::BatchScoringModel<decltype(cached)> && !specdec::BatchScoringModel<decltype(m)>);
  std::mt19937_64 rng(11);
  const auto draw = [&](std::size_t lo, std::size_t hi) {
    std::vector<token_id> t(std::uniform_int_distribution<std::size_t>(lo, hi)(rng));
    for (token_id& x : t) x = std::uniform_int_distribution<token_id>(0, V - 1)(rng);
    return t;
  };
  for (std::size_t b = 1; b <= 7; ++b) {  // up to and past the 3 lanes: ceil(b / 3) forwards
    std::vector<std::vector<token_id>> contexts, continuations;
    std::size_t total = 0;
    for (std::size_t k = 0; k < b; ++k) {
      contexts.push_back(draw(1, 6));
      continuations.push_back(draw(0, 4));  // an empty continuation asks for the context's next row alone
      total += (continuations.back().size() + 1) * V;
    }
    const std::vector<std::span<const token_id>> cs(contexts.begin(), contexts.end()),
        ks(continuations.begin(), continuations.end());
    std::vector<float> got(total), want(total);
    const std::size_t forwards = cached.stats().forwards;
    specdec::score_batch(cached, cs, ks, got);  // the free function calls the member
    CHECK(cached.stats().forwards == forwards + (b + 2) / 3);
    specdec::score_batch(m, cs, ks, want);  // m has neither: one next_logits per row
    CAPTURE(b);
    CHECK(got == want);
  }
  std::vector<token_id> c{1, 2}, k{3};
  const std::span<const token_id> one[] = {c}, none[] = {std::span<const token_id>{}};
  std::vector<float> rows(2 * V), wrong(V);
  CHECK_THROWS_WITH(cached.score_batch(one, std::span<const std::span<const token_id>>{}, rows),
                    Catch::Matchers::Contains("one continuation per context"));
  const std::span<const token_id> ks[] = {k};
  CHECK_THROWS_WITH(cached.score_batch(one, ks, wrong), Catch::Matchers::Contains("rows per context"));
  CHECK_THROWS_WITH(cached.score_batch(none, ks, rows), Catch::Matchers::Contains("empty context"));
  const std::vector<token_id> outside{static_cast<token_id>(V)};
  const std::span<const token_id> bad[] = {outside};
  CHECK_THROWS_WITH(specdec::score_batch(cached, one, bad, rows), Catch::Matchers::Contains("outside the vocabulary"));
}

TEST_CASE("beam drafting on prefix_cached_model drafts what it drafts on the plain model", "[model]") {
  const auto m = specdec::make_model(V, positional_logits);
  specdec::recomputing_sequence_model engine(m);
  const specdec::prefix_cached_model cached(engine, 4);
  const specdec::beam_params params{.width = 4};
  std::vector<token_id> context{2, 5, 1};
  for (std::uint64_t round = 0; round < 20; ++round) {
    const specdec::random::request_stream stream{.seed = 9, .request = 0, .step = static_cast<std::uint32_t>(round)};
    const auto a = specdec::draft_beams(m, context, 4, params, stream);
    const auto b = specdec::draft_beams(cached, context, 4, params, stream);
    REQUIRE(a.tokens == b.tokens);
    REQUIRE(a.log_q == b.log_q);
    context.insert(context.end(), a.tokens.begin(), a.tokens.end());
  }
  CHECK(cached.stats().reused_positions > 0);
}
