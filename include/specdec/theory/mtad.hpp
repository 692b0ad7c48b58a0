//! \file theory/mtad.hpp
//! \brief Closed forms of multi-token assisted decoding, MTAD ("Optimized Multi-Token Joint Decoding with
//! Auxiliary Model for LLM Inference"): perplexity (eq. (1)), the perplexity limit of Theorem 3.2, the bounds
//! of Lemma A.1, Lemma 3.4, Theorem 3.5 and Theorem 3.6 (sections 3-4, appendix A), and the energy model of
//! eq. (9).
//!
//! Model. Each MTAD iteration i accepts the longest prefix x_{1:j} of a beam-sampled draft with
//! min(1, p(x_{1:j}) / q(x_{1:j})) > tau (Algorithm 1; the appendix proofs use >=), then samples one
//! token from the target p. gamma_bar = lim Gamma_N / N is the mean number of tokens per iteration,
//! the target's token INCLUDED (proof of Lemma A.1: "the first gamma_i - 1 tokens are the accepted
//! draft tokens and the last token is sampled from p"), so gamma_bar >= 1. Perplexities are in the
//! natural-log convention exp(-mean log p); entropies and U are in nats.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::theory::mtad {

namespace detail {
template <class T>
double perplexity_impl(std::span<const T> probs) noexcept {
  double sum_log = 0.0;
  for (const T x : probs) {
    const double p = static_cast<double>(x);
    if (p == 0.0) return std::numeric_limits<double>::infinity();
    sum_log += std::log(p);
  }
  return std::exp(-sum_log / static_cast<double>(probs.size()));
}
template <class T>
bool all_probabilities(std::span<const T> probs) noexcept {
  for (const T x : probs)
    if (!theory::detail::is_probability(static_cast<double>(x))) return false;
  return true;
}
template <class T>
double perplexity_from_log_probs_impl(std::span<const T> log_probs) noexcept {
  double sum_log = 0.0;
  for (const T x : log_probs) sum_log += static_cast<double>(x);
  return std::exp(-sum_log / static_cast<double>(log_probs.size()));
}
template <class T>
bool all_log_probabilities(std::span<const T> log_probs) noexcept {
  for (const T x : log_probs) {
    const double v = static_cast<double>(x);
    if (!(v <= 0.0)) return false;  // NaN and positive values fail; -inf is allowed
  }
  return true;
}
template <class T>
double checked_perplexity(std::span<const T> probs) {
  SPECDEC_EXPECTS(!probs.empty(), "the token sequence must not be empty");
  SPECDEC_EXPECTS(all_probabilities(probs), "every probability must be in [0, 1]");
  return perplexity_impl(probs);
}
template <class T>
double checked_perplexity_from_log_probs(std::span<const T> log_probs) {
  SPECDEC_EXPECTS(!log_probs.empty(), "the token sequence must not be empty");
  SPECDEC_EXPECTS(all_log_probabilities(log_probs), "every log-probability must be <= 0 (not NaN)");
  return perplexity_from_log_probs_impl(log_probs);
}
inline bool valid_gamma_bar(double gamma_bar) noexcept { return theory::detail::is_finite(gamma_bar) && gamma_bar >= 1.0; }
}  // namespace detail

//! PPL(x_{1:N}) = exp(-(1/N) sum_t log p(x_t | x_{1:t-1})) (eq. (1)), from the conditional
//! probabilities p(x_t | x_{1:t-1}) of the N tokens. Log-likelihoods are accumulated in double; a
//! zero probability gives +infinity. Equals the inverse geometric mean of the probabilities.
//! \pre probs not empty; every entry in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
inline double perplexity(std::span<const double> probs) { return detail::checked_perplexity(probs); }

//! float probabilities: as the double overload (accumulated in double).
//! \pre probs not empty; every entry in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
inline double perplexity(std::span<const float> probs) { return detail::checked_perplexity(probs); }

//! PPL from the log-probabilities log p(x_t | x_{1:t-1}) (natural log) of the tokens (eq. (1)):
//! exp(-mean). -infinity entries give +infinity.
//! \pre log_probs not empty; every entry <= 0 (not NaN; -infinity allowed).
//! \throws specdec::error otherwise.
inline double perplexity_from_log_probs(std::span<const double> log_probs) {
  return detail::checked_perplexity_from_log_probs(log_probs);
}

//! float log-probabilities: as the double overload (accumulated in double).
//! \pre log_probs not empty; every entry <= 0 (not NaN; -infinity allowed).
//! \throws specdec::error otherwise.
inline double perplexity_from_log_probs(std::span<const float> log_probs) {
  return detail::checked_perplexity_from_log_probs(log_probs);
}

