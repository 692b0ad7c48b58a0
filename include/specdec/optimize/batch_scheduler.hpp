//! \file optimize/batch_scheduler.hpp
//! \brief SV's batch scheduler (Kim et al., SV, section 5, "Scheduling for Batch Execution"): choose how
//! many of its drafted tokens each request of a batch sends to the target, to maximise the batch goodput
//!   G(n_1, ..., n_B) = sum_b E_b(n_b) / L(n_1 + ... + n_B),
//! where E_b(n) = sum_{j<=n} g_{b,j} is request b's expected accepted drafts (marginal gains g as in
//! optimize/sv_length.hpp; under SV's eq. (3), g_{b,j} = prod_{i<=j} a_{b,i}) and L(K) is the latency of
//! one batched verification step that verifies K drafted tokens in all (the target also scores one
//! position per request: build L with `offset_latency` from a per-position profile). With
//! `token_counting::with_target_token` the numerator adds B, the token the target emits for every
//! request.
//!
//! **Greedy (the paper's algorithm).** Start with no token; repeatedly take, among the next untaken
//! token of every request (prefix order: a request's token j + 1 only after its token j), the one
//! with the largest gain (ties: lowest request index) and add it while the goodput strictly improves
//! (`stop_rule::first_drop`). Every request makes progress whatever the schedule: the target emits one
//! token per request even when n_b = 0.
//!
//! **Optimality.** When every request's gains do not increase (always true under eq. (3)), the greedy's
//! first K tokens are the K largest gains, so they maximise sum_b E_b over every length vector with
//! sum n_b = K (an exchange argument; F(K) = sum of the K largest gains is concave). If L is also convex
//! and non-decreasing, F(K) / L(K) is unimodal (the argument of optimize/sv_length.hpp), so stopping at
//! the first drop is optimal over all length vectors; tests/optimize/sv_batch_scheduler.cpp checks it
//! against `exhaustive_schedule` on random instances.
//! When the assumptions fail:
//!   - L not convex (a staircase): the first drop can be a local maximum, and the greedy stops early.
//!     `stop_rule::best_prefix` scans every K and keeps the best prefix of the greedy order; with
//!     non-increasing gains it is optimal for *any* latency profile (L depends on K only).
//!   - gains that increase within a request (decode/sv.hpp's exact mode, where position j's gain uses
//!     P(accept | S_j) but position j + 1's uses the exact A_j): the K largest gains may not be a set of
//!     prefixes, and both rules can miss the optimum. Both still return a valid schedule.
//!   - a latency that decreases: `specdec::error` ("not increasing").
#pragma once

#include <cstddef>
#include <cstdint>
#include <queue>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/optimize/sv_length.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec::optimize {

//! When the greedy stops.
enum class stop_rule {
  first_drop,   //!< SV section 5: at the first token that does not strictly improve the goodput
  best_prefix,  //!< take every token in greedy order and keep the best prefix (optimal for any L)
};

//! Options of the batch scheduler.
struct batch_scheduler_options {
  token_counting counting = token_counting::accepted_drafts;  //!< numerator of the goodput
  stop_rule stop = stop_rule::first_drop;                     //!< when the greedy stops
};

//! A schedule: the number of drafted tokens each request sends to the target, and its estimated figures.
struct batch_schedule {
  std::vector<std::size_t> lengths;  //!< n_b, one per request, n_b <= drafted_b
  std::size_t total = 0;             //!< K = sum n_b
  double expected_tokens = 0.0;      //!< sum_b E_b(n_b) (+ B with the target's tokens)
  double latency = 0.0;              //!< L(K); 0 when not read (accepted_drafts and K = 0)
  double goodput = 0.0;              //!< expected_tokens / latency
};

