//! \file optimize/threshold.hpp
//! \brief Choosing SPRINTER's verifier threshold from its ROC curve (beyond the paper, built on
//! SPRINTER's Theorems 3.1 and 3.3; Zhong, Teku and Tandon,
//! "Speeding up Speculative Decoding via Sequential Approximate Verification").
//!
//! A verifier with threshold tau accepts a draft token when its score exceeds tau; each threshold
//! gives a point (eta_tp, eta_fp) of the ROC curve. Lower thresholds accept more: longer runs of
//! drafted tokens per target call (Thm 3.3) but a larger distance to the target distribution,
//! d_TV(p, p_SPRINTER) = eta_fp d_TV(p, q) (Thm 3.1). `choose_threshold` returns the threshold that
//! maximises the expected tokens per unit time subject to eta_fp d_TV(p, q) <= bound.
//!
//! Tokens per unit time (renewal-reward). In the scenario of Thm 3.3 (the draft's first r tokens
//! acceptable, the rest not) one SPRINTER run drafts and verifies N + 1 tokens, N of them accepted
//! by the verifier, then one target call decides the rejected one, so it emits N + 1 tokens in
//! time (N + 1)(t_d + t_v) + t_t. Runs are i.i.d., so the long-run rate is
//!   rate = (E[N] + 1) / ((E[N] + 1)(t_d + t_v) + t_t),   E[N] from eq. (3),
//! an increasing function of E[N]. When r itself varies from run to run, pass its law r_pmf:
//! E[N] = sum_k P(r = k) E[N | r = k] (the rate is still a ratio of expectations).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/sprinter.hpp"

namespace specdec::optimize::sprinter {

//! Per-token times of a SPRINTER run: a draft call, a verifier call, and the target call that
//! checks the verifier-rejected token. Any unit.
struct costs {
  double t_draft = 1.0;     //!< time of one draft-model call (> 0)
  double t_verifier = 0.0;  //!< time of one verifier call (the paper neglects it, t_v <= t_d)
  double t_target = 1.0;    //!< time of one target call
};

//! One point of a verifier's ROC curve.
struct roc_point {
  double threshold = 0.0;  //!< the verifier's threshold (only reported back)
  double eta_tp = 0.0;     //!< true-positive rate at that threshold
  double eta_fp = 0.0;     //!< false-positive rate at that threshold
};

//! The threshold chosen, with what it achieves.
struct threshold_choice {
  std::size_t index = 0;         //!< its position in the ROC span
  roc_point point;               //!< the ROC point
  double expected_tokens = 0.0;  //!< E[N] (eq. (3), averaged over r_pmf); +infinity if unbounded
  double token_rate = 0.0;       //!< expected tokens per unit time
  double total_variation = 0.0;  //!< eta_fp d_TV(p, q) (Thm 3.1)
};

namespace detail {
inline void check_costs(const costs& c) {
  SPECDEC_EXPECTS(theory::detail::is_finite(c.t_draft) && c.t_draft > 0.0, "t_draft must be finite and > 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c.t_verifier), "t_verifier must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(c.t_target), "t_target must be finite and >= 0");
}
inline void check_pmf(std::span<const double> r_pmf) {
  SPECDEC_EXPECTS(!r_pmf.empty(), "r_pmf must not be empty");
  SPECDEC_EXPECTS(theory::detail::is_probability_row(r_pmf, theory::detail::row_sum_tolerance<double>),
                  "r_pmf must be a probability row (P(r = k) for k = 0, 1, ...; sum 1 within 1e-6)");
}
// E[N] averaged over r_pmf; +infinity when a term with positive probability is unbounded.
inline double mixed_expected_tokens(double eta_tp, double eta_fp, std::span<const double> r_pmf) {
  double sum = 0.0;
  for (std::size_t k = 0; k < r_pmf.size(); ++k) {
    if (r_pmf[k] == 0.0) continue;
    const int r = static_cast<int>(k);
    if (!theory::sprinter::detail::finite_expectation(eta_tp, eta_fp, r)) return std::numeric_limits<double>::infinity();
    sum += r_pmf[k] * theory::sprinter::expected_tokens(eta_tp, eta_fp, r);
  }
  return sum;
}
// The renewal-reward rate for a given E[N] (the limit 1 / (t_d + t_v) when E[N] is infinite).
inline double rate_from_tokens(double expected_tokens, const costs& c) {
  const double per_token = c.t_draft + c.t_verifier;
  if (expected_tokens == std::numeric_limits<double>::infinity()) return 1.0 / per_token;
  const double n1 = expected_tokens + 1.0;
  return n1 / (n1 * per_token + c.t_target);
}
}  // namespace detail

//! Expected tokens per unit time of SPRINTER with an i.i.d. verifier (eta_tp, eta_fp) when r tokens
//! per draft are acceptable: (E[N] + 1) / ((E[N] + 1)(t_d + t_v) + t_t), E[N] of eq. (3) (see the
//! file comment). With eta_fp = 1 and eta_tp^r > 0 (the verifier never stops) the limit 1/(t_d + t_v).
//! \pre eta_tp, eta_fp in [0, 1]; r >= 0; t_draft finite and > 0; t_verifier, t_target finite and >= 0.
//! \throws specdec::error otherwise.
inline double token_rate(double eta_tp, double eta_fp, int r, const costs& c) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  detail::check_costs(c);
  const double n = theory::sprinter::detail::finite_expectation(eta_tp, eta_fp, r)
                       ? theory::sprinter::expected_tokens(eta_tp, eta_fp, r)
                       : std::numeric_limits<double>::infinity();
  return detail::rate_from_tokens(n, c);
}

