//! \file integrations/llama_cpp/sequence_model.hpp
//! \brief `llama_cpp::sequence_model`: a llama.cpp context as a `specdec::SequenceModel`
//! (model/sequence.hpp), so that the step decoder (decode/batch_decoder.hpp) runs on a real KV-cached
//! transformer.
//!
//! - Every live specdec sequence is one llama.cpp sequence id (a slot in [0, n_seq_max)), taken at its
//!   first append and given back by `release`.
//! - `forward` is one `llama_decode` for all appends of the call (split only when they exceed the
//!   context's batch size), with logits requested only at the rows asked for; each token's position
//!   is its sequence's length before it.
//! - `rollback(s, n)` removes the last n positions of s from the KV cache (`llama_memory_seq_rm`).
//! - A forward that would take a sequence past the context's per-sequence size is refused before any
//!   decoding (specdec::engine_error), and a failed `llama_decode` leaves every sequence as it was
//!   before the call (the positions it added are removed), then throws.
//! - On a context made with `context_options::tree_paths` > 0 it is a `TreeSequenceModel`: a
//!   tree-shaped append gives each root-to-leaf path a sequence id of its own (tree_paths.hpp says why
//!   that is exact tree attention), scored in the same `llama_decode` as every other append;
//!   `commit_tree` gives the accepted path's cells to the sequence and frees every path id (the other
//!   nodes' cells are then free). A forward whose trees need more path ids than are free is refused
//!   before anything is decoded.
//! - On a context made with `context_options::hidden_states`, `hidden_state(s)` is the last-layer
//!   hidden state at s's last position, kept from the chain append that ended there (SPRINTER's
//!   verifier reads the draft model's; integrations/llama_cpp/hidden_state_features.hpp). llama.cpp
//!   outputs every token of a batch (logits and embeddings) while embeddings are on, so a forward
//!   there is two `llama_decode`s: every token but each chain-appended sequence's last with
//!   embeddings off (rows only where asked), then those last tokens with embeddings on. A catch-up of
//!   n tokens so pays the output layer for the rows asked and one token, not for all n.
#pragma once

#include <llama.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "specdec/errors.hpp"
#include "specdec/integrations/llama_cpp/handles.hpp"
#include "specdec/integrations/llama_cpp/tree_paths.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec::llama_cpp {

//! What `forward` asked of llama.cpp (besides `sequence_model_stats`).
struct llama_calls {
  std::size_t decode_calls = 0;  //!< llama_decode calls (more than forwards when one exceeds the batch)
};

//! A llama.cpp context as a `specdec::SequenceModel` (see the file comment).
class sequence_model {
 public:
  //! Decodes on `ctx` (not owned; one sequence_model per context, used from one thread at a time).
  explicit sequence_model(context& ctx) : ctx_(&ctx), vocab_(ctx.owner().vocab_size()) {
    for (std::size_t slot = ctx.max_sequences(); slot-- > 0;) free_slots_.push_back(static_cast<llama_seq_id>(slot));
    const std::size_t ids = ctx.max_sequences() + ctx.tree_paths();
    for (std::size_t id = ids; id-- > ctx.max_sequences();) free_paths_.push_back(static_cast<llama_seq_id>(id));
    batch_ = llama_batch_init(static_cast<std::int32_t>(ctx.batch()), 0, static_cast<std::int32_t>(ids));
    wanted_.resize(ctx.batch());
    hidden_of_.resize(ctx.batch());
    embeddings_on_ = ctx.hidden_states();
  }
  ~sequence_model() { llama_batch_free(batch_); }
  sequence_model(const sequence_model&) = delete;
  sequence_model& operator=(const sequence_model&) = delete;

  //! V, the model's vocabulary size.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! The number of tokens in sequence s's state (0 for a sequence not live).
  std::size_t length(sequence_id s) const {
    const auto it = live_.find(s);
    return it == live_.end() ? 0 : it->second.length;
  }
  //! The width of a hidden state (`context::hidden_size()`).
  std::size_t hidden_size() const noexcept { return ctx_->hidden_size(); }
  //! The last-layer hidden state (`hidden_size()` values) at sequence s's last position, from
  //! the chain append that ended there. \throws specdec::error on a context without hidden states, or
  //! when s's last position is not where a chain append ended (a rollback past that position forgets it).
  std::span<const float> hidden_state(sequence_id s) const {
    SPECDEC_EXPECTS(ctx_->hidden_states(), "specdec::llama_cpp::sequence_model: the context was made without hidden_states");
    const auto it = live_.find(s);
    SPECDEC_EXPECTS(
        it != live_.end() && it->second.hidden_at == it->second.length && !it->second.hidden.empty(),
        "specdec::llama_cpp::sequence_model: no hidden state at the sequence's last position (roll back, then append)");
    return it->second.hidden;
  }
  //! The calls, appended positions, rows and rollbacks so far.
  const sequence_model_stats& stats() const noexcept { return stats_; }
  //! What was asked of llama.cpp so far (llama_decode calls).
  const llama_calls& engine_stats() const noexcept { return engine_stats_; }

