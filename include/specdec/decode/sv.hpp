//! \file decode/sv.hpp
//! \brief Speculative Verification (Kim et al., SV,
//! "Speculative Verification: Exploiting Information Gain for Speculative Decoding", sections 4-5) on the step
//! decoder (decode/batch_decoder.hpp): each round drafts gamma_max tokens; SV's verified-length stage
//! runs a companion model on the same context to get P_c at every drafted position, computes SV's
//! indicators S and A (estimate/indicators.hpp), turns them into acceptance estimates
//! (estimate/acceptance_estimator.hpp) and chooses how many drafts to verify (optimize/sv_length.hpp
//! per request: `sv_request_lengths`; optimize/batch_scheduler.hpp across a batch: `sv_batch_lengths`);
//! the target verifies that prefix with the strict rule and the rest is dropped.
//!
//! **Is SV lossless? It depends on what the length decision looks at.** The paper argues (section 4.2)
//! that a verified token is accepted by the standard rule and a dropped one is produced by the target,
//! so the output follows the target. That is true only if the decision to verify drafted position j
//! does not depend on the drafted token x_j itself. Once it does, the verified tokens are a selected
//! sample of q, not q, and min(1, p/q) no longer corrects them to p. One position, p = (0.5, 0.5),
//! q = (0.9, 0.1), "verify x only if x = 0": P(emit 0) = 0.9 min(1, 0.5/0.9) + 0.1 p(0) = 0.55, not 0.5.
//! SV's A_j = min(1, P_c(x_j)/P_d(x_j)) depends on x_j, so two modes are offered:
//!   - `sv_mode::paper`: a_j = P(accept | S_j, A_j) at every position, as the paper does. **Not
//!     lossless in general**: tests/decode/sv.cpp enumerates its exact output law on a small Markov
//!     triple (total variation from the target > 0) and its chi-squared test rejects it.
//!   - `sv_mode::exact` (the default): the decision on position j uses only what is known before x_j
//!     was drawn: the gain of position j is prod_{i<j} P(accept | S_i, A_i) * P(accept | S_j) (S_j
//!     depends on the context x_{<j} only; A_j enters the gains of later positions). With the
//!     incremental search (single request) or the greedy's first-drop rule (batch) the decision "verify
//!     j" is then a function of x_{<j} (and of other requests' independent drafts): a stopping time of
//!     the draft process, which keeps the output exactly target-distributed (tested by chi-squared
//!     against the target). Brute force and `stop_rule::best_prefix` look at later positions and are
//!     refused in this mode.
//!
//! **Why a verified-length stage, not a `LengthPolicy`.** A `LengthPolicy` (length/fixed.hpp) picks the
//! draft length from past statistics before drafting. SV drafts gamma_max tokens first and picks the
//! verified length from those tokens' indicators, so its choice is the decoder's stage between
//! drafting and verification (`verify_length_stage`); the draft length itself is `gamma_max`.
//!
//! **Counting and cost.** `decode_stats` counts verified tokens as `drafted` (so `acceptance_rate()` is
//! accepted / verified, SV's token accept rate); `sv_stats` adds the tokens actually drafted and
//! dropped, the companion calls and the histogram of verified lengths (SV Table 9's fairness data).
//! The companion scores all drafted positions of a round in one call (`score_batch`: a parallel forward
//! over the tokens the drafters produced, every request's in one forward of a KV-cached companion),
//! charged `t_companion` of simulated time.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/estimate/acceptance_estimator.hpp"
#include "specdec/estimate/binning.hpp"
#include "specdec/estimate/indicators.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/optimize/batch_scheduler.hpp"
#include "specdec/optimize/latency_table.hpp"
#include "specdec/optimize/sv_length.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec {

//! What the verification-length decision may look at (see the file comment).
enum class sv_mode {
  exact,  //!< position j judged on P(accept | S_j) and the exact estimates of positions < j: lossless
  paper,  //!< every position judged on P(accept | S_j, A_j), as in the paper: not lossless in general
};

