//! \file acceptance/mtad.hpp
//! \brief MTAD verification (seed 003, section 3.2 and Algorithm 1): accept the longest draft prefix
//! whose JOINT likelihood ratio passes a threshold, then sample one token from the target.
//!
//! One target call scores the context plus the gamma drafts (gamma + 1 rows: row i is
//! p(. | x_{1:i})). With log p(x_{1:j}) = sum_{i < j} log p(x_{i+1} | x_{1:i}) and the drafter's
//! log q(x_{1:j}), prefix j (1 <= j <= gamma) passes iff
//!   min(1, p(x_{1:j}) / q(x_{1:j})) > tau   <=>   min(0, log p(x_{1:j}) - log q(x_{1:j})) > log tau,
//! evaluated in log space (no underflow however long the draft or small the probabilities).
//! The rule accepts j* = the LARGEST passing j (0 if none), emits x_1..x_{j*}, then samples one token
//! from the plain target row j* (no residual, as the paper does; stream position j*, purpose resample).
//!
//! **Longest passing prefix vs. first failure.** Passing is not monotone in j: a prefix can fail and a
//! longer one pass again when the later tokens have p > q (the joint ratio climbs back). The rule
//! takes the longest passing prefix, as section 3.2 says ("accepts the longest prefix sub-sequence
//! that passes verification") and as Algorithm 1 computes when its line 11 is read as eta <- i (the
//! loop keeps the LAST, i.e. deepest, passing depth). The two descriptions therefore give the same
//! j*; what differs is a chain-SD reading that stops at the first failing prefix, which would accept
//! fewer tokens (tests/acceptance/mtad.cpp has the case). Algorithm 1's eta <- -1 in line 6 is an
//! off-by-one of 0-indexed code: with no passing prefix the token is sampled from the first row
//! (j* = 0), so every iteration emits at least one token.
//!
//! **tau.** tau in [0, 1] (the paper states [0, 1); tau = 1 is allowed here). tau = 0 (log tau = -inf)
//! accepts the longest prefix whose tokens all have p > 0; tau = 1 accepts nothing, so every
//! iteration emits exactly one token sampled from p (MTAD becomes target-only sampling).
//!
//! **Guarantee.** Lossy by design (it approximates multi-token joint decoding). Every accepted prefix
//! satisfies p(x_{1:j*}) >= tau q(x_{1:j*}) (eq. (13), the basis of Lemma A.1); with
//! ||log p - log q||_inf <= U every prefix j < |log tau| / U passes (Theorem 3.6), so each iteration
//! emits at least theory::mtad::guaranteed_tokens_per_iteration(tau, U, gamma) tokens.
//!
//! **Edge cases.** A draft id outside [0, V) refuses the request (bad_draft_token, nothing emitted).
//! log q(x_{1:j}) = -inf (q was not what the draft came from) fails that prefix and flags
//! draft_prob_zero. A target entry p(x_i) that is NaN, negative or infinite stops the scan there:
//! only prefixes before it may pass, and the request is marked invalid_row with no sampled token
//! (as in every rule: an invalid request emits only the drafts accepted before the unusable row).
//! The same holds when the row to sample from is unusable.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! MTAD's acceptance test on joint log-likelihoods, with threshold tau in [0, 1].
class mtad_rule {
 public:
  //! \pre 0 <= tau <= 1 (not NaN). \throws specdec::error otherwise.
  explicit mtad_rule(double tau) : tau_(tau), log_tau_(std::log(tau)) {
    SPECDEC_EXPECTS(tau >= 0.0 && tau <= 1.0, "tau must be in [0, 1]");
  }
  //! The threshold tau.
  double tau() const noexcept { return tau_; }
  //! log tau (-inf for tau = 0).
  double log_tau() const noexcept { return log_tau_; }
  //! Whether a prefix with joint log p and joint log q passes: min(0, log_p - log_q) > log tau.
  //! A prefix with log_p = -inf or log_q = -inf never passes.
  bool passes(double log_p, double log_q) const noexcept {
    if (!(log_p > -std::numeric_limits<double>::infinity()) || !(log_q > -std::numeric_limits<double>::infinity())) return false;
    return std::min(0.0, log_p - log_q) > log_tau_;
  }

  //! Equal thresholds.
  bool operator==(const mtad_rule&) const = default;

 private:
  double tau_;
  double log_tau_;
};