  //! \throws specdec::error on a broken precondition, or a tree-shaped append on a context without
  //!         tree paths or on a sequence whose last tree is not committed (nothing is decoded then);
  //!         specdec::engine_error when a sequence would exceed the context, more sequences are live
  //!         than the context holds, the trees need more path ids than are free, or llama_decode
  //!         fails (the sequences are then as before the call).
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    specdec::detail::check_rows(appends, logits.size(), vocab_);
    for (const auto& a : appends) {
      SPECDEC_EXPECTS(a.parents.empty() || ctx_->tree_paths() > 0,
                      "specdec::llama_cpp::sequence_model: a tree-shaped append needs a context made with tree_paths > 0");
      specdec::detail::check_append(a, length(a.sequence), vocab_, true);
      const auto it = live_.find(a.sequence);
      SPECDEC_EXPECTS(it == live_.end() || it->second.tree.paths.empty(),
                      "specdec::llama_cpp::sequence_model: a sequence is extended again only after commit_tree");
    }
    prepare(appends);
    ++stats_.calls;
    std::size_t row = 0;
    targets_.clear();
    done_ = 0;
    // Hidden-state contexts: each sequence's last chain-appended token waits for the second decode.
    deferred_.clear();
    if (ctx_->hidden_states()) {
      last_chain_append_.clear();
      for (std::size_t j = 0; j < appends.size(); ++j)
        if (appends[j].parents.empty() && !appends[j].tokens.empty()) last_chain_append_[appends[j].sequence] = j;
      set_embeddings(false);
    }
    try {
      for (std::size_t j = 0; j < appends.size(); ++j) {
        const sequence_append& a = appends[j];
        slot& s = live_.at(a.sequence);
        if (!a.parents.empty()) begin_tree(a, s);
        const std::size_t first_row = a.tokens.size() - a.rows;
        const bool defer_last =
            ctx_->hidden_states() && a.parents.empty() && !a.tokens.empty() && last_chain_append_.at(a.sequence) == j;
        const std::size_t now = a.tokens.size() - (defer_last ? 1 : 0);
        for (std::size_t i = 0; i < now; ++i) {
          if (batch_.n_tokens == static_cast<std::int32_t>(ctx_->batch())) decode(logits);
          const bool output = i >= first_row;
          if (a.parents.empty())
            add(a.tokens[i], s, output, false);
          else
            add_node(a.tokens[i], s, i, output);
          if (output) targets_.push_back(row++);
        }
        if (defer_last) deferred_.push_back({a.tokens.back(), &s, a.rows > 0, a.rows > 0 ? row++ : 0});
        if (!a.parents.empty()) s.length += a.tokens.size();
        stats_.appended_positions += a.tokens.size();
        stats_.rows += a.rows;
      }
      if (!deferred_.empty()) {
        if (batch_.n_tokens > 0) decode(logits);
        set_embeddings(true);
        for (const deferred_token& d : deferred_) {
          if (batch_.n_tokens == static_cast<std::int32_t>(ctx_->batch())) decode(logits);
          add(d.token, *d.owner, d.output, true);
          if (d.output) targets_.push_back(d.row);
        }
      }
      if (batch_.n_tokens > 0) decode(logits);
    } catch (...) {
      undo();
      throw;
    }
  }

  //! Removes the last n positions of s (a tree not yet committed counts as its nodes: n must then
  //! cover the whole tree, which is dropped). \throws specdec::error when n exceeds its length or
  //! ends inside an uncommitted tree; specdec::engine_error when the model's memory cannot drop a
  //! suffix (a recurrent model).
  void rollback(sequence_id s, std::size_t n) {
    SPECDEC_EXPECTS(n <= length(s), "specdec::llama_cpp::sequence_model::rollback: past the start of the sequence");
    if (n == 0) return;
    slot& sl = live_.at(s);
    if (!sl.tree.paths.empty()) {
      const std::size_t nodes = sl.length - sl.tree.base;
      SPECDEC_EXPECTS(n >= nodes,
                      "specdec::llama_cpp::sequence_model::rollback: a tree is dropped whole or kept with commit_tree");
      free_tree(sl);
      sl.length = sl.tree.base;
      stats_.rolled_back += nodes;
      n -= nodes;
      if (n == 0) return;
    }
    if (!llama_memory_seq_rm(ctx_->memory(), sl.id, static_cast<llama_pos>(sl.length - n), -1))
      throw engine_error("specdec::llama_cpp::sequence_model::rollback: this model's memory cannot remove a suffix");
    sl.length -= n;
    sl.forget_stale_hidden();
    stats_.rolled_back += n;
  }

  //! `TreeSequenceModel::commit_tree`: of the last `count` tokens of s (nodes of its last tree-shaped
  //! append), keeps those at the offsets `keep`, which must be a root-to-node path below the append's
  //! chain of leading tokens (what the step decoder commits: its pending tokens, then a tree). The
  //! kept nodes' cells go to s, every path id of the tree is freed (so the other nodes' cells are).
  //! \throws specdec::error when s has no uncommitted tree, `count` is not the number of tree
  //! nodes after that chain, or `keep` is not such a path (nothing changes then).
  void commit_tree(sequence_id s, std::size_t count, std::span<const std::int32_t> keep) {
    const auto it = live_.find(s);
    SPECDEC_EXPECTS(it != live_.end() && !it->second.tree.paths.empty(),
                    "specdec::llama_cpp::sequence_model::commit_tree: the sequence has no uncommitted tree");
    slot& sl = it->second;
    tree_state& t = sl.tree;
    SPECDEC_EXPECTS(detail::is_trunk_and_path(t.parents, count, keep),
                    "specdec::llama_cpp::sequence_model::commit_tree: the kept offsets are not a root-to-node path below "
                    "the append's leading chain");
    const std::size_t nodes = t.parents.size();
    const std::size_t kept = nodes - count + keep.size();
    // Every path through the last kept node (any path when nothing of the tree is kept below the
    // chain) holds the kept nodes at positions [base, base + kept): share those cells with s.
    const std::size_t last =
        keep.empty() ? (nodes - count == 0 ? 0 : nodes - count - 1) : nodes - count + static_cast<std::size_t>(keep.back());
    if (kept > 0) {
      const llama_seq_id path = t.paths[t.shape.paths_of(last).front()];
      llama_memory_seq_cp(ctx_->memory(), path, sl.id, static_cast<llama_pos>(t.base), static_cast<llama_pos>(t.base + kept));
    }
    free_tree(sl);
    stats_.rolled_back += nodes - kept;
    sl.length = t.base + kept;
  }

  //! Frees s's KV cache and its sequence id (a later append starts it again from length 0).
  void release(sequence_id s) {
    const auto it = live_.find(s);
    if (it == live_.end()) return;
    free_tree(it->second);
    llama_memory_seq_rm(ctx_->memory(), it->second.id, -1, -1);
    free_slots_.push_back(it->second.id);
    live_.erase(it);
  }

  //! Whether tree-shaped appends are taken (the context was made with `context_options::tree_paths` > 0).
  bool takes_tree_appends() const noexcept { return ctx_->tree_paths() > 0; }
  //! The path ids free for trees (`context_options::tree_paths` when no tree is uncommitted).
  std::size_t free_tree_paths() const noexcept { return free_paths_.size(); }

 private:
  // A tree-shaped append not yet committed: its nodes live in the cells of its path ids only.
  struct tree_state {
    std::size_t base = 0;               // the sequence's length before the tree
    std::vector<std::int32_t> parents;  // the append's parents
    detail::tree_paths shape;           // depths and paths of the nodes
    std::vector<llama_seq_id> paths;    // the llama.cpp id of each path (empty: no tree)
  };
  struct slot {
    llama_seq_id id = 0;
    std::size_t length = 0;  // positions in the KV cache (with an uncommitted tree's nodes)
    std::size_t before = 0;  // length before the current forward (to undo a failed one)
    tree_state tree;
    std::vector<float> hidden;  // the hidden state at position hidden_at - 1 (hidden_states contexts)
    std::size_t hidden_at = 0;  // the length when `hidden` was output (0: none)

    // Forgets a hidden state output past the end (a rollback or an undone forward removed its
    // position), so that a tree committed back to that length cannot revive it.
    void forget_stale_hidden() noexcept {
      if (hidden_at > length) hidden_at = 0;
    }
  };

  // Takes path ids for a tree and shares the state's cells with each (cells of one stream are shared).
  void begin_tree(const sequence_append& a, slot& s) {
    tree_state& t = s.tree;
    t.base = s.length;
    t.parents.assign(a.parents.begin(), a.parents.end());
    t.shape.assign(t.parents);
    t.paths.clear();
    for (std::size_t k = 0; k < t.shape.count(); ++k) {
      t.paths.push_back(free_paths_.back());
      free_paths_.pop_back();
      llama_memory_seq_cp(ctx_->memory(), s.id, t.paths.back(), -1, -1);
    }
  }

  // Removes every path id of s's tree from the cache and gives them back.
  void free_tree(slot& s) noexcept {
    for (const llama_seq_id id : s.tree.paths) {
      llama_memory_seq_rm(ctx_->memory(), id, -1, -1);
      free_paths_.push_back(id);
    }
    s.tree.paths.clear();
  }

  // Takes a slot for every new sequence and checks every sequence's room before anything is decoded.
  void prepare(std::span<const sequence_append> appends) {
    std::unordered_map<sequence_id, std::size_t> grow;
    for (const auto& a : appends) grow[a.sequence] += a.tokens.size();
    std::size_t fresh = 0;
    for (const auto& [s, n] : grow) {
      if (!live_.contains(s)) ++fresh;
      if (length(s) + n > ctx_->context_per_sequence())
        throw engine_error("specdec::llama_cpp::sequence_model: sequence " + std::to_string(s) + " would hold " +
                           std::to_string(length(s) + n) + " positions, more than the context's " +
                           std::to_string(ctx_->context_per_sequence()) + " per sequence");
    }
    if (fresh > free_slots_.size())
      throw engine_error("specdec::llama_cpp::sequence_model: more live sequences than the context's " +
                         std::to_string(ctx_->max_sequences()));
    std::size_t paths = 0;
    for (const auto& a : appends) {
      if (a.parents.empty()) continue;
      SPECDEC_EXPECTS(grow[a.sequence] == a.tokens.size(),
                      "specdec::llama_cpp::sequence_model: a tree-shaped append is its sequence's only append of a forward");
      tree_shape_.assign(a.parents);
      paths += tree_shape_.count();
    }
    if (paths > free_paths_.size())
      throw engine_error("specdec::llama_cpp::sequence_model: the trees of this forward have " + std::to_string(paths) +
                         " root-to-leaf paths, more than the " + std::to_string(free_paths_.size()) +
                         " free path ids of the context (context_options::tree_paths = " + std::to_string(ctx_->tree_paths()) +
                         ")");
    for (const auto& [s, n] : grow) {
      if (!live_.contains(s)) {
        slot fresh;
        fresh.id = free_slots_.back();
        live_[s] = std::move(fresh);
        free_slots_.pop_back();
      }
      live_[s].before = live_[s].length;
    }
    touched_.clear();
    for (const auto& [s, n] : grow) touched_.push_back(s);
  }

  // A chain token of s; `hidden`: its hidden state is kept as s's (a sequence's last token of a forward
  // on a hidden-state context, decoded with embeddings on).
  void add(token_id t, slot& s, bool output, bool hidden) {
    const auto i = static_cast<std::size_t>(batch_.n_tokens++);
    batch_.token[i] = t;
    batch_.pos[i] = static_cast<llama_pos>(s.length++);
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = s.id;
    mark(i, output);
    if (hidden) hidden_of_[i] = &s;
  }

  // Whether token i's row goes to the caller. While embeddings are on llama.cpp outputs every token:
  // every one is marked then, and `wanted_` says which rows are the caller's.
  void mark(std::size_t i, bool output) {
    wanted_[i] = output;
    hidden_of_[i] = nullptr;
    batch_.logits[i] = output || embeddings_on_ ? 1 : 0;
  }

  // Turns llama.cpp's embeddings output on or off (hidden-state contexts) for the next decodes.
  void set_embeddings(bool on) {
    if (on == embeddings_on_) return;
    llama_set_embeddings(ctx_->get(), on);
    embeddings_on_ = on;
  }

  // Node i of s's tree: at the state's length plus its depth, in every path through it (any of them
  // gives its attention, tree_paths.hpp).
  void add_node(token_id t, const slot& s, std::size_t i, bool output) {
    const auto k = static_cast<std::size_t>(batch_.n_tokens++);
    const auto paths = s.tree.shape.paths_of(i);
    batch_.token[k] = t;
    batch_.pos[k] = static_cast<llama_pos>(s.tree.base + s.tree.shape.depth(i));
    batch_.n_seq_id[k] = static_cast<std::int32_t>(paths.size());
    for (std::size_t j = 0; j < paths.size(); ++j) batch_.seq_id[k][j] = s.tree.paths[paths[j]];
    mark(k, output);
  }

  // Decodes the pending batch and copies its output rows to their places in `logits`.
  void decode(std::span<float> logits) {
    const std::int32_t status = llama_decode(ctx_->get(), batch_);
    ++engine_stats_.decode_calls;
    if (status != 0)
      throw engine_error("specdec::llama_cpp::sequence_model: llama_decode failed (status " + std::to_string(status) +
                         (status == 1 ? ": no room in the KV cache)" : ")"));
    // A slot's hidden state is copied from its one deferred token (the forward's second decode): one
    // copy per sequence and forward. It is copied now, not when asked, because the next llama_decode
    // on the context (another sequence's forward) replaces llama.cpp's buffer, while
    // `hidden_state(s)` stays valid until s itself changes.
    std::size_t k = 0;
    for (std::int32_t i = 0; i < batch_.n_tokens; ++i) {
      const auto u = static_cast<std::size_t>(i);
      if (slot* owner = hidden_of_[u]; owner != nullptr) {
        const float* h = llama_get_embeddings_ith(ctx_->get(), i);
        if (h == nullptr) throw engine_error("specdec::llama_cpp::sequence_model: llama.cpp returned no hidden state");
        owner->hidden.assign(h, h + ctx_->hidden_size());
        owner->hidden_at = static_cast<std::size_t>(batch_.pos[i]) + 1;
      }
      if (!wanted_[u]) continue;
      const float* row = llama_get_logits_ith(ctx_->get(), i);
      if (row == nullptr)
        throw engine_error("specdec::llama_cpp::sequence_model: llama.cpp returned no logits for a requested row");
      std::copy_n(row, vocab_, logits.begin() + static_cast<std::ptrdiff_t>(targets_[done_ + k] * vocab_));
      ++k;
    }
    done_ += k;
    batch_.n_tokens = 0;
  }

  // After a failure: every touched sequence back to its length before the call (new ones released).
  void undo() noexcept {
    batch_.n_tokens = 0;
    done_ = 0;
    for (const sequence_id s : touched_) {
      const auto it = live_.find(s);
      if (it == live_.end()) continue;
      free_tree(it->second);
      llama_memory_seq_rm(ctx_->memory(), it->second.id, static_cast<llama_pos>(it->second.before), -1);
      it->second.length = it->second.before;
      it->second.forget_stale_hidden();
      if (it->second.length == 0) {
        free_slots_.push_back(it->second.id);
        live_.erase(it);
      }
    }
  }

  context* ctx_;
  std::size_t vocab_;
  llama_batch batch_{};
  std::unordered_map<sequence_id, slot> live_;
  std::vector<llama_seq_id> free_slots_;
  std::vector<llama_seq_id> free_paths_;  // llama.cpp ids for tree paths
  detail::tree_paths tree_shape_;         // scratch: a tree's paths while checking a forward
  std::vector<std::size_t> targets_;      // the logits row of each requested output, in batch order
  std::vector<sequence_id> touched_;
  std::vector<char> wanted_;      // per batch token: whether its row goes to the caller
  std::vector<slot*> hidden_of_;  // per batch token: the slot whose hidden state it ends (chains, hidden-state contexts)
  std::size_t done_ = 0;          // outputs of this forward copied so far
  // A sequence's last chain token of a forward on a hidden-state context, decoded after the others.
  struct deferred_token {
    token_id token;
    slot* owner;
    bool output;      // whether its row is asked for
    std::size_t row;  // its row in the caller's logits (when asked for)
  };
  std::vector<deferred_token> deferred_;
  std::unordered_map<sequence_id, std::size_t> last_chain_append_;  // per sequence: its last chain append's index
  bool embeddings_on_ = false;                                      // llama.cpp's embeddings flag (hidden-state contexts)
  sequence_model_stats stats_;
  llama_calls engine_stats_;
};

static_assert(TreeSequenceModel<sequence_model>);

}  // namespace specdec::llama_cpp
