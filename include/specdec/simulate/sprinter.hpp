//! \file simulate/sprinter.hpp
//! \brief Monte-Carlo simulators of SPRINTER (Zhong, Teku and Tandon, "Speeding up Speculative Decoding via
//! Sequential Approximate Verification"), the processes behind theory/sprinter.hpp:
//!   - `verifier_chain(eta_tp, eta_fp, r)`: the scenario of Figure 4 / Theorem 3.3. The draft's
//!     first r tokens are acceptable, the later ones are not; an i.i.d. verifier accepts an
//!     acceptable token with probability eta_tp and an unacceptable one with eta_fp, and drafting
//!     stops at its first rejection. N = tokens accepted before that rejection (eq. (3));
//!     T_stop = t_d (N + 1) (eq. (4): the rejected token was drafted too).
//!   - `token_process(p, q, eta_tp, eta_fp)`: one SPRINTER position on actual tokens (Theorem 3.1,
//!     Theorem A.4): x ~ q; x is acceptable iff q(x) <= p(x); the verifier accepts it with eta_tp or
//!     eta_fp; a verifier-rejected token goes to the target, which keeps it iff u q(x) < p(x) (the
//!     strict rule) and otherwise samples norm(max(0, p - q)) (Algorithm 2).
//! Randomness: simulate/options.hpp (one Philox stream per draw). The per-draw steps
//! (`run_chain_draw`, `sprinter_position`) are host/device code shared with the cuda backend
//! (backend/cuda/simulate.cuh), which gives the same counts for the same seeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "specdec/acceptance/strict.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/chain.hpp"
#include "specdec/simulate/detail/position.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/sprinter.hpp"

namespace specdec::simulate::detail {

//! The preconditions of `sprinter::verifier_chain` (shared with the cuda overload).
inline void check_verifier_chain(double eta_tp, double eta_fp, int r, const run_options& options) {
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(r >= 0, "r must be >= 0");
  SPECDEC_EXPECTS(theory::sprinter::detail::finite_expectation(eta_tp, eta_fp, r),
                  "eta_fp = 1 with eta_tp^r > 0: a run would never end");
  SPECDEC_EXPECTS(valid_range(options), "first + draws overflows");
}

//! The preconditions of `sprinter::token_process` (shared with the cuda overload).
inline void check_sprinter_token_process(std::span<const double> p, std::span<const double> q, double eta_tp, double eta_fp,
                                         const run_options& options) {
  SPECDEC_EXPECTS(valid_row_pair(p, q), "p and q must be probability rows of the same non-zero length");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_tp), "eta_tp must be in [0, 1]");
  SPECDEC_EXPECTS(theory::detail::is_probability(eta_fp), "eta_fp must be in [0, 1]");
  SPECDEC_EXPECTS(valid_range(options), "first + draws overflows");
}

//! What one simulated SPRINTER position emitted (the per-draw step of `sprinter::token_process`).
struct sprinter_token_draw {
  std::size_t token = 0;           //!< the emitted token
  bool verifier_accepted = false;  //!< the verifier kept the draft token
  bool kept = false;               //!< the draft token was kept (by the verifier or the target)
  bool fallback = false;           //!< the correction's residual had no mass
};

//! One SPRINTER position on the stream `s`: x ~ q; acceptable iff q(x) <= p(x); the verifier keeps
//! x with probability eta_tp or eta_fp; otherwise the target verifies x with `rows.rule` (strict in
//! Algorithm 2). Host and device (see simulate/detail/position.hpp for `rows`).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Rows>
SPECDEC_HOST_DEVICE sprinter_token_draw sprinter_position(const Rows& rows, double eta_tp, double eta_fp,
                                                          random::philox_stream s) {
  const std::size_t x = rows.sample_q(s.uniform());
  const bool acceptable = rows.q_at(x) <= rows.p_at(x);
  if (s.uniform() < (acceptable ? eta_tp : eta_fp)) return {x, true, true, false};  // the verifier keeps x
  const position_outcome o = verify_drafted(rows, x, s);                            // Algorithm 2
  return {o.token, false, o.accepted, o.fallback};
}

}  // namespace specdec::simulate::detail

namespace specdec::simulate::sprinter {

//! The outcome of simulated SPRINTER drafting runs with an i.i.d. verifier.
struct run_tally {
  double eta_tp = 0.0, eta_fp = 0.0;  //!< the verifier's false-positive rate
  //! \var eta_tp
  //! The verifier's true-positive rate.
  int r = 0;                       //!< acceptable tokens at the head of every draft
  count_tally accepted;            //!< N per run: tokens the verifier accepted before its first rejection
  std::uint64_t draft_tokens = 0;  //!< tokens drafted (and verified): N + 1 per run, summed

  //! E[N] (Theorem 3.3, eq. (3)).
  estimate tokens() const noexcept { return accepted.summary(); }

