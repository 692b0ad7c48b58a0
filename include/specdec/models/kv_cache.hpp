//! \file models/kv_cache.hpp
//! \brief A reference `SequenceModel` with a per-sequence cache, the way a KV-cached engine works:
//! each appended position is evaluated once, when it is appended, and its next-token row is kept;
//! `forward` returns kept rows, `rollback` drops them. Built on any `Model` (the cache stores the
//! rows themselves, where an engine stores keys and values), so tests can check an engine-shaped
//! loop against fresh recomputation (`consistent`), and examples/engine_kv_cache.cpp shows the shape.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec {

//! A `SequenceModel` over a `Model` that evaluates each position once and caches its row.
template <Model M>
class kv_cached_model : public detail::stored_sequence_model<M> {
  using base = detail::stored_sequence_model<M>;
  using base::model_;
  using base::store_;

 public:
  //! Wraps `model`, which must outlive the adapter.
  explicit kv_cached_model(const M& model) : base(model, model.vocab_size()) {}
  using base::vocab_size;

  //! Appends, evaluating each new position once, and copies out the requested rows.
  //! \throws specdec::error on a broken precondition (nothing is appended then).
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    const std::size_t V = vocab_size();
    store_.begin_forward(appends, logits.size(), V);
    sequence_model_stats& stats = store_.stats;
    std::size_t row = 0;
    for (const auto& a : appends) {
      auto& e = store_[a.sequence];  // payload: row i follows tokens[0..i] (a tree token: its path)
      if (!a.parents.empty()) {
        const std::size_t before = e.tokens.size();
        e.payload.resize((before + a.tokens.size()) * V);
        for (std::size_t i = 0; i < a.tokens.size(); ++i) {
          detail::tree_context(std::span<const token_id>(e.tokens).first(before), a, i, context_);
          model_->next_logits(std::span<const token_id>(context_), std::span<float>(e.payload).subspan((before + i) * V, V));
        }
        e.tokens.insert(e.tokens.end(), a.tokens.begin(), a.tokens.end());
      } else {
        for (const token_id t : a.tokens) {
          e.tokens.push_back(t);
          e.payload.resize(e.tokens.size() * V);
          model_->next_logits(std::span<const token_id>(e.tokens), std::span<float>(e.payload).last(V));
        }
      }
      stats.appended_positions += a.tokens.size();
      stats.recomputed_positions += a.tokens.size();
      const std::size_t first = e.tokens.size() - a.rows;
      std::copy_n(e.payload.begin() + static_cast<std::ptrdiff_t>(first * V), a.rows * V,
                  logits.begin() + static_cast<std::ptrdiff_t>(row * V));
      stats.rows += a.rows;
      row += a.rows;
    }
  }
  //! Whether sequence s's cached rows equal a fresh evaluation of its tokens, bit for bit (what a KV
  //! cache must guarantee after any sequence of appends and rollbacks).
  bool consistent(sequence_id s) const {
    const auto* e = store_.find(s);
    if (e == nullptr) return true;
    const std::size_t V = vocab_size();
    if (e->payload.size() != e->tokens.size() * V) return false;
    std::vector<float> fresh(V);
    for (std::size_t i = 0; i < e->tokens.size(); ++i) {
      model_->next_logits(std::span<const token_id>(e->tokens).first(i + 1), std::span<float>(fresh));
      if (!std::equal(fresh.begin(), fresh.end(), e->payload.begin() + static_cast<std::ptrdiff_t>(i * V))) return false;
    }
    return true;
  }

 private:
  std::vector<token_id> context_;  // a tree token's context
};

}  // namespace specdec
