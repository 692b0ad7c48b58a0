//! \file simulate/sd.hpp
//! \brief Monte-Carlo simulators of standard speculative decoding (Leviathan, Kalman and Matias
//! 2023), the processes behind the closed forms of theory/sd.hpp:
//!   - `chain(alpha, gamma)` / `chain(alphas)`: one iteration drafts gamma tokens, each accepted
//!     independently with probability alpha (alpha_i at position i) until the first rejection;
//!     T = 1 + accepted tokens per iteration (Leviathan eq. (1) and its position-dependent form);
//!   - `token_process(rule, p, q, gamma)`: the same iteration on actual tokens: each draft is
//!     sampled from q, tested with a rejection-family rule (strict, lenient, ...) against p, and
//!     corrected from the residual on rejection; after gamma acceptances the bonus token is
//!     sampled from p. With the strict rule the acceptance rate is 1 - TV(p, q) (Leviathan
//!     Def. 3.1) and every emitted token has law p.
//! Results carry the histogram of accepted drafts, means, variances and standard errors, and the
//! number of draft tokens simulated. Randomness: simulate/options.hpp (one Philox stream per draw).
//! One draw of each process is a host/device function (`run_chain_draw` in simulate/chain.hpp,
//! `sd_token_iteration` here) that the cuda backend's kernels call too (backend/cuda/simulate.cuh,
//! overloads taking exec::cuda), so the GPU gives the same counts for the same seeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/chain.hpp"
#include "specdec/simulate/detail/position.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec::simulate::detail {

//! The preconditions of `chain(alpha, gamma, options)` (shared with the cuda overload).
inline void check_sd_chain(double alpha, const run_options& options) {
  SPECDEC_EXPECTS(theory::detail::is_probability(alpha), "alpha must be in [0, 1]");
  SPECDEC_EXPECTS(valid_range(options), "first + draws overflows");
}

//! The preconditions of `chain(alphas, options)` (shared with the cuda overload).
inline void check_sd_chain(std::span<const double> alphas, const run_options& options) {
  for (const double a : alphas) SPECDEC_EXPECTS(theory::detail::is_probability(a), "every alpha_i must be in [0, 1]");
  SPECDEC_EXPECTS(valid_range(options), "first + draws overflows");
}

//! What one SD iteration on tokens produced (the per-draw step of `token_process`).
struct sd_token_draw {
  std::uint64_t accepted = 0;   //!< accepted drafts
  std::uint64_t examined = 0;   //!< drafts examined (accept tests drawn)
  std::uint64_t fallbacks = 0;  //!< corrections for which the residual had no mass
  std::size_t first_token = 0;  //!< the token emitted at position 1
  bool first_accepted = false;  //!< the first draft was accepted
  bool bonus = false;           //!< all gamma drafts passed and a bonus token was sampled from p
  std::size_t bonus_token = 0;  //!< that bonus token
};

//! One SD iteration on the stream `s`: up to gamma times, draft x ~ q and verify it
//! (`verify_drafted`); stop at the first rejection; after gamma acceptances sample the bonus token
//! from p. \pre gamma >= 1. Host and device (see simulate/detail/position.hpp for `rows`).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Rows>
SPECDEC_HOST_DEVICE sd_token_draw sd_token_iteration(const Rows& rows, std::size_t gamma, random::philox_stream s) {
  sd_token_draw d;
  for (std::size_t k = 0; k < gamma; ++k) {
    const std::size_t x = rows.sample_q(s.uniform());
    const position_outcome o = verify_drafted(rows, x, s);
    ++d.examined;
    if (k == 0) {
      d.first_token = o.token;
      d.first_accepted = o.accepted;
    }
    if (o.fallback) ++d.fallbacks;
    if (!o.accepted) return d;
    ++d.accepted;
  }
  d.bonus = true;
  d.bonus_token = rows.sample_p(s.uniform());
  return d;
}

