//! \file simulate/sv.hpp
//! \brief Monte-Carlo simulator of Speculative Verification's accepted length (Kim et al., "Speculative
//! Verification: Exploiting Information Gain for Speculative Decoding", appendix D): gamma drafts are verified,
//! draft i + 1 is accepted with probability a[i] given that drafts 1..i were, and N is the length of the
//! accepted prefix (eq. (3); its mean is eq. (4)). N does not count the target's own token.
//! The process is the position-dependent Bernoulli chain of simulate/sd.hpp with alphas = a[0..gamma),
//! so this header only names it in SV's terms and adds the goodput of eq. (6).
#pragma once

#include <cstddef>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec::simulate::sv {

//! Simulates N for gamma verified drafts with acceptance a[0..gamma) (appendix D, eq. (3)).
//! result.accepted is the histogram of N; result.draft_tokens the drafts examined.
//! \pre gamma <= a.size(); a[0..gamma) in [0, 1]; first + draws does not overflow.
//! \throws specdec::error otherwise.
inline sd::iteration_tally accepted(std::span<const double> a, std::size_t gamma, const run_options& options) {
  SPECDEC_EXPECTS(gamma <= a.size(), "gamma must be <= a.size()");
  return sd::chain(a.first(gamma), options);
}

//! The goodput estimate N / Latency(gamma) (appendix D, eqs. (5)-(6)): the mean of N scaled by
//! 1 / L(gamma), with its standard error (the closed form is theory::sv::estimated_goodput). With
//! count_target_token = false, gamma = 0 gives 0 without reading the profile, as the closed form
//! does; with true, (N + 1) / L(gamma) is estimated (the target's token counted).
//! \pre L(gamma) finite and > 0 (unless gamma = 0 and count_target_token is false).
//! \throws specdec::error otherwise.
template <theory::LatencyProfile L>
estimate goodput(const sd::iteration_tally& result, const L& latency, bool count_target_token = false) {
  const estimate n = result.accepted.summary();
  if (result.gamma == 0 && !count_target_token) return affine(n, 0.0, 0.0);
  const double inv = 1.0 / theory::latency_at(latency, result.gamma);
  return affine(n, inv, count_target_token ? inv : 0.0);
}

}  // namespace specdec::simulate::sv
