// Positive and negative checks of the Model concept family, and the archetypes run through the
// model/score.hpp helpers.
#include <catch2/catch.hpp>

#include <array>
#include <span>
#include <vector>

#include "specdec/model/archetypes.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"

namespace {

using specdec::token_id;

// Negative examples: each misses one requirement.
struct no_vocab_size {
  void next_logits(std::span<const token_id>, std::span<float>) const {}
};
struct non_const_next_logits {
  std::size_t vocab_size() const { return 2; }
  void next_logits(std::span<const token_id>, std::span<float>) {}  // not const
};
struct wrong_logits_type {
  std::size_t vocab_size() const { return 2; }
  void next_logits(std::span<const token_id>, std::span<double>) const {}  // double, not float
};
struct vocab_size_not_a_number {
  struct opaque {};
  opaque vocab_size() const { return {}; }
  void next_logits(std::span<const token_id>, std::span<float>) const {}
};
struct stateful_without_rollback {
  std::size_t vocab_size() const { return 2; }
  void reset(std::span<const token_id>) {}
  void append(std::span<const token_id>) {}
  std::size_t length() const { return 0; }
  void next_logits(std::span<float>) const {}
};
struct features_without_size {
  std::size_t vocab_size() const { return 2; }
  void next_logits(std::span<const token_id>, std::span<float>) const {}
  void features(std::span<const token_id>, std::span<float>) const {}
};
struct score_with_two_arguments {
  std::size_t vocab_size() const { return 2; }
  void next_logits(std::span<const token_id>, std::span<float>) const {}
  void score(std::span<const token_id>, std::span<float>) const {}
};
// A type with a vocab_size returning int still models Model (convertible to size_t).
struct int_vocab {
  int vocab_size() const { return 3; }
  void next_logits(std::span<const token_id>, std::span<float>) const {}
};

}  // namespace

// --- archetypes satisfy exactly their concept ---
static_assert(specdec::Model<specdec::model_archetype>);
static_assert(!specdec::ParallelScoringModel<specdec::model_archetype>);
static_assert(!specdec::StatefulModel<specdec::model_archetype>);
static_assert(!specdec::BatchedModel<specdec::model_archetype>);
static_assert(!specdec::FeatureModel<specdec::model_archetype>);
static_assert(!specdec::ProbabilityModel<specdec::model_archetype>);

static_assert(specdec::Model<specdec::parallel_scoring_model_archetype>);
static_assert(specdec::ParallelScoringModel<specdec::parallel_scoring_model_archetype>);
static_assert(!specdec::BatchedModel<specdec::parallel_scoring_model_archetype>);
static_assert(!specdec::StatefulModel<specdec::parallel_scoring_model_archetype>);

static_assert(specdec::StatefulModel<specdec::stateful_model_archetype>);
static_assert(!specdec::Model<specdec::stateful_model_archetype>);
static_assert(!specdec::StatefulModel<const specdec::stateful_model_archetype>);  // needs mutation

static_assert(specdec::BatchedModel<specdec::batched_model_archetype>);
static_assert(!specdec::ParallelScoringModel<specdec::batched_model_archetype>);
static_assert(!specdec::FeatureModel<specdec::batched_model_archetype>);

static_assert(specdec::FeatureModel<specdec::feature_model_archetype>);
static_assert(!specdec::BatchedModel<specdec::feature_model_archetype>);
static_assert(!specdec::ProbabilityModel<specdec::feature_model_archetype>);

static_assert(specdec::ProbabilityModel<specdec::probability_model_archetype>);
static_assert(!specdec::ParallelScoringModel<specdec::probability_model_archetype>);

// --- negative examples ---
static_assert(!specdec::Model<no_vocab_size>);
static_assert(!specdec::Model<non_const_next_logits>);
static_assert(!specdec::Model<wrong_logits_type>);
static_assert(!specdec::Model<vocab_size_not_a_number>);
static_assert(!specdec::Model<int>);
static_assert(!specdec::StatefulModel<stateful_without_rollback>);
static_assert(!specdec::FeatureModel<features_without_size>);
static_assert(!specdec::ParallelScoringModel<score_with_two_arguments>);
static_assert(specdec::Model<score_with_two_arguments>);
static_assert(specdec::Model<int_vocab>);