//! The preconditions of `token_process` (shared with the cuda overload).
inline void check_sd_token_process(std::span<const double> p, std::span<const double> q, std::size_t gamma,
                                   const run_options& options) {
  SPECDEC_EXPECTS(valid_row_pair(p, q), "p and q must be probability rows of the same non-zero length");
  SPECDEC_EXPECTS(gamma >= 1, "gamma must be >= 1");
  SPECDEC_EXPECTS(valid_range(options), "first + draws overflows");
}

}  // namespace specdec::simulate::detail

namespace specdec::simulate::sd {

//! The outcome of simulated SD iterations with gamma drafts each.
struct iteration_tally {
  std::size_t gamma = 0;           //!< drafts per iteration
  count_tally accepted;            //!< accepted drafts per iteration, A in {0..gamma} (SV's N)
  std::uint64_t draft_tokens = 0;  //!< drafts the simulation examined (accept tests drawn)

  //! E[T], T = A + 1 tokens per iteration, bonus/correction token counted (Leviathan eq. (1)).
  estimate tokens() const noexcept { return affine(accepted.summary(), 1.0, 1.0); }

  //! Walltime improvement E[T] / (gamma c + 1) (Leviathan Thm 3.8): every iteration costs
  //! gamma c + 1 target-call times, so the estimate is the mean of T scaled.
  //! \pre c finite and >= 0. \throws specdec::error otherwise.
  estimate speedup(double c) const {
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(c), "c (draft cost / target cost) must be finite and >= 0");
    return affine(tokens(), 1.0 / (static_cast<double>(gamma) * c + 1.0), 0.0);
  }

  //! Walltime improvement with a latency profile: E[T] t_target(0) / (gamma t_draft + t_target(gamma))
  //! (the closed form is theory::sd::speedup(alpha, gamma, t_draft, profile)).
  //! \pre t_draft finite and >= 0; t_target(0), t_target(gamma) finite and > 0.
  //! \throws specdec::error otherwise.
  template <theory::LatencyProfile L>
  estimate speedup(double t_draft, const L& t_target) const {
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(t_draft), "t_draft must be finite and >= 0");
    const double iteration = static_cast<double>(gamma) * t_draft + theory::latency_at(t_target, gamma);
    return affine(tokens(), theory::latency_at(t_target, 0) / iteration, 0.0);
  }

  //! Operations factor (gamma c_hat + gamma + 1) / E[T] (Leviathan Thm 3.11), by the delta method.
  //! \pre c_hat finite and >= 0. \throws specdec::error otherwise.
  estimate operations_factor(double c_hat) const {
    SPECDEC_EXPECTS(theory::detail::is_nonnegative(c_hat), "c_hat must be finite and >= 0");
    const double g = static_cast<double>(gamma);
    const double k = g * c_hat + g + 1.0;
    const estimate t = tokens();
    return delta_method(t, k / t.mean, -k / (t.mean * t.mean));
  }
};

//! Simulates SD iterations with i.i.d. acceptance alpha: per iteration, up to gamma Bernoulli(alpha)
//! trials until the first failure (the process of Leviathan eq. (1), Thm 3.8 and 3.11).
//! \pre alpha in [0, 1]; first + draws does not overflow.
//! \throws specdec::error otherwise.
inline iteration_tally chain(double alpha, std::size_t gamma, const run_options& options) {
  detail::check_sd_chain(alpha, options);
  auto c = detail::run_bernoulli_chain(gamma, detail::constant_probability{alpha}, options, gamma + 1);
  return {gamma, std::move(c.successes), c.trials};
}

