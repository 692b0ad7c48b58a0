//! \file draft/verifier.hpp
//! \brief SPRINTER's low-cost verifier (Zhong, Teku and Tandon, "Speeding up Speculative Decoding via
//! Sequential Approximate Verification", sections 3 and 3.2): a binary classifier V that maps features s(x, prefix) of a drafted token x to a score in
//! [0, 1]; V(s) >= tau means "x is acceptable, keep drafting" (Algorithm 2).
//!
//! Two concepts split the job:
//! - a `FeatureExtractor` computes s(x, prefix) from what the drafter knows (the prefix, x, the draft
//!   row q that x was sampled from, and a Philox stream for verifiers that need randomness);
//! - a `Verifier` maps those features to a score.
//!
//! Shipped here (core, standard library only):
//! - `draft_row_features`: the documented feature vector of a draft model without hidden states
//!   (the draft row's top probabilities, its entropy, the token's own q(x) and rank);
//! - `model_features<M>`: the draft model's own features after prefix + x, for a `FeatureModel`
//!   (the paper feeds the draft's last hidden state); `make_features(model)` picks one of the two;
//! - `oracle_features<Target>` + `oracle_noise_verifier`: the i.i.d. noisy oracle of the paper's
//!   analysis (section 3.1), for exact tests: it accepts an acceptable token (q(x) <= lambda p(x))
//!   with probability eta_tp and an unacceptable one with probability eta_fp;
//! - `make_verifier(d, f)` / `make_feature_extractor(d, f)`: adapters for users' own callables.
//! The learned linear verifier (one linear layer + sigmoid, Adam on binary cross-entropy) is in
//! learn/linear_verifier.hpp (Eigen).
//!
//! A verifier that returns NaN or a score outside [0, 1] is an error (`specdec::numerical_error`),
//! never a silent decision: `checked_score` guards every call the library makes.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! What a verifier may look at for one drafted token: s(x, prefix) is computed from this.
struct verifier_query {
  std::span<const token_id> prefix;  //!< the context before x (prompt + generated + earlier drafts)
  token_id token = no_token;         //!< the drafted token x
  std::span<const float> q_row;      //!< the (warped) draft row x was sampled from; q_row[x] = q(x)
  random::request_stream stream{};   //!< the run's stream; purpose::verifier is reserved for verifiers
  std::uint32_t position = 0;        //!< x's position in the run (0 = first drafted token)
};

//! A verifier: `v.feature_size()` inputs, `v.score(features)` a score in [0, 1] (SPRINTER section 3,
//! V(s(x, prefix))). The score must not be NaN; callers check it with `checked_score`.
template <class V>
concept Verifier = requires(const V& v, std::span<const float> features) {
  { v.feature_size() } -> std::convertible_to<std::size_t>;
  { v.score(features) } -> std::convertible_to<double>;
};

//! A feature extractor: writes `f.feature_size()` values s(x, prefix) for a `verifier_query`.
//! Non-const: an extractor may keep scratch buffers.
template <class F>
concept FeatureExtractor = requires(F& f, const verifier_query& query, std::span<float> out) {
  { f.feature_size() } -> std::convertible_to<std::size_t>;
  f.extract(query, out);
};

//! Checks SPRINTER's inference threshold tau (Algorithm 2: keep drafting while V(s) >= tau).
//! tau = 0 accepts every token (only the run cap stops drafting); tau = 1 accepts only score 1.
//! \throws specdec::error unless tau is in [0, 1] (NaN included).
inline void validate_threshold(double tau) {
  SPECDEC_EXPECTS(tau >= 0.0 && tau <= 1.0, "the verifier threshold tau must be in [0, 1]");
}

//! Checks SPRINTER's training / acceptability threshold lambda: a token is acceptable when
//! q(x) <= lambda p(x) (section 3.2, A.5); lambda = 1 is the paper's definition of acceptable.
//! \throws specdec::error unless lambda is finite and >= 1.
inline void validate_lambda(double lambda) {
  SPECDEC_EXPECTS(std::isfinite(lambda) && lambda >= 1.0, "lambda must be finite and >= 1");
}

//! Whether x is acceptable at threshold lambda: q(x) <= lambda p(x) (section 3.2; lambda = 1 is
//! the set x_acc of the proof of Theorem 3.1).
constexpr bool is_acceptable(double p, double q, double lambda = 1.0) noexcept { return q <= lambda * p; }

