//! \file model/archetypes.hpp
//! \brief Minimal models that satisfy exactly one concept of the Model family each.
//!
//! Following Boost.Math's `distribution_archetype` (concepts/distributions.hpp), each archetype offers
//! only the members its concept requires, so an algorithm that compiles and runs on an archetype needs
//! nothing more than that concept (docs/design.md, 'Tests').
//! The members are defined, not only declared: every archetype is a uniform model (all logits 0, so every
//! token has probability 1 / V) and checks the sizes it is given, so algorithms can also be run on them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec {

//! Satisfies `Model` and nothing richer: uniform next-token logits over `vocab_size()` tokens.
class model_archetype {
 public:
  //! A uniform model over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit model_archetype(std::size_t vocab_size = 4) : vocab_(vocab_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Writes zeros (uniform logits). \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> /*context*/, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }

 private:
  std::size_t vocab_;
};

//! Satisfies `ParallelScoringModel` (and so `Model`) and nothing richer: uniform logits.
class parallel_scoring_model_archetype {
 public:
  //! A uniform model over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit parallel_scoring_model_archetype(std::size_t vocab_size = 4) : vocab_(vocab_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Writes zeros. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> /*context*/, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  //! Writes `continuation.size() + 1` rows of zeros.
  //! \pre `rows.size() == (continuation.size() + 1) * vocab_size()`. \throws specdec::error otherwise.
  void score(std::span<const token_id> /*context*/, [[maybe_unused]] std::span<const token_id> continuation,
             std::span<float> rows) const {
    SPECDEC_EXPECTS(rows.size() == (continuation.size() + 1) * vocab_,
                    "rows must hold (continuation.size() + 1) * vocab_size() values");
    std::fill(rows.begin(), rows.end(), 0.0f);
  }

 private:
  std::size_t vocab_;
};

//! Satisfies `StatefulModel` only (it is not a `Model`): tracks the length of its state and gives
//! uniform logits after it.
class stateful_model_archetype {
 public:
  //! An empty state over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit stateful_model_archetype(std::size_t vocab_size = 4) : vocab_(vocab_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Makes `tokens` the whole state.
  void reset(std::span<const token_id> tokens) { length_ = tokens.size(); }
  //! Appends `tokens` to the state.
  void append(std::span<const token_id> tokens) { length_ += tokens.size(); }
  //! Removes the last `n` tokens. \pre `n <= length()`. \throws specdec::error otherwise.
  void rollback(std::size_t n) {
    SPECDEC_EXPECTS(n <= length_, "cannot roll back more tokens than the state holds");
    length_ -= n;
  }
  //! The number of tokens in the state.
  std::size_t length() const noexcept { return length_; }
  //! Writes zeros. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }

 private:
  std::size_t vocab_;
  std::size_t length_ = 0;
};

//! Satisfies `BatchedModel` (and so `Model`) and nothing richer: uniform logits.
class batched_model_archetype {
 public:
  //! A uniform model over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit batched_model_archetype(std::size_t vocab_size = 4) : vocab_(vocab_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Writes zeros. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> /*context*/, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  //! Writes `contexts.size()` rows of zeros.
  //! \pre `logits.size() == contexts.size() * vocab_size()`. \throws specdec::error otherwise.
  void next_logits_batch([[maybe_unused]] std::span<const std::span<const token_id>> contexts, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == contexts.size() * vocab_, "logits must hold contexts.size() * vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }

 private:
  std::size_t vocab_;
};

//! Satisfies `FeatureModel` (and so `Model`) and nothing richer: uniform logits; the features are
//! `(context length, 0, 0, ...)`, so a verifier sees something that depends on the context.
class feature_model_archetype {
 public:
  //! A uniform model over `vocab_size` tokens with `feature_size` features.
  //! \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit feature_model_archetype(std::size_t vocab_size = 4, std::size_t feature_size = 2)
      : vocab_(vocab_size), features_(feature_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! The number of features.
  std::size_t feature_size() const noexcept { return features_; }
  //! Writes zeros. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> /*context*/, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  //! Writes the context length into the first feature and zeros elsewhere.
  //! \pre `features.size() == feature_size()`. \throws specdec::error otherwise.
  void features(std::span<const token_id> context, std::span<float> features) const {
    SPECDEC_EXPECTS(features.size() == features_, "features must hold feature_size() values");
    std::fill(features.begin(), features.end(), 0.0f);
    if (!features.empty()) features[0] = static_cast<float>(context.size());
  }

 private:
  std::size_t vocab_;
  std::size_t features_;
};

//! Satisfies `ProbabilityModel` (and so `Model`) and nothing richer: the uniform distribution, exactly.
class probability_model_archetype {
 public:
  //! A uniform model over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit probability_model_archetype(std::size_t vocab_size = 4) : vocab_(vocab_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Writes zeros. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> /*context*/, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  //! Writes `1 / vocab_size()` everywhere. \pre `probs.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_probs(std::span<const token_id> /*context*/, std::span<double> probs) const {
    SPECDEC_EXPECTS(probs.size() == vocab_, "probs must hold vocab_size() values");
    std::fill(probs.begin(), probs.end(), 1.0 / static_cast<double>(vocab_));
  }

