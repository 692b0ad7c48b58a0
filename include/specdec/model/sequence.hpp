//! \file model/sequence.hpp
//! \brief `SequenceModel`: the interface an inference engine with its own KV cache implements, so that
//! the step decoder (decode/batch_decoder.hpp) can run on it; and adapters that make every `Model`
//! (and every `StatefulModel`) one.
//!
//! A sequence model holds the state of many sequences, each named by a `sequence_id`. One call,
//! `forward(appends, logits)`, extends a ragged batch of sequences by a few tokens each and writes the
//! next-token logits of exactly the positions asked for; `rollback(s, n)` drops the last n tokens of
//! sequence s (a rejected draft), `release(s)` frees it. A sequence exists from its first append (length
//! 0 before). This is the shape of a paged-KV engine's step: its scheduler batches the appends, the
//! model runs once, and the sampler reads the requested rows (docs/engine.md).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"

namespace specdec {

//! Names a sequence of a `SequenceModel`.
using sequence_id = std::uint64_t;

//! One sequence's part of a `forward` call: `tokens` are appended to the sequence's state, and the
//! logits after each of the last `rows` appended positions are written (row k is the next-token
//! logits after the state plus tokens[0 .. tokens.size() - rows + k]). Chain drafting asks for the
//! last position, chain verification for the last gamma + 1.
//! `parents` makes the append tree-shaped (tree verification, acceptance/tree.hpp): empty for a chain,
//! else one entry per token, parents[i] in [-1, i): -1 means token i follows the state, j that it follows
//! token j of this append. Row k is then the logits after the state plus the path to its token. Only a
//! `TreeSequenceModel` takes such appends, and the sequence is extended again only after `commit_tree`.
struct sequence_append {
  sequence_id sequence = 0;                 //!< the sequence the tokens are appended to
  std::span<const token_id> tokens;         //!< the tokens appended
  std::size_t rows = 0;                     //!< the number of rows asked for: the logits after each of the last `rows` positions
  std::span<const std::int32_t> parents{};  //!< empty for a chain; else the parent of each token in this append (-1: the state)
};

//! A batched, stateful model of many sequences (a KV-cached engine).
//! - `m.forward(appends, logits)`: applies every append in order and writes their rows one after the
//!   other (append 0's rows first), `logits.size() == (sum of rows) * vocab_size()`;
//! - `m.rollback(s, n)` removes the last n tokens of sequence s (`n <= m.length(s)`);
//! - `m.release(s)` frees sequence s (a later append starts it again from length 0);
//! - `m.length(s)` is the number of tokens in sequence s's state.
//! Preconditions a model may check (the adapters do, with `specdec::error`): every appended token is in
//! the vocabulary, `rows <= tokens.size()`, `rows == 0` or the state before the append plus the tokens is
//! not empty.
template <class M>
concept SequenceModel = requires(M& m, const M& cm, std::span<const sequence_append> appends, std::span<float> logits,
                                 sequence_id s, std::size_t n) {
  { cm.vocab_size() } -> std::convertible_to<std::size_t>;
  m.forward(appends, logits);
  m.rollback(s, n);
  m.release(s);
  { cm.length(s) } -> std::convertible_to<std::size_t>;
};

//! A `SequenceModel` that also takes tree-shaped appends (`sequence_append::parents`) and then keeps
//! one path of the tree: `m.commit_tree(s, count, keep)` keeps, of the last `count` tokens of s (a
//! tree's nodes), those at the offsets `keep` (increasing, a root-to-node path), in that order, and
//! drops the others (an engine copies the kept KV entries down, as EAGLE and TensorRT-LLM do).
template <class M>
concept TreeSequenceModel = SequenceModel<M> && requires(M& m, sequence_id s, std::size_t n, std::span<const std::int32_t> keep) {
  m.commit_tree(s, n, keep);
};

//! Whether `m` takes tree-shaped appends now: a `TreeSequenceModel` does unless it has a member
//! `takes_tree_appends()` that says otherwise (an engine whose trees depend on how it was set up).
template <SequenceModel M>
bool takes_tree_appends(const M& m) {
  if constexpr (!TreeSequenceModel<M>)
    return false;
  else if constexpr (requires {
                       { m.takes_tree_appends() } -> std::convertible_to<bool>;
                     })
    return m.takes_tree_appends();
  else
    return true;
}

//! What a sequence model computed (kept by the adapters; compare with what the cost model charges).
struct sequence_model_stats {
  std::size_t calls = 0;                 //!< forward calls
  std::size_t appended_positions = 0;    //!< tokens appended (what a KV-cached engine computes)
  std::size_t rows = 0;                  //!< logit rows written
  std::size_t recomputed_positions = 0;  //!< positions the wrapped model evaluated (a recomputing adapter re-reads the context)
  std::size_t rolled_back = 0;           //!< tokens removed by rollback
};

namespace detail {
//! Checks one append against a state of `length` tokens and a vocabulary of V.
inline void check_append(const sequence_append& a, std::size_t length, std::size_t V, bool trees = false) {
  SPECDEC_EXPECTS(trees || a.parents.empty(), "specdec::SequenceModel: this model takes no tree-shaped appends (parents)");
  SPECDEC_EXPECTS(a.parents.empty() || a.parents.size() == a.tokens.size(),
                  "specdec::SequenceModel: one parent per appended token");
  for (std::size_t i = 0; i < a.parents.size(); ++i)
    SPECDEC_EXPECTS(a.parents[i] >= -1 && a.parents[i] < static_cast<std::int32_t>(i),
                    "specdec::SequenceModel: a parent is not an earlier token of the append");
  SPECDEC_EXPECTS(a.rows <= a.tokens.size(), "specdec::SequenceModel: an append asks for more rows than it appends");
  for ([[maybe_unused]] const token_id t : a.tokens)
    SPECDEC_EXPECTS(in_vocabulary(t, V), "specdec::SequenceModel: an appended token is outside the vocabulary");
  SPECDEC_EXPECTS(length + a.tokens.size() > 0 || a.rows == 0, "specdec::SequenceModel: logits of an empty sequence");
}

//! The total rows of `appends`, checked against the size of `logits`.
inline std::size_t check_rows(std::span<const sequence_append> appends, std::size_t logits_size, std::size_t V) {
  std::size_t rows = 0;
  for (const auto& a : appends) rows += a.rows;
  SPECDEC_EXPECTS(V > 0 && specdec::detail::holds_rows(logits_size, rows, V),  // no wrapping product rows * V
                  "specdec::SequenceModel: logits must hold the requested rows");
  return rows;
}

//! The context of token i of a tree-shaped append: `before` (the state), then the tokens on the path to i.
inline void tree_context(std::span<const token_id> before, const sequence_append& a, std::size_t i, std::vector<token_id>& out) {
  std::size_t depth = 0;
  for (std::int32_t j = static_cast<std::int32_t>(i); j >= 0; j = a.parents[static_cast<std::size_t>(j)]) ++depth;
  out.assign(before.begin(), before.end());
  out.resize(before.size() + depth);
  for (std::int32_t j = static_cast<std::int32_t>(i); j >= 0; j = a.parents[static_cast<std::size_t>(j)])
    out[before.size() + --depth] = a.tokens[static_cast<std::size_t>(j)];
}

//! The per-sequence state of the reference adapters: each sequence's tokens and `width` floats per
//! token beside them (none for `recomputing_sequence_model`; the cached row of V logits for
//! `kv_cached_model`), with the length, rollback and release every `SequenceModel` needs.
class sequence_store {
 public:
  struct entry {
    std::vector<token_id> tokens;
    std::vector<float> payload;  //!< [tokens.size()][width]
  };
  explicit sequence_store(std::size_t width = 0) : width_(width) {}