//! Simulates SD iterations with position-dependent acceptance: draft i (1-based) is accepted with
//! probability alphas[i-1] given that drafts 1..i-1 were; gamma = alphas.size() (the process of
//! theory::sd::expected_tokens(alphas) and tokens_variance(alphas); with alphas = a[0..gamma) it is
//! SV's appendix D eq. (3), see simulate/sv.hpp).
//! \pre every alphas[i] in [0, 1]; first + draws does not overflow.
//! \throws specdec::error otherwise.
inline iteration_tally chain(std::span<const double> alphas, const run_options& options) {
  detail::check_sd_chain(alphas, options);
  const std::uint64_t g = alphas.size();
  auto c = detail::run_bernoulli_chain(g, detail::table_probability{alphas.data()}, options, alphas.size() + 1);
  return {alphas.size(), std::move(c.successes), c.trials};
}

//! The outcome of simulated SD iterations on actual tokens.
struct token_process_result {
  iteration_tally chain;             //!< accepted drafts per iteration and drafts examined
  count_tally first_token;           //!< the token emitted at position 1 of each iteration (gamma >= 1)
  std::uint64_t first_accepted = 0;  //!< iterations whose first draft was accepted
  std::uint64_t fallbacks = 0;       //!< corrections for which the residual had no mass (p was sampled)
  count_tally bonus_token;           //!< the bonus tokens (iterations whose gamma drafts all passed); law p

  //! P(first draft accepted): the acceptance rate sum_v a(v) of the rule (1 - TV(p, q) for the
  //! strict rule, Leviathan Def. 3.1); one Bernoulli draw per iteration.
  estimate acceptance() const noexcept { return bernoulli_estimate(first_accepted, first_token.count()); }
};

}  // namespace specdec::simulate::sd

namespace specdec::simulate::detail {
//! The loop of `sd::token_process` over any rows object: `host_rows` in the CPU simulator,
//! `table_rows` to replay the same draws through sampling tables (tests/simulate/sampling_table.cpp).
template <class Rows>
sd::token_process_result run_sd_token_process(const Rows& rows, std::size_t vocab_size, std::size_t gamma,
                                              const run_options& options) {
  sd::token_process_result r;
  r.chain.gamma = gamma;
  r.chain.accepted = count_tally(gamma + 1);
  r.first_token = count_tally(vocab_size);
  r.bonus_token = count_tally(vocab_size);
  const std::uint64_t end = options.first + options.draws;
  for (std::uint64_t i = options.first; i != end; ++i) {
    const sd_token_draw d = sd_token_iteration(rows, gamma, draw_stream(options, i));
    r.chain.draft_tokens += d.examined;
    r.first_token.add(d.first_token);
    if (d.first_accepted) ++r.first_accepted;
    r.fallbacks += d.fallbacks;
    if (d.bonus) r.bonus_token.add(d.bonus_token);
    r.chain.accepted.add(d.accepted);
  }
  return r;
}
}  // namespace specdec::simulate::detail

namespace specdec::simulate::sd {

//! Simulates SD iterations on tokens with a context-free pair (the same p and q at every position):
//! draft x ~ q, accept iff rule.accepts(p(x), q(x), u), else emit a correction from
//! norm(max(0, p - a)) and end the iteration; after gamma acceptances sample the bonus token from p.
//! The exact law of the token emitted at a verified position is
//! specdec::token_distribution(rule, p, q, out) (acceptance/distribution.hpp), = p for the strict
//! rule; acceptances are i.i.d. with probability sum_v rule.accepted_mass(p(v), q(v)), so E[T] is
//! theory::sd::expected_tokens(that rate, gamma).
//! \pre p, q probability rows of the same length V >= 1 (sums 1 within 1e-6); gamma >= 1;
//!      first + draws does not overflow.
//! \throws specdec::error otherwise.
template <RejectionRule Rule>
token_process_result token_process(const Rule& rule, std::span<const double> p, std::span<const double> q, std::size_t gamma,
                                   const run_options& options) {
  detail::check_sd_token_process(p, q, gamma, options);
  return detail::run_sd_token_process(detail::host_rows<Rule>{rule, p, q}, p.size(), gamma, options);
}

}  // namespace specdec::simulate::sd