 private:
  std::size_t vocab_;
};

//! Satisfies `SequenceModel` and nothing richer (it takes no tree-shaped appends): a KV-cached engine
//! reduced to its sequences' lengths, writing uniform rows.
class sequence_model_archetype {
 public:
  //! No sequences, over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  explicit sequence_model_archetype(std::size_t vocab_size = 4) : vocab_(vocab_size) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Applies every append (chains only) and writes zeros for the rows asked for.
  //! \throws specdec::error on a bad append or a `logits` span of the wrong size.
  void forward(std::span<const sequence_append> appends, std::span<float> logits) { forward(appends, logits, false); }
  //! Removes the last `n` tokens of sequence `s`. \throws specdec::error when it holds fewer.
  void rollback(sequence_id s, std::size_t n) {
    SPECDEC_EXPECTS(n <= length(s), "cannot roll back more tokens than the sequence holds");
    lengths_[s] -= n;
  }
  //! Frees sequence `s`.
  void release(sequence_id s) { lengths_.erase(s); }
  //! The number of tokens in sequence `s` (0 before its first append).
  std::size_t length(sequence_id s) const {
    const auto it = lengths_.find(s);
    return it == lengths_.end() ? 0 : it->second;
  }

 protected:
  //! `forward`, taking tree-shaped appends when `trees` is true.
  void forward(std::span<const sequence_append> appends, std::span<float> logits, bool trees) {
    std::size_t rows = 0;
    for (const sequence_append& a : appends) {
      detail::check_append(a, length(a.sequence), vocab_, trees);
      rows += a.rows;
    }
    SPECDEC_EXPECTS(logits.size() == rows * vocab_, "logits must hold the rows asked for times vocab_size() values");
    for (const sequence_append& a : appends) lengths_[a.sequence] += a.tokens.size();
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  //! Sequence `s`'s length, writable.
  std::size_t& length_of(sequence_id s) { return lengths_[s]; }

 private:
  std::size_t vocab_;
  std::map<sequence_id, std::size_t> lengths_;
};

//! Satisfies `TreeSequenceModel` and nothing richer: `sequence_model_archetype` taking tree-shaped
//! appends, `commit_tree` keeping the given path's length.
class tree_sequence_model_archetype : public sequence_model_archetype {
 public:
  using sequence_model_archetype::sequence_model_archetype;
  //! Applies every append (chains or trees) and writes zeros for the rows asked for.
  //! \throws specdec::error on a bad append or a `logits` span of the wrong size.
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    sequence_model_archetype::forward(appends, logits, true);
  }
  //! Keeps, of the last `count` tokens of `s`, those at the offsets `keep` (increasing, below count).
  //! \throws specdec::error otherwise.
  void commit_tree(sequence_id s, std::size_t count, std::span<const std::int32_t> keep) {
    SPECDEC_EXPECTS(count <= length(s) && keep.size() <= count, "commit_tree: more tokens than the sequence holds");
    for (std::size_t i = 0; i < keep.size(); ++i)
      SPECDEC_EXPECTS(keep[i] >= 0 && static_cast<std::size_t>(keep[i]) < count && (i == 0 || keep[i] > keep[i - 1]),
                      "commit_tree: the kept offsets must increase and lie below count");
    length_of(s) -= count - keep.size();
  }
};

}  // namespace specdec