  const entry* find(sequence_id s) const {
    const auto it = entries_.find(s);
    return it == entries_.end() ? nullptr : &it->second;
  }
  entry& operator[](sequence_id s) { return entries_[s]; }
  std::size_t length(sequence_id s) const {
    const entry* e = find(s);
    return e == nullptr ? 0 : e->tokens.size();
  }
  std::span<const token_id> tokens(sequence_id s) const {
    const entry* e = find(s);
    return e == nullptr ? std::span<const token_id>{} : std::span<const token_id>(e->tokens);
  }
  //! \throws specdec::error when n exceeds the sequence's length.
  void rollback(sequence_id s, std::size_t n) {
    SPECDEC_EXPECTS(n <= length(s), "specdec::SequenceModel::rollback: past the start of the sequence");
    if (n == 0) return;
    entry& e = entries_[s];
    e.tokens.resize(e.tokens.size() - n);
    e.payload.resize(e.tokens.size() * width_);
    stats.rolled_back += n;
  }
  void release(sequence_id s) { entries_.erase(s); }
  //! Keeps, of the last `count` tokens of s, those at the offsets `keep` (increasing), with their
  //! payload rows (`TreeSequenceModel::commit_tree`).
  //! \throws specdec::error when count exceeds the length or `keep` is not increasing in [0, count)
  void commit_tree(sequence_id s, std::size_t count, std::span<const std::int32_t> keep) {
    SPECDEC_EXPECTS(count <= length(s), "specdec::TreeSequenceModel::commit_tree: more tokens than the sequence holds");
    entry& e = entries_[s];
    const std::size_t base = e.tokens.size() - count;
    std::size_t at = base;
    for (std::size_t k = 0; k < keep.size(); ++k) {
      SPECDEC_EXPECTS(keep[k] >= 0 && static_cast<std::size_t>(keep[k]) < count && (k == 0 || keep[k] > keep[k - 1]),
                      "specdec::TreeSequenceModel::commit_tree: kept offsets must increase within the tree");
      const std::size_t from = base + static_cast<std::size_t>(keep[k]);
      e.tokens[at] = e.tokens[from];
      std::copy_n(e.payload.begin() + static_cast<std::ptrdiff_t>(from * width_), width_,
                  e.payload.begin() + static_cast<std::ptrdiff_t>(at * width_));
      ++at;
    }
    stats.rolled_back += count - keep.size();
    e.tokens.resize(at);
    e.payload.resize(at * width_);
  }
  //! The checks every `forward` makes before it changes anything, and its call count.
  //! \throws specdec::error on a broken precondition.
  void begin_forward(std::span<const sequence_append> appends, std::size_t logits_size, std::size_t V) {
    check_rows(appends, logits_size, V);
    for (const auto& a : appends) check_append(a, length(a.sequence), V, true);
    ++stats.calls;
  }

