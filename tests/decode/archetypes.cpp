// Every algorithm of the decode path instantiates and runs against the minimal archetypes alone:
// nothing in it needs more of a model than the concept it names.
#include <catch2/catch.hpp>

#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/model/archetypes.hpp"

namespace {
template <class Target, class Draft, class Rule>
void run_all(const Target& target, const Draft& draft, const Rule& rule) {
  specdec::decode_options o;
  o.max_new_tokens = 9;
  const std::vector<specdec::token_id> prompt{0};
  const auto r = specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 3, rule, prompt, o);
  CHECK(r.tokens.size() == 9);
  CHECK(specdec::is_valid(r.status));
  for (const auto t : r.tokens) CHECK(specdec::in_vocabulary(t, 4));
}
}  // namespace

TEST_CASE("decode runs on the Model and ParallelScoringModel archetypes with every rule", "[decode][archetype]") {
  const specdec::model_archetype draft(4);
  const specdec::model_archetype plain_target(4);
  const specdec::parallel_scoring_model_archetype scoring_target(4);
  run_all(plain_target, draft, specdec::strict);
  run_all(scoring_target, draft, specdec::strict);
  run_all(scoring_target, draft, specdec::lenient_rule(0.7));
  run_all(scoring_target, draft, specdec::greedy);
  run_all(scoring_target, draft, specdec::sample_and_match);
  // Uniform draft and target: every draft is accepted by the strict rule.
  specdec::decode_options o;
  o.max_new_tokens = 40;
  const auto r = specdec::decode(specdec::exec::seq, scoring_target, draft, specdec::warp_params{}, 3, specdec::strict,
                                 std::vector<specdec::token_id>{0}, o);
  CHECK(r.stats.acceptance_rate() == 1.0);
  const auto base = specdec::decode_target_only(plain_target, std::vector<specdec::token_id>{0}, o);
  CHECK(base.tokens.size() == 40);
}
