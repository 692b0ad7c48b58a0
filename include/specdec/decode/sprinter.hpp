//! \file decode/sprinter.hpp
//! \brief The SPRINTER generation loop (Zhong, Teku and Tandon; shared/seeds/000_*.txt, Algorithm 1
//! and Algorithm 2 of appendix A.5): draft while a low-cost verifier accepts, then ONE target call
//! that checks only the last token.
//!
//! Each run (draft/verifier_gated.hpp): the drafter proposes x_1, x_2, ... and the verifier keeps
//! them while V(s(x, prefix)) >= tau. Verifier-accepted tokens are emitted without any target check.
//! When the verifier rejects x_j (or the run reaches its cap), the target is called once on
//! context + x_1..x_{j-1} and checks x_j with the standard rule min(1, p/q) (`strict_rule`, u from
//! purpose::accept); on rejection it emits a token from norm(max(0, p - q)) (`sample_residual`,
//! purpose::resample). No bonus token (Algorithm 2 returns Prefix + t).
//!
//! **Guarantee** (Theorem 3.1): with a verifier that accepts acceptable tokens (q(x) <= p(x)) with
//! probability eta_tp and unacceptable ones with probability eta_fp, i.i.d., every token that is not
//! a forced check at the cap is distributed as (1 - eta_fp) p + eta_fp q given its prefix, so
//! d_TV = eta_fp d_TV(p, q) per token; eta_fp = 0 is lossless. A forced check is exact SD (law p).
//! For any verifier whose acceptance of token v at a prefix is a(v), `sprinter_token_distribution`
//! gives the exact law. tests/decode/sprinter.cpp checks both at the sequence level.
//!
//! **Honest counting.** The target never saw the verifier-accepted tokens, so the call that checks
//! x_j must process them: it scores j positions (the previous run's last token and x_1..x_{j-1} as
//! inputs; only the last row is used). `target_positions` counts those j, the simulated time charges
//! `cost.target_time(j)`; with t_target_per_token = 0 this is the paper's "call M_p once" (eq. (6)),
//! otherwise it is the KV-cached catch-up of theory::sprinter::flops_sprinter_catch_up. The loop
//! computes only the row it needs (the reference models are stateless), so wall time is not the
//! honest measure; simulated time is. A run that ends at the generation budget with every token
//! accepted by the verifier makes no target call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/contracts.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/decode/stats.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec {

//! What SPRINTER counts beyond `decode_stats`. In the `decode_stats` of a SPRINTER result:
//! iterations = runs; drafted = draft tokens; accepted = draft tokens kept (by the verifier, or by the
//! target's check), so acceptance_rate() is Theorem A.4's beta_SPRINTER (forced checks included);
//! draft_calls = drafted; target_positions as in the file comment.
struct sprinter_stats {
  std::size_t verifier_calls = 0;     //!< verifier evaluations
  std::size_t verifier_accepted = 0;  //!< tokens kept on the verifier's word alone
  std::size_t target_checks = 0;      //!< last tokens checked by the target (= target calls)
  std::size_t target_kept = 0;        //!< checked tokens the target kept (the rest were resampled)
  std::size_t forced_checks = 0;      //!< runs that reached max_run
  std::size_t budget_ends = 0;        //!< runs that ended at the budget with no target call
  std::vector<std::size_t> run_lengths;  //!< N of each run: its verifier-accepted tokens (Theorem 3.3)

  //! Mean verifier-accepted tokens per run, the empirical E[N_SPRINTER] (Theorem 3.3).
  double mean_verifier_run() const noexcept {
    if (run_lengths.empty()) return 0.0;
    double s = 0.0;
    for (const std::size_t n : run_lengths) s += static_cast<double>(n);
    return s / static_cast<double>(run_lengths.size());
  }
  //! Accepted over evaluated by the verifier.
  double verifier_accept_rate() const noexcept {
    return verifier_calls ? double(verifier_accepted) / double(verifier_calls) : 0.0;
  }
};

//! SPRINTER's extra cost parameter: `decode_options::cost` has the draft and target times.
struct sprinter_options {
  double t_verifier = 0.0;  //!< simulated time of one verifier call (t_v <= t_d in the paper)
};

//! A SPRINTER generation: a `decode_result` (tokens, decode_stats, status) plus `sprinter_stats`.
struct sprinter_result : decode_result {
  sprinter_stats sprinter;
};