  sequence_model_stats stats;

 private:
  std::size_t width_;
  std::unordered_map<sequence_id, entry> entries_;
};

//! What the reference adapters over a `Model` share: the model, the per-sequence store, and the
//! `SequenceModel` members other than `forward` (each adapter computes its rows its own way).
template <Model M>
class stored_sequence_model {
 public:
  std::size_t vocab_size() const { return model_->vocab_size(); }
  std::size_t length(sequence_id s) const { return store_.length(s); }
  const sequence_model_stats& stats() const noexcept { return store_.stats; }
  //! The tokens of sequence s's state.
  std::span<const token_id> tokens(sequence_id s) const { return store_.tokens(s); }
  //! \throws specdec::error when n exceeds the sequence's length.
  void rollback(sequence_id s, std::size_t n) { store_.rollback(s, n); }
  void release(sequence_id s) { store_.release(s); }
  //! `TreeSequenceModel::commit_tree`. \throws specdec::error on bad offsets.
  void commit_tree(sequence_id s, std::size_t count, std::span<const std::int32_t> keep) { store_.commit_tree(s, count, keep); }

 protected:
  stored_sequence_model(const M& model, std::size_t width) : model_(&model), store_(width) {}
  const M* model_;
  sequence_store store_;
};
}  // namespace detail

//! Any `Model` as a `SequenceModel`: keeps each sequence's tokens and computes the requested rows by
//! scoring the whole context (`score`, model/score.hpp: one `score` call on a `ParallelScoringModel`,
//! else one `next_logits` per row; a tree-shaped append, one `next_logits` per row on its path). Correct
//! for every model, and as slow as recomputation is: use it for reference models and tests; an engine
//! implements `SequenceModel` (and `TreeSequenceModel`) itself.
template <Model M>
class recomputing_sequence_model : public detail::stored_sequence_model<M> {
  using base = detail::stored_sequence_model<M>;
  using base::model_;
  using base::store_;

 public:
  //! Wraps `model`, which must outlive the adapter.
  explicit recomputing_sequence_model(const M& model) : base(model, 0) {}
  using base::vocab_size;

  //! \throws specdec::error on a broken precondition (nothing is appended then).
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    const std::size_t V = vocab_size();
    store_.begin_forward(appends, logits.size(), V);
    sequence_model_stats& stats = store_.stats;
    std::size_t row = 0;
    for (const auto& a : appends) {
      std::vector<token_id>& state = store_[a.sequence].tokens;
      if (!a.parents.empty()) {  // a tree: each row scores its own path
        const std::size_t before = state.size();
        for (std::size_t k = 0; k < a.rows; ++k) {
          detail::tree_context(std::span<const token_id>(state).first(before), a, a.tokens.size() - a.rows + k, context_);
          model_->next_logits(std::span<const token_id>(context_), logits.subspan((row + k) * V, V));
          stats.recomputed_positions += context_.size();
        }
        state.insert(state.end(), a.tokens.begin(), a.tokens.end());
        stats.appended_positions += a.tokens.size();
        stats.rows += a.rows;
        row += a.rows;
        continue;
      }
      const std::size_t before = state.size() + a.tokens.size() - a.rows;  // context of the first row, minus its last token
      state.insert(state.end(), a.tokens.begin(), a.tokens.end());
      stats.appended_positions += a.tokens.size();
      if (a.rows == 0) continue;
      // Row k follows state[0 .. before + k]: score state[0 .. before + 1) then the next rows - 1 tokens.
      const std::span<const token_id> all(state);
      score(*model_, all.first(before + 1), all.subspan(before + 1, a.rows - 1), logits.subspan(row * V, a.rows * V));
      stats.recomputed_positions += before + a.rows;
      stats.rows += a.rows;
      row += a.rows;
    }
  }