//! How a single request's verification length is searched (optimize/sv_length.hpp).
enum class length_search {
  incremental,  //!< SV section 5: grow while the goodput improves (the only search allowed in exact mode)
  brute_force,  //!< every length, the best one (paper mode only)
};

//! Per-position marginal gains of a round (optimize/sv_length.hpp): with a_i = P(accept | S_i, A_i),
//! paper mode g_j = prod_{i<=j} a_i (SV eq. (3)); exact mode g_j = prod_{i<j} a_i * P(accept | S_j).
//! \pre s, a and gains have the same length; S and A in [0, 1]. \throws specdec::error otherwise.
inline void sv_gains(const estimate::acceptance_estimator& estimator, std::span<const double> s, std::span<const double> a,
                     sv_mode mode, std::span<double> gains) {
  SPECDEC_EXPECTS(s.size() == a.size() && a.size() == gains.size(), "s, a and gains must have the same length");
  double prefix = 1.0;  // prod_{i<j} P(accept | S_i, A_i)
  for (std::size_t j = 0; j < s.size(); ++j) {
    const double full = estimator(s[j], a[j]);
    gains[j] = prefix * (mode == sv_mode::paper ? full : estimator.given_similarity(s[j]));
    prefix *= full;
  }
}

//! The verification length of one request from its round's gains: the incremental search or brute
//! force of optimize/sv_length.hpp on `latency` (k = drafted tokens verified).
//! \throws specdec::error for brute force in exact mode (it would look at later drafts and lose
//!         exactness), and whatever the optimiser throws.
template <theory::LatencyProfile L>
std::size_t choose_sv_length(std::span<const double> gains, const L& latency, sv_mode mode, length_search search,
                             optimize::token_counting counting) {
  SPECDEC_EXPECTS(!(mode == sv_mode::exact && search == length_search::brute_force),
                  "exact SV needs the incremental search: brute force looks at later drafts and loses exactness");
  return search == length_search::incremental ? optimize::incremental_length_from_gains(gains, latency, counting).length
                                              : optimize::best_length_from_gains(gains, latency, counting).length;
}

//! SV's own counters, next to `decode_stats`.
struct sv_stats {
  std::size_t drafted = 0;                          //!< tokens drafted (verified + dropped)
  std::size_t dropped = 0;                          //!< drafted tokens never sent to the target
  std::size_t companion_calls = 0;                  //!< one per round with at least one draft
  std::vector<std::size_t> verified_length_counts;  //!< [n]: rounds that verified n drafts (SV Table 9)

  //! Mean number of drafts verified per round.
  double mean_verified_length() const noexcept {
    std::size_t rounds = 0, total = 0;
    for (std::size_t n = 0; n < verified_length_counts.size(); ++n) {
      rounds += verified_length_counts[n];
      total += n * verified_length_counts[n];
    }
    return rounds ? static_cast<double>(total) / static_cast<double>(rounds) : 0.0;
  }
  //! Records a round that drafted `drafted_now` tokens, verified `verified` and called the companion or not.
  void record(std::size_t drafted_now, std::size_t verified, bool companion_called) {
    drafted += drafted_now;
    dropped += drafted_now - verified;
    companion_calls += companion_called;
    if (verified_length_counts.size() <= verified) verified_length_counts.resize(verified + 1, 0);
    ++verified_length_counts[verified];
  }
};

//! A generation by SV: the common result plus SV's counters.
struct sv_result : decode_result {
  sv_stats sv;  //!< SV's own counters
};

//! Options of single-request SV.
struct sv_options {
  std::size_t gamma_max = 5;                          //!< tokens drafted per round (the paper's draft length)
  sv_mode mode = sv_mode::exact;                      //!< what the length decision may look at
  length_search search = length_search::incremental;  //!< how the verified length is searched (incremental in exact mode)
  optimize::token_counting counting = optimize::token_counting::accepted_drafts;  //!< goodput numerator
  warp_params companion_params{};                                                 //!< how the companion's logits become P_c
  double t_companion = 0.05;  //!< simulated time of one companion call (all positions)
};

