//! \file theory/sprinter.hpp
//! \brief Closed forms of SPRINTER, sequential approximate verification (Zhong, Teku and Tandon,
//! "Speeding up Speculative Decoding via Sequential Approximate Verification"): section 3.1, appendix A.1-A.4 and A.8.
//!
//! Model. A draft token x ~ q is "acceptable" when q(x) <= p(x). A low-cost verifier accepts an
//! acceptable token with probability eta_tp (true-positive rate) and an unacceptable one with
//! probability eta_fp (false-positive rate), independently of everything else (the paper's i.i.d.
//! verifier assumption). Drafting continues while the verifier accepts; at the first rejection
//! the target checks that last token with the standard rule min(1, p/q) and resamples
//! norm(max(0, p - q)) on rejection (Algorithm 2).
//!
//! Counting conventions. N (Theorem 3.3) counts the draft tokens the verifier accepted before its
//! first rejection; the token the verifier rejected (kept or replaced by the target) is NOT in N.
//! T_stop (Theorem 3.4) counts draft calls up to and including that rejected token: t_d (N + 1).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::theory::sprinter {

namespace detail {
template <class T>
constexpr void mix_rows(std::span<const T> p, std::span<const T> q, double eta_fp, std::span<T> out) noexcept {
  for (std::size_t x = 0; x < p.size(); ++x)
    out[x] = static_cast<T>((1.0 - eta_fp) * static_cast<double>(p[x]) + eta_fp * static_cast<double>(q[x]));
}
// eta_tp^r with the 0^0 = 1 convention.
constexpr double tp_pow(double eta_tp, int r) noexcept { return theory::detail::pow_int(eta_tp, static_cast<std::uint64_t>(r)); }
// The expectation of N is infinite exactly when eta_fp = 1 and P(first r accepted) = eta_tp^r > 0.
constexpr bool finite_expectation(double eta_tp, double eta_fp, int r) noexcept {
  return eta_fp < 1.0 || (eta_tp == 0.0 && r > 0);
}
}  // namespace detail

//! The distribution of a token emitted by SPRINTER,
//!   p_SPRINTER(x) = (1 - eta_fp) p(x) + eta_fp q(x)      (Theorem 3.1, eq. (2); proof A.1 eq. (7)),
//! written into `out`. It does not depend on eta_tp: a false negative sends an acceptable token to
//! the target, which keeps it. `out` may alias p or q.
//! \pre p.size() == q.size() == out.size() > 0; p and q probability rows (entries in [0, 1], sums
//!      1 within 1e-6); eta_fp in [0, 1].
//! \throws specdec::error otherwise.
constexpr void token_distribution(std::span<const double> p, std::span<const double> q, double eta_fp, std::span<double> out) {
  SPECDEC_EXPECTS(p.size() == q.size() && p.size() == out.size(), "p, q and out must have the same length");
  SPECDEC_EXPECTS(!p.empty(), "p and q must not be empty");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<double>),
                  "q must be a probability row (entries in [0, 1], sum 1 within 1e-6)");
  detail::mix_rows(p, q, eta_fp, out);
}

//! float rows: as the double overload (mixed in double, stored as float); sums within 1e-4.
//! \pre as the double overload, with row sums 1 within 1e-4.
//! \throws specdec::error otherwise.
constexpr void token_distribution(std::span<const float> p, std::span<const float> q, double eta_fp, std::span<float> out) {
  SPECDEC_EXPECTS(p.size() == q.size() && p.size() == out.size(), "p, q and out must have the same length");
  SPECDEC_EXPECTS(!p.empty(), "p and q must not be empty");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<float>),
                  "p must be a probability row (entries in [0, 1], sum 1 within 1e-4)");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<float>),
                  "q must be a probability row (entries in [0, 1], sum 1 within 1e-4)");
  detail::mix_rows(p, q, eta_fp, out);
}

//! d_TV(p, p_SPRINTER) = eta_fp * d_TV(p, q) (Theorem 3.1, second part; proof A.1 eq. (15)): the
//! quality loss of one SPRINTER token. eta_fp = 0 gives 0 (lossless, as standard SD).
//! \pre eta_fp in [0, 1]; tv_pq in [0, 1].
//! \throws specdec::error otherwise.
constexpr double total_variation(double eta_fp, double tv_pq) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(tv_pq), "tv_pq must be in [0, 1]");
  return eta_fp * tv_pq;
}

