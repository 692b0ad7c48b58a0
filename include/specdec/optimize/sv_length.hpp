//! \file optimize/sv_length.hpp
//! \brief SV's single-request verification length (Kim et al., SV, section 5; appendix D, eqs. (3)-(6),
//! Lemma D.11): verify the gamma drafted tokens that maximise the estimated goodput
//! E(N | gamma) / L(gamma), with E(N | gamma) from per-position acceptance estimates a_i (SV's
//! P(T_i | S, A)) through the closed forms of theory/sv.hpp, and L from a latency profile read at
//! k = gamma drafted tokens verified.
//!
//! **Counting.** `token_counting::accepted_drafts` is the paper's eq. (6): the numerator counts accepted
//! drafts only, gamma = 0 has goodput 0 and L(0) is never read. `token_counting::with_target_token` adds
//! the correction or bonus token the target emits in every step, (E(N | gamma) + 1) / L(gamma), which is
//! the real tokens-per-second of a step (Leviathan's E[T] = E(N | gamma) + 1); gamma = 0 then has
//! goodput 1 / L(0). The second verifies fewer tokens: adding token gamma + 1 pays off iff its gain
//! prod_{i<=gamma+1} a_i exceeds goodput(gamma) (L(gamma+1) - L(gamma)), and goodput(gamma) is larger
//! when the target's token is counted.
//!
//! **Gains.** The optimisers work on marginal gains g_j = E(N | j) - E(N | j - 1), the expected
//! accepted tokens added by verifying position j as well. Under SV's model (eq. (3)) g_j =
//! prod_{i<=j} a_i (`acceptance_to_gains`), which never increases: E is concave (Lemma D.11, which
//! always holds for a_i in [0, 1]). Other gain sequences (decode/sv.hpp's exact mode) are accepted too.
//!
//! **Search.** `incremental_length*` is section 5's search: raise gamma while the goodput strictly
//! improves, stop at the first gamma where it does not. `brute_force_length*` evaluates every gamma and
//! returns the smallest maximiser. They agree whenever the goodput is unimodal, which holds when the
//! gains do not increase and the latency is convex and non-decreasing (SV eq. (9)): for
//! c = goodput(gamma + 1) < goodput(gamma), h(k) = E(k) - c L(k) is concave with h(gamma) > 0 = h(gamma + 1),
//! so h stays negative and the goodput keeps falling. SV's Lemma D.12 claims more (concavity of the
//! goodput) and does not hold in general (docs/theory.md); unimodality is what the search needs. When
//! the latency is not convex (a staircase from tile quantisation) or the gains rise, the incremental
//! search can stop at a local maximum: tests/optimize/sv_length.cpp shows both.
//!
//! **Bad input.** Gains or acceptance probabilities outside [0, 1] or NaN, and a latency that is not
//! finite and > 0 or decreases between two values read, throw `specdec::error`.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/theory/latency_profile.hpp"
#include "specdec/theory/sv.hpp"

