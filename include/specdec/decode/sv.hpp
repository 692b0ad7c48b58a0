//! \file decode/sv.hpp
//! \brief The Speculative Verification loop (Kim et al., SV, shared/seeds/001_*.txt, sections 4-5):
//! each round drafts gamma_max tokens, runs a companion model on the same context to get P_c at every
//! drafted position, computes SV's indicators S and A (estimate/indicators.hpp), turns them into
//! acceptance estimates (estimate/acceptance_estimator.hpp), chooses how many drafts to verify
//! (optimize/sv_length.hpp for one request, optimize/batch_scheduler.hpp for a batch), verifies that
//! prefix with the strict rule (`verify_chain`) and drops the rest. The pieces are those of the common
//! loop (decode/decode.hpp): `chain_drafter`, `score`, warping, `verify_chain`, `decode_stats`.
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
//! **Why no `LengthPolicy`.** A `LengthPolicy` (length/fixed.hpp) picks the draft length from past
//! statistics before drafting. SV drafts gamma_max tokens first and picks the verified length from those
//! tokens' indicators, so its choice is a separate step (`choose_sv_length`, or the batch scheduler)
//! between drafting and verification; the draft length itself is `gamma_max`.
//!
//! **Counting and cost.** `decode_stats` counts verified tokens as `drafted` (so `acceptance_rate()` is
//! accepted / verified, SV's token accept rate); `sv_stats` adds the tokens actually drafted and
//! dropped, the companion calls and the histogram of verified lengths (SV Table 9's fairness data).
//! The companion scores all drafted positions in one call per round (it is a parallel forward over
//! tokens the drafter produced), charged `t_companion` of simulated time.
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
#include "specdec/decode/stats.hpp"
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
  std::size_t drafted = 0;          //!< tokens drafted (verified + dropped)
  std::size_t dropped = 0;          //!< drafted tokens never sent to the target
  std::size_t companion_calls = 0;  //!< one per round with at least one draft
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
  sv_stats sv;
};

//! Options of single-request SV.
struct sv_options {
  std::size_t gamma_max = 5;                 //!< tokens drafted per round (the paper's draft length)
  sv_mode mode = sv_mode::exact;             //!< what the length decision may look at
  length_search search = length_search::incremental;
  optimize::token_counting counting = optimize::token_counting::accepted_drafts;  //!< goodput numerator
  warp_params companion_params{};            //!< how the companion's logits become P_c
  double t_companion = 0.05;                 //!< simulated time of one companion call (all positions)
};

//! The latency of one single-request SV step that verifies k drafts, under a cost model:
//! gamma_max * t_draft + t_companion + t_target(k + 1) (drafting and the companion are spent before the
//! choice, the target scores k + 1 positions). A `theory::LatencyProfile` for `decode_sv`.
struct sv_step_latency {
  cost_model cost{};
  std::size_t gamma_max = 5;
  double t_companion = 0.05;
  //! L(k). \pre k >= 0.
  double operator()(int k) const {
    return static_cast<double>(gamma_max) * cost.t_draft + t_companion + cost.target_time(static_cast<std::size_t>(k) + 1);
  }
};

