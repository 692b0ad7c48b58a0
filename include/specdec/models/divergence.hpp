//! \file models/divergence.hpp
//! \brief Target/draft pairs with controlled divergence: wrappers that perturb any `Model`.
//!
//! - `mixed_with_uniform(model, e)`: q = (1 - e) p + e u, with u uniform; TV(p, q) = e TV(p, u) exactly,
//!   so the acceptance rate of standard speculative sampling, 1 - TV(p, q) (Leviathan et al. 2023,
//!   seed 004, section 3.4), is known in closed form;
//! - `tempered(model, T)`: q = softmax(log p / T) (temperature change);
//! - `sparsified(model, k)`: q = p restricted to its k most likely tokens, renormalised (sparsity change);
//! - `make_markov_pair(V, order, seed, e)`: a random `markov_model` target and its `(1 - e) p + e u` draft
//!   as two tables, so both are exact reference models.
//!
//! Each wrapper is a `Model`, and a `ProbabilityModel` when the wrapped model is one. Its logits are the
//! float logarithms of its double probabilities, so the two interfaces agree. The wrapped model is held as
//! in model/adapters.hpp: a factory given an lvalue refers to it (it must outlive the wrapper), given an
//! rvalue it moves it in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/models/markov.hpp"

namespace specdec {
namespace detail {

//! Writes the log-probabilities of `model` after `context` in double: `log(next_probs)` for a
//! `ProbabilityModel` (`-inf` for zeros), the logits as they are otherwise (log-probabilities up to a
//! constant). \throws specdec::error when a logit is NaN or `+inf`.
template <class M>
void next_log_weights(const M& model, std::span<const token_id> context, std::span<double> out) {
  if constexpr (ProbabilityModel<M>) {
    model.next_probs(context, out);
    for (double& x : out) x = x > 0.0 ? std::log(x) : -std::numeric_limits<double>::infinity();
  } else {
    std::vector<float> logits(out.size());
    model.next_logits(context, std::span<float>(logits));
    for (std::size_t i = 0; i < logits.size(); ++i) {
      SPECDEC_EXPECTS(!std::isnan(logits[i]) && logits[i] != std::numeric_limits<float>::infinity(), "a logit is NaN or +inf");
      out[i] = static_cast<double>(logits[i]);
    }
  }
}

//! Turns log-weights into probabilities in place (stable softmax in double).
//! \throws specdec::error when every weight is `-inf`.
inline void softmax_in_place(std::span<double> x) {
  const double max = *std::max_element(x.begin(), x.end());
  SPECDEC_EXPECTS(max > -std::numeric_limits<double>::infinity(), "every logit is -inf: the row has no mass");
  double sum = 0.0;
  for (double& v : x) {
    v = std::exp(v - max);
    sum += v;
  }
  for (double& v : x) v /= sum;
}

}  // namespace detail

//! q = (1 - e) p + e / V: the wrapped model's distribution mixed with the uniform one. Built by
//! `mixed_with_uniform`. Exactly, `TV(p, q) = e * TV(p, u)` and `q(x) >= e / V > 0` for e > 0.
//! \tparam M a `Model`, or `const T&` to refer to one.
template <class M>
  requires Model<std::remove_cvref_t<M>>
class uniform_mixture_model {
 public:
  //! The wrapped model's type.
  using inner_type = std::remove_cvref_t<M>;
  //! Mixes `model` with the uniform distribution with weight `e`.
  //! \pre `0 <= e <= 1`. \throws specdec::error otherwise.
  uniform_mixture_model(M model, double e) : inner_(std::forward<M>(model)), e_(e) {
    SPECDEC_EXPECTS(e >= 0.0 && e <= 1.0, "the mixing weight e must be in [0, 1]");
  }
  //! The number of tokens.
  std::size_t vocab_size() const { return static_cast<std::size_t>(inner_.vocab_size()); }
  //! The weight e of the uniform distribution.
  double epsilon() const noexcept { return e_; }
  //! The wrapped model.
  const inner_type& inner() const noexcept { return inner_; }
  //! Writes `log q` as float (`-inf` where q = 0, which needs e = 0).
  //! \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_size(), "logits must hold vocab_size() values");
    std::vector<double> q(logits.size());
    mix(context, q);
    detail::probs_to_logits(q, logits);
  }
  //! Writes q exactly as `(1 - e) p + e / V` in double. \pre `probs.size() == vocab_size()`.
  //! \throws specdec::error otherwise.
  void next_probs(std::span<const token_id> context, std::span<double> probs) const requires ProbabilityModel<inner_type> {
    SPECDEC_EXPECTS(probs.size() == vocab_size(), "probs must hold vocab_size() values");
    mix(context, probs);
  }