//! Calls `v.score(features)` and checks the result.
//! \pre features.size() == v.feature_size().
//! \throws specdec::error on a feature-size mismatch; specdec::numerical_error when the score is
//!         NaN or outside [0, 1] (a verifier must never decide silently on garbage).
template <Verifier V>
double checked_score(const V& v, std::span<const float> features) {
  SPECDEC_EXPECTS(features.size() == static_cast<std::size_t>(v.feature_size()),
                  "the feature vector does not have the verifier's feature_size()");
  const double s = static_cast<double>(v.score(features));
  if (!(s >= 0.0 && s <= 1.0))
    throw numerical_error(std::isnan(s)
                              ? "specdec::checked_score: the verifier returned NaN"
                              : "specdec::checked_score: the verifier returned a score outside [0, 1]: " + std::to_string(s));
  return s;
}

//! V(s) >= tau (Algorithm 2). \throws as `checked_score` and `validate_threshold`.
template <Verifier V>
bool verifier_accepts(const V& v, std::span<const float> features, double tau) {
  validate_threshold(tau);
  return checked_score(v, features) >= tau;
}

// ---------------------------------------------------------------------------------------------
// Adapters for users' own classifiers and feature functions.

//! A `Verifier` made from a callable `f(std::span<const float>) -> double`; built by `make_verifier`.
template <class F>
class function_verifier {
 public:
  //! \pre feature_size >= 1. \throws specdec::error otherwise.
  function_verifier(std::size_t feature_size, F f) : size_(feature_size), f_(std::move(f)) {
    SPECDEC_EXPECTS(feature_size >= 1, "a verifier needs at least one feature");
  }
  //! The number of features f expects.
  std::size_t feature_size() const noexcept { return size_; }
  //! f(features); not checked here (callers use `checked_score`).
  double score(std::span<const float> features) const { return static_cast<double>(std::invoke(f_, features)); }

 private:
  std::size_t size_;
  F f_;
};

//! Wraps `f(std::span<const float> features) -> double` as a `Verifier` of `feature_size` inputs.
//! \pre feature_size >= 1; f callable on a const object. \throws specdec::error when feature_size == 0.
template <class F>
function_verifier<F> make_verifier(std::size_t feature_size, F f) {
  static_assert(std::is_invocable_r_v<double, const F&, std::span<const float>>,
                "specdec::make_verifier: f must be callable as double f(std::span<const float>) on a const object");
  return function_verifier<F>(feature_size, std::move(f));
}

//! A `FeatureExtractor` made from a callable `f(const verifier_query&, std::span<float>)`.
template <class F>
class function_features {
 public:
  //! \pre feature_size >= 1. \throws specdec::error otherwise.
  function_features(std::size_t feature_size, F f) : size_(feature_size), f_(std::move(f)) {
    SPECDEC_EXPECTS(feature_size >= 1, "a feature extractor needs at least one feature");
  }
  //! The number of features f writes.
  std::size_t feature_size() const noexcept { return size_; }
  //! \pre out.size() == feature_size(). \throws specdec::error otherwise, and whatever f throws.
  void extract(const verifier_query& query, std::span<float> out) {
    SPECDEC_EXPECTS(out.size() == size_, "out must hold feature_size() values");
    std::invoke(f_, query, out);
  }

 private:
  std::size_t size_;
  F f_;
};

//! Wraps `f(const verifier_query&, std::span<float> out)` as a `FeatureExtractor`.
//! \throws specdec::error when feature_size == 0.
template <class F>
function_features<F> make_feature_extractor(std::size_t feature_size, F f) {
  static_assert(std::is_invocable_v<F&, const verifier_query&, std::span<float>>,
                "specdec::make_feature_extractor: f must be callable as f(const verifier_query&, std::span<float>)");
  return function_features<F>(feature_size, std::move(f));
}

// ---------------------------------------------------------------------------------------------
// Features of a draft model.

namespace detail {
//! Checks the query's token and row. \throws specdec::error when x is outside the row.
inline void expect_query(const verifier_query& q) {
  SPECDEC_EXPECTS(!q.q_row.empty(), "the query has no draft row");
  SPECDEC_EXPECTS(in_vocabulary(q.token, q.q_row.size()), "the drafted token is outside the draft row");
}
}  // namespace detail