// --- the per-requirement detail concepts say which piece is missing ---
static_assert(!specdec::detail::has_vocab_size<no_vocab_size>);
static_assert(specdec::detail::has_next_logits<no_vocab_size>);
static_assert(specdec::detail::has_vocab_size<non_const_next_logits>);
static_assert(!specdec::detail::has_next_logits<non_const_next_logits>);
static_assert(specdec::detail::has_state_next_logits<stateful_without_rollback>);
static_assert(!specdec::detail::has_state_edits<stateful_without_rollback>);
static_assert(!specdec::detail::has_features<features_without_size>);
static_assert(!specdec::detail::has_score<score_with_two_arguments>);

// --- explain_* hold (and compile) for conforming types ---
static_assert(specdec::detail::explain_model<specdec::model_archetype>());
static_assert(specdec::detail::explain_parallel_scoring_model<specdec::parallel_scoring_model_archetype>());
static_assert(specdec::detail::explain_stateful_model<specdec::stateful_model_archetype>());
static_assert(specdec::detail::explain_batched_model<specdec::batched_model_archetype>());
static_assert(specdec::detail::explain_feature_model<specdec::feature_model_archetype>());
static_assert(specdec::detail::explain_probability_model<specdec::probability_model_archetype>());

TEST_CASE("archetypes run through score(): parallel and fallback paths give uniform rows", "[model][archetypes]") {
  const std::vector<token_id> context{0, 1};
  const std::vector<token_id> continuation{2, 3, 1};
  std::vector<float> rows((continuation.size() + 1) * 4, 7.0f);

  specdec::score(specdec::model_archetype(4), context, continuation, rows);
  for (float x : rows) CHECK(x == 0.0f);

  std::fill(rows.begin(), rows.end(), 7.0f);
  specdec::score(specdec::parallel_scoring_model_archetype(4), context, continuation, rows);
  for (float x : rows) CHECK(x == 0.0f);

  std::fill(rows.begin(), rows.end(), 7.0f);
  specdec::score(specdec::feature_model_archetype(4), context, continuation, rows);
  for (float x : rows) CHECK(x == 0.0f);
}

TEST_CASE("archetypes run through batch_next_logits() and next_probs()", "[model][archetypes]") {
  const std::vector<token_id> a{0}, b{1, 2}, c{};
  const std::array<std::span<const token_id>, 3> contexts{a, b, c};
  std::vector<float> logits(3 * 5, 1.0f);

  specdec::batch_next_logits(specdec::batched_model_archetype(5), contexts, logits);
  for (float x : logits) CHECK(x == 0.0f);
  std::fill(logits.begin(), logits.end(), 1.0f);
  specdec::batch_next_logits(specdec::model_archetype(5), contexts, logits);
  for (float x : logits) CHECK(x == 0.0f);

  std::vector<double> probs(5);
  specdec::next_probs(specdec::model_archetype(5), b, probs);
  for (double p : probs) CHECK(p == Approx(0.2).epsilon(1e-15));
  specdec::next_probs(specdec::probability_model_archetype(5), b, probs);
  for (double p : probs) CHECK(p == 0.2);
}

TEST_CASE("the stateful archetype tracks its length", "[model][archetypes]") {
  specdec::stateful_model_archetype m(3);
  const std::vector<token_id> t{0, 1, 2};
  m.reset(t);
  CHECK(m.length() == 3);
  m.append(t);
  CHECK(m.length() == 6);
  m.rollback(4);
  CHECK(m.length() == 2);
  CHECK_THROWS_AS(m.rollback(3), specdec::error);
  std::vector<float> logits(3, 1.0f);
  m.next_logits(logits);
  for (float x : logits) CHECK(x == 0.0f);
}

TEST_CASE("the feature archetype reports the context length", "[model][archetypes]") {
  specdec::feature_model_archetype m(4, 3);
  std::vector<float> f(3);
  const std::vector<token_id> ctx{1, 1, 1, 1, 1};
  m.features(ctx, f);
  CHECK(f[0] == 5.0f);
  CHECK(f[1] == 0.0f);
  std::vector<float> wrong(2);
  CHECK_THROWS_AS(m.features(ctx, wrong), specdec::error);
}

TEST_CASE("archetypes check sizes", "[model][archetypes]") {
  std::vector<float> small(3);
  CHECK_THROWS_AS(specdec::model_archetype(4).next_logits({}, small), specdec::error);
  CHECK_THROWS_AS(specdec::model_archetype(0), specdec::error);
  const std::vector<token_id> cont{1};
  CHECK_THROWS_AS(specdec::parallel_scoring_model_archetype(4).score({}, cont, small), specdec::error);
}