//! The latency of one single-request SV step that verifies k drafts, under a cost model:
//! gamma_max * t_draft + t_companion + t_target(k + 1) (drafting and the companion are spent before the
//! choice, the target scores k + 1 positions). A `theory::LatencyProfile` for `decode_sv`.
struct sv_step_latency {
  cost_model cost{};          //!< the draft and target times
  std::size_t gamma_max = 5;  //!< gamma_max, the drafts per round
  double t_companion = 0.05;  //!< the simulated time of one companion call
  //! L(k). \pre k >= 0.
  double operator()(int k) const {
    return static_cast<double>(gamma_max) * cost.t_draft + t_companion + cost.target_time(static_cast<std::size_t>(k) + 1);
  }
};

//! What SV's verified-length stage reads besides its options (section 5): the companion model that
//! scores the drafted positions, the acceptance estimator P(accept | S, A) fitted on profiling
//! samples (`profile_sv_indicators`), and a latency profile. `decode_sv` reads `latency` as L(k), the
//! latency of one step that verifies k drafts (e.g. `sv_step_latency`); `decode_sv_batch` reads it as
//! the target's latency for one call scoring P positions in all (P >= 1). The companion and the
//! estimator are held by reference and must outlive the call; the latency profile is copied.
//! \code
//!   const auto r = specdec::decode_sv(specdec::exec::seq, target, draft, draft_params,
//!                                     specdec::sv_setup{companion, estimator, latency}, prompt, options, sv);
//! \endcode
template <Model Companion, theory::LatencyProfile L>
struct sv_setup {
  const Companion& companion;                       //!< a `Model` over the target's vocabulary, run on the drafted positions
  const estimate::acceptance_estimator& estimator;  //!< P(accept | S, A), fitted on profiling samples
  L latency;                                        //!< the latency profile (see above for what each entry reads)
};

//! `sv_setup{companion, estimator, latency}` deduces the companion's and the profile's types.
template <class Companion, class L>
sv_setup(const Companion&, const estimate::acceptance_estimator&, L) -> sv_setup<Companion, L>;

namespace detail {
//! Buffers of a round's indicators and gains, request k's at [first[k], first[k + 1]).
struct sv_workspace {
  std::vector<float> logits, companion_rows;
  std::vector<double> s, a, gains;
  std::vector<std::size_t> first;
  std::vector<std::span<const token_id>> contexts, continuations;
};

//! S and A of every drafted position of a round's requests: one `score_batch` call of the companion
//! scores them all (rows after context + drafts[0..j), j < n, of each request with drafts; a KV-cached
//! companion such as `prefix_cached_model` makes it one forward for the batch), its rows are warped
//! into P_c and compared with the q rows.
//! \throws specdec::error when a request with drafts lacks their q rows (a beam drafter);
//!         specdec::numerical_error when the companion returns a row without usable mass.
template <exec::ExecutionPolicy Policy, Model C>
void sv_round_indicators(const Policy& policy, const C& companion, const warp_params& companion_params,
                         std::span<const drafted_request> requests, sv_workspace& w) {
  const std::size_t V = companion.vocab_size();
  w.first.clear();
  w.contexts.clear();
  w.continuations.clear();
  std::size_t n = 0;
  for (const drafted_request& d : requests) {
    w.first.push_back(n);
    if (d.drafts.empty()) continue;
    SPECDEC_EXPECTS(d.q_rows.size() == d.drafts.size() * V, "SV's length stage needs the q rows of the drafts (a chain drafter)");
    w.contexts.push_back(d.context);
    w.continuations.push_back(d.drafts.first(d.drafts.size() - 1));
    n += d.drafts.size();
  }
  w.first.push_back(n);
  w.s.resize(n);
  w.a.resize(n);
  if (n == 0) return;
  w.logits.resize(n * V);
  w.companion_rows.resize(n * V);
  score_batch(companion, std::span<const std::span<const token_id>>(w.contexts),
              std::span<const std::span<const token_id>>(w.continuations), std::span<float>(w.logits));
  warp_rows(w.logits, w.companion_rows, V, companion_params);
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const std::size_t at = w.first[k], count = w.first[k + 1] - at;
    if (count == 0) continue;
    estimate::compute_indicators(
        policy, specdec::row_batch<const float>(requests[k].q_rows, V),
        specdec::row_batch<const float>(std::span<const float>(w.companion_rows).subspan(at * V, count * V), V),
        requests[k].drafts, std::span<double>(w.s).subspan(at, count), std::span<double>(w.a).subspan(at, count));
  }
}