//! The limit of MTJD's perplexity, exp(-E_gamma L_p(gamma, p_tilde) / gamma_bar) (Theorem 3.2,
//! eq. (3)), from the expected log-likelihood E_gamma L_p of the gamma tokens sampled per iteration.
//! \pre expected_log_likelihood <= 0 (not NaN; -infinity gives +infinity); gamma_bar finite, >= 1.
//! \throws specdec::error otherwise.
inline double theorem_3_2_perplexity(double expected_log_likelihood, double gamma_bar) {
  SPECDEC_EXPECTS(expected_log_likelihood <= 0.0, "the expected log-likelihood must be <= 0 (not NaN)");
  SPECDEC_EXPECTS(detail::valid_gamma_bar(gamma_bar), "gamma_bar (tokens per iteration) must be finite and >= 1");
  return std::exp(-expected_log_likelihood / gamma_bar);
}

//! Lemma A.1 bound: lim PPL_p(x) / PPL_q(x) <= tau^(-1/gamma_bar) (appendix A.3, eq. (12)), for the
//! tokens x generated by MTAD with threshold tau. tau = 0 gives +infinity (no guarantee), tau = 1
//! gives 1. Assumes the target's token of each iteration is sampled from p (so its mean log-ratio
//! is KL(p, q) >= 0).
//! \pre tau in [0, 1]; gamma_bar finite and >= 1.
//! \throws specdec::error otherwise.
inline double lemma_a1_bound(double tau, double gamma_bar) {
  SPECDEC_EXPECTS(theory::detail::is_probability(tau), "tau must be in [0, 1]");
  SPECDEC_EXPECTS(detail::valid_gamma_bar(gamma_bar), "gamma_bar (tokens per iteration) must be finite and >= 1");
  if (tau == 0.0) return std::numeric_limits<double>::infinity();
  return std::exp(-std::log(tau) / gamma_bar);
}