//! The MTAD accepted length: the largest j in 1..n with rule.passes(log_p[j-1], log_q[j-1]), or 0.
//! \pre log_p.size() == log_q.size(). \throws specdec::error otherwise.
inline std::size_t mtad_accepted_length(const mtad_rule& rule, std::span<const double> log_p, std::span<const double> log_q) {
  SPECDEC_EXPECTS(log_p.size() == log_q.size(), "log_p and log_q must have one entry per prefix");
  for (std::size_t j = log_p.size(); j > 0; --j)
    if (rule.passes(log_p[j - 1], log_q[j - 1])) return j;
  return 0;
}

//! Verifies one MTAD draft: `drafts` (n tokens), the drafter's joint log-probabilities
//! `log_q_prefix[j - 1] = log q(x_{1:j})`, and the target's (warped) probability rows [n + 1][V]
//! from one call. Returns the accepted drafts followed by the token sampled from row j*, the number
//! accepted and the status (see the file comment).
//! \pre log_q_prefix.size() == drafts.size(); target_probs.size() == (drafts.size() + 1) * vocab_size;
//!      vocab_size >= 1; no log_q entry is NaN or +inf.
//! \throws specdec::error when a precondition fails.
template <exec::ExecutionPolicy Policy, class T>
chain_result mtad_verify(const Policy&, const mtad_rule& rule, std::span<const token_id> drafts,
                         std::span<const double> log_q_prefix, std::span<const T> target_probs, std::size_t vocab_size,
                         const random::request_stream& stream) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::mtad_verify");
  const std::size_t n = drafts.size(), V = vocab_size;
  SPECDEC_EXPECTS(V >= 1, "the vocabulary must not be empty");
  SPECDEC_EXPECTS(log_q_prefix.size() == n, "log_q_prefix must hold one joint log q per draft prefix");
  SPECDEC_EXPECTS(target_probs.size() == (n + 1) * V, "target_probs must hold (drafts.size() + 1) * V values");
  for ([[maybe_unused]] const double lq : log_q_prefix)
    SPECDEC_EXPECTS(!std::isnan(lq) && lq != std::numeric_limits<double>::infinity(), "a log q(x_{1:j}) is NaN or +inf");

  chain_result r;
  for (const token_id x : drafts)
    if (!in_vocabulary(x, V)) {
      r.status = verify_status::bad_draft_token;
      return r;
    }
  // Joint log p of every prefix, in double (-inf once a token has p = 0); stop at an unusable entry.
  std::vector<double> log_p;
  log_p.reserve(n);
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(target_probs[i * V + static_cast<std::size_t>(drafts[i])]);
    if (!(p >= 0.0) || !std::isfinite(p)) {
      r.status |= verify_status::invalid_row;
      break;
    }
    if (log_q_prefix[i] == -std::numeric_limits<double>::infinity()) r.status |= verify_status::draft_prob_zero;
    log_p.push_back(sum += std::log(p));
  }
  const std::size_t readable = log_p.size();
  const std::size_t j_star = mtad_accepted_length(rule, log_p, log_q_prefix.first(readable));
  r.num_accepted = static_cast<std::int32_t>(j_star);
  r.tokens.assign(drafts.begin(), drafts.begin() + static_cast<std::ptrdiff_t>(j_star));
  if (readable < n) return r;  // invalid: no sampled token

  const auto row = target_probs.subspan(j_star * V, V);
  const sample_result s =
      sample_categorical(row, stream.open(static_cast<std::uint32_t>(j_star), random::purpose::resample).uniform());
  if (s.status != row_status::ok) {
    r.status |= verify_status::invalid_row;
    return r;
  }
  r.tokens.push_back(s.token);
  return r;
}

//! `mtad_verify` on contiguous containers (std::vector, std::array): drafts, their joint log q and
//! the target rows [n + 1][V].
template <exec::ExecutionPolicy Policy, class T>
chain_result mtad_verify(const Policy& policy, const mtad_rule& rule, const std::vector<token_id>& drafts,
                         const std::vector<double>& log_q_prefix, const std::vector<T>& target_probs, std::size_t vocab_size,
                         const random::request_stream& stream) {
  return mtad_verify(policy, rule, std::span<const token_id>(drafts), std::span<const double>(log_q_prefix),
                     std::span<const T>(target_probs), vocab_size, stream);
}

}  // namespace specdec