//! The gains of `mode` for every drafted position of a round (`sv_round_indicators`, then `sv_gains`
//! per request): request k's at [w.first[k], w.first[k + 1]) of w.gains.
template <exec::ExecutionPolicy Policy, Model C>
void sv_round_gains(const Policy& policy, const C& companion, const warp_params& companion_params,
                    const estimate::acceptance_estimator& estimator, sv_mode mode, std::span<const drafted_request> requests,
                    sv_workspace& w) {
  sv_round_indicators(policy, companion, companion_params, requests, w);
  w.gains.resize(w.s.size());
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const std::size_t at = w.first[k], count = w.first[k + 1] - at;
    sv_gains(estimator, std::span<const double>(w.s).subspan(at, count), std::span<const double>(w.a).subspan(at, count), mode,
             std::span<double>(w.gains).subspan(at, count));
  }
}

//! Request k's gains of the last `sv_round_gains`.
inline std::span<const double> request_gains(const sv_workspace& w, std::size_t k) {
  return std::span<const double>(w.gains).subspan(w.first[k], w.first[k + 1] - w.first[k]);
}
}  // namespace detail

//! SV's verified-length stage for single requests (section 5): after drafting, the companion's
//! indicators give each request's gains and `choose_sv_length` its goodput-optimal length on
//! `setup.latency` (L(k): one step that verifies k drafts). The stage refers to `setup.companion` and
//! `setup.estimator`, which must outlive it, and copies the latency profile.
//! \throws specdec::error for brute force in exact mode, or a latency profile that decreases over
//!         k = 0..gamma_max.
template <exec::ExecutionPolicy Policy, Model Companion, theory::LatencyProfile L>
verify_length_stage sv_request_lengths(Policy policy, const sv_setup<Companion, L>& setup, const sv_options& sv) {
  validate(sv.companion_params);
  SPECDEC_EXPECTS(!(sv.mode == sv_mode::exact && sv.search == length_search::brute_force),
                  "exact SV needs the incremental search: brute force looks at later drafts and loses exactness");
  // Read at k = 0..gamma_max every round: refused here, not at a round (the decoder would end the
  // request a verified-length stage throws for, not the call).
  optimize::check_latency_profile(setup.latency, 0, static_cast<int>(sv.gamma_max));
  return [=, c = &setup.companion, e = &setup.estimator, latency = setup.latency, w = detail::sv_workspace{}](
             std::span<const drafted_request> requests, std::span<std::size_t> lengths) mutable {
    detail::sv_round_gains(policy, *c, sv.companion_params, *e, sv.mode, requests, w);
    for (std::size_t k = 0; k < requests.size(); ++k)
      if (!requests[k].drafts.empty())
        lengths[k] = choose_sv_length(detail::request_gains(w, k), latency, sv.mode, sv.search, sv.counting);
  };
}

namespace detail {
//! A single SV generation on a decoder whose request drafts `gamma_max` per round: SV's counters from
//! the step events, the companion's time added to the simulated clock.
template <class Decoder>
sv_result run_sv_request(Decoder& decoder, request_options o, const cost_model& cost, const sv_options& sv) {
  o.gamma = sv.gamma_max;
  sv_result r;
  run_request(decoder, std::move(o), cost, r, [&](const step_event& e) {
    if (!e.target_logits.empty()) r.sv.record(e.drafted, e.verified, e.drafted > 0);
  });
  r.stats.simulated_time += static_cast<double>(r.sv.companion_calls) * sv.t_companion;
  return r;
}
}  // namespace detail

