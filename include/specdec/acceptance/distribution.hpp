//! \file acceptance/distribution.hpp
//! \brief The exact distribution of what one verified position emits under a rejection-family rule.
//!
//! For a drafted position with target row p and draft row q, the position emits
//!  - the draft token v, accepted: probability a(v) = q(v) P(accept v) = rule.accepted_mass(p(v), q(v));
//!  - a correction v from the residual: probability R r(v), R = 1 - sum a, r = norm(max(0, p - a))
//!    (r = p when the residual has no mass, matching the sampler's fallback).
//! Their sum is the single-position output distribution; tests enumerate whole sequences with it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/contracts.hpp"

namespace specdec {

//! Writes accepted[v] = a(v) and corrected[v] = R r(v).
//! \pre all four rows have the same length
template <RejectionRule Rule>
void emission_distribution(const Rule& rule, std::span<const double> p, std::span<const double> q, std::span<double> accepted,
                           std::span<double> corrected) {
  SPECDEC_EXPECTS(p.size() == q.size() && accepted.size() == p.size() && corrected.size() == p.size(), "rows differ in length");
  double accepted_total = 0.0, residual_total = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    accepted[v] = rule.accepted_mass(p[v], q[v]);
    accepted_total += accepted[v];
    corrected[v] = std::max(0.0, p[v] - accepted[v]);
    residual_total += corrected[v];
  }
  const double reject = std::max(0.0, 1.0 - accepted_total);
  for (std::size_t v = 0; v < p.size(); ++v)
    corrected[v] = reject * (residual_total > 0.0 ? corrected[v] / residual_total : p[v]);
}

//! out[v] = a(v) + R r(v): the output distribution of one verified position.
template <RejectionRule Rule>
void token_distribution(const Rule& rule, std::span<const double> p, std::span<const double> q, std::span<double> out) {
  std::vector<double> corrected(p.size());
  emission_distribution(rule, p, q, out, std::span<double>(corrected));
  for (std::size_t v = 0; v < p.size(); ++v) out[v] += corrected[v];
}

}  // namespace specdec
