//! \file model/prefix_cached_model.hpp
//! \brief `prefix_cached_model`: a `SequenceModel` (a KV-cached engine such as llama.cpp) seen as a
//! stateless `Model`, `BatchedModel`, `ParallelScoringModel` and `BatchScoringModel`, so that every stage written against
//! `Model` (beam drafting for MTAD, tree drafters, SV's companion, verifier-gated drafting) runs on a real engine's KV cache.
//!
//! The adapter keeps `lanes` sequences of the wrapped model. A call asks for the next-token rows after
//! some contexts; each context is served by the free lane that costs least: the tokens it must append
//! (the context past its common prefix with the lane) plus the tokens of the lane it drops (the lane's
//! past that prefix), ties to the lower lane. The lane is rolled back to that common prefix and the
//! rest of the context is appended, with one row asked for. So a context that extends, or branches off,
//! what a lane held costs only its new tokens, and contexts served one call at a time (requests sharing
//! the adapter, one lane each) keep their lanes: a lane holding another context is taken only when that
//! saves more than it drops (not for a shared opening such as a system prompt, when a lane is empty): a drafter that extends its context by one token per call appends one
//! token per call, a beam or tree frontier re-sends each path below its branch point, never the whole
//! context. All lanes of a call go to the model in one `forward` (more contexts than lanes: one
//! forward per `lanes` contexts). When the common prefix is the whole context, its last token is
//! appended again (a row needs an appended position). `score(context, continuation)` asks one lane
//! for the continuation.size() + 1 rows after context + continuation[0..i) in one forward (the lane
//! keeps at most the context's tokens but its last as its shared prefix, so every row is appended);
//! `score_batch` does so for B contexts, one forward per `lanes` of them (SV's companion scores every
//! request's drafts of a round in one forward).
//!
//! `next_logits` is `const`, as `Model` requires, and changes only the cache (the rows are what the
//! wrapped model gives for the context): the adapter is not safe to call from two threads at once, and
//! the wrapped model's lanes must not be used by anyone else. Lane ids are `first_id`, `first_id + 1`,
//! ... in the wrapped model. An empty context is refused (there is no row before the first token).
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec {

//! What a `prefix_cached_model` asked of its model.
struct prefix_cache_stats {
  std::size_t contexts = 0;            //!< contexts whose rows were asked for
  std::size_t forwards = 0;            //!< `forward` calls on the wrapped model
  std::size_t appended_positions = 0;  //!< tokens appended (what the engine computed)
  std::size_t reused_positions = 0;    //!< context tokens found in a lane's cache (not recomputed)
};

//! A `SequenceModel` as a stateless `Model` / `BatchedModel` over `lanes` cached sequences (see the
//! file comment).
template <SequenceModel M>
class prefix_cached_model {
 public:
  //! Wraps `model` (which must outlive the adapter) with `lanes` sequences, ids `first_id` onwards.
  //! \throws specdec::error when lanes is 0.
  prefix_cached_model(M& model, std::size_t lanes, sequence_id first_id = 0) : model_(&model), first_id_(first_id), held_(lanes) {
    SPECDEC_EXPECTS(lanes > 0, "specdec::prefix_cached_model: at least one lane");
  }

  //! V, the wrapped model's vocabulary size.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! The number of lanes (contexts served per `forward`).
  std::size_t lanes() const noexcept { return held_.size(); }
  //! What was asked of the wrapped model so far.
  const prefix_cache_stats& stats() const noexcept { return stats_; }

  //! The next-token logits after `context`. \throws specdec::error on an empty context or a wrong
  //! row size; whatever the wrapped model throws.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    next_logits_batch(std::span<const std::span<const token_id>>(&context, 1), logits);
  }

  //! Row b of `logits` is the next-token logits after `contexts[b]` (one `forward` per `lanes()`
  //! contexts). \throws as `next_logits`.
  void next_logits_batch(std::span<const std::span<const token_id>> contexts, std::span<float> logits) const {
    const std::size_t V = vocab_size();
    SPECDEC_EXPECTS(logits.size() == contexts.size() * V, "specdec::prefix_cached_model: one row per context");
    for (const auto& c : contexts) SPECDEC_EXPECTS(!c.empty(), "specdec::prefix_cached_model: an empty context has no row");
    for (std::size_t first = 0; first < contexts.size(); first += lanes()) {
      const std::size_t n = std::min(lanes(), contexts.size() - first);
      ones_.assign(n, 1);
      serve(contexts.subspan(first, n), logits.subspan(first * V, n * V), std::span<const std::size_t>(ones_));
    }
  }

  //! Rows i = 0..continuation.size() of `rows`: the next-token logits after context +
  //! continuation[0..i), from one lane in one `forward` (a `ParallelScoringModel`).
  //! \throws specdec::error on an empty context or a wrong row count; whatever the wrapped model throws.
  void score(std::span<const token_id> context, std::span<const token_id> continuation, std::span<float> rows) const {
    score_batch(std::span<const std::span<const token_id>>(&context, 1),
                std::span<const std::span<const token_id>>(&continuation, 1), rows);
  }

  //! For b = 0..B-1 in turn, the rows `score(contexts[b], continuations[b], ...)` writes, from one
  //! forward per `lanes()` contexts (a `BatchScoringModel`). \throws as `score`.
  void score_batch(std::span<const std::span<const token_id>> contexts, std::span<const std::span<const token_id>> continuations,
                   std::span<float> rows) const {
    SPECDEC_EXPECTS(contexts.size() == continuations.size(), "specdec::prefix_cached_model: one continuation per context");
    const std::size_t V = vocab_size();
    std::size_t total = 0;
    batch_wholes_.resize(contexts.size());
    batch_rows_.clear();
    for (std::size_t b = 0; b < contexts.size(); ++b) {
      SPECDEC_EXPECTS(!contexts[b].empty(), "specdec::prefix_cached_model: an empty context has no row");
      batch_wholes_[b].assign(contexts[b].begin(), contexts[b].end());
      batch_wholes_[b].insert(batch_wholes_[b].end(), continuations[b].begin(), continuations[b].end());
      batch_rows_.push_back(continuations[b].size() + 1);
      total += batch_rows_.back() * V;
    }
    SPECDEC_EXPECTS(rows.size() == total, "specdec::prefix_cached_model: continuation.size() + 1 rows per context");
    batch_views_.assign(batch_wholes_.begin(), batch_wholes_.end());
    std::size_t at = 0;
    for (std::size_t first = 0; first < contexts.size(); first += lanes()) {
      const std::size_t n = std::min(lanes(), contexts.size() - first);
      const auto counts = std::span<const std::size_t>(batch_rows_).subspan(first, n);
      std::size_t values = 0;
      for (const std::size_t r : counts) values += r * V;
      serve(std::span<const std::span<const token_id>>(batch_views_).subspan(first, n), rows.subspan(at, values), counts);
      at += values;
    }
  }

  //! The wrapped model's sequence whose cached tokens are exactly `context` (the lane that last served
  //! it, while no later call reused that lane), or none: what reads a row's side outputs, such as a
  //! hidden state, asks here where the row was computed.
  std::optional<sequence_id> sequence_holding(std::span<const token_id> context) const {
    for (std::size_t k = 0; k < held_.size(); ++k)
      if (std::ranges::equal(held_[k], context)) return first_id_ + k;
    return std::nullopt;
  }

  //! Frees every lane's sequence in the wrapped model.
  void clear() {
    for (std::size_t k = 0; k < held_.size(); ++k) {
      model_->release(first_id_ + k);
      held_[k].clear();
    }
  }

 private:
  static std::size_t common_prefix(std::span<const token_id> a, std::span<const token_id> b) {
    const auto [x, y] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(x - a.begin());
  }

  // Serves at most lanes() contexts with one forward, the last `rows[b]` rows of context b (`logits`
  // holds exactly those rows).
  void serve(std::span<const std::span<const token_id>> contexts, std::span<float> logits,
             std::span<const std::size_t> rows_of) const {
    used_.assign(held_.size(), false);
    appends_.clear();
    for (std::size_t b = 0; b < contexts.size(); ++b) {
      const std::span<const token_id> c = contexts[b];
      const std::size_t rows = rows_of[b];
      std::size_t best = held_.size(), shared = 0, best_cost = 0;
      for (std::size_t k = 0; k < held_.size(); ++k) {
        if (used_[k]) continue;
        // every row asked for is an appended position
        const std::size_t n = std::min(common_prefix(held_[k], c), c.size() - rows);
        const std::size_t cost = (c.size() - n) + (held_[k].size() - n);  // appended + dropped
        if (best == held_.size() || cost < best_cost) best = k, shared = n, best_cost = cost;
      }
      used_[best] = true;
      model_->rollback(first_id_ + best, held_[best].size() - shared);
      held_[best].assign(c.begin(), c.end());
      appends_.push_back({.sequence = first_id_ + best, .tokens = c.subspan(shared), .rows = rows});
      stats_.appended_positions += c.size() - shared;
      stats_.reused_positions += shared;
    }
    ++stats_.forwards;
    stats_.contexts += contexts.size();
    try {
      model_->forward(std::span<const sequence_append>(appends_), logits);
    } catch (...) {
      clear_after_failure();
      throw;
    }
  }

  // A failed forward leaves the lanes' model state unknown to us: start them again from nothing.
  void clear_after_failure() const noexcept {
    for (std::size_t k = 0; k < held_.size(); ++k) {
      try {
        model_->release(first_id_ + k);
      } catch (...) {  // NOLINT(bugprone-empty-catch): releasing is best effort here
      }
      held_[k].clear();
    }
  }

  M* model_;
  sequence_id first_id_;
  mutable std::vector<std::vector<token_id>> held_;  // the tokens each lane's sequence holds
  mutable std::vector<bool> used_;
  mutable std::vector<sequence_append> appends_;
  mutable std::vector<std::vector<token_id>> batch_wholes_;  // score_batch's (and score's) contexts + continuations
  mutable std::vector<std::span<const token_id>> batch_views_;
  mutable std::vector<std::size_t> batch_rows_, ones_;  // rows asked per context
  mutable prefix_cache_stats stats_;
};

}  // namespace specdec