//! Speculative Verification of one request: the step decoder with `drafter` as drafter stage (gamma_max
//! drafts per round), SV's verified-length stage (`sv_request_lengths`) and the strict rule.
//! \param policy     the backend: `exec::seq`, `exec::simd`, `exec::cuda` (exec/policy.hpp)
//! \param target     the target `Model`; its rows are warped with `options.target_params`
//! \param drafter    proposes gamma_max tokens per round and their q rows (`chain_drafter`)
//! \param setup      the companion (run on the same contexts as the drafter), the estimator
//!                   P(accept | S, A) and L(k), the latency of a step that verifies k drafts
//!                   (e.g. `sv_step_latency`): `sv_setup{companion, estimator, latency}`
//! \param sv         SV's options: gamma_max, mode, length search, companion warp and companion time
//! \param prompt     the prompt, not empty
//! \param options    max_new_tokens, seed, request_id, stop tokens and target warp
//! \param cost       the draft and target times the simulated clock charges
//!
//! Randomness: round r uses request_stream{seed, request_id, r}, as `decode` does. A model's unusable
//! row ends the generation with `invalid_row` in `status`; the companion's throws.
//! \pre the models share the vocabulary; options valid. \throws specdec::error on bad options or
//!      shapes, brute force in exact mode, a bad latency profile, or an empty prompt;
//!      specdec::numerical_error when the companion returns a row without usable mass.
template <exec::ExecutionPolicy Policy, Model Target, Drafter D, Model Companion, theory::LatencyProfile L>
sv_result decode_sv(const Policy& policy, const Target& target, D& drafter, const sv_setup<Companion, L>& setup,
                    const sv_options& sv, std::span<const token_id> prompt, const decode_options& options,
                    const cost_model& cost = {}) {
  SPECDEC_EXPECTS(target.vocab_size() == setup.companion.vocab_size(), "the target and the companion must share the vocabulary");
  SPECDEC_EXPECTS(std::isfinite(sv.t_companion) && sv.t_companion >= 0.0, "t_companion must be finite and >= 0");
  recomputing_sequence_model<Target> t(target);
  no_sequence_model none(target.vocab_size());
  batch_decoder decoder(policy, t, none, strict);
  decoder.set_verify_length_stage(sv_request_lengths(policy, setup, sv));
  request_options o = detail::request_of(prompt, options);
  o.drafter = drafter_stage(drafter);
  return detail::run_sv_request(decoder, std::move(o), cost, sv);
}

//! Single-request SV with the decoder's chain drafting on `draft` warped with `draft_params`; the
//! other arguments as in the overload above.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, Model Companion, theory::LatencyProfile L>
sv_result decode_sv(const Policy& policy, const Target& target, const Draft& draft, const warp_params& draft_params,
                    const sv_setup<Companion, L>& setup, const sv_options& sv, std::span<const token_id> prompt,
                    const decode_options& options, const cost_model& cost = {}) {
  SPECDEC_EXPECTS(target.vocab_size() == setup.companion.vocab_size(), "the target and the companion must share the vocabulary");
  SPECDEC_EXPECTS(std::isfinite(sv.t_companion) && sv.t_companion >= 0.0, "t_companion must be finite and >= 0");
  recomputing_sequence_model<Target> t(target);
  recomputing_sequence_model<Draft> q(draft);
  batch_decoder decoder(policy, t, q, strict);
  decoder.set_verify_length_stage(sv_request_lengths(policy, setup, sv));
  request_options o = detail::request_of(prompt, options);
  o.draft_params = draft_params;
  return detail::run_sv_request(decoder, std::move(o), cost, sv);
}

// ---- batches -------------------------------------------------------------------------------------

//! How a batch round chooses its verification lengths.
enum class batch_length_rule {
  fixed,  //!< verify every drafted token: standard SD (gamma_max = 0: target-only decoding)
  sv,     //!< SV's greedy batch scheduler on the companion's estimates
};

//! Options of a batched generation. Simulated time per round: gamma_round * t_draft_step (+
//! t_companion_step with SV) + target_latency(active requests + verified drafts).
struct sv_batch_options {
  std::size_t gamma_max = 5;                       //!< tokens drafted per request and round
  batch_length_rule rule = batch_length_rule::sv;  //!< fixed (SD / target-only) or SV
  sv_mode mode = sv_mode::exact;                   //!< what SV's decision may look at
  optimize::batch_scheduler_options scheduler{};   //!< counting and stop rule of the greedy
  warp_params companion_params{};                  //!< how the companion's logits become P_c
  double t_draft_step = 0.05;                      //!< one batched draft forward (one position of every request)
  double t_companion_step = 0.05;                  //!< one batched companion call scoring every drafted position
  bool drafting_in_goodput = true;                 //!< the scheduler's L(K) includes the round's drafting time
};

