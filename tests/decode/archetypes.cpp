// Every algorithm of the decode path instantiates and runs against the minimal archetypes alone:
// nothing in it needs more of a model than the concept it names. The step decoder runs on the
// `SequenceModel` archetype (chains) and the `TreeSequenceModel` archetype (trees), and refuses tree
// verification on a target that takes no trees.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/draft/tree_shape.hpp"
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

static_assert(specdec::SequenceModel<specdec::sequence_model_archetype>);
static_assert(!specdec::TreeSequenceModel<specdec::sequence_model_archetype>);
static_assert(specdec::TreeSequenceModel<specdec::tree_sequence_model_archetype>);

namespace {
// Runs every request of `decoder` to its end; returns the tokens emitted.
template <class Decoder>
std::size_t run_to_end(Decoder& decoder) {
  std::size_t emitted = 0;
  while (decoder.active() > 0)
    for (const specdec::step_event& e : decoder.step()) {
      emitted += e.tokens.size();
      for (const auto t : e.tokens) CHECK(specdec::in_vocabulary(t, 4));
      CHECK(specdec::is_valid(e.status));
    }
  return emitted;
}
}  // namespace

TEMPLATE_TEST_CASE("the step decoder runs on the SequenceModel archetype with every chain rule", "[decode][archetype]",
                   specdec::strict_rule, specdec::greedy_rule, specdec::sample_and_match_rule) {
  specdec::sequence_model_archetype target(4), draft(4);
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, TestType{});
  for (std::uint32_t id = 0; id < 3; ++id) {
    specdec::request_options o;
    o.prompt = {0, 1};
    o.request_id = id;
    o.gamma = id + 1;
    o.max_new_tokens = 11;
    decoder.add(o);
  }
  CHECK(run_to_end(decoder) == 33);
  CHECK(target.length(1) == 0);  // finished requests are released
}

TEST_CASE("the step decoder verifies trees on the TreeSequenceModel archetype and refuses them on a SequenceModel",
          "[decode][archetype][tree]") {
  const specdec::model_archetype draft_model(4);
  specdec::static_tree_drafter drafter(draft_model, specdec::tree_shape::full({2, 2}));
  specdec::request_options o;
  o.prompt = {0};
  o.gamma = 2;
  o.max_new_tokens = 12;
  o.drafter = specdec::tree_drafter_stage(drafter);
  o.acceptance = specdec::tree_acceptance{specdec::target_only};
  specdec::no_sequence_model none(4);
  specdec::tree_sequence_model_archetype tree_target(4);
  specdec::batch_decoder trees(specdec::exec::seq, tree_target, none, specdec::strict);
  trees.add(o);
  CHECK(run_to_end(trees) == 12);
  specdec::sequence_model_archetype chain_target(4);
  specdec::batch_decoder chains(specdec::exec::seq, chain_target, none, specdec::strict);
  CHECK_THROWS_WITH(chains.add(o), Catch::Matchers::Contains("tree-shaped appends"));
}