namespace detail {
//! Buffers of one request's round.
struct sv_workspace {
  draft_block block;
  std::vector<float> logits, companion_rows, p_rows;
  std::vector<double> s, a, gains;
};

//! S and A of the drafted tokens in `w.block`: one companion call scores every drafted position (rows
//! after context + drafts[0..j), j < gamma), its rows are warped into P_c and compared with the q rows.
template <exec::ExecutionPolicy Policy, Model C>
void sv_indicators(const Policy& policy, const C& companion, const warp_params& companion_params, std::span<const token_id> context,
                   sv_workspace& w) {
  const std::size_t V = companion.vocab_size(), gamma = w.block.tokens.size();
  w.s.resize(gamma);
  w.a.resize(gamma);
  if (gamma == 0) return;
  const auto drafts = std::span<const token_id>(w.block.tokens);
  w.logits.resize(gamma * V);
  w.companion_rows.resize(gamma * V);
  score(companion, context, drafts.first(gamma - 1), std::span<float>(w.logits));
  warp_rows(w.logits, w.companion_rows, V, companion_params);
  estimate::compute_indicators(policy, std::span<const float>(w.block.q_rows), std::span<const float>(w.companion_rows), drafts, V,
                               std::span<double>(w.s), std::span<double>(w.a));
}

//! Drafts `gamma` tokens and, with an estimator, runs the companion and fills S, A and the gains of
//! `mode` (without one, only the drafts). Returns the draft-model calls.
template <exec::ExecutionPolicy Policy, Drafter D, Model C>
std::size_t sv_draft(const Policy& policy, D& drafter, const C& companion, const warp_params& companion_params,
                     const estimate::acceptance_estimator* estimator, sv_mode mode, std::span<const token_id> context,
                     std::size_t gamma, const random::request_stream& stream, sv_workspace& w) {
  const std::size_t calls = drafter.draft(context, gamma, stream, w.block);
  SPECDEC_EXPECTS(w.block.tokens.size() == gamma && w.block.q_rows.size() == gamma * companion.vocab_size(),
                  "the drafter's block does not match gamma and V");
  w.gains.resize(gamma);
  if (estimator == nullptr) return calls;
  sv_indicators(policy, companion, companion_params, context, w);
  sv_gains(*estimator, w.s, w.a, mode, w.gains);
  return calls;
}

//! Scores context + the first n drafts with the target, warps the rows and verifies them strictly.
template <exec::ExecutionPolicy Policy, Model T>
chain_result sv_verify(const Policy& policy, const T& target, const warp_params& target_params, std::span<const token_id> context,
                       std::size_t n, const random::request_stream& stream, sv_workspace& w) {
  const std::size_t V = target.vocab_size();
  const auto drafts = std::span<const token_id>(w.block.tokens).first(n);
  w.logits.resize((n + 1) * V);
  w.p_rows.resize((n + 1) * V);
  score(target, context, drafts, std::span<float>(w.logits));
  warp_rows(w.logits, w.p_rows, V, target_params);
  return verify_chain(policy, strict, drafts, std::span<const float>(w.block.q_rows).first(n * V), std::span<const float>(w.p_rows),
                      V, stream);
}

//! Appends a verification's tokens to a request; true when the request is done.
inline bool sv_append(sv_result& r, std::vector<token_id>& context, const chain_result& c, std::size_t verified,
                      const decode_options& options) {
  r.stats.record_round(verified, static_cast<std::size_t>(c.num_accepted));
  ++r.stats.target_calls;
  r.stats.target_positions += verified + 1;
  r.status |= c.status;
  r.tokens.insert(r.tokens.end(), c.tokens.begin(), c.tokens.end());
  context.insert(context.end(), c.tokens.begin(), c.tokens.end());
  const bool done = !is_valid(c.status) || finish(r, options);
  r.stats.emitted = r.tokens.size();
  return done;
}
}  // namespace detail