//! A batched generation: per-request results and the batch's simulated time.
struct sv_batch_result {
  std::vector<sv_result> requests;  //!< in prompt order; stats.simulated_time = time while active
  std::size_t rounds = 0;           //!< lockstep rounds (one batched target call each)
  double simulated_time = 0.0;      //!< total simulated time of the batch
  double wall_seconds = 0.0;        //!< measured
  //! Tokens emitted by all requests.
  std::size_t emitted() const noexcept {
    std::size_t n = 0;
    for (const auto& r : requests) n += r.tokens.size();
    return n;
  }
  //! Emitted tokens per unit of simulated time (the batch goodput of SV Figure 3).
  double goodput() const noexcept { return simulated_time > 0.0 ? static_cast<double>(emitted()) / simulated_time : 0.0; }
};

//! SV's verified-length stage for a batch (section 6): after drafting, the companion's indicators give
//! every request's gains and the greedy scheduler (optimize/batch_scheduler.hpp) picks all lengths on
//! L(K) = drafting + target_latency(B + K), B the requests of the round and drafting its gamma_round
//! draft steps and companion call (`drafting_in_goodput`), target_latency = `setup.latency`. The stage
//! refers to `setup.companion` and `setup.estimator`, which must outlive it, and copies the latency
//! profile. \throws specdec::error for `stop_rule::best_prefix` in exact mode.
template <exec::ExecutionPolicy Policy, Model Companion, theory::LatencyProfile TL>
verify_length_stage sv_batch_lengths(Policy policy, const sv_setup<Companion, TL>& setup, const sv_batch_options& batch) {
  validate(batch.companion_params);
  SPECDEC_EXPECTS(!(batch.mode == sv_mode::exact && batch.scheduler.stop == optimize::stop_rule::best_prefix),
                  "exact SV needs the first-drop rule: best_prefix looks at later drafts and loses exactness");
  return
      [=, c = &setup.companion, e = &setup.estimator, target_latency = setup.latency, w = detail::sv_workspace{},
       drafted = std::vector<std::size_t>{}](std::span<const drafted_request> requests, std::span<std::size_t> lengths) mutable {
        drafted.clear();
        std::size_t gamma_round = 0;
        for (const drafted_request& d : requests) {
          drafted.push_back(d.drafts.size());
          gamma_round = std::max(gamma_round, d.drafts.size());
        }
        detail::sv_round_gains(policy, *c, batch.companion_params, *e, batch.mode, requests, w);  // every request's, in order
        const double drafting =
            static_cast<double>(gamma_round) * batch.t_draft_step + (gamma_round > 0 ? batch.t_companion_step : 0.0);
        const optimize::offset_latency<TL> step{&target_latency, static_cast<int>(requests.size()),
                                                batch.drafting_in_goodput ? drafting : 0.0};
        const auto schedule = optimize::schedule_batch_from_gains(std::span<const double>(w.gains),
                                                                  std::span<const std::size_t>(drafted), step, batch.scheduler);
        std::copy(schedule.lengths.begin(), schedule.lengths.end(), lengths.begin());
      };
}

