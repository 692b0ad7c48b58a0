//! \file model/concepts.hpp
//! \brief The Model concept family: what an algorithm may ask of a language model (docs/design.md, 'Models').
//!
//! The library never runs a network; it asks a model for next-token scores. Each capability is a small
//! concept, and loops adapt with `if constexpr` to what a model offers:
//! - `Model`: next-token logits for a context (the minimum; enough for a draft or companion model);
//! - `ParallelScoringModel`: logits for every position of `context + continuation` in one call (a target);
//! - `StatefulModel`: a KV-cache-like state with append and rollback;
//! - `BatchedModel`: next-token logits for B contexts in one call;
//! - `BatchScoringModel`: a `ParallelScoringModel` that scores B continuations in one call;
//! - `FeatureModel`: a feature vector (e.g. the last hidden state) for a verifier such as SPRINTER;
//! - `ProbabilityModel`: exact next-token probabilities in double (reference models).
//!
//! Conventions shared by every concept:
//! - *logits* are log-probabilities up to an additive constant per row; `-inf` marks an impossible token;
//!   NaN and `+inf` are not allowed;
//! - a row has exactly `vocab_size()` entries and rows are stored contiguously (row-major);
//! - a context is a span of token ids in `[0, vocab_size())`, oldest first.
//!
//! Besides the concepts, `specdec::detail` holds one concept per requirement and `explain_*` helpers
//! whose `static_assert`s say which requirement a type misses (in the spirit of mp-units'
//! `bits/unsatisfied.h`): `static_assert(specdec::detail::explain_model<M>());`.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>

#include "specdec/core/token.hpp"