//! The acceptance rate of SPRINTER, beta_SPRINTER = 1 - (1 - eta_fp) d_TV(p, q) (Theorem A.4,
//! eq. (34)): the probability that the draft token is kept, by the verifier or by the target.
//! eta_fp = 0 gives Leviathan's beta = 1 - TV (Remark A.5).
//! \pre eta_fp in [0, 1]; tv_pq in [0, 1].
//! \throws specdec::error otherwise.
constexpr double acceptance_rate(double eta_fp, double tv_pq) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(tv_pq), "tv_pq must be in [0, 1]");
  return 1.0 - (1.0 - eta_fp) * tv_pq;
}

//! P(N_SPRINTER = i) (Theorem 3.3): eta_tp^i (1 - eta_tp) for i < r, and
//! eta_tp^r eta_fp^(i-r) (1 - eta_fp) for i >= r, when the draft's first r tokens are acceptable
//! and the later ones are not. 0^0 = 1. With eta_fp = 1 the law is defective (N = infinity with
//! probability eta_tp^r) and the terms i >= r are 0.
//! \pre i >= 0; eta_tp, eta_fp in [0, 1]; r >= 0.
//! \throws specdec::error otherwise.
constexpr double prob_tokens(int i, double eta_tp, double eta_fp, int r) {
  SPECDEC_EXPECTS(i >= 0, "i must be >= 0");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  if (i < r) return theory::detail::pow_int(eta_tp, static_cast<std::uint64_t>(i)) * (1.0 - eta_tp);
  return detail::tp_pow(eta_tp, r) * theory::detail::pow_int(eta_fp, static_cast<std::uint64_t>(i - r)) * (1.0 - eta_fp);
}

//! E[N_SPRINTER] = (eta_tp - eta_tp^r) / (1 - eta_tp) + eta_tp^r / (1 - eta_fp) (Theorem 3.3,
//! eq. (3); proof A.2 eq. (23)). Evaluated in the equivalent cancellation-free form
//!   eta_tp G(eta_tp, r - 1) + eta_tp^r eta_fp / (1 - eta_fp),  G(a, n) = sum_{k=0}^{n} a^k,
//! exact at eta_tp = 1 (r + eta_fp / (1 - eta_fp)), at eta_fp = 0 (the first term alone) and at
//! r = 0 (eta_fp / (1 - eta_fp), a geometric law); accurate for large r.
//! \pre eta_tp, eta_fp in [0, 1]; r >= 0; not (eta_fp = 1 and eta_tp^r > 0), where E[N] is infinite.
//! \throws specdec::error otherwise.
constexpr double expected_tokens(double eta_tp, double eta_fp, int r) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  SPECDEC_EXPECTS(detail::finite_expectation(eta_tp, eta_fp, r),
                  "eta_fp = 1 with eta_tp^r > 0 makes E[N] infinite (the verifier never stops)");
  const double head = eta_tp * theory::detail::geometric_sum(eta_tp, static_cast<std::int64_t>(r) - 1);
  const double tp_r = detail::tp_pow(eta_tp, r);
  return tp_r == 0.0 ? head : head + tp_r * eta_fp / (1.0 - eta_fp);
}

//! Var(N_SPRINTER) for the law of Theorem 3.3 (beyond the papers). Writing N = M + B G_f with
//! M = min(G_tp, r) (G_tp geometric with P(G_tp >= k) = eta_tp^k), B = 1[M = r] and G_f an
//! independent geometric law with P(G_f >= j) = eta_fp^j (mean mu = eta_fp / (1 - eta_fp),
//! variance s2 = eta_fp / (1 - eta_fp)^2):
//!   Var(N) = Var(M) + eta_tp^r s2 + eta_tp^r (1 - eta_tp^r) mu^2 + 2 eta_tp^r mu (r - E[M]),
//! every term >= 0. Reduces to the truncated-geometric variance sd::tokens_variance(eta_tp, r) at
//! eta_fp = 0, and to s2 at r = 0.
//! \pre as expected_tokens.
//! \throws specdec::error otherwise.
constexpr double tokens_variance(double eta_tp, double eta_fp, int r) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  SPECDEC_EXPECTS(detail::finite_expectation(eta_tp, eta_fp, r),
                  "eta_fp = 1 with eta_tp^r > 0 makes Var(N) infinite (the verifier never stops)");
  const double var_m = theory::detail::truncated_geometric_variance(eta_tp, r);
  const double tp_r = detail::tp_pow(eta_tp, r);
  if (tp_r == 0.0 || eta_fp == 0.0) return var_m;
  const double mean_m = eta_tp * theory::detail::geometric_sum(eta_tp, static_cast<std::int64_t>(r) - 1);
  double deficit = static_cast<double>(r) - mean_m;  // sum_{k=1}^{r} (1 - eta_tp^k) >= 0
  if (deficit < 0.0) deficit = 0.0;
  const double one_minus_fp = 1.0 - eta_fp;
  const double mu = eta_fp / one_minus_fp;
  const double s2 = mu / one_minus_fp;
  const double one_minus_tp_r = theory::detail::one_minus_pow(eta_tp, static_cast<std::uint64_t>(r));
  return var_m + tp_r * s2 + tp_r * one_minus_tp_r * mu * mu + 2.0 * tp_r * mu * deficit;
}

