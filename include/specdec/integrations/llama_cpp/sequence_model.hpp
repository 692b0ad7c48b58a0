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
#include "specdec/model/sequence.hpp"

namespace specdec::llama_cpp {

//! What `forward` asked of llama.cpp (besides `sequence_model_stats`).
struct decode_stats {
  std::size_t decode_calls = 0;  //!< llama_decode calls (more than forwards when one exceeds the batch)
};

//! A llama.cpp context as a `specdec::SequenceModel` (see the file comment).
class sequence_model {
 public:
  //! Decodes on `ctx` (not owned; one sequence_model per context, used from one thread at a time).
  explicit sequence_model(context& ctx) : ctx_(&ctx), vocab_(ctx.owner().vocab_size()) {
    for (std::size_t slot = ctx.max_sequences(); slot-- > 0;) free_slots_.push_back(static_cast<llama_seq_id>(slot));
    batch_ = llama_batch_init(static_cast<std::int32_t>(ctx.batch()), 0, 1);
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
  //! The calls, appended positions, rows and rollbacks so far.
  const sequence_model_stats& stats() const noexcept { return stats_; }
  //! What was asked of llama.cpp so far (llama_decode calls).
  const llama_cpp::decode_stats& engine_stats() const noexcept { return engine_stats_; }

  //! \throws specdec::error on a broken precondition, or a tree-shaped append (nothing is decoded then);
  //!         specdec::engine_error when a sequence would exceed the context, more sequences are live
  //!         than the context holds, or llama_decode fails (the sequences are then as before the call).
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    specdec::detail::check_rows(appends, logits.size(), vocab_);
    for (const auto& a : appends) specdec::detail::check_append(a, length(a.sequence), vocab_);
    prepare(appends);
    ++stats_.calls;
    std::size_t row = 0;
    targets_.clear();
    done_ = 0;
    try {
      for (const auto& a : appends) {
        slot& s = live_.at(a.sequence);
        const std::size_t first_row = a.tokens.size() - a.rows;
        for (std::size_t i = 0; i < a.tokens.size(); ++i) {
          if (batch_.n_tokens == static_cast<std::int32_t>(ctx_->batch())) decode(logits);
          const bool output = i >= first_row;
          add(a.tokens[i], s, output);
          if (output) targets_.push_back(row++);
        }
        stats_.appended_positions += a.tokens.size();
        stats_.rows += a.rows;
      }
      if (batch_.n_tokens > 0) decode(logits);
    } catch (...) {
      undo();
      throw;
    }
  }

  //! Removes the last n positions of s. \throws specdec::error when n exceeds its length;
  //! specdec::engine_error when the model's memory cannot drop a suffix (a recurrent model).
  void rollback(sequence_id s, std::size_t n) {
    SPECDEC_EXPECTS(n <= length(s), "specdec::llama_cpp::sequence_model::rollback: past the start of the sequence");
    if (n == 0) return;
    slot& sl = live_.at(s);
    if (!llama_memory_seq_rm(ctx_->memory(), sl.id, static_cast<llama_pos>(sl.length - n), -1))
      throw engine_error("specdec::llama_cpp::sequence_model::rollback: this model's memory cannot remove a suffix");
    sl.length -= n;
    stats_.rolled_back += n;
  }

  //! Frees s's KV cache and its sequence id (a later append starts it again from length 0).
  void release(sequence_id s) {
    const auto it = live_.find(s);
    if (it == live_.end()) return;
    llama_memory_seq_rm(ctx_->memory(), it->second.id, -1, -1);
    free_slots_.push_back(it->second.id);
    live_.erase(it);
  }

 private:
  struct slot {
    llama_seq_id id = 0;
    std::size_t length = 0;  // positions in the KV cache
    std::size_t before = 0;  // length before the current forward (to undo a failed one)
  };

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
    for (const auto& [s, n] : grow) {
      if (!live_.contains(s)) {
        live_[s] = slot{free_slots_.back(), 0, 0};
        free_slots_.pop_back();
      }
      live_[s].before = live_[s].length;
    }
    touched_.clear();
    for (const auto& [s, n] : grow) touched_.push_back(s);
  }

  void add(token_id t, slot& s, bool output) {
    const auto i = static_cast<std::size_t>(batch_.n_tokens++);
    batch_.token[i] = t;
    batch_.pos[i] = static_cast<llama_pos>(s.length++);
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = s.id;
    batch_.logits[i] = output ? 1 : 0;
  }

  // Decodes the pending batch and copies its output rows to their places in `logits`.
  void decode(std::span<float> logits) {
    const std::int32_t status = llama_decode(ctx_->get(), batch_);
    ++engine_stats_.decode_calls;
    if (status != 0)
      throw engine_error("specdec::llama_cpp::sequence_model: llama_decode failed (status " + std::to_string(status) +
                         (status == 1 ? ": no room in the KV cache)" : ")"));
    std::size_t k = 0;
    for (std::int32_t i = 0; i < batch_.n_tokens; ++i) {
      if (!batch_.logits[i]) continue;
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
      llama_memory_seq_rm(ctx_->memory(), it->second.id, static_cast<llama_pos>(it->second.before), -1);
      it->second.length = it->second.before;
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
  std::vector<std::size_t> targets_;  // the logits row of each requested output, in batch order
  std::vector<sequence_id> touched_;
  std::size_t done_ = 0;  // outputs of this forward copied so far
  sequence_model_stats stats_;
  llama_cpp::decode_stats engine_stats_;
};

static_assert(SequenceModel<sequence_model>);

}  // namespace specdec::llama_cpp
