//! \file model/gathered_sequence_model.hpp
//! \brief `gathered_sequence_model`: one `SequenceModel` shared by the drafter stages of a batch, their
//! forwards merged into one forward of the wrapped model.
//!
//! Drafter stages are written against one request (tree drafters and MTAD's beams over
//! `prefix_cached_model` lanes, draft/tree.hpp, draft/beam.hpp): each makes one draft forward per tree
//! level or beam step, so B requests cost B small forwards per level. `run(calls)`, set as the step
//! decoder's stage runner (`batch_decoder::set_stage_runner`), runs every request's stage call on a
//! thread of its own; whenever every unfinished call is waiting in `forward`, their appends go to the
//! wrapped model as one forward (a round) and each call gets its own rows back. A step then costs as
//! many draft forwards as its deepest request has levels, each carrying every request's positions
//! (on llama.cpp: one `llama_decode` per level for the whole batch instead of one per request).
//!
//! Outside `run`, and on the thread that called it, `forward` calls the wrapped model directly. The
//! wrapped model is called by one thread at a time (`rollback`, `release` and `length` under a lock,
//! merged forwards while every call waits), so an engine that is not thread-safe, such as a llama.cpp
//! context, may be wrapped. The sequences of concurrent calls must be distinct (each request's
//! `prefix_cached_model` with its own `first_id`). A call's rows are what the merged forward computes
//! for its appends: the same as its own forward would give for a model whose rows do not depend on the
//! batch (the reference models); an engine whose arithmetic depends on the batch composition
//! (llama.cpp's, in the last bits) may differ as much as it does between batch sizes.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec {

//! What a `gathered_sequence_model` did.
struct gather_stats {
  std::size_t runs = 0;          //!< `run` calls
  std::size_t rounds = 0;        //!< merged forwards of the wrapped model (one per round)
  std::size_t merged_calls = 0;  //!< `forward` calls served by those rounds
  std::size_t direct_calls = 0;  //!< `forward` calls outside `run` (passed straight through)
};

//! A `SequenceModel` whose forwards from concurrent stage calls are merged (see the file comment).
template <SequenceModel M>
class gathered_sequence_model {
 public:
  //! Wraps `model`, which must outlive the adapter.
  explicit gathered_sequence_model(M& model) : model_(&model) {}
  gathered_sequence_model(const gathered_sequence_model&) = delete;
  gathered_sequence_model& operator=(const gathered_sequence_model&) = delete;

  //! V, the wrapped model's vocabulary size.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! The wrapped model's length of sequence s.
  std::size_t length(sequence_id s) const {
    const std::lock_guard lock(mutex_);
    return model_->length(s);
  }
  //! The wrapped model's rollback, under the lock.
  void rollback(sequence_id s, std::size_t n) {
    const std::lock_guard lock(mutex_);
    model_->rollback(s, n);
  }
  //! The wrapped model's release, under the lock.
  void release(sequence_id s) {
    const std::lock_guard lock(mutex_);
    model_->release(s);
  }
  //! The wrapped model's hidden-state width (a model with hidden states, such as a llama.cpp context
  //! made with them).
  std::size_t hidden_size() const requires requires(const M& m) { m.hidden_size(); }
  { return model_->hidden_size(); }
  //! The wrapped model's `hidden_state(s)`, looked up under the lock (so it may be read from a stage
  //! call while others run); valid until s changes, which only its own caller does.
  std::span<const float> hidden_state(sequence_id s) const requires requires(const M& m) { m.hidden_state(s); }
  {
    const std::lock_guard lock(mutex_);
    return model_->hidden_state(s);
  }
  //! What was merged so far.
  gather_stats stats() const {
    const std::lock_guard lock(mutex_);
    return stats_;
  }