//! As token_rate, with r random: r_pmf[k] = P(r = k).
//! \pre as token_rate; r_pmf a probability row (sum 1 within 1e-6), not empty.
//! \throws specdec::error otherwise.
inline double token_rate(double eta_tp, double eta_fp, std::span<const double> r_pmf, const costs& c) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  detail::check_pmf(r_pmf);
  detail::check_costs(c);
  return detail::rate_from_tokens(detail::mixed_expected_tokens(eta_tp, eta_fp, r_pmf), c);
}

//! The ROC point that maximises the expected tokens per unit time subject to
//! eta_fp tv_pq <= tv_bound (Theorem 3.1's distance to the target), with r_pmf[k] = P(r = k).
//! Among equal rates the smaller distance wins, then the earlier point. No feasible point:
//! std::nullopt (e.g. a bound below eta_fp tv_pq for every point; eta_fp = 0 is always feasible).
//! \pre every point's eta_tp, eta_fp in [0, 1]; tv_pq in [0, 1]; tv_bound >= 0 (not NaN); r_pmf
//!      and costs as token_rate.
//! \throws specdec::error otherwise.
inline std::optional<threshold_choice> choose_threshold(std::span<const roc_point> roc, std::span<const double> r_pmf,
                                                        const costs& c, double tv_pq, double tv_bound) {
  SPECDEC_EXPECTS(theory::detail::is_probability(tv_pq), "tv_pq must be in [0, 1]");
  SPECDEC_EXPECTS(tv_bound >= 0.0, "tv_bound must be >= 0 (not NaN)");
  detail::check_pmf(r_pmf);
  detail::check_costs(c);
  std::optional<threshold_choice> best;
  for (std::size_t i = 0; i < roc.size(); ++i) {
    const roc_point& pt = roc[i];
    SPECDEC_EXPECTS(theory::detail::is_probability(pt.eta_tp), "every eta_tp must be in [0, 1]");
    SPECDEC_EXPECTS(theory::detail::is_probability(pt.eta_fp), "every eta_fp must be in [0, 1]");
    const double tv = theory::sprinter::total_variation(pt.eta_fp, tv_pq);
    if (!(tv <= tv_bound)) continue;
    const double n = detail::mixed_expected_tokens(pt.eta_tp, pt.eta_fp, r_pmf);
    const double rate = detail::rate_from_tokens(n, c);
    if (!best || rate > best->token_rate || (rate == best->token_rate && tv < best->total_variation))
      best = threshold_choice{i, pt, n, rate, tv};
  }
  return best;
}

//! choose_threshold with a fixed r (the scenario of Theorem 3.3).
//! \pre as above; r >= 0.
//! \throws specdec::error otherwise.
inline std::optional<threshold_choice> choose_threshold(std::span<const roc_point> roc, int r, const costs& c, double tv_pq,
                                                        double tv_bound) {
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  std::vector<double> pmf(static_cast<std::size_t>(r) + 1, 0.0);
  pmf.back() = 1.0;
  return choose_threshold(roc, std::span<const double>(pmf), c, tv_pq, tv_bound);
}

}  // namespace specdec::optimize::sprinter