//! E[T_stop] = (1 - eta_tp^r) t_d / (1 - eta_tp) + eta_tp^r t_d / (1 - eta_fp) (Theorem 3.4, eq. (4);
//! proof A.3 eq. (24)): the expected drafting time until the verifier's first rejection,
//! = t_d (E[N] + 1) since the rejected token was drafted too. Verifier time t_v <= t_d is
//! neglected and the target's time is not included, as in the proof. Evaluated as
//! t_d (G(eta_tp, r - 1) + eta_tp^r / (1 - eta_fp)); exact at eta_tp = 1 (t_d (r + 1/(1 - eta_fp))).
//! \pre eta_tp, eta_fp in [0, 1]; r >= 0; t_d finite and >= 0; not (eta_fp = 1 and eta_tp^r > 0).
//! \throws specdec::error otherwise.
constexpr double expected_stopping_time(double eta_tp, double eta_fp, int r, double t_d) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_d), "t_d must be finite and >= 0");
  SPECDEC_EXPECTS(detail::finite_expectation(eta_tp, eta_fp, r),
                  "eta_fp = 1 with eta_tp^r > 0 makes E[T_stop] infinite (the verifier never stops)");
  const double head = theory::detail::geometric_sum(eta_tp, static_cast<std::int64_t>(r) - 1);
  const double tp_r = detail::tp_pow(eta_tp, r);
  return t_d * (tp_r == 0.0 ? head : head + tp_r / (1.0 - eta_fp));
}

//! SD-Flops(gamma) = gamma F_d + gamma F_t (eq. (5)): one run of standard SD, gamma draft calls and
//! a target pass charged F_t per drafted token (the paper charges gamma target positions, not
//! gamma + 1; perfect verification assumed, i.e. all gamma drafts acceptable).
//! \pre f_d, f_t finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double flops_sd(std::size_t gamma, double f_d, double f_t) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_d), "f_d must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_t), "f_t must be finite and >= 0");
  const double g = static_cast<double>(gamma);
  return g * f_d + g * f_t;
}

//! SPRINTER-Flops(gamma) = gamma F_d + gamma F_v + F_t (eq. (6)): one run of SPRINTER with a perfect
//! verifier (eta_fp = 0, eta_tp = 1), gamma draft and verifier calls and ONE target evaluation of
//! cost F_t. This charges the target once, as if a call cost F_t however many new positions it
//! processes; the savings (gamma - 1) F_t of section 3.1 / A.8 follow from that assumption.
//! See flops_sprinter_catch_up for a KV-cached target.
//! \pre f_d, f_v, f_t finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double flops_sprinter(std::size_t gamma, double f_d, double f_v, double f_t) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_d), "f_d must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_v), "f_v must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_t), "f_t must be finite and >= 0");
  const double g = static_cast<double>(gamma);
  return g * f_d + g * f_v + f_t;
}

//! SPRINTER FLOPs counting the target's catch-up (beyond the paper): gamma F_d + gamma F_v + gamma F_t.
//! A KV-cached target never saw the gamma - 1 verifier-accepted tokens, so the call that checks
//! the last one must also process them: gamma positions at F_t each (F_t = FLOPs per position).
//! Under this accounting SPRINTER's target FLOPs equal eq. (5)'s and the saving is in the number
//! of target calls (latency), not in FLOPs. gamma = 1 gives eq. (6).
//! \pre f_d, f_v, f_t finite and >= 0.
//! \throws specdec::error otherwise.
constexpr double flops_sprinter_catch_up(std::size_t gamma, double f_d, double f_v, double f_t) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_d), "f_d must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_v), "f_v must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(f_t), "f_t must be finite and >= 0");
  const double g = static_cast<double>(gamma);
  return g * f_d + g * f_v + g * f_t;
}

}  // namespace specdec::theory::sprinter