  //! E[T_stop] = (t_d + t_v) E[N + 1]: drafting (and verifier) time until the verifier's first
  //! rejection. t_v = 0 is Theorem 3.4, eq. (4), which neglects the verifier.
  //! \pre t_d, t_v finite and >= 0. \throws specdec::error otherwise.
  estimate stopping_time(double t_d, double t_v = 0.0) const {
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_d), "t_d must be finite and >= 0");
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_v), "t_v must be finite and >= 0");
    return affine(tokens(), t_d + t_v, t_d + t_v);
  }

  //! Tokens per unit time of SPRINTER decoding in this scenario, by the renewal-reward theorem:
  //! each run emits N + 1 tokens (the verifier-accepted ones, then the target's verdict on the
  //! rejected one) and costs (N + 1)(t_d + t_v) + t_t, so the long-run rate is
  //! E[N + 1] / ((t_d + t_v) E[N + 1] + t_t); delta-method standard error. The closed form is
  //! optimize::sprinter_token_rate (optimize/threshold.hpp).
  //! \pre t_d, t_v finite and >= 0; t_t finite and > 0 or t_d + t_v > 0.
  //! \throws specdec::error otherwise.
  estimate token_rate(double t_d, double t_v, double t_t) const {
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_d), "t_d must be finite and >= 0");
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_v), "t_v must be finite and >= 0");
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_t), "t_t must be finite and >= 0");
    SPECDEC_EXPECTS(t_d + t_v + t_t > 0.0, "a run must take some time (t_d + t_v + t_t > 0)");
    const estimate n1 = affine(tokens(), 1.0, 1.0);  // E[N + 1]
    const double a = t_d + t_v, time = a * n1.mean + t_t;
    return delta_method(n1, n1.mean / time, t_t / (time * time));
  }
};

//! Simulates SPRINTER's drafting under the i.i.d. verifier of Theorem 3.3: per run, decisions
//! k = 0, 1, ... accept with probability eta_tp while k < r and eta_fp after, until the first
//! rejection. Cost per run: E[N] + 1 uniforms.
//! \pre eta_tp, eta_fp in [0, 1]; r >= 0; E[N] finite (not eta_fp = 1 with eta_tp^r > 0, where a
//!      run never ends); first + draws does not overflow.
//! \throws specdec::error otherwise.
inline run_tally verifier_chain(double eta_tp, double eta_fp, int r, const run_options& options) {
  detail::check_verifier_chain(eta_tp, eta_fp, r, options);
  const auto rr = static_cast<std::uint64_t>(r);
  auto c = detail::run_bernoulli_chain(~std::uint64_t{0}, detail::two_phase_probability{eta_tp, eta_fp, rr}, options,
                                       static_cast<std::size_t>(r) + 16);
  return {eta_tp, eta_fp, r, std::move(c.successes), c.trials};
}

//! The outcome of simulated single SPRINTER positions.
struct token_process_result {
  count_tally token;                    //!< the emitted token (histogram over [0, V)); law: Theorem 3.1
  std::uint64_t kept = 0;               //!< the draft token was kept (by the verifier or the target)
  std::uint64_t verifier_accepted = 0;  //!< the verifier accepted the draft token
  std::uint64_t fallbacks = 0;          //!< corrections for which the residual had no mass

  //! beta_SPRINTER = P(draft token kept) (Theorem A.4, eq. (34)).
  estimate acceptance() const noexcept { return bernoulli_estimate(kept, token.count()); }
  //! P(verifier accepts) = eta_tp Q_acc + eta_fp (1 - Q_acc), Q_acc = sum over x with q(x) <= p(x) of q(x).
  estimate verifier_acceptance() const noexcept { return bernoulli_estimate(verifier_accepted, token.count()); }
};

}  // namespace specdec::simulate::sprinter

namespace specdec::simulate::detail {
//! The loop of `sprinter::token_process` over any rows object (see run_sd_token_process).
template <class Rows>
sprinter::token_process_result run_sprinter_token_process(const Rows& rows, std::size_t vocab_size, double eta_tp, double eta_fp,
                                                          const run_options& options) {
  sprinter::token_process_result r;
  r.token = count_tally(vocab_size);
  const std::uint64_t end = options.first + options.draws;
  for (std::uint64_t i = options.first; i != end; ++i) {
    const sprinter_token_draw d = sprinter_position(rows, eta_tp, eta_fp, draw_stream(options, i));
    if (d.verifier_accepted) ++r.verifier_accepted;
    if (d.kept) ++r.kept;
    if (d.fallback) ++r.fallbacks;
    r.token.add(d.token);
  }
  return r;
}
}  // namespace specdec::simulate::detail

namespace specdec::simulate::sprinter {

//! Simulates one SPRINTER position per draw on actual tokens (see the file comment). The emitted
//! token has law (1 - eta_fp) p + eta_fp q (Theorem 3.1), whatever eta_tp.
//! \pre p, q probability rows of the same length V >= 1 (sums 1 within 1e-6); eta_tp, eta_fp in
//!      [0, 1]; first + draws does not overflow.
//! \throws specdec::error otherwise.
inline token_process_result token_process(std::span<const double> p, std::span<const double> q, double eta_tp, double eta_fp,
                                          const run_options& options) {
  detail::check_sprinter_token_process(p, q, eta_tp, eta_fp, options);
  return detail::run_sprinter_token_process(detail::host_rows<strict_rule>{specdec::strict, p, q}, p.size(), eta_tp, eta_fp,
                                            options);
}

}  // namespace specdec::simulate::sprinter