  //! The wrapped model's forward of `appends`: from a call of `run`, in the next merged round (waiting
  //! for it); otherwise directly. \throws whatever the wrapped model throws for the round.
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    std::unique_lock lock(mutex_);
    if (!running_ || std::this_thread::get_id() == driver_) {
      ++stats_.direct_calls;
      model_->forward(appends, logits);
      return;
    }
    pending call{appends, logits, call_index()};
    waiting_.push_back(&call);
    changed_.notify_all();
    changed_.wait(lock, [&] { return call.done; });
    if (call.error) std::rethrow_exception(call.error);
  }

  //! Runs each of `calls` on a thread of its own and serves their forwards in merged rounds; returns
  //! when all have returned. A call should not throw (the step decoder's calls catch their stage's
  //! exceptions); if one does, the first such exception is rethrown here after all have finished.
  void run(std::span<const std::function<void()>> calls) {
    {
      const std::lock_guard lock(mutex_);
      running_ = true;
      driver_ = std::this_thread::get_id();
      unfinished_ = calls.size();
      ++stats_.runs;
    }
    std::exception_ptr first_error;
    {
      std::vector<std::jthread> threads;
      threads.reserve(calls.size());
      for (std::size_t k = 0; k < calls.size(); ++k) try {
          const std::function<void()>& call = calls[k];
          threads.emplace_back([this, &call, &first_error, k] {
            call_index() = k;
            std::exception_ptr error;
            try {
              call();
            } catch (...) {
              error = std::current_exception();
            }
            const std::lock_guard lock(mutex_);
            if (error && !first_error) first_error = error;
            --unfinished_;
            changed_.notify_all();
          });
        } catch (...) {  // no thread for the rest (std::system_error): the started ones still get served
          const std::lock_guard lock(mutex_);
          if (!first_error) first_error = std::current_exception();
          unfinished_ -= calls.size() - k;
          break;
        }
      std::unique_lock lock(mutex_);
      for (;;) {  // a round whenever every unfinished call waits in forward
        changed_.wait(lock, [&] { return waiting_.size() == unfinished_; });
        if (unfinished_ == 0) break;
        serve_round();
        changed_.notify_all();
      }
      running_ = false;
    }  // the threads have returned: joined here
    if (first_error) std::rethrow_exception(first_error);
  }

 private:
  struct pending {
    std::span<const sequence_append> appends;
    std::span<float> logits;
    std::size_t order = 0;  // the index of the call of `run` it came from
    std::exception_ptr error{};
    bool done = false;
  };

  // The index, among `run`'s calls, of the call this thread runs.
  static std::size_t& call_index() {
    thread_local std::size_t index = 0;
    return index;
  }

  // Every waiting call's appends as one forward (the lock held; every call waits); rows back to each.
  // The appends go in the order of the calls, not of their arrival, so a round's batch (and an
  // engine's arithmetic, where it depends on the batch) is the same in every run.
  void serve_round() {
    std::sort(waiting_.begin(), waiting_.end(), [](const pending* a, const pending* b) { return a->order < b->order; });
    const std::size_t V = model_->vocab_size();
    merged_.clear();
    sizes_.clear();
    for (const pending* p : waiting_) {
      merged_.insert(merged_.end(), p->appends.begin(), p->appends.end());
      std::size_t rows = 0;
      for (const sequence_append& a : p->appends) rows += a.rows;
      sizes_.push_back(rows * V);
    }
    std::size_t total = 0;
    for (const std::size_t n : sizes_) total += n;
    buffer_.resize(total);
    try {
      for (std::size_t k = 0; k < waiting_.size(); ++k)  // what each call's own forward would check
        SPECDEC_EXPECTS(waiting_[k]->logits.size() >= sizes_[k], "specdec::SequenceModel: logits must hold the requested rows");
      model_->forward(std::span<const sequence_append>(merged_), std::span<float>(buffer_));
      std::size_t at = 0;
      for (std::size_t k = 0; k < waiting_.size(); ++k) {
        std::copy_n(buffer_.begin() + static_cast<std::ptrdiff_t>(at), sizes_[k], waiting_[k]->logits.begin());
        at += sizes_[k];
      }
    } catch (...) {
      for (pending* p : waiting_) p->error = std::current_exception();
    }
    ++stats_.rounds;
    stats_.merged_calls += waiting_.size();
    for (pending* p : waiting_) p->done = true;
    waiting_.clear();
  }

  M* model_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a call waits, a call finished, or a round was served
  std::vector<pending*> waiting_;
  std::size_t unfinished_ = 0;
  bool running_ = false;
  std::thread::id driver_{};
  std::vector<sequence_append> merged_;
  std::vector<std::size_t> sizes_;  // each waiting call's rows times V
  std::vector<float> buffer_;
  gather_stats stats_;
};

}  // namespace specdec