//! The documented feature vector for draft models without hidden states (n-gram, tabular), computed
//! from the draft row q that x was sampled from (what the paper calls "the probability distribution of
//! the LLM's vocabulary", section 3.2). 10 features, in this order:
//!   0  q(x)                       5  the 3rd largest probability
//!   1  log q(x)  (q floored at 1e-12)   6  the 4th largest probability
//!   2  log(1 + rank of x)  (0 = argmax; ties share the lower rank)
//!   3  max_v q(v)                 7  entropy H(q) in nats
//!   4  the 2nd largest probability 8  log(q(x) / max_v q(v))
//!                                 9  1 if x is an argmax of q, else 0
//! Missing ranks (V < 4) read 0. O(V) per token, no allocation.
class draft_row_features {
 public:
  //! The number of features, 10.
  static constexpr std::size_t size = 10;
  //! The number of features, 10.
  static constexpr std::size_t feature_size() noexcept { return size; }

  //! Writes the 10 features of `query`.
  //! \pre out.size() == 10; query.token in [0, q_row.size()). \throws specdec::error otherwise.
  void extract(const verifier_query& query, std::span<float> out) const {
    SPECDEC_EXPECTS(out.size() == size, "out must hold draft_row_features::size values");
    detail::expect_query(query);
    const std::span<const float> q = query.q_row;
    const double qx = static_cast<double>(q[static_cast<std::size_t>(query.token)]);
    std::array<double, 4> top{0.0, 0.0, 0.0, 0.0};  // descending
    std::size_t rank = 0;
    for (const float f : q) {
      const double v = static_cast<double>(f);
      if (v > qx) ++rank;
      if (v > top[3]) {
        std::size_t i = 3;
        while (i > 0 && v > top[i - 1]) {
          top[i] = top[i - 1];
          --i;
        }
        top[i] = v;
      }
    }
    constexpr double floor = 1e-12;
    const double log_qx = std::log(std::max(qx, floor));
    out[0] = static_cast<float>(qx);
    out[1] = static_cast<float>(log_qx);
    out[2] = static_cast<float>(std::log1p(static_cast<double>(rank)));
    for (std::size_t i = 0; i < 4; ++i) out[3 + i] = static_cast<float>(top[i]);
    out[7] = static_cast<float>(entropy(q));
    out[8] = static_cast<float>(log_qx - std::log(std::max(top[0], floor)));
    out[9] = rank == 0 ? 1.0f : 0.0f;
  }
};

//! The features of a `FeatureModel` draft (e.g. its last hidden state, the paper's verifier input,
//! section 3.2 / A.5) after prefix + x: the state that has read the drafted token, so the verifier
//! can tell tokens apart (a real engine computes it anyway to draft the next token).
//! Stores a reference to the model (the caller keeps it alive).
template <FeatureModel M>
class model_features {
 public:
  //! Features of `model`, which must outlive the extractor.
  explicit model_features(const M& model) : model_(&model) {}
  //! The model's feature size.
  std::size_t feature_size() const { return static_cast<std::size_t>(model_->feature_size()); }
  //! \pre out.size() == feature_size(); query.token in the row. \throws specdec::error otherwise.
  void extract(const verifier_query& query, std::span<float> out) {
    SPECDEC_EXPECTS(out.size() == feature_size(), "out must hold feature_size() values");
    detail::expect_query(query);
    context_.assign(query.prefix.begin(), query.prefix.end());
    context_.push_back(query.token);
    model_->features(std::span<const token_id>(context_), out);
  }

 private:
  const M* model_;
  std::vector<token_id> context_;
};

//! The default features of a draft model: `model_features` for a `FeatureModel`, otherwise
//! `draft_row_features` (which needs no model).
template <Model M>
auto make_features(const M& model) {
  if constexpr (FeatureModel<M>)
    return model_features<M>(model);
  else
    return draft_row_features{};
}

// ---------------------------------------------------------------------------------------------
// The i.i.d. noisy oracle of SPRINTER's analysis (section 3.1).