namespace detail {
//! Checks the ragged gains: drafted.size() requests, sum drafted == gains.size(), gains in [0, 1].
inline void check_ragged(std::span<const double> values, std::span<const std::size_t> drafted, const char* what) {
  std::size_t total = 0;
  for (const auto d : drafted) total += d;
  SPECDEC_EXPECTS(total == values.size(), "the per-request drafted counts must add up to the number of values");
  check_unit_values(values, what);
}

//! Per-request gains prod_{i<=j} a_{b,i} of ragged acceptance estimates (checked).
inline std::vector<double> ragged_gains(std::span<const double> a, std::span<const std::size_t> drafted) {
  check_ragged(a, drafted, "acceptance probabilities a_i");
  std::vector<double> gains(a.size());
  std::size_t o = 0;
  for (const auto d : drafted) {
    acceptance_to_gains(a.subspan(o, d), std::span<double>(gains).subspan(o, d));
    o += d;
  }
  return gains;
}

//! Fills a schedule's figures from its lengths.
template <class Reader>
batch_schedule finish_schedule(std::vector<std::size_t> lengths, std::size_t total, double accepted, Reader& latency,
                               token_counting counting) {
  const double requests = static_cast<double>(lengths.size());
  const length_choice c = evaluate(total, accepted, latency, counting, requests);
  return batch_schedule{std::move(lengths), total, c.expected_tokens, c.latency, c.goodput};
}
}  // namespace detail

//! SV's greedy batch schedule from ragged marginal gains: request b's gains are
//! gains[o_b, o_b + drafted[b]) with o_b = drafted[0] + ... + drafted[b-1].
//! \pre sum drafted == gains.size(); gains in [0, 1]; the latencies read finite, > 0, non-decreasing.
//! \throws specdec::error otherwise.
template <theory::LatencyProfile L>
batch_schedule schedule_batch_from_gains(std::span<const double> gains, std::span<const std::size_t> drafted, const L& latency,
                                         const batch_scheduler_options& options = {}) {
  detail::check_ragged(gains, drafted, "gains");
  const std::size_t B = drafted.size();
  std::vector<std::size_t> offset(B + 1, 0), next(B, 0), picks;
  for (std::size_t b = 0; b < B; ++b) offset[b + 1] = offset[b] + drafted[b];
  struct head {
    double gain;
    std::size_t request;
  };
  const auto lower = [](const head& x, const head& y) { return x.gain < y.gain || (x.gain == y.gain && x.request > y.request); };
  std::priority_queue<head, std::vector<head>, decltype(lower)> heads(lower);
  for (std::size_t b = 0; b < B; ++b)
    if (drafted[b] > 0) heads.push({gains[offset[b]], b});
  detail::monotone_reader<L> reader{latency};
  const auto goodput_of = [&](std::size_t k, double accepted) {
    return detail::evaluate(k, accepted, reader, options.counting, static_cast<double>(B)).goodput;
  };
  double accepted = 0.0, current = goodput_of(0, 0.0), best = current;
  std::size_t best_k = 0;
  while (!heads.empty()) {
    const head h = heads.top();
    const double candidate = goodput_of(picks.size() + 1, accepted + h.gain);
    if (options.stop == stop_rule::first_drop && !(candidate > current)) break;
    heads.pop();
    picks.push_back(h.request);
    accepted += h.gain;
    current = candidate;
    if (candidate > best) {
      best = candidate;
      best_k = picks.size();
    }
    if (++next[h.request] < drafted[h.request]) heads.push({gains[offset[h.request] + next[h.request]], h.request});
  }
  std::vector<std::size_t> lengths(B, 0);
  double kept = 0.0;
  for (std::size_t i = 0; i < best_k; ++i) {
    const std::size_t b = picks[i];
    kept += gains[offset[b] + lengths[b]];
    ++lengths[b];
  }
  return detail::finish_schedule(std::move(lengths), best_k, kept, reader, options.counting);
}

