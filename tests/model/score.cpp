// specdec::score, batch_next_logits and next_probs: the member is used when offered, the fallback loop
// gives the same rows, and sizes are checked.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <algorithm>
#include <span>
#include <vector>

#include "specdec/model/adapters.hpp"
#include "specdec/model/score.hpp"

namespace {
using specdec::token_id;

// Logits that encode the context: logit[t] = 10 * length + (last token == t ? 1 : 0).
void encode_context(std::span<const token_id> ctx, std::span<float> logits) {
  for (std::size_t t = 0; t < logits.size(); ++t)
    logits[t] = 10.0f * static_cast<float>(ctx.size()) + ((!ctx.empty() && ctx.back() == static_cast<token_id>(t)) ? 1.0f : 0.0f);
}
}  // namespace

TEST_CASE("score() falls back to next_logits on growing contexts", "[model][score]") {
  const auto m = specdec::make_model(3, encode_context);
  const std::vector<token_id> ctx{2, 0};
  const std::vector<token_id> cont{1, 2};
  std::vector<float> rows(3 * 3);
  specdec::score(m, ctx, cont, rows);
  // row 0: after {2,0}; row 1: after {2,0,1}; row 2: after {2,0,1,2}
  CHECK(rows[0] == 21.0f);
  CHECK(rows[1] == 20.0f);
  CHECK(rows[3 + 1] == 31.0f);
  CHECK(rows[3 + 0] == 30.0f);
  CHECK(rows[6 + 2] == 41.0f);
  CHECK(rows[6 + 1] == 40.0f);
}

TEST_CASE("score() calls the model's own score when it has one", "[model][score]") {
  int score_calls = 0, next_calls = 0;
  const auto m = specdec::make_parallel_model(
      2,
      [&](std::span<const token_id>, std::span<float> l) {
        ++next_calls;
        std::fill(l.begin(), l.end(), 1.0f);
      },
      [&](std::span<const token_id>, std::span<const token_id>, std::span<float> r) {
        ++score_calls;
        std::fill(r.begin(), r.end(), 2.0f);
      });
  static_assert(specdec::ParallelScoringModel<decltype(m)>);
  const std::vector<token_id> cont{0, 1, 1};
  std::vector<float> rows(4 * 2);
  specdec::score(m, {}, cont, rows);
  CHECK(score_calls == 1);
  CHECK(next_calls == 0);
  for (float x : rows) CHECK(x == 2.0f);
}

TEST_CASE("score() checks shapes and continuation ids", "[model][score]") {
  const auto m = specdec::make_model(3, encode_context);
  const std::vector<token_id> cont{1, 2};
  std::vector<float> wrong(8);
  CHECK_THROWS_AS(specdec::score(m, {}, cont, wrong), specdec::error);
  const std::vector<token_id> bad{1, 3};
  std::vector<float> rows(9);
  CHECK_THROWS_AS(specdec::score(m, {}, bad, rows), specdec::error);
  const std::vector<token_id> negative{-1};
  std::vector<float> rows2(6);
  CHECK_THROWS_AS(specdec::score(m, {}, negative, rows2), specdec::error);
  // an empty continuation gives the single next-token row
  std::vector<float> one(3);
  specdec::score(m, cont, {}, one);
  CHECK(one[2] == 21.0f);
}

TEST_CASE("batch_next_logits() loops when the model is not batched", "[model][score]") {
  const auto m = specdec::make_model(3, encode_context);
  const std::vector<token_id> a{1}, b{}, c{0, 0, 2};
  const std::array<std::span<const token_id>, 3> contexts{a, b, c};
  std::vector<float> logits(9);
  specdec::batch_next_logits(m, contexts, logits);
  CHECK(logits[1] == 11.0f);
  CHECK(logits[3] == 0.0f);
  CHECK(logits[6 + 2] == 31.0f);
  std::vector<float> wrong(8);
  CHECK_THROWS_AS(specdec::batch_next_logits(m, contexts, wrong), specdec::error);
}

TEST_CASE("next_probs() is a stable double softmax of the logits", "[model][score]") {
  const auto m = specdec::make_model(3, [](std::span<const token_id>, std::span<float> l) {
    l[0] = 1000.0f;  // would overflow exp() without the max shift; float ulp at 1000 is 6e-5
    l[1] = 1000.0f + std::log(3.0f);
    l[2] = -std::numeric_limits<float>::infinity();
  });
  std::vector<double> p(3);
  specdec::next_probs(m, {}, p);
  CHECK(p[0] == Approx(0.25).margin(1e-4));
  CHECK(p[1] == Approx(0.75).margin(1e-4));
  CHECK(p[2] == 0.0);
  CHECK(p[0] + p[1] + p[2] == Approx(1.0).margin(1e-15));
  std::vector<double> wrong(2);
  CHECK_THROWS_AS(specdec::next_probs(m, {}, wrong), specdec::error);
}

TEST_CASE("next_probs() rejects NaN, +inf and rows without mass", "[model][score]") {
  const auto nan_model = specdec::make_model(2, [](std::span<const token_id>, std::span<float> l) {
    l[0] = 0.0f;
    l[1] = std::numeric_limits<float>::quiet_NaN();
  });
  const auto inf_model = specdec::make_model(2, [](std::span<const token_id>, std::span<float> l) {
    l[0] = 0.0f;
    l[1] = std::numeric_limits<float>::infinity();
  });
  const auto empty_model = specdec::make_model(2, [](std::span<const token_id>, std::span<float> l) {
    std::fill(l.begin(), l.end(), -std::numeric_limits<float>::infinity());
  });
  std::vector<double> p(2);
  CHECK_THROWS_AS(specdec::next_probs(nan_model, {}, p), specdec::error);
  CHECK_THROWS_AS(specdec::next_probs(inf_model, {}, p), specdec::error);
  CHECK_THROWS_AS(specdec::next_probs(empty_model, {}, p), specdec::error);
}