//! Speculative Verification of one request.
//! \param drafter    proposes gamma_max tokens per round and their q rows (`chain_drafter`)
//! \param companion  a `Model` over the same vocabulary, run on the same contexts as the drafter
//! \param estimator  P(accept | S, A), fitted on profiling samples (`profile_sv_indicators`)
//! \param latency    L(k), the latency of a step that verifies k drafts (e.g. `sv_step_latency`)
//! Randomness: round r uses request_stream{seed, request_id, r}, as `decode` does.
//! \pre the models share the vocabulary; options valid. \throws specdec::error on bad options or
//!      shapes, brute force in exact mode, or a bad latency profile; specdec::numerical_error when a
//!      model returns a row without usable mass.
template <exec::ExecutionPolicy Policy, Model Target, Drafter D, Model Companion, theory::LatencyProfile L>
sv_result decode_sv(const Policy& policy, const Target& target, D& drafter, const Companion& companion,
                    const estimate::acceptance_estimator& estimator, const L& latency, std::span<const token_id> prompt,
                    const decode_options& options, const sv_options& sv) {
  validate(options.target_params);
  validate(options.cost);
  validate(sv.companion_params);
  SPECDEC_EXPECTS(target.vocab_size() == companion.vocab_size(), "the target and the companion must share the vocabulary");
  SPECDEC_EXPECTS(std::isfinite(sv.t_companion) && sv.t_companion >= 0.0, "t_companion must be finite and >= 0");
  SPECDEC_EXPECTS(!(sv.mode == sv_mode::exact && sv.search == length_search::brute_force),
                  "exact SV needs the incremental search: brute force looks at later drafts and loses exactness");
  const auto start = std::chrono::steady_clock::now();
  sv_result r;
  if (options.max_new_tokens == 0) return r;
  std::vector<token_id> context(prompt.begin(), prompt.end());
  detail::sv_workspace w;
  while (true) {
    const std::size_t remaining = options.max_new_tokens - r.tokens.size();
    const std::size_t gamma = std::min(sv.gamma_max, remaining - 1);
    const random::request_stream stream{options.seed, options.request_id, static_cast<std::uint32_t>(r.stats.iterations)};
    r.stats.draft_calls += detail::sv_draft(policy, drafter, companion, sv.companion_params, &estimator, sv.mode, context, gamma, stream, w);
    const std::size_t n = gamma == 0 ? 0 : choose_sv_length(std::span<const double>(w.gains), latency, sv.mode, sv.search, sv.counting);
    const chain_result c = detail::sv_verify(policy, target, options.target_params, context, n, stream, w);
    r.sv.record(gamma, n, gamma > 0);
    r.stats.simulated_time += static_cast<double>(gamma) * options.cost.t_draft + (gamma > 0 ? sv.t_companion : 0.0) +
                              options.cost.target_time(n + 1);
    if (detail::sv_append(r, context, c, n, options)) break;
  }
  r.stats.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

//! Single-request SV with a chain drafter over `draft` warped with `draft_params`.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, Model Companion, theory::LatencyProfile L>
sv_result decode_sv(const Policy& policy, const Target& target, const Draft& draft, const warp_params& draft_params,
                    const Companion& companion, const estimate::acceptance_estimator& estimator, const L& latency,
                    std::span<const token_id> prompt, const decode_options& options, const sv_options& sv) {
  chain_drafter<Draft> drafter(draft, draft_params);
  return decode_sv(policy, target, drafter, companion, estimator, latency, prompt, options, sv);
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
  double t_draft_step = 0.05;      //!< one batched draft forward (one position of every request)
  double t_companion_step = 0.05;  //!< one batched companion call scoring every drafted position
  bool drafting_in_goodput = true; //!< the scheduler's L(K) includes the round's drafting time
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

//! Decodes B requests in lockstep: every round, each unfinished request drafts gamma_max tokens (fewer
//! near its budget), SV computes every request's gains and the greedy scheduler
//! (optimize/batch_scheduler.hpp) picks the lengths on L(K) = drafting + target_latency(B_active + K),
//! each request verifies its prefix strictly, and one batched target call is charged. With
//! `batch_length_rule::fixed` every draft is verified (SD) and the companion is not run.
//! Request b uses request_stream{seed, request_id + b, round}, so its randomness does not depend on the
//! rest of the batch. Exactness: as for `decode_sv` (exact mode with the first-drop rule is lossless
//! per request, and requests stay independent).
//! \param target_latency  the target's latency for one call scoring P positions in all (P >= 1)
//! \pre the models share the vocabulary; options valid. \throws specdec::error on bad options,
//!      `stop_rule::best_prefix` in exact mode, or a bad latency profile.
template <exec::ExecutionPolicy Policy, Model Target, Model Draft, Model Companion, theory::LatencyProfile TL>
sv_batch_result decode_sv_batch(const Policy& policy, const Target& target, const Draft& draft, const warp_params& draft_params,
                                const Companion& companion, const estimate::acceptance_estimator& estimator, const TL& target_latency,
                                std::span<const std::vector<token_id>> prompts, const decode_options& options,
                                const sv_batch_options& batch) {
  validate(options.target_params);
  validate(batch.companion_params);
  SPECDEC_EXPECTS(target.vocab_size() == companion.vocab_size(), "the target and the companion must share the vocabulary");
  SPECDEC_EXPECTS(std::isfinite(batch.t_draft_step) && batch.t_draft_step >= 0.0 && std::isfinite(batch.t_companion_step) &&
                      batch.t_companion_step >= 0.0,
                  "t_draft_step and t_companion_step must be finite and >= 0");
  const bool use_sv = batch.rule == batch_length_rule::sv;
  SPECDEC_EXPECTS(!(use_sv && batch.mode == sv_mode::exact && batch.scheduler.stop == optimize::stop_rule::best_prefix),
                  "exact SV needs the first-drop rule: best_prefix looks at later drafts and loses exactness");
  const auto start = std::chrono::steady_clock::now();
  const std::size_t B = prompts.size();
  chain_drafter<Draft> drafter(draft, draft_params);
  sv_batch_result out;
  out.requests.resize(B);
  std::vector<std::vector<token_id>> contexts(prompts.begin(), prompts.end());
  std::vector<detail::sv_workspace> w(B);
  std::vector<bool> done(B, options.max_new_tokens == 0);
  std::vector<std::size_t> active, gammas, lengths;
  std::vector<double> gains;
  for (std::uint32_t round = 0;; ++round) {
    active.clear();
    for (std::size_t b = 0; b < B; ++b)
      if (!done[b]) active.push_back(b);
    if (active.empty()) break;
    gammas.clear();
    gains.clear();
    std::size_t gamma_round = 0;
    for (const std::size_t b : active) {
      sv_result& r = out.requests[b];
      const std::size_t gamma = std::min(batch.gamma_max, options.max_new_tokens - r.tokens.size() - 1);
      const random::request_stream stream{options.seed, options.request_id + static_cast<std::uint32_t>(b), round};
      r.stats.draft_calls += detail::sv_draft(policy, drafter, companion, batch.companion_params, use_sv ? &estimator : nullptr,
                                              batch.mode, contexts[b], gamma, stream, w[b]);
      gammas.push_back(gamma);
      if (use_sv) gains.insert(gains.end(), w[b].gains.begin(), w[b].gains.end());
      gamma_round = std::max(gamma_round, gamma);
    }
    const bool companion_ran = use_sv && gamma_round > 0;
    const double drafting = static_cast<double>(gamma_round) * batch.t_draft_step + (companion_ran ? batch.t_companion_step : 0.0);
    if (use_sv) {
      const optimize::offset_latency<TL> step{&target_latency, static_cast<int>(active.size()), batch.drafting_in_goodput ? drafting : 0.0};
      lengths = optimize::schedule_batch_from_gains(std::span<const double>(gains), std::span<const std::size_t>(gammas), step,
                                                    batch.scheduler)
                    .lengths;
    } else {
      lengths = gammas;
    }
    std::size_t verified = 0;
    for (const auto n : lengths) verified += n;
    const double round_time = drafting + theory::latency_at(target_latency, static_cast<int>(active.size() + verified));
    out.simulated_time += round_time;
    ++out.rounds;
    for (std::size_t i = 0; i < active.size(); ++i) {
      const std::size_t b = active[i];
      sv_result& r = out.requests[b];
      const random::request_stream stream{options.seed, options.request_id + static_cast<std::uint32_t>(b), round};
      const chain_result c = detail::sv_verify(policy, target, options.target_params, contexts[b], lengths[i], stream, w[b]);
      r.sv.record(gammas[i], lengths[i], use_sv && gammas[i] > 0);
      r.stats.simulated_time += round_time;
      done[b] = detail::sv_append(r, contexts[b], c, lengths[i], options);
    }
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& r : out.requests) r.stats.wall_seconds = out.wall_seconds;
  return out;
}

// ---- profiling -----------------------------------------------------------------------------------

//! Options of `profile_sv_indicators`.
struct sv_profile_options {
  std::size_t gamma = 5;              //!< SD's draft length during profiling
  std::size_t tokens_per_prompt = 64; //!< tokens generated from each prompt
  bool accept_bits = false;           //!< record sampled accept bits instead of probabilities
  warp_params companion_params{};     //!< how the companion's logits become P_c
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
                                                               std::span<const std::vector<token_id>> prompts,
                                                               const decode_options& options, const sv_profile_options& profile) {
  validate(options.target_params);
  validate(profile.companion_params);
  SPECDEC_EXPECTS(target.vocab_size() == companion.vocab_size(), "the target and the companion must share the vocabulary");
  const std::size_t V = target.vocab_size();
  chain_drafter<Draft> drafter(draft, draft_params);
  std::vector<estimate::indicator_sample> samples;
  detail::sv_workspace w;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<token_id> context(prompts[i].begin(), prompts[i].end());
    std::size_t emitted = 0;
    for (std::uint32_t round = 0; emitted < profile.tokens_per_prompt; ++round) {
      const random::request_stream stream{options.seed, options.request_id + static_cast<std::uint32_t>(i), round};
      const std::size_t gamma = profile.gamma;
      detail::sv_draft(policy, drafter, companion, profile.companion_params, nullptr, sv_mode::exact, context, gamma, stream, w);
      detail::sv_indicators(policy, companion, profile.companion_params, context, w);
      const chain_result c = detail::sv_verify(policy, target, options.target_params, context, gamma, stream, w);
      random::philox_stream bits = stream.open(0, random::purpose::simulate);
      for (std::size_t j = 0; j < gamma; ++j) {
        const double q = w.block.q_rows[j * V + static_cast<std::size_t>(w.block.tokens[j])];
        const double p = w.p_rows[j * V + static_cast<std::size_t>(w.block.tokens[j])];
        const double x = q > 0.0 ? std::min(1.0, p / q) : 0.0;
        samples.push_back({w.s[j], w.a[j], profile.accept_bits ? (bits.uniform() < x ? 1.0 : 0.0) : x});
      }
      if (!is_valid(c.status)) break;
      context.insert(context.end(), c.tokens.begin(), c.tokens.end());
      emitted += c.tokens.size();
      if (options.stop_token && std::find(c.tokens.begin(), c.tokens.end(), *options.stop_token) != c.tokens.end()) break;
    }
  }
  return samples;
}

}  // namespace specdec