 private:
  std::vector<token_id> context_;  // a tree row's context
};

//! A `StatefulModel` per sequence as a `SequenceModel`: `make()` returns a fresh `StatefulModel` for
//! each new sequence; rows are read with `next_logits` after appending token by token.
template <class Factory>
  requires StatefulModel<std::invoke_result_t<Factory&>>
class stateful_sequence_model {
 public:
  //! The `StatefulModel` type `make()` returns.
  using state_model = std::invoke_result_t<Factory&>;
  //! An adapter that makes each new sequence's model with `make`, over `vocab` tokens.
  explicit stateful_sequence_model(Factory make, std::size_t vocab) : make_(std::move(make)), vocab_(vocab) {}

  //! V, the vocabulary size.
  std::size_t vocab_size() const { return vocab_; }
  //! The number of tokens in sequence s's state (0 for a sequence not live).
  std::size_t length(sequence_id s) const {
    const auto it = states_.find(s);
    return it == states_.end() ? 0 : static_cast<std::size_t>(it->second.length());
  }
  //! The calls, appended positions, rows and rollbacks so far.
  const sequence_model_stats& stats() const noexcept { return stats_; }

  //! \throws specdec::error on a broken precondition (nothing is appended then).
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    detail::check_rows(appends, logits.size(), vocab_);
    for (const auto& a : appends) detail::check_append(a, length(a.sequence), vocab_);
    ++stats_.calls;
    std::size_t row = 0;
    for (const auto& a : appends) {
      auto it = states_.find(a.sequence);
      if (it == states_.end()) it = states_.emplace(a.sequence, make_()).first;
      state_model& m = it->second;
      const std::size_t first_row = a.tokens.size() - a.rows;
      if (first_row > 0) m.append(a.tokens.first(first_row));
      for (std::size_t k = 0; k < a.rows; ++k) {
        m.append(a.tokens.subspan(first_row + k, 1));
        m.next_logits(logits.subspan((row + k) * vocab_, vocab_));
      }
      stats_.appended_positions += a.tokens.size();
      stats_.recomputed_positions += a.tokens.size();
      stats_.rows += a.rows;
      row += a.rows;
    }
  }
  //! \throws specdec::error when n exceeds the sequence's length.
  void rollback(sequence_id s, std::size_t n) {
    SPECDEC_EXPECTS(n <= length(s), "specdec::SequenceModel::rollback: past the start of the sequence");
    if (n == 0) return;
    states_.at(s).rollback(n);
    stats_.rolled_back += n;
  }
  //! Frees sequence s (a later append starts it again from length 0).
  void release(sequence_id s) { states_.erase(s); }

 private:
  Factory make_;
  std::size_t vocab_;
  std::unordered_map<sequence_id, state_model> states_;
  sequence_model_stats stats_;
};

//! The draft model of a step decoder whose requests all draft through drafter stages (or not at all):
//! a `SequenceModel` over V tokens that holds nothing and refuses to compute.
class no_sequence_model {
 public:
  //! A model of `vocab` tokens that holds nothing.
  explicit no_sequence_model(std::size_t vocab) : vocab_(vocab) {}
  //! V, the vocabulary size.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! 0: no sequence holds anything.
  std::size_t length(sequence_id) const noexcept { return 0; }
  //! \throws specdec::error when asked to append anything.
  void forward(std::span<const sequence_append> appends, std::span<float>) {
    SPECDEC_EXPECTS(appends.empty(), "specdec::no_sequence_model: this decoder has no draft model to forward");
  }
  //! \throws specdec::error for n > 0.
  void rollback(sequence_id, std::size_t n) { SPECDEC_EXPECTS(n == 0, "specdec::no_sequence_model: nothing to roll back"); }
  //! Does nothing: no sequence holds anything.
  void release(sequence_id) noexcept {}

 private:
  std::size_t vocab_;
};

}  // namespace specdec
