//! \file acceptance/last_token.hpp
//! \brief SPRINTER's acceptance (Zhong, Teku and Tandon, "Speeding up Speculative Decoding via Sequential
//! Approximate Verification", Algorithm 2 of appendix A.5): the drafter's verifier has already accepted the
//! leading drafts x_1..x_{n-1}, which are final; the target checks only the last one, x_n, with the standard
//! test min(1, p/q) (u from purpose::accept at stream position n - 1) and on rejection emits a token from
//! norm(max(0, p - q)) (purpose::resample, same position). No bonus token (Algorithm 2 returns Prefix + t).
//!
//! **Guarantee** (Theorem 3.1): with a verifier that accepts acceptable tokens (q(x) <= p(x)) with
//! probability eta_tp and unacceptable ones with probability eta_fp, i.i.d., a token that is not a
//! forced check is distributed as (1 - eta_fp) p + eta_fp q given its prefix, so d_TV = eta_fp d_TV(p, q)
//! per token; eta_fp = 0 is lossless. A forced check (the run reached its cap and the verifier never
//! saw x_n) is exactly standard speculative sampling: its law is p. For any verifier that accepts v
//! with probability a(v), `sprinter_token_distribution` is the exact law of one token (proof A.1,
//! eqs. (8)-(14)); tests/decode/sprinter.cpp checks it at the sequence level.
//! In the step decoder (decode/batch_decoder.hpp) a request selects this rule with `last_token`; its
//! drafter stage (draft/verifier_gated.hpp) says which drafts the verifier kept.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/acceptance/position_test.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec {

//! Selects SPRINTER's last-token check for a request of the step decoder.
struct last_token_rule {};
//! The last-token rule, as the value a request of the step decoder selects.
inline constexpr last_token_rule last_token{};

//! What the target's check of x_n produced: the emitted token (x_n, or the residual's sample), whether
//! x_n was kept, and the status (`residual_fallback` when the residual had no mass and p was sampled;
//! `invalid_row` when p or q cannot be read, with no token).
struct last_token_result {
  token_id token = no_token;                 //!< x_n when kept, else the residual's sample; no_token on `invalid_row`
  bool kept = false;                         //!< whether x_n passed the target's test
  verify_status status = verify_status::ok;  //!< ok, `residual_fallback` or `invalid_row`
};

//! Checks the last draft x (drafted at stream position `position`) against the target row p, given
//! the row q it was sampled from: the chain walk's test of one position (`test_position` with the
//! strict rule, as `verify_chain(exec::seq, strict, ...)` runs it at position `position`), then the
//! residual on rejection (see the file comment). Statuses are the chain walk's: q(x) = 0 rejects
//! without a draw (`draft_prob_zero`; a q without mass is then `invalid_row`); p(x) or q(x) NaN,
//! infinite or negative is `invalid_row`; p(x) > 1 is not checked here (the chain walk does not).
//! \pre p and q are rows of one length V >= 1. \throws specdec::error otherwise.
template <class T>
last_token_result check_last_token(token_id x, std::span<const T> q, std::span<const T> p, std::uint32_t position,
                                   const random::request_stream& stream) {
  SPECDEC_EXPECTS(!p.empty() && p.size() == q.size(), "specdec::check_last_token: p and q must be rows of one length V >= 1");
  last_token_result r;
  if (!in_vocabulary(x, p.size())) {
    r.status = verify_status::bad_draft_token;
    return r;
  }
  const auto at = static_cast<std::size_t>(x);
  const position_outcome outcome = test_position(strict, static_cast<double>(p[at]), static_cast<double>(q[at]),
                                                 [&] { return stream.open(position, random::purpose::accept).uniform(); });
  if (outcome == position_outcome::unusable) {
    r.status = verify_status::invalid_row;
    return r;
  }
  if (outcome == position_outcome::draft_prob_zero) {
    r.status |= verify_status::draft_prob_zero;
    if (!backend::seq::seq_kernels::has_mass(q)) {  // as in the chain walk: a q without mass is unusable, not a residual of p
      r.status |= verify_status::invalid_row;
      return r;
    }
  }
  if (outcome == position_outcome::accepted) {
    r.token = x;
    r.kept = true;
    return r;
  }
  const residual_result res = sample_residual(p, q, stream.open(position, random::purpose::resample).uniform());
  if (res.sample.status != row_status::ok) {
    r.status |= verify_status::invalid_row;
    return r;
  }
  if (res.used_fallback) r.status |= verify_status::residual_fallback;
  r.token = res.sample.token;
  return r;
}

//! The exact law of one SPRINTER token at a prefix (not a forced check) when the verifier accepts a
//! drafted v with probability accept_prob[v], independently of everything else:
//!   out(x) = q(x) a(x) + (1 - a(x)) min(p(x), q(x)) + R norm(max(0, p - q))(x),
//!   R = sum_v (1 - a(v)) max(0, q(v) - p(v)),
//! the verifier's keep, the target's keep, and the residual. With a(v) = eta_tp on {q <= p} and eta_fp
//! elsewhere it is Theorem 3.1's (1 - eta_fp) p + eta_fp q (proof A.1, eqs. (8)-(14)); with a = 0 it
//! is p (standard SD). A deterministic verifier has a(v) in {0, 1}.
//! \pre p, q, accept_prob, out of one length > 0; p, q probability rows (sums 1 within 1e-6); each
//!      accept_prob in [0, 1]. \throws specdec::error otherwise.
inline void sprinter_token_distribution(std::span<const double> p, std::span<const double> q, std::span<const double> accept_prob,
                                        std::span<double> out) {
  SPECDEC_EXPECTS(!p.empty() && p.size() == q.size() && p.size() == accept_prob.size() && p.size() == out.size(),
                  "p, q, accept_prob and out must have one non-zero length");
  double sp = 0.0, sq = 0.0, excess = 0.0, rejected = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    SPECDEC_EXPECTS(p[v] >= 0.0 && q[v] >= 0.0 && p[v] <= 1.0 && q[v] <= 1.0, "p and q entries must be in [0, 1]");
    SPECDEC_EXPECTS(accept_prob[v] >= 0.0 && accept_prob[v] <= 1.0, "accept_prob entries must be in [0, 1]");
    sp += p[v];
    sq += q[v];
    excess += std::max(0.0, p[v] - q[v]);
    rejected += (1.0 - accept_prob[v]) * std::max(0.0, q[v] - p[v]);
  }
  SPECDEC_EXPECTS(std::abs(sp - 1.0) <= 1e-6 && std::abs(sq - 1.0) <= 1e-6, "p and q must sum to 1 within 1e-6");
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double a = accept_prob[v];
    const double residual = excess > 0.0 ? std::max(0.0, p[v] - q[v]) / excess : p[v];  // fallback: p
    out[v] = q[v] * a + (1.0 - a) * std::min(p[v], q[v]) + rejected * residual;
  }
}

}  // namespace specdec