//! SV's greedy batch schedule from ragged acceptance estimates a_{b,i} = P(T_i | S, A) of each
//! request's drafted tokens (gains prod_{i<=j} a_{b,i}, SV eq. (3)).
//! \pre as for `schedule_batch_from_gains`, with a in [0, 1]. \throws specdec::error otherwise.
template <theory::LatencyProfile L>
batch_schedule schedule_batch(std::span<const double> a, std::span<const std::size_t> drafted, const L& latency,
                              const batch_scheduler_options& options = {}) {
  const std::vector<double> gains = detail::ragged_gains(a, drafted);
  return schedule_batch_from_gains(std::span<const double>(gains), drafted, latency, options);
}

//! The exhaustive optimum over every length vector 0 <= n_b <= drafted[b] (the test oracle for the
//! greedy): the first maximiser in lexicographic order of (n_1, ..., n_B).
//! \pre as for `schedule_batch_from_gains`; prod_b (drafted[b] + 1) <= max_vectors.
//! \throws specdec::error otherwise.
template <theory::LatencyProfile L>
batch_schedule exhaustive_schedule_from_gains(std::span<const double> gains, std::span<const std::size_t> drafted,
                                              const L& latency, const batch_scheduler_options& options = {},
                                              std::uint64_t max_vectors = 1u << 22) {
  detail::check_ragged(gains, drafted, "gains");
  const std::size_t B = drafted.size();
  std::uint64_t vectors = 1;
  std::size_t total_max = 0;
  for (const auto d : drafted) {
    vectors *= d + 1;
    total_max += d;
    SPECDEC_EXPECTS(vectors <= max_vectors, "too many length vectors for an exhaustive search");
  }
  // Prefix sums E_b(n) and the latencies of every K, read once in increasing K (monotonicity checked).
  std::vector<std::vector<double>> e(B);
  for (std::size_t b = 0, o = 0; b < B; o += drafted[b], ++b) {
    e[b].assign(drafted[b] + 1, 0.0);
    for (std::size_t j = 0; j < drafted[b]; ++j) e[b][j + 1] = e[b][j] + gains[o + j];
  }
  detail::monotone_reader<L> reader{latency};
  std::vector<length_choice> by_k;  // latency and target tokens of every K (accepted drafts added below)
  for (std::size_t k = 0; k <= total_max; ++k)
    by_k.push_back(detail::evaluate(k, 0.0, reader, options.counting, static_cast<double>(B)));
  std::vector<std::size_t> n(B, 0), best_n(B, 0);
  double best = -1.0;
  while (true) {
    double accepted = 0.0;
    std::size_t k = 0;
    for (std::size_t b = 0; b < B; ++b) {
      accepted += e[b][n[b]];
      k += n[b];
    }
    const length_choice& c = by_k[k];
    const double g = c.latency > 0.0 ? theory::sv::goodput(c.expected_tokens + accepted, c.latency) : 0.0;
    if (g > best) {
      best = g;
      best_n = n;
    }
    std::size_t b = B;
    while (b > 0 && n[b - 1] == drafted[b - 1]) n[--b] = 0;
    if (b == 0) break;
    ++n[b - 1];
  }
  double accepted = 0.0;
  std::size_t k = 0;
  for (std::size_t b = 0; b < B; ++b) {
    accepted += e[b][best_n[b]];
    k += best_n[b];
  }
  return detail::finish_schedule(std::move(best_n), k, accepted, reader, options.counting);
}

//! `exhaustive_schedule_from_gains` from acceptance estimates (gains prod_{i<=j} a_{b,i}).
template <theory::LatencyProfile L>
batch_schedule exhaustive_schedule(std::span<const double> a, std::span<const std::size_t> drafted, const L& latency,
                                   const batch_scheduler_options& options = {}, std::uint64_t max_vectors = 1u << 22) {
  const std::vector<double> gains = detail::ragged_gains(a, drafted);
  return exhaustive_schedule_from_gains(std::span<const double>(gains), drafted, latency, options, max_vectors);
}

}  // namespace specdec::optimize
