//! \file theory/sv.hpp
//! \brief Closed forms of Speculative Verification (Kim et al.,
//! "Speculative Verification: Exploiting Information Gain for Speculative Decoding"): the law of
//! the number of accepted drafts, its mean, and goodput (section 5, appendix D eqs. (3)-(6)).
//!
//! Model (Definitions D.3, D.4). a[i] is the acceptance probability of drafted token i + 1 given
//! that tokens 1..i were accepted (SV estimates it as P(T_i | S, A)); acceptances are
//! independent. Verifying gamma drafted tokens accepts N of them, the longest accepted prefix.
//! N counts accepted DRAFT tokens only: the token the target emits after them (correction or
//! bonus) is not counted, unlike Leviathan's E[T] in theory/sd.hpp (E[T] = E(N | gamma) + 1).
//! Latencies come as a LatencyProfile (theory/latency_profile.hpp): L(k) is the latency of one
//! decoding step that verifies k drafted tokens (SV's Latency_profiled(gamma), Assumption D.10).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/latency_profile.hpp"
#include "specdec/theory/sd.hpp"

namespace specdec::theory::sv {

namespace detail {
constexpr bool valid_prefix(std::span<const double> a, std::size_t gamma) noexcept {
  if (gamma > a.size()) return false;
  for (std::size_t i = 0; i < gamma; ++i)
    if (!theory::detail::is_probability(a[i])) return false;
  return true;
}
}  // namespace detail

//! P_gamma(N = n), the probability that exactly n of gamma verified drafts are accepted
//! (appendix D, eq. (3)): (1 - a[n]) prod_{i<n} a[i] for n < gamma, prod_{i<gamma} a[i] for
//! n = gamma, 0 for n > gamma. Only a[0..gamma) is read.
//! \pre gamma <= a.size(); a[0..gamma) in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double prob_accepted(std::size_t n, std::span<const double> a, std::size_t gamma) {
  SPECDEC_EXPECTS(gamma <= a.size(), "gamma must be <= a.size()");
  SPECDEC_EXPECTS(detail::valid_prefix(a, gamma), "a[0..gamma) must be probabilities in [0, 1]");
  if (n > gamma) return 0.0;
  double prod = 1.0;
  for (std::size_t i = 0; i < n; ++i) prod *= a[i];
  return n < gamma ? prod * (1.0 - a[n]) : prod;
}

//! E(N | gamma) = sum_{i=1}^{gamma} i P_gamma(N = i) (appendix D, eq. (4)), evaluated in the
//! equivalent tail-sum form sum_{k=1}^{gamma} prod_{i<k} a[i] (no rounding from the (1 - a) factors).
//! Equals sd::expected_tokens(a.first(gamma)) - 1; with a constant a it is Leviathan's eq. (1)
//! minus the bonus token, (a - a^(gamma+1)) / (1 - a). gamma = 0 gives 0.
//! \pre gamma <= a.size(); a[0..gamma) in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double expected_accepted(std::span<const double> a, std::size_t gamma) {
  SPECDEC_EXPECTS(gamma <= a.size(), "gamma must be <= a.size()");
  SPECDEC_EXPECTS(detail::valid_prefix(a, gamma), "a[0..gamma) must be probabilities in [0, 1]");
  double sum = 0.0, t = 1.0;
  for (std::size_t i = 0; i < gamma; ++i) {
    t *= a[i];
    if (t == 0.0) break;
    sum += t;
  }
  return sum;
}

//! Var(N | gamma) for the law of eq. (3) (beyond the paper): the same as
//! sd::tokens_variance(a.first(gamma)), since N and T = N + 1 differ by a constant.
//! \pre gamma <= a.size(); a[0..gamma) in [0, 1] (not NaN).
//! \throws specdec::error otherwise.
constexpr double variance_accepted(std::span<const double> a, std::size_t gamma) {
  SPECDEC_EXPECTS(gamma <= a.size(), "gamma must be <= a.size()");
  return sd::tokens_variance(a.first(gamma));
}

//! Goodput = tokens / latency (Definition D.5, eq. (5)): accepted tokens per unit time. Pass
//! E(N | gamma) and the profiled latency to get eq. (6); pass E(N | gamma) + 1 to count the
//! target's own token as well.
//! \pre expected_tokens finite and >= 0; latency finite and > 0.
//! \throws specdec::error otherwise.
constexpr double goodput(double expected_tokens, double latency) {
  SPECDEC_EXPECTS(theory::detail::is_nonnegative(expected_tokens), "expected_tokens must be finite and >= 0");
  SPECDEC_EXPECTS(theory::detail::is_finite(latency) && latency > 0.0, "latency must be finite and > 0");
  return expected_tokens / latency;
}

//! The goodput estimate E(N | gamma) / Latency_profiled(gamma) (appendix D, eq. (6)), latency read
//! from a LatencyProfile at k = gamma (callable L(gamma) or span entry L[gamma]). gamma = 0 gives 0
//! without reading the profile. Counts accepted drafts only, as the paper does.
//! \pre gamma <= a.size(); a[0..gamma) in [0, 1]; L(gamma) finite and > 0.
//! \throws specdec::error otherwise.
template <LatencyProfile L>
constexpr double estimated_goodput(std::span<const double> a, std::size_t gamma, const L& latency) {
  const double tokens = expected_accepted(a, gamma);
  if (gamma == 0) return 0.0;
  return goodput(tokens, latency_at(latency, gamma));
}

//! The goodput curve of eq. (6) over a latency profile: out[gamma] = E(N | gamma) / L(gamma) for
//! gamma = 0, ..., out.size() - 1 (out[0] = 0; L(0) is not read), in O(out.size()). SV picks the
//! gamma that maximises it (section 5; concave under Assumption D.10, Lemma D.12).
//! \pre out.size() <= a.size() + 1; a[0..out.size()-1) in [0, 1]; L(k) finite and > 0 for
//!      1 <= k < out.size().
//! \throws specdec::error otherwise.
template <LatencyProfile L>
constexpr void estimated_goodput(std::span<const double> a, const L& latency, std::span<double> out) {
  SPECDEC_EXPECTS(out.size() <= a.size() + 1, "out.size() must be <= a.size() + 1");
  if (out.empty()) return;
  const std::size_t max_gamma = out.size() - 1;
  SPECDEC_EXPECTS(detail::valid_prefix(a, max_gamma), "a[0..out.size()-1) must be probabilities in [0, 1]");
  out[0] = 0.0;
  double sum = 0.0, t = 1.0;
  for (std::size_t gamma = 1; gamma <= max_gamma; ++gamma) {
    t *= a[gamma - 1];
    sum += t;
    out[gamma] = sum / latency_at(latency, gamma);
  }
}

}  // namespace specdec::theory::sv
