// make_model, make_parallel_model, stateful_adapter / make_stateful.
#include <catch2/catch.hpp>

#include <span>
#include <vector>

#include "specdec/model/adapters.hpp"
#include "specdec/model/archetypes.hpp"
#include "specdec/model/score.hpp"

namespace {
using specdec::token_id;

// logit[t] = sum of the context + t, so every context gives a distinct row.
void sum_logits(std::span<const token_id> ctx, std::span<float> logits) {
  float s = 0.0f;
  for (token_id t : ctx) s += static_cast<float>(t);
  for (std::size_t t = 0; t < logits.size(); ++t) logits[t] = s + static_cast<float>(t);
}
}  // namespace

TEST_CASE("make_model wraps a callable", "[model][adapters]") {
  const auto m = specdec::make_model(4, sum_logits);
  static_assert(specdec::Model<decltype(m)>);
  static_assert(!specdec::ParallelScoringModel<decltype(m)>);
  CHECK(m.vocab_size() == 4);
  const std::vector<token_id> ctx{1, 2};
  std::vector<float> l(4);
  m.next_logits(ctx, l);
  CHECK(l[0] == 3.0f);
  CHECK(l[3] == 6.0f);
  std::vector<float> wrong(3);
  CHECK_THROWS_AS(m.next_logits(ctx, wrong), specdec::error);
  CHECK_THROWS_AS(specdec::make_model(0, sum_logits), specdec::error);

  // a capturing lambda
  const float bias = 0.5f;
  const auto biased = specdec::make_model(2, [bias](std::span<const token_id>, std::span<float> out) {
    out[0] = bias;
    out[1] = -bias;
  });
  std::vector<float> b(2);
  biased.next_logits({}, b);
  CHECK(b[0] == 0.5f);
}

TEST_CASE("make_parallel_model agrees with the fallback loop", "[model][adapters]") {
  const auto m = specdec::make_parallel_model(
      3, sum_logits, [](std::span<const token_id> ctx, std::span<const token_id> cont, std::span<float> rows) {
        std::vector<token_id> grown(ctx.begin(), ctx.end());
        for (std::size_t i = 0; i <= cont.size(); ++i) {
          sum_logits(grown, rows.subspan(i * 3, 3));
          if (i < cont.size()) grown.push_back(cont[i]);
        }
      });
  static_assert(specdec::ParallelScoringModel<decltype(m)>);
  const std::vector<token_id> ctx{2}, cont{1, 1, 0};
  std::vector<float> direct(12), loop(12);
  specdec::score(m, ctx, cont, direct);
  specdec::score(specdec::make_model(3, sum_logits), ctx, cont, loop);
  CHECK(direct == loop);
  std::vector<float> wrong(11);
  CHECK_THROWS_AS(m.score(ctx, cont, wrong), specdec::error);
}

TEST_CASE("stateful_adapter keeps the tokens and rolls back", "[model][adapters]") {
  const auto inner = specdec::make_model(5, sum_logits);
  const std::vector<token_id> prefix{1, 2};
  specdec::stateful_adapter s(inner, prefix);
  static_assert(specdec::StatefulModel<decltype(s)>);
  static_assert(specdec::Model<decltype(s)>);
  CHECK(s.length() == 2);
  std::vector<float> l(5);
  s.next_logits(l);
  CHECK(l[0] == 3.0f);

  const std::vector<token_id> more{4, 4, 1};
  s.append(more);
  CHECK(s.length() == 5);
  s.next_logits(l);
  CHECK(l[0] == 12.0f);
  s.rollback(2);
  CHECK(s.length() == 3);
  CHECK(std::vector<token_id>(s.tokens().begin(), s.tokens().end()) == std::vector<token_id>{1, 2, 4});
  s.next_logits(l);
  CHECK(l[0] == 7.0f);
  CHECK_THROWS_AS(s.rollback(4), specdec::error);
  s.rollback(3);
  CHECK(s.length() == 0);
  s.next_logits(l);
  CHECK(l[0] == 0.0f);

  const std::vector<token_id> bad{5};
  CHECK_THROWS_AS(s.append(bad), specdec::error);
  CHECK_THROWS_AS(s.reset(bad), specdec::error);
  s.reset(more);
  CHECK(s.length() == 3);

  // the stateless interface ignores the state
  s.next_logits(prefix, l);
  CHECK(l[0] == 3.0f);
}

TEST_CASE("make_stateful refers to lvalues and owns rvalues", "[model][adapters]") {
  const specdec::model_archetype archetype(3);
  auto by_ref = specdec::make_stateful(archetype);
  static_assert(std::is_same_v<decltype(by_ref), specdec::stateful_adapter<const specdec::model_archetype&>>);
  CHECK(&by_ref.model() == &archetype);
  auto owned = specdec::make_stateful(specdec::model_archetype(3));
  static_assert(std::is_same_v<decltype(owned), specdec::stateful_adapter<specdec::model_archetype>>);
  static_assert(specdec::StatefulModel<decltype(by_ref)>);
  std::vector<float> l(3, 1.0f);
  owned.next_logits(l);
  CHECK(l[2] == 0.0f);
}