 private:
  void mix(std::span<const token_id> context, std::span<double> q) const {
    specdec::next_probs(inner_, context, q);
    const double u = 1.0 / static_cast<double>(q.size());
    for (double& x : q) x = (1.0 - e_) * x + e_ * u;
  }
  M inner_;
  double e_;
};

//! Makes `uniform_mixture_model`: q = (1 - e) p + e u. An lvalue `model` is referred to, an rvalue moved in.
//! \pre `0 <= e <= 1`. \throws specdec::error otherwise.
// clang-format off
template <class M>
  requires Model<std::remove_cvref_t<M>>
uniform_mixture_model<detail::stored_model_t<M&&>> mixed_with_uniform(M&& model, double e) {
  return uniform_mixture_model<detail::stored_model_t<M&&>>(std::forward<M>(model), e);
}
// clang-format on

//! q = softmax(log p / T): the wrapped model at temperature T (T < 1 sharpens, T > 1 flattens; zeros stay
//! zeros). Built by `tempered`.
//! \tparam M a `Model`, or `const T&` to refer to one.
template <class M>
  requires Model<std::remove_cvref_t<M>>
class tempered_model {
 public:
  //! The wrapped model's type.
  using inner_type = std::remove_cvref_t<M>;
  //! Tempers `model` with temperature `temperature`.
  //! \pre `temperature` finite and > 0. \throws specdec::error otherwise.
  tempered_model(M model, double temperature) : inner_(std::forward<M>(model)), t_(temperature) {
    SPECDEC_EXPECTS(std::isfinite(temperature) && temperature > 0.0, "the temperature must be finite and > 0");
  }
  //! The number of tokens.
  std::size_t vocab_size() const { return static_cast<std::size_t>(inner_.vocab_size()); }
  //! The temperature T.
  double temperature() const noexcept { return t_; }
  //! The wrapped model.
  const inner_type& inner() const noexcept { return inner_; }
  //! Writes `log q` as float. \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_size(), "logits must hold vocab_size() values");
    std::vector<double> q(logits.size());
    temper(context, q);
    detail::probs_to_logits(q, logits);
  }
  //! Writes q in double. \pre `probs.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_probs(std::span<const token_id> context, std::span<double> probs) const requires ProbabilityModel<inner_type> {
    SPECDEC_EXPECTS(probs.size() == vocab_size(), "probs must hold vocab_size() values");
    temper(context, probs);
  }

 private:
  void temper(std::span<const token_id> context, std::span<double> q) const {
    detail::next_log_weights(inner_, context, q);
    for (double& x : q) x /= t_;  // -inf / T stays -inf
    detail::softmax_in_place(q);
  }
  M inner_;
  double t_;
};

//! Makes `tempered_model`: q = softmax(log p / T). An lvalue `model` is referred to, an rvalue moved in.
//! \pre `temperature` finite and > 0. \throws specdec::error otherwise.
// clang-format off
template <class M>
  requires Model<std::remove_cvref_t<M>>
tempered_model<detail::stored_model_t<M&&>> tempered(M&& model, double temperature) {
  return tempered_model<detail::stored_model_t<M&&>>(std::forward<M>(model), temperature);
}
// clang-format on