//! Features for `oracle_noise_verifier`: {q(x), p(x), u}, where p is the target's (warped) next-token
//! row after the prefix and u ~ U[0, 1) is drawn from the query's stream at (position,
//! purpose::verifier), so decisions are i.i.d. across positions and runs and reproducible.
//! This asks the target for p(x): it is a test oracle, not a deployable verifier, and its target
//! evaluations are not counted as target calls.
template <Model Target>
class oracle_features {
 public:
  //! \throws specdec::error on invalid warp parameters.
  explicit oracle_features(const Target& target, warp_params target_params = {}) : target_(&target), params_(target_params) {
    validate(params_);
  }
  //! The number of features, 3: {q(x), p(x), u}.
  static constexpr std::size_t feature_size() noexcept { return 3; }

  //! \pre out.size() == 3; query.token in the row; q_row.size() == the target's vocabulary.
  //! \throws specdec::error otherwise; specdec::numerical_error when the target's row has no mass.
  void extract(const verifier_query& query, std::span<float> out) {
    SPECDEC_EXPECTS(out.size() == 3, "out must hold 3 values");
    detail::expect_query(query);
    const std::size_t V = static_cast<std::size_t>(target_->vocab_size());
    SPECDEC_EXPECTS(query.q_row.size() == V, "the draft row and the target differ in vocabulary size");
    p_.resize(V);
    next_probs(*target_, query.prefix, std::span<double>(p_));
    if (!params_.is_identity() && warp_probs(std::span<double>(p_), params_) != row_status::ok)
      throw numerical_error("specdec::oracle_features: the target row has no usable mass");
    const std::size_t x = static_cast<std::size_t>(query.token);
    out[0] = query.q_row[x];
    out[1] = static_cast<float>(p_[x]);
    out[2] = static_cast<float>(query.stream.open(query.position, random::purpose::verifier).uniform());
    // A float u could round up to 1.0f; keep it in [0, 1).
    if (out[2] >= 1.0f) out[2] = std::nextafter(1.0f, 0.0f);
  }

 private:
  const Target* target_;
  warp_params params_;
  std::vector<double> p_;
};

//! The i.i.d. verifier of SPRINTER's analysis (section 3.1, Theorems 3.1, 3.3, A.4): on features
//! {q(x), p(x), u} from `oracle_features`, it accepts an acceptable token (q(x) <= lambda p(x)) when
//! u < eta_tp and an unacceptable one when u < eta_fp. Scores are 0 or 1, so any tau in (0, 1]
//! gives the same decisions. With lambda = 1 the output of SPRINTER is exactly
//! (1 - eta_fp) p + eta_fp q per token (Theorem 3.1); for lambda > 1 see
//! `sprinter_token_distribution` (decode/sprinter.hpp) with `accept_probability`.
struct oracle_noise_verifier {
  double eta_tp = 1.0;  //!< P(accept | acceptable), the true-positive rate
  double eta_fp = 0.0;  //!< P(accept | unacceptable), the false-positive rate
  double lambda = 1.0;  //!< acceptable iff q(x) <= lambda p(x)

  //! \throws specdec::error unless eta_tp, eta_fp in [0, 1] and lambda finite and >= 1.
  oracle_noise_verifier(double tp, double fp, double lam = 1.0) : eta_tp(tp), eta_fp(fp), lambda(lam) {
    SPECDEC_EXPECTS(tp >= 0.0 && tp <= 1.0, "eta_tp must be in [0, 1]");
    SPECDEC_EXPECTS(fp >= 0.0 && fp <= 1.0, "eta_fp must be in [0, 1]");
    validate_lambda(lam);
  }
  //! The number of features it reads, 3: {q(x), p(x), u} (`oracle_features`).
  static constexpr std::size_t feature_size() noexcept { return 3; }
  //! The probability that the verifier accepts a token with target probability p and draft probability q.
  constexpr double accept_probability(double p, double q) const noexcept { return is_acceptable(p, q, lambda) ? eta_tp : eta_fp; }
  //! 1 when u < accept_probability(p(x), q(x)), else 0. \pre features = {q(x), p(x), u}.
  double score(std::span<const float> f) const {
    SPECDEC_EXPECTS(f.size() == 3, "oracle_noise_verifier expects the 3 features of oracle_features");
    return static_cast<double>(f[2]) < accept_probability(static_cast<double>(f[1]), static_cast<double>(f[0])) ? 1.0 : 0.0;
  }
};

}  // namespace specdec
