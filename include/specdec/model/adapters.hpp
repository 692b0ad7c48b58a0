//! \file model/adapters.hpp
//! \brief Adapters that make models out of callables, and a stateful model out of any `Model`.
//!
//! - `make_model(V, f)`: a `Model` whose `next_logits` calls `f(context, logits)`;
//! - `make_parallel_model(V, f_next, f_score)`: a `ParallelScoringModel`;
//! - `stateful_adapter<M>` / `make_stateful(m)`: a `StatefulModel` (and a `Model`) that keeps the token
//!   vector itself; rollback just shortens it. This is how a loop written for KV-cache engines runs on
//!   a stateless reference model.
//!
//! Storage rule for wrappers (shared with models/divergence.hpp, modelled on `std::views::all`): a factory
//! given an lvalue stores a `const&` to it (the caller keeps it alive); given an rvalue it moves it in.
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/concepts.hpp"

namespace specdec {
namespace detail {

//! How a wrapper stores the model it was given as `Arg&&`: `const T&` for an lvalue, `T` for an rvalue.
template <class Arg>
using stored_model_t =
    std::conditional_t<std::is_lvalue_reference_v<Arg>, const std::remove_cvref_t<Arg>&, std::remove_cvref_t<Arg>>;

//! Checks every id of `tokens` against the vocabulary. \throws specdec::error when one is outside it.
inline void expect_in_vocabulary([[maybe_unused]] std::span<const token_id> tokens, [[maybe_unused]] std::size_t vocab_size) {
  for ([[maybe_unused]] token_id t : tokens)
    SPECDEC_EXPECTS(in_vocabulary(t, vocab_size), "a token id is outside the vocabulary");
}

}  // namespace detail

//! A `Model` made from a callable: `next_logits(context, logits)` checks the size of `logits` and calls
//! `f(context, logits)`. Built by `make_model`.
//! \tparam F a callable invocable as `const F&` with `(std::span<const token_id>, std::span<float>)`.
template <class F>
class function_model {
 public:
  //! Wraps `f` as a model over `vocab_size` tokens. \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  function_model(std::size_t vocab_size, F f) : vocab_(vocab_size), f_(std::move(f)) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Calls `f(context, logits)`. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise,
  //! and whatever `f` throws.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::invoke(f_, context, logits);
  }

 private:
  std::size_t vocab_;
  F f_;
};

//! Makes a `Model` over `vocab_size` tokens whose next-token logits are written by
//! `f(std::span<const token_id> context, std::span<float> logits)`.
//! \pre `vocab_size >= 1`; `f` is callable on a const object (a lambda without `mutable`).
//! \throws specdec::error when `vocab_size == 0`.
template <class F>
function_model<F> make_model(std::size_t vocab_size, F f) {
  static_assert(std::is_invocable_v<const F&, std::span<const token_id>, std::span<float>>,
                "specdec::make_model: f must be callable as f(std::span<const token_id>, std::span<float>) on a "
                "const object");
  return function_model<F>(vocab_size, std::move(f));
}

//! A `ParallelScoringModel` made from two callables; built by `make_parallel_model`.
//! \tparam FNext invocable as `const FNext&` with `(std::span<const token_id>, std::span<float>)`.
//! \tparam FScore invocable as `const FScore&` with
//!         `(std::span<const token_id>, std::span<const token_id>, std::span<float>)`.
template <class FNext, class FScore>
class function_parallel_model {
 public:
  //! Wraps the callables as a model over `vocab_size` tokens.
  //! \pre `vocab_size >= 1`. \throws specdec::error otherwise.
  function_parallel_model(std::size_t vocab_size, FNext f_next, FScore f_score)
      : vocab_(vocab_size), next_(std::move(f_next)), score_(std::move(f_score)) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
  }
  //! The number of tokens.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! Calls `f_next(context, logits)`. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    std::invoke(next_, context, logits);
  }
  //! Calls `f_score(context, continuation, rows)`.
  //! \pre `rows.size() == (continuation.size() + 1) * vocab_size()`. \throws specdec::error otherwise.
  void score(std::span<const token_id> context, std::span<const token_id> continuation, std::span<float> rows) const {
    SPECDEC_EXPECTS(rows.size() == (continuation.size() + 1) * vocab_,
                    "rows must hold (continuation.size() + 1) * vocab_size() values");
    std::invoke(score_, context, continuation, rows);
  }

 private:
  std::size_t vocab_;
  FNext next_;
  FScore score_;
};