//! q = p restricted to its k most likely tokens and renormalised (top-k sparsification); ties at the k-th
//! place go to the smaller token id. With k >= V, q = p. Built by `sparsified`.
//! \tparam M a `Model`, or `const T&` to refer to one.
template <class M>
  requires Model<std::remove_cvref_t<M>>
class sparsified_model {
 public:
  //! The wrapped model's type.
  using inner_type = std::remove_cvref_t<M>;
  //! Keeps the top `k` tokens of `model`. \pre `k >= 1`. \throws specdec::error otherwise.
  sparsified_model(M model, std::size_t k) : inner_(std::forward<M>(model)), k_(k) {
    SPECDEC_EXPECTS(k >= 1, "k must be at least 1");
  }
  //! The number of tokens.
  std::size_t vocab_size() const { return static_cast<std::size_t>(inner_.vocab_size()); }
  //! How many tokens are kept.
  std::size_t k() const noexcept { return k_; }
  //! The wrapped model.
  const inner_type& inner() const noexcept { return inner_; }
  //! Writes `log q` as float (`-inf` outside the top k). \pre `logits.size() == vocab_size()`.
  //! \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_size(), "logits must hold vocab_size() values");
    std::vector<double> q(logits.size());
    sparsify(context, q);
    detail::probs_to_logits(q, logits);
  }
  //! Writes q in double. \pre `probs.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_probs(std::span<const token_id> context, std::span<double> probs) const requires ProbabilityModel<inner_type> {
    SPECDEC_EXPECTS(probs.size() == vocab_size(), "probs must hold vocab_size() values");
    sparsify(context, probs);
  }

 private:
  void sparsify(std::span<const token_id> context, std::span<double> q) const {
    specdec::next_probs(inner_, context, q);
    if (k_ >= q.size()) return;
    std::vector<std::size_t> order(q.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_ - 1), order.end(),
                     [&](std::size_t a, std::size_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); });
    std::vector<bool> keep(q.size(), false);
    for (std::size_t i = 0; i < k_; ++i) keep[order[i]] = true;
    double sum = 0.0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (!keep[i]) q[i] = 0.0;
      sum += q[i];
    }
    for (double& x : q) x /= sum;  // sum > 0: the most likely token is kept
  }
  M inner_;
  std::size_t k_;
};

//! Makes `sparsified_model`: p restricted to its top k tokens. An lvalue `model` is referred to, an rvalue
//! moved in. \pre `k >= 1`. \throws specdec::error otherwise.
// clang-format off
template <class M>
  requires Model<std::remove_cvref_t<M>>
sparsified_model<detail::stored_model_t<M&&>> sparsified(M&& model, std::size_t k) {
  return sparsified_model<detail::stored_model_t<M&&>>(std::forward<M>(model), k);
}
// clang-format on

//! A target and a draft `markov_model` over the same vocabulary.
struct markov_pair {
  markov_model target;  //!< p
  markov_model draft;   //!< q
};

//! A random target `random_markov_model(V, order, seed, concentration, zero_fraction)` and a draft whose
//! every table row is `(1 - e) p + e / V` (computed entry by entry in double). So for every context
//! `TV(p, q) = e * TV(p, u)` (up to rounding), and the acceptance rate of standard speculative sampling
//! `1 - TV(p, q)` is known exactly.
//! \pre `0 <= e <= 1` and the preconditions of `random_markov_model`. \throws specdec::error otherwise.
inline markov_pair make_markov_pair(std::size_t vocab_size, std::size_t order, std::uint64_t seed, double e,
                                    double concentration = 1.0, double zero_fraction = 0.0) {
  SPECDEC_EXPECTS(e >= 0.0 && e <= 1.0, "the mixing weight e must be in [0, 1]");
  markov_model target = random_markov_model(vocab_size, order, seed, concentration, zero_fraction);
  std::vector<double> table(target.table().begin(), target.table().end());
  const double u = 1.0 / static_cast<double>(vocab_size);
  for (double& x : table) x = (1.0 - e) * x + e * u;
  markov_model draft(vocab_size, order, std::move(table));
  return markov_pair{std::move(target), std::move(draft)};
}

}  // namespace specdec