namespace specdec {

//! A language model that gives next-token logits for any context.
//!
//! `m.next_logits(context, logits)` writes, for the token that follows `context`, one logit per
//! vocabulary entry: log-probabilities up to an additive constant, `-inf` allowed for impossible tokens.
//! It must be callable on a `const` model (it does not change observable state), and
//! `logits.size() == m.vocab_size()` is a precondition.
template <class M>
concept Model = requires(const M& m, std::span<const token_id> context, std::span<float> logits) {
  { m.vocab_size() } -> std::convertible_to<std::size_t>;
  m.next_logits(context, logits);
};

//! A model that scores a whole continuation in one call (what a target model offers to a verifier).
//!
//! `m.score(context, continuation, rows)` writes `continuation.size() + 1` rows of `vocab_size()` logits:
//! row `i` holds the next-token logits after `context + continuation[0..i)`. Row `k = continuation.size()`
//! is the bonus row. `rows.size() == (continuation.size() + 1) * vocab_size()` is a precondition.
template <class M>
concept ParallelScoringModel = Model<M> &&
    requires(const M& m, std::span<const token_id> context, std::span<const token_id> continuation, std::span<float> rows) {
  m.score(context, continuation, rows);
};

//! A model with mutable state (a KV cache): a token sequence that can be reset, extended and rolled back.
//!
//! - `m.reset(tokens)` makes `tokens` the whole state; `m.append(tokens)` extends it;
//! - `m.rollback(n)` removes the last `n` tokens (`n <= m.length()` is a precondition);
//! - `m.length()` is the number of tokens in the state;
//! - `m.next_logits(logits)` writes the next-token logits after the current state.
//!
//! A stateful model need not also be a `Model`; `stateful_adapter` (model/adapters.hpp) turns a `Model`
//! into one.
template <class M>
concept StatefulModel = requires(M& m, std::span<const token_id> tokens, std::size_t n, std::span<float> logits) {
  { m.vocab_size() } -> std::convertible_to<std::size_t>;
  m.reset(tokens);
  m.append(tokens);
  m.rollback(n);
  { m.length() } -> std::convertible_to<std::size_t>;
  m.next_logits(logits);
};

//! A model that gives next-token logits for B contexts in one call.
//!
//! `m.next_logits_batch(contexts, logits)` writes row `b` of `logits` (B x V, row-major) for `contexts[b]`;
//! `logits.size() == contexts.size() * vocab_size()` is a precondition.
template <class M>
concept BatchedModel = Model<M> &&
    requires(const M& m, std::span<const std::span<const token_id>> contexts, std::span<float> logits) {
  m.next_logits_batch(contexts, logits);
};

//! A `ParallelScoringModel` that scores B continuations, each after its own context, in one call (a
//! KV-cached engine serving every request of a batch with one forward).
//!
//! `m.score_batch(contexts, continuations, rows)` writes, for b = 0..B-1 in turn, the
//! `continuations[b].size() + 1` rows that `m.score(contexts[b], continuations[b], ...)` writes;
//! `rows.size()` = the sum of those counts times `vocab_size()` is a precondition.
template <class M>
concept BatchScoringModel = ParallelScoringModel<M> &&
    requires(const M& m, std::span<const std::span<const token_id>> contexts,
             std::span<const std::span<const token_id>> continuations, std::span<float> rows) {
  m.score_batch(contexts, continuations, rows);
};

//! A model that exposes a feature vector for a context, e.g. its last hidden state, as input to a
//! learned verifier (SPRINTER, seed 000).
//!
//! `m.features(context, features)` writes `feature_size()` values; `features.size() == m.feature_size()`
//! is a precondition.
template <class M>
concept FeatureModel = Model<M> && requires(const M& m, std::span<const token_id> context, std::span<float> features) {
  { m.feature_size() } -> std::convertible_to<std::size_t>;
  m.features(context, features);
};

//! A model that also gives exact next-token probabilities in double precision (reference models do),
//! so tests need no log/exp round trip.
//!
//! `m.next_probs(context, probs)` writes a probability vector that sums to 1 (within rounding);
//! `probs.size() == m.vocab_size()` is a precondition. Its logits must be the logarithms of these
//! probabilities (up to float rounding and an additive constant).
template <class M>
concept ProbabilityModel = Model<M> && requires(const M& m, std::span<const token_id> context, std::span<double> probs) {
  m.next_probs(context, probs);
};

namespace detail {

//! `m.vocab_size()` exists on a const model and converts to `std::size_t`.
template <class M>
concept has_vocab_size = requires(const M& m) {
  { m.vocab_size() } -> std::convertible_to<std::size_t>;
};
//! `m.next_logits(context, logits)` is callable on a const model.
template <class M>
concept has_next_logits = requires(const M& m, std::span<const token_id> c, std::span<float> l) {
  m.next_logits(c, l);
};
//! `m.score(context, continuation, rows)` is callable on a const model.
template <class M>
concept has_score = requires(const M& m, std::span<const token_id> c, std::span<const token_id> k, std::span<float> r) {
  m.score(c, k, r);
};
//! Non-const `reset(tokens)`, `append(tokens)` and `rollback(n)` exist.
template <class M>
concept has_state_edits = requires(M& m, std::span<const token_id> t, std::size_t n) {
  m.reset(t);
  m.append(t);
  m.rollback(n);
};
//! `m.length()` exists and converts to `std::size_t`.
template <class M>
concept has_length = requires(M& m) {
  { m.length() } -> std::convertible_to<std::size_t>;
};
//! `m.next_logits(logits)` (logits after the current state) exists.
template <class M>
concept has_state_next_logits = requires(M& m, std::span<float> l) {
  m.next_logits(l);
};
//! `m.next_logits_batch(contexts, logits)` is callable on a const model.
template <class M>
concept has_next_logits_batch = requires(const M& m, std::span<const std::span<const token_id>> c, std::span<float> l) {
  m.next_logits_batch(c, l);
};
//! `m.score_batch(contexts, continuations, rows)` is callable on a const model.
template <class M>
concept has_score_batch = requires(const M& m, std::span<const std::span<const token_id>> c,
                                   std::span<const std::span<const token_id>> k, std::span<float> r) {
  m.score_batch(c, k, r);
};
//! `m.feature_size()` and `m.features(context, features)` are callable on a const model.
template <class M>
concept has_features = requires(const M& m, std::span<const token_id> c, std::span<float> f) {
  { m.feature_size() } -> std::convertible_to<std::size_t>;
  m.features(c, f);
};
//! `m.next_probs(context, probs)` is callable on a const model.
template <class M>
concept has_next_probs = requires(const M& m, std::span<const token_id> c, std::span<double> p) {
  m.next_probs(c, p);
};

//! Explains, through `static_assert` messages, why `M` is not a `Model`; returns true when it is.
//! Use as `static_assert(specdec::detail::explain_model<M>());`.
template <class M>
consteval bool explain_model() {
  static_assert(has_vocab_size<M>, "specdec::Model: M needs `std::size_t vocab_size() const`");
  static_assert(has_next_logits<M>,
                "specdec::Model: M needs `void next_logits(std::span<const token_id>, std::span<float>) const`");
  return Model<M>;
}

//! Explains why `M` is not a `ParallelScoringModel`; returns true when it is.
template <class M>
consteval bool explain_parallel_scoring_model() {
  static_assert(explain_model<M>());
  static_assert(has_score<M>, "specdec::ParallelScoringModel: M needs `void score(std::span<const token_id> context, "
                              "std::span<const token_id> continuation, std::span<float> rows) const`");
  return ParallelScoringModel<M>;
}

//! Explains why `M` is not a `StatefulModel`; returns true when it is.
template <class M>
consteval bool explain_stateful_model() {
  static_assert(has_vocab_size<M>, "specdec::StatefulModel: M needs `std::size_t vocab_size() const`");
  static_assert(has_state_edits<M>, "specdec::StatefulModel: M needs `reset(std::span<const token_id>)`, "
                                    "`append(std::span<const token_id>)` and `rollback(std::size_t)`");
  static_assert(has_length<M>, "specdec::StatefulModel: M needs `std::size_t length()`");
  static_assert(has_state_next_logits<M>, "specdec::StatefulModel: M needs `void next_logits(std::span<float>)`");
  return StatefulModel<M>;
}

//! Explains why `M` is not a `BatchedModel`; returns true when it is.
template <class M>
consteval bool explain_batched_model() {
  static_assert(explain_model<M>());
  static_assert(has_next_logits_batch<M>, "specdec::BatchedModel: M needs `void next_logits_batch(std::span<const "
                                          "std::span<const token_id>>, std::span<float>) const`");
  return BatchedModel<M>;
}

//! Explains why `M` is not a `BatchScoringModel`; returns true when it is.
template <class M>
consteval bool explain_batch_scoring_model() {
  static_assert(explain_parallel_scoring_model<M>());
  static_assert(has_score_batch<M>, "specdec::BatchScoringModel: M needs `void score_batch(std::span<const std::span<const "
                                    "token_id>> contexts, std::span<const std::span<const token_id>> continuations, "
                                    "std::span<float> rows) const`");
  return BatchScoringModel<M>;
}

//! Explains why `M` is not a `FeatureModel`; returns true when it is.
template <class M>
consteval bool explain_feature_model() {
  static_assert(explain_model<M>());
  static_assert(has_features<M>, "specdec::FeatureModel: M needs `std::size_t feature_size() const` and "
                                 "`void features(std::span<const token_id>, std::span<float>) const`");
  return FeatureModel<M>;
}

//! Explains why `M` is not a `ProbabilityModel`; returns true when it is.
template <class M>
consteval bool explain_probability_model() {
  static_assert(explain_model<M>());
  static_assert(has_next_probs<M>,
                "specdec::ProbabilityModel: M needs `void next_probs(std::span<const token_id>, std::span<double>) const`");
  return ProbabilityModel<M>;
}

}  // namespace detail
}  // namespace specdec