//! Lemma 3.4 bound on MTAD's perplexity under the draft model,
//!   PPL_q <= exp(-(1 - epsilon)/gamma_bar E_gamma L_q(gamma - 1, argmax o q) + H(p, q)/gamma_bar)
//! (eq. (6)), where E_gamma L_q(gamma - 1, argmax o q) <= 0 is the expected maximal draft
//! log-likelihood of the accepted drafts (eq. (7)), epsilon <= 0 the beam-search error of eq. (5)
//! and H(p, q) the single-token cross-entropy (nats).
//! \pre expected_max_log_q <= 0 and finite; epsilon <= 0 and finite; cross_entropy >= 0 and finite;
//!      gamma_bar finite and >= 1.
//! \throws specdec::error otherwise.
inline double lemma_3_4_bound(double gamma_bar, double epsilon, double expected_max_log_q, double cross_entropy) {
  SPECDEC_EXPECTS(detail::valid_gamma_bar(gamma_bar), "gamma_bar (tokens per iteration) must be finite and >= 1");
  SPECDEC_EXPECTS(theory::detail::is_finite(epsilon) && epsilon <= 0.0, "epsilon (beam error) must be finite and <= 0");
  SPECDEC_EXPECTS(theory::detail::is_finite(expected_max_log_q) && expected_max_log_q <= 0.0,
                  "expected_max_log_q must be finite and <= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(cross_entropy), "cross_entropy must be finite and >= 0");
  return std::exp((-(1.0 - epsilon) * expected_max_log_q + cross_entropy) / gamma_bar);
}

namespace detail {
//! Theorem 3.5's bound tau^(-1/gamma_bar) exp(((1 - epsilon gamma_bar) H(p) + c_U U) / gamma_bar) for the
//! coefficient c_U of U (the statement's or the proof's), with the checks both share.
inline double theorem_3_5(double tau, double gamma_bar, double epsilon, double entropy_p, double u, double u_coefficient) {
  SPECDEC_EXPECTS(theory::detail::is_probability(tau), "tau must be in [0, 1]");
  SPECDEC_EXPECTS(detail::valid_gamma_bar(gamma_bar), "gamma_bar (tokens per iteration) must be finite and >= 1");
  SPECDEC_EXPECTS(theory::detail::is_finite(epsilon) && epsilon <= 0.0, "epsilon (beam error) must be finite and <= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(entropy_p), "entropy_p must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(u), "U must be finite and >= 0");
  if (tau == 0.0) return std::numeric_limits<double>::infinity();
  return std::exp((-std::log(tau) + (1.0 - epsilon * gamma_bar) * entropy_p + u_coefficient * u) / gamma_bar);
}
}  // namespace detail

//! Theorem 3.5 bound, as stated (eq. (8)):
//!   lim PPL_p(x) / PPL_p(x*) <= tau^(-1/gamma_bar) exp(((1 - epsilon gamma_bar) H(p) + (1 - epsilon + gamma_bar) U) / gamma_bar),
//! x from approximate MTAD, x* from deterministic exact MTJD, H(p) the target's per-token entropy,
//! U >= ||log p - log q||_inf, epsilon <= 0 the beam error of Lemma 3.4. Evaluated in log space;
//! overflow gives +infinity, tau = 0 gives +infinity.
//! Note: the proof in appendix A.4 (eqs. (26)-(30)) supports the coefficient 1 + (1 - epsilon)
//! gamma_bar on U rather than 1 - epsilon + gamma_bar; the two agree when epsilon = 0 or
//! gamma_bar = 1, otherwise the stated bound is the smaller. See theorem_3_5_bound_from_proof.
//! \pre tau in [0, 1]; gamma_bar finite and >= 1; epsilon finite and <= 0; entropy_p and u finite, >= 0.
//! \throws specdec::error otherwise.
inline double theorem_3_5_bound(double tau, double gamma_bar, double epsilon, double entropy_p, double u) {
  return detail::theorem_3_5(tau, gamma_bar, epsilon, entropy_p, u, 1.0 - epsilon + gamma_bar);
}

//! Theorem 3.5 bound as the appendix A.4 proof derives it (beyond the paper's statement):
//!   tau^(-1/gamma_bar) exp(((1 - epsilon gamma_bar) H(p) + (1 + (1 - epsilon) gamma_bar) U) / gamma_bar),
//! collecting H(p, q)/gamma_bar <= (H(p) + U)/gamma_bar, (epsilon/gamma_bar) E L_p <= -epsilon H(p) and
//! ((1 - epsilon)/gamma_bar)(E L_p - E L_q) <= (1 - epsilon) U. >= theorem_3_5_bound, equal when
//! epsilon = 0 or gamma_bar = 1.
//! \pre as theorem_3_5_bound.
//! \throws specdec::error otherwise.
inline double theorem_3_5_bound_from_proof(double tau, double gamma_bar, double epsilon, double entropy_p, double u) {
  return detail::theorem_3_5(tau, gamma_bar, epsilon, entropy_p, u, 1.0 + (1.0 - epsilon) * gamma_bar);
}

//! Theorem 3.6 bound: gamma_bar >= |log tau| / U (proof A.5): every prefix of length j <= |log tau| / U
//! passes verification because |log p - log q| <= U per token. U = 0 gives +infinity for tau < 1
//! (p = q: every draft passes) and 0 for tau = 1; tau = 0 gives +infinity.
//! The bound ignores the draft length gamma (at most gamma drafts can be accepted); see
//! guaranteed_tokens_per_iteration for the capped version.
//! \pre tau in [0, 1]; u finite and >= 0.
//! \throws specdec::error otherwise.
inline double theorem_3_6_bound(double tau, double u) {
  SPECDEC_EXPECTS(theory::detail::is_probability(tau), "tau must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(u), "U must be finite and >= 0");
  if (tau == 1.0) return 0.0;
  if (tau == 0.0 || u == 0.0) return std::numeric_limits<double>::infinity();
  return -std::log(tau) / u;
}

//! The number of tokens EVERY MTAD iteration emits at least, by the argument of Theorem 3.6 made
//! exact for a draft of length gamma (beyond the paper): 1 + min(gamma, j*), where j* counts the
//! prefix lengths j >= 1 with j U < |log tau| (then log p - log q >= -j U > log tau, so Algorithm 1's
//! strict test passes), and the 1 is the target's token. Hence gamma_bar >= this value; it is also
//! a valid bound under the proofs' non-strict test. U = 0 with tau < 1, or tau = 0, gives 1 + gamma.
//! \pre tau in [0, 1]; u finite and >= 0.
//! \throws specdec::error otherwise.
inline std::size_t guaranteed_tokens_per_iteration(double tau, double u, std::size_t gamma) {
  SPECDEC_EXPECTS(theory::detail::is_probability(tau), "tau must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(u), "U must be finite and >= 0");
  if (tau == 1.0) return 1;
  if (tau == 0.0 || u == 0.0) return 1 + gamma;
  const double x = -std::log(tau) / u;  // > 0
  if (x > static_cast<double>(gamma)) return 1 + gamma;
  return static_cast<std::size_t>(std::ceil(x));  // 1 + j, j = ceil(x) - 1 >= 0 the largest integer with j < x
}

//! The energy model E_total = PW_flop T_flop + PW_mem T_mem (section 4, eq. (9)): power of
//! arithmetic and of (global) memory operations times the time spent on each.
//! \pre every argument finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double energy(double pw_flop, double t_flop, double pw_mem, double t_mem) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(pw_flop), "pw_flop must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_flop), "t_flop must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(pw_mem), "pw_mem must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_mem), "t_mem must be finite and >= 0");
  return pw_flop * t_flop + pw_mem * t_mem;
}

}  // namespace specdec::theory::mtad