//! SPRINTER decoding of one request with a `verifier_gated_drafter` (Algorithm 2, repeated until
//! `options.max_new_tokens` tokens or the stop token). Run r uses request_stream{seed, request_id, r}.
//! \pre the drafter and the target share the vocabulary.
//! \throws specdec::error on bad options (warp, cost, t_verifier < 0 or not finite);
//!         specdec::numerical_error when a model returns an unusable row or the verifier returns NaN
//!         or a score outside [0, 1].
template <Model Target, Model DraftModel, FeatureExtractor Features, Verifier V>
sprinter_result decode_sprinter(const Target& target, verifier_gated_drafter<DraftModel, Features, V>& drafter,
                                std::span<const token_id> prompt, const decode_options& options,
                                const sprinter_options& sprinter = {}) {
  validate(options.target_params);
  validate(options.cost);
  SPECDEC_EXPECTS(std::isfinite(sprinter.t_verifier) && sprinter.t_verifier >= 0.0, "t_verifier must be finite and >= 0");
  const std::size_t Vn = static_cast<std::size_t>(target.vocab_size());
  SPECDEC_EXPECTS(drafter.vocab_size() == Vn, "the draft and target vocabularies differ");
  const auto start = std::chrono::steady_clock::now();
  sprinter_result r;
  std::vector<token_id> context(prompt.begin(), prompt.end());
  draft_block block;
  gated_run run;
  std::vector<float> logits(Vn), p(Vn);
  while (r.tokens.size() < options.max_new_tokens) {
    const random::request_stream stream{options.seed, options.request_id, static_cast<std::uint32_t>(r.stats.iterations)};
    const std::size_t n = drafter.draft(context, options.max_new_tokens - r.tokens.size(), stream, block, run);
    r.stats.draft_calls += n;
    r.sprinter.verifier_calls += run.verifier_calls;
    r.sprinter.verifier_accepted += run.verifier_accepted;
    r.sprinter.run_lengths.push_back(run.verifier_accepted);
    r.stats.simulated_time += static_cast<double>(n) * options.cost.t_draft +
                              static_cast<double>(run.verifier_calls) * sprinter.t_verifier;
    std::size_t kept = run.verifier_accepted;
    const std::size_t before = context.size();
    // Verifier-accepted tokens are final (Algorithm 2: Prefix = Prefix + x while V >= tau).
    context.insert(context.end(), block.tokens.begin(), block.tokens.begin() + static_cast<std::ptrdiff_t>(run.verifier_accepted));
    if (run.needs_check()) {
      // One target call: it processes the n - 1 accepted tokens and scores the last one (n positions).
      target.next_logits(std::span<const token_id>(context), std::span<float>(logits));
      detail::warp_rows(logits, p, Vn, options.target_params);
      ++r.stats.target_calls;
      r.stats.target_positions += n;
      r.stats.simulated_time += options.cost.target_time(n);
      ++r.sprinter.target_checks;
      if (run.forced_check) ++r.sprinter.forced_checks;
      const token_id x = block.tokens[n - 1];
      const std::span<const float> q(block.q_rows.data() + (n - 1) * Vn, Vn);
      const auto pos = static_cast<std::uint32_t>(n - 1);
      const double px = static_cast<double>(p[static_cast<std::size_t>(x)]);
      const double qx = static_cast<double>(q[static_cast<std::size_t>(x)]);
      token_id emitted = x;
      if (strict.accepts(px, qx, stream.open(pos, random::purpose::accept).uniform())) {
        ++kept;
        ++r.sprinter.target_kept;
      } else {
        const residual_result res = sample_residual(std::span<const float>(p), q, stream.open(pos, random::purpose::resample).uniform());
        if (res.used_fallback) r.status |= verify_status::residual_fallback;
        emitted = res.sample.token;
      }
      context.push_back(emitted);
    } else {
      ++r.sprinter.budget_ends;
    }
    r.stats.record_round(n, kept);
    r.tokens.insert(r.tokens.end(), context.begin() + static_cast<std::ptrdiff_t>(before), context.end());
    if (detail::finish(r, options)) break;
  }
  r.stats.emitted = r.tokens.size();
  r.stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

//! SPRINTER with a drafter built from `draft` (warped with `draft_params`), the feature extractor
//! `features`, the verifier `verifier` and the gating parameters `gating` (tau, max_run).
//! \throws as the constructor of `verifier_gated_drafter` and the overload above.
template <Model Target, Model DraftModel, FeatureExtractor Features, Verifier V>
sprinter_result decode_sprinter(const Target& target, const DraftModel& draft, const warp_params& draft_params,
                                Features features, V verifier, const gating_params& gating,
                                std::span<const token_id> prompt, const decode_options& options,
                                const sprinter_options& sprinter = {}) {
  verifier_gated_drafter<DraftModel, Features, V> drafter(draft, draft_params, std::move(features), std::move(verifier), gating);
  return decode_sprinter(target, drafter, prompt, options, sprinter);
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
inline void sprinter_token_distribution(std::span<const double> p, std::span<const double> q,
                                        std::span<const double> accept_prob, std::span<double> out) {
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