//! Decodes B requests together on the step decoder (chain drafting on `draft`, the strict rule): every
//! round, each unfinished request drafts gamma_max tokens (fewer near its budget) and, with
//! `batch_length_rule::sv`, SV's batch stage (`sv_batch_lengths`) picks how many each verifies; with
//! `fixed` every draft is verified (SD; gamma_max = 0: target-only decoding) and the companion is not
//! run. The simulated clock charges each round gamma_round * t_draft_step (+ t_companion_step with SV)
//! + target_latency(active requests + verified drafts), one batched target call.
//! Request b uses request_stream{seed, request_id + b, round}, so its randomness does not depend on the
//! rest of the batch. Exactness: as for `decode_sv` (exact mode with the first-drop rule is lossless
//! per request, and requests stay independent).
//! \param policy          the backend: `exec::seq`, `exec::simd`, `exec::cuda` (exec/policy.hpp)
//! \param target          the target `Model`; its rows are warped with `options.target_params`
//! \param draft           the draft `Model`, which drafts the chains
//! \param draft_params    how the draft's rows are warped before drafting from them
//! \param setup           the companion (run on the drafted positions, SV only), the estimator
//!                        P(accept | S, A) and the target's latency for one call scoring P positions
//!                        in all (P >= 1): `sv_setup{companion, estimator, target_latency}`
//! \param batch           SV's batch options: gamma_max, the length rule, the scheduler, the round's costs
//! \param prompts         one prompt per request, none empty
//! \param options         what every request shares (request b's id is options.request_id + b)
//! \pre the models share the vocabulary; options valid. \throws specdec::error on bad options,
//!      `stop_rule::best_prefix` in exact mode, a bad latency profile, or an empty prompt.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, Model Companion, theory::LatencyProfile TL>
sv_batch_result decode_sv_batch(const Policy& policy, const Target& target, const Draft& draft, const warp_params& draft_params,
                                const sv_setup<Companion, TL>& setup, const sv_batch_options& batch,
                                std::span<const std::vector<token_id>> prompts, const decode_options& options) {
  SPECDEC_EXPECTS(target.vocab_size() == setup.companion.vocab_size(), "the target and the companion must share the vocabulary");
  SPECDEC_EXPECTS(std::isfinite(batch.t_draft_step) && batch.t_draft_step >= 0.0 && std::isfinite(batch.t_companion_step) &&
                      batch.t_companion_step >= 0.0,
                  "t_draft_step and t_companion_step must be finite and >= 0");
  const bool use_sv = batch.rule == batch_length_rule::sv;
  const auto start = std::chrono::steady_clock::now();
  recomputing_sequence_model<Target> t(target);
  recomputing_sequence_model<Draft> q(draft);
  batch_decoder decoder(policy, t, q, strict);
  const TL& target_latency = setup.latency;
  if (use_sv) decoder.set_verify_length_stage(sv_batch_lengths(policy, setup, batch));
  sv_batch_result out;
  out.requests.resize(prompts.size());
  std::vector<request_handle> handles;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    request_options o = detail::request_of(std::span<const token_id>(prompts[b]), options);
    o.request_id = options.request_id + static_cast<std::uint32_t>(b);
    o.draft_params = draft_params;
    o.gamma = batch.gamma_max;
    handles.push_back(decoder.add(std::move(o)));
  }
  std::vector<double> time(prompts.size(), 0.0);
  while (decoder.active() > 0) {
    const std::span<const step_event> events = decoder.step();
    std::size_t gamma_round = 0, verified = 0, active = 0;
    for (const step_event& e : events)
      if (!e.target_logits.empty()) {
        ++active;
        gamma_round = std::max(gamma_round, e.drafted);
        verified += e.verified;
      }
    if (active == 0) continue;
    const double drafting =
        static_cast<double>(gamma_round) * batch.t_draft_step + (use_sv && gamma_round > 0 ? batch.t_companion_step : 0.0);
    const double round_time = drafting + theory::latency_at(target_latency, active + verified);
    out.simulated_time += round_time;
    ++out.rounds;
    for (const step_event& e : events) {
      const auto b = static_cast<std::size_t>(std::find(handles.begin(), handles.end(), e.request) - handles.begin());
      sv_result& r = out.requests[b];
      if (!e.target_logits.empty()) {
        r.sv.record(e.drafted, e.verified, use_sv && e.drafted > 0);
        time[b] += round_time;
      }
      r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
      r.status = e.status;
      if (e.finished != finish_reason::none) r.stats = decoder.stats(e.request);
    }
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    out.requests[b].stats.simulated_time = time[b];
    out.requests[b].stats.wall_seconds = out.wall_seconds;
  }
  return out;
}