//! Makes a `ParallelScoringModel` over `vocab_size` tokens from `f_next(context, logits)` and
//! `f_score(context, continuation, rows)` (see the `ParallelScoringModel` contract for the row layout).
//! The two callables must agree: row `i` of `f_score` equals `f_next` on `context + continuation[0..i)`.
//! \pre `vocab_size >= 1`. \throws specdec::error otherwise.
template <class FNext, class FScore>
function_parallel_model<FNext, FScore> make_parallel_model(std::size_t vocab_size, FNext f_next, FScore f_score) {
  static_assert(std::is_invocable_v<const FNext&, std::span<const token_id>, std::span<float>>,
                "specdec::make_parallel_model: f_next must be callable as f_next(std::span<const token_id>, "
                "std::span<float>) on a const object");
  static_assert(std::is_invocable_v<const FScore&, std::span<const token_id>, std::span<const token_id>, std::span<float>>,
                "specdec::make_parallel_model: f_score must be callable as f_score(std::span<const token_id>, "
                "std::span<const token_id>, std::span<float>) on a const object");
  return function_parallel_model<FNext, FScore>(vocab_size, std::move(f_next), std::move(f_score));
}

//! Turns any `Model` into a `StatefulModel` by keeping the token sequence itself: `append` copies the
//! tokens, `rollback(n)` pops `n` of them, and `next_logits(logits)` calls the wrapped model on the whole
//! sequence. It is also a `Model` (`next_logits(context, logits)` forwards, ignoring the state).
//! \tparam M a `Model` type, or `const T&` to refer to a model owned elsewhere (see `make_stateful`).
template <class M>
  requires Model<std::remove_cvref_t<M>>
class stateful_adapter {
 public:
  //! Wraps `model` with the state `prefix`. \pre every id of `prefix` is in the vocabulary.
  //! \throws specdec::error otherwise.
  explicit stateful_adapter(M model, std::span<const token_id> prefix = {}) : model_(std::forward<M>(model)) { reset(prefix); }
  //! The number of tokens.
  std::size_t vocab_size() const { return static_cast<std::size_t>(model_.vocab_size()); }
  //! Makes `tokens` the whole state. \pre every id is in the vocabulary. \throws specdec::error otherwise.
  void reset(std::span<const token_id> tokens) {
    detail::expect_in_vocabulary(tokens, vocab_size());
    tokens_.assign(tokens.begin(), tokens.end());
  }
  //! Appends `tokens` to the state. \pre every id is in the vocabulary. \throws specdec::error otherwise.
  void append(std::span<const token_id> tokens) {
    detail::expect_in_vocabulary(tokens, vocab_size());
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  }
  //! Removes the last `n` tokens. \pre `n <= length()`. \throws specdec::error otherwise.
  void rollback(std::size_t n) {
    SPECDEC_EXPECTS(n <= tokens_.size(), "cannot roll back more tokens than the state holds");
    tokens_.resize(tokens_.size() - n);
  }
  //! The number of tokens in the state.
  std::size_t length() const noexcept { return tokens_.size(); }
  //! The state, oldest token first.
  std::span<const token_id> tokens() const noexcept { return tokens_; }
  //! The wrapped model.
  const std::remove_cvref_t<M>& model() const noexcept { return model_; }
  //! Next-token logits after the current state. \pre `logits.size() == vocab_size()`.
  //! \throws specdec::error otherwise (and whatever the model throws).
  void next_logits(std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_size(), "logits must hold vocab_size() values");
    model_.next_logits(std::span<const token_id>(tokens_), logits);
  }
  //! Next-token logits after `context`, ignoring the state (so the adapter is also a `Model`).
  //! \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_size(), "logits must hold vocab_size() values");
    model_.next_logits(context, logits);
  }

 private:
  M model_;
  std::vector<token_id> tokens_;
};

//! Deduces `stateful_adapter<T>` (a copy) from a model passed by value.
template <class M>
stateful_adapter(M, std::span<const token_id>) -> stateful_adapter<M>;
//! Deduces `stateful_adapter<T>` (a copy) from a model passed by value.
template <class M>
stateful_adapter(M) -> stateful_adapter<M>;

//! Makes a `stateful_adapter` over `model` with the state `prefix`. An lvalue model is referred to (it must
//! outlive the adapter); an rvalue is moved in.
//! \pre every id of `prefix` is in the vocabulary. \throws specdec::error otherwise.
// clang-format off
template <class M>
  requires Model<std::remove_cvref_t<M>>
stateful_adapter<detail::stored_model_t<M&&>> make_stateful(M&& model, std::span<const token_id> prefix = {}) {
  return stateful_adapter<detail::stored_model_t<M&&>>(std::forward<M>(model), prefix);
}
// clang-format on

}  // namespace specdec