namespace specdec::optimize {

//! What the goodput counts (see the file comment).
enum class token_counting {
  accepted_drafts,    //!< E(N | gamma), SV eq. (6)
  with_target_token,  //!< E(N | gamma) + 1: the target's correction or bonus token too
};

//! A chosen verification length and its estimated figures.
struct length_choice {
  std::size_t length = 0;        //!< drafted tokens to verify
  double expected_tokens = 0.0;  //!< the goodput's numerator: E(N | length) (+ 1 with the target's token)
  double latency = 0.0;          //!< L(length); 0 when not read (accepted_drafts and length 0)
  double goodput = 0.0;          //!< expected_tokens / latency (0 for accepted_drafts and length 0)
};

namespace detail {
//! \throws specdec::error unless every value is in [0, 1] (not NaN); `what` names them.
inline void check_unit_values(std::span<const double> v, const char* what) {
  for (const double x : v)
    if (!(x >= 0.0 && x <= 1.0)) throw error(std::string("specdec::optimize: ") + what + " must lie in [0, 1] (not NaN)");
}

//! Reads latencies in increasing k and checks that they do not decrease.
template <theory::LatencyProfile L>
struct monotone_reader {
  const L& profile;        //!< the latency profile read
  bool read = false;       //!< whether a latency has been read
  std::size_t last_k = 0;  //!< the k of the last latency read (when `read`)
  double last = 0.0;       //!< the last latency read
  //! L(k); \throws specdec::error if it is below the last latency read at a smaller k.
  double operator()(std::size_t k) {
    const double l = theory::latency_at(profile, k);
    if (read && k > last_k && l < last)
      throw error("specdec::optimize: the latency profile is not increasing: L(" + std::to_string(k) + ") < L(" +
                  std::to_string(last_k) + ")");
    read = true;
    last_k = k;
    last = l;
    return l;
  }
};

//! The choice for `n` verified drafts with `accepted` expected accepted drafts; with
//! `with_target_token` the numerator adds `target_tokens` (1 for a request, B for a batch).
template <class Reader>
length_choice evaluate(std::size_t n, double accepted, Reader& latency, token_counting counting, double target_tokens = 1.0) {
  length_choice c{n, accepted + (counting == token_counting::with_target_token ? target_tokens : 0.0), 0.0, 0.0};
  if (counting == token_counting::accepted_drafts && n == 0) return c;
  c.latency = latency(n);
  c.goodput = theory::sv::goodput(c.expected_tokens, c.latency);
  return c;
}
}  // namespace detail

//! g_j = prod_{i<=j} a_i: the expected accepted tokens added by verifying drafted position j
//! (SV eq. (3)-(4): E(N | gamma) = sum_{j<=gamma} g_j).
//! \pre gains.size() == a.size(); a in [0, 1]. \throws specdec::error otherwise.
inline void acceptance_to_gains(std::span<const double> a, std::span<double> gains) {
  SPECDEC_EXPECTS(gains.size() == a.size(), "gains and a must have the same length");
  detail::check_unit_values(a, "acceptance probabilities a_i");
  double t = 1.0;
  for (std::size_t j = 0; j < a.size(); ++j) gains[j] = t *= a[j];
}

//! The estimated goodput of verifying `gamma` drafts (SV eq. (6) with `accepted_drafts`), from the
//! acceptance estimates `a` through theory::sv::expected_accepted (eq. (4)).
//! \pre gamma <= a.size(); a[0..gamma) in [0, 1]; L(gamma) finite and > 0 when read.
//! \throws specdec::error otherwise.
template <theory::LatencyProfile L>
double sv_goodput(std::span<const double> a, std::size_t gamma, const L& latency,
                  token_counting counting = token_counting::accepted_drafts) {
  SPECDEC_EXPECTS(gamma <= a.size(), "gamma must be <= a.size()");
  detail::monotone_reader<L> reader{latency};
  return detail::evaluate(gamma, theory::sv::expected_accepted(a, gamma), reader, counting).goodput;
}

namespace detail {
//! The goodput of n = 0, 1, ... verified drafts from marginal gains; with `stop_at_drop` it stops at the
//! first n that does not strictly improve on the best so far (the incremental search), otherwise it
//! scans every n. Returns the smallest maximiser seen.
template <theory::LatencyProfile L>
length_choice search_gains(std::span<const double> gains, const L& latency, token_counting counting, bool stop_at_drop) {
  check_unit_values(gains, "gains");
  monotone_reader<L> reader{latency};
  length_choice best = evaluate(0, 0.0, reader, counting);
  double accepted = 0.0;
  for (std::size_t n = 1; n <= gains.size(); ++n) {
    accepted += gains[n - 1];
    const length_choice next = evaluate(n, accepted, reader, counting);
    if (next.goodput > best.goodput)
      best = next;
    else if (stop_at_drop)
      break;
  }
  return best;
}
}  // namespace detail

//! SV section 5's incremental search on marginal gains: gamma = 1, 2, ... while the goodput strictly
//! improves; returns the last improving gamma (0 if none). Reads L(k) only up to the first gamma that
//! does not improve. Optimal when the goodput is unimodal (non-increasing gains, convex latency).
//! \pre gains in [0, 1]; the latencies read finite, > 0 and non-decreasing.
//! \throws specdec::error otherwise.
template <theory::LatencyProfile L>
length_choice incremental_length_from_gains(std::span<const double> gains, const L& latency,
                                            token_counting counting = token_counting::accepted_drafts) {
  return detail::search_gains(gains, latency, counting, true);
}

//! The brute-force check: the goodput of every gamma = 0..gains.size(), the smallest maximiser.
//! Optimal for any latency profile and any gains.
//! \pre as for `incremental_length_from_gains` (every L(k) is read). \throws specdec::error otherwise.
template <theory::LatencyProfile L>
length_choice best_length_from_gains(std::span<const double> gains, const L& latency,
                                     token_counting counting = token_counting::accepted_drafts) {
  return detail::search_gains(gains, latency, counting, false);
}

//! SV section 5's incremental search from acceptance estimates a_i = P(T_i | S, A) (gains
//! prod_{i<=j} a_i). \pre a in [0, 1]; latencies as above. \throws specdec::error otherwise.
template <theory::LatencyProfile L>
length_choice incremental_length(std::span<const double> a, const L& latency,
                                 token_counting counting = token_counting::accepted_drafts) {
  std::vector<double> gains(a.size());
  acceptance_to_gains(a, gains);
  return incremental_length_from_gains(std::span<const double>(gains), latency, counting);
}

//! Brute force from acceptance estimates, computed independently of the search: E(N | gamma) from
//! theory::sv::expected_accepted (eq. (4)) for every gamma = 0..a.size(); the smallest maximiser.
//! \pre a in [0, 1]; every L(k) finite, > 0 and non-decreasing. \throws specdec::error otherwise.
template <theory::LatencyProfile L>
length_choice brute_force_length(std::span<const double> a, const L& latency,
                                 token_counting counting = token_counting::accepted_drafts) {
  detail::check_unit_values(a, "acceptance probabilities a_i");
  detail::monotone_reader<L> reader{latency};
  length_choice best = detail::evaluate(0, 0.0, reader, counting);
  for (std::size_t n = 1; n <= a.size(); ++n) {
    const length_choice next = detail::evaluate(n, theory::sv::expected_accepted(a, n), reader, counting);
    if (next.goodput > best.goodput) best = next;
  }
  return best;
}

}  // namespace specdec::optimize