// ---- profiling -----------------------------------------------------------------------------------

//! Options of `profile_sv_indicators`.
struct sv_profile_options {
  std::size_t gamma = 5;               //!< SD's draft length during profiling
  std::size_t tokens_per_prompt = 64;  //!< tokens generated from each prompt
  bool accept_bits = false;            //!< record sampled accept bits instead of probabilities
  warp_params companion_params{};      //!< how the companion's logits become P_c
};

//! Profiling samples for the acceptance estimator (SV section 7.4's procedure): runs standard SD
//! (strict rule, fixed gamma) from every prompt and, for every drafted token, records S, A and x =
//! min(1, p(t)/q(t)) (or, with `accept_bits`, a bit drawn with that probability from the stream's
//! `simulate` purpose). Every drafted position is recorded, also those after a rejection (the target's
//! acceptance probability is defined on the drafted context): at inference SV estimates every drafted
//! position too (Assumption D.9 asks the two distributions to match).
//! Prompt i uses request id options.request_id + i.
//! \pre the models share the vocabulary. \throws as `decode`.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, Model Companion>
std::vector<estimate::indicator_sample> profile_sv_indicators(const Policy& policy, const Target& target, const Draft& draft,
                                                              const warp_params& draft_params, const Companion& companion,
                                                              const sv_profile_options& profile,
                                                              std::span<const std::vector<token_id>> prompts,
                                                              const decode_options& options) {
  validate(options.target_params);
  validate(profile.companion_params);
  SPECDEC_EXPECTS(target.vocab_size() == companion.vocab_size(), "the target and the companion must share the vocabulary");
  const std::size_t V = target.vocab_size();
  recomputing_sequence_model<Target> t(target);
  recomputing_sequence_model<Draft> q(draft);
  batch_decoder decoder(policy, t, q, strict);
  // The verified-length stage only observes: S, A, q(x_j) and the stream of each round's drafts.
  detail::sv_workspace w;
  std::vector<double> s, a, qx;
  random::request_stream stream{};
  decoder.set_verify_length_stage([&](std::span<const drafted_request> requests, std::span<std::size_t>) {
    const drafted_request& d = requests.front();
    detail::sv_round_indicators(policy, companion, profile.companion_params, requests.first(1), w);
    s = w.s;
    a = w.a;
    qx.clear();
    for (std::size_t j = 0; j < d.drafts.size(); ++j) qx.push_back(d.q_rows[j * V + static_cast<std::size_t>(d.drafts[j])]);
    stream = d.stream;
  });
  std::vector<estimate::indicator_sample> samples;
  std::vector<float> p(V);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    request_options o = detail::request_of(std::span<const token_id>(prompts[i]), options);
    o.request_id = options.request_id + static_cast<std::uint32_t>(i);
    o.draft_params = draft_params;
    o.gamma = profile.gamma;
    o.max_new_tokens = profile.tokens_per_prompt + profile.gamma + 1;  // every round drafts gamma
    const request_handle h = decoder.add(std::move(o));
    while (decoder.active() > 0) {
      const step_event& e = decoder.step().front();
      if (e.target_logits.empty()) continue;
      // x = min(1, p(x_j) / q(x_j)) of every drafted position, also those after a rejection.
      random::philox_stream bits = stream.open(0, random::purpose::simulate);
      for (std::size_t j = 0; j < e.drafted; ++j) {
        if (warp_logits(e.target_logits.subspan(j * V, V), std::span<float>(p), options.target_params) != row_status::ok)
          throw numerical_error("specdec::profile_sv_indicators: the target returned a row without usable mass");
        const double pj = p[static_cast<std::size_t>(e.drafts[j])];
        const double x = qx[j] > 0.0 ? std::min(1.0, pj / qx[j]) : 0.0;
        samples.push_back({s[j], a[j], profile.accept_bits ? (bits.uniform() < x ? 1.0 : 0.0) : x});
      }
      if (e.finished == finish_reason::none && decoder.tokens(h).size() >= profile.tokens_per_prompt) decoder.cancel(h);
    }
  }
  return samples;
}

}  // namespace specdec
