// One sequence of a SequenceModel as a StatefulModel (model/sequence_state.hpp): after any mix of
// resets, appends and rollbacks its rows are the model's rows after the state, other sequences are
// untouched, and bad calls are errors.
#include <catch2/catch.hpp>

#include <span>
#include <vector>

#include "specdec/model/adapters.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/sequence_state.hpp"
#include "specdec/models/kv_cache.hpp"
#include "specdec/random/stream.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;
using Catch::Matchers::Contains;
}  // namespace

TEST_CASE("sequence_state: a sequence of a SequenceModel as a StatefulModel", "[model][sequence_state]") {
  constexpr std::size_t V = 7;
  const auto model = specdec::make_model(V, specdec_test::wave_logits(0.3));
  specdec::kv_cached_model<decltype(model)> engine(model);
  using state_t = specdec::sequence_state<decltype(engine)>;
  static_assert(specdec::StatefulModel<state_t>);
  state_t a(engine, 1), b(engine, 2);
  b.reset(std::vector<token_id>{4, 5});
  std::vector<float> got(V), want(V), other(V);
  b.next_logits(std::span<float>(other));
  auto rng = specdec::random::philox_stream({99, 0, 0, 0, specdec::random::purpose::user});
  a.reset(std::vector<token_id>{1});
  for (int i = 0; i < 300; ++i) {
    const std::uint32_t op = rng.next_u32() % 5;
    if (op == 0 && a.length() > 1) {
      a.rollback(1 + rng.next_u32() % (a.length() - 1));
    } else if (op == 1) {
      std::vector<token_id> t(rng.next_u32() % 3);
      for (token_id& x : t) x = static_cast<token_id>(rng.next_u32() % V);
      a.append(t);
    } else if (op == 2 && i % 50 == 0) {
      a.reset(std::vector<token_id>{static_cast<token_id>(rng.next_u32() % V)});
    } else {
      a.next_logits(std::span<float>(got));
      model.next_logits(a.tokens(), std::span<float>(want));
      REQUIRE(got == want);
      CHECK(engine.length(1) == a.length());  // every token in the cache after a row
    }
  }
  // The other sequence is as it was.
  b.next_logits(std::span<float>(got));
  CHECK(got == other);
  CHECK(engine.length(2) == 2);
  CHECK_THROWS_WITH(a.rollback(a.length() + 1), Contains("past the start"));
  CHECK_THROWS_WITH(a.append(std::vector<token_id>{7}), Contains("outside the vocabulary"));
  a.reset(std::vector<token_id>{});
  CHECK_THROWS_WITH(a.next_logits(std::span<float>(got)), Contains("empty"));
}
