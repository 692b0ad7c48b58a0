//! \file sampling/residual.hpp
//! \brief The residual sampler: norm(max(0, p - a)) where a is the mass the rule already accepted;
//! the bonus token is the same call with q = 0 (one code path, docs/design.md, 'Randomness').
//!
//! For the strict rule a_v = min(p_v, q_v) and the residual is the textbook norm(max(0, p - q))
//! (Leviathan et al. 2023, Alg. 1). A rule supplies a_v through `accepted_mass(p_v, q_v)`.
//! Zero residual mass (p == q up to rounding, or rows that are not normalised) falls back to sampling
//! p itself and says so through `used_fallback`; nothing is ever divided by zero.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! The outcome of a residual draw.
struct residual_result {
  sample_result sample;        //!< the token, and the status of the row that was finally sampled
  bool used_fallback = false;  //!< the residual had no mass and p itself was sampled
};

namespace detail {
//! The residual weight max(0, p - accepted_mass(p, q)) of one entry; NaN when p or q is NaN, infinite
//! or negative, so that the row is reported `not_finite` (max(0, .) would hide it). Shared by every
//! backend (host and device), so that their weights are the same doubles.
//! Branch-free (`accepted_mass` is evaluated on unusable inputs too, and its value then discarded), so
//! that the GPU's loops over a row pair keep many loads in flight (see `usable_weight`).
template <class AcceptedMass>
SPECDEC_HOST_DEVICE constexpr double residual_weight(double pv, double qv, const AcceptedMass& accepted_mass) {
  const bool p_usable = usable_weight(pv), q_usable = usable_weight(qv);
  const double r = pv - accepted_mass(pv, qv);
  const double kept = r > 0.0 ? r : 0.0;
  return (p_usable & q_usable) ? kept : std::numeric_limits<double>::quiet_NaN();
}
}  // namespace detail

//! Samples from norm(max(0, p_v - accepted_mass(p_v, q_v))) with the uniform u; q may be empty,
//! meaning q = 0 (the bonus token: a sample from p). Falls back to p when the residual has no mass.
//! \pre q is empty or q.size() == p.size()
template <class T, class AcceptedMass>
residual_result sample_residual(std::span<const T> p, std::span<const T> q, AcceptedMass&& accepted_mass, double u) {
  SPECDEC_EXPECTS(q.empty() || q.size() == p.size(), "draft and target rows differ in length");
  const auto target_weight = [&](std::size_t v) { return static_cast<double>(p[v]); };
  if (q.empty()) return {sample_by_weights(p.size(), target_weight, u), false};
  const auto residual_weight = [&](std::size_t v) {
    return detail::residual_weight(static_cast<double>(p[v]), static_cast<double>(q[v]), accepted_mass);
  };
  residual_result r{sample_by_weights(p.size(), residual_weight, u), false};
  if (r.sample.status == row_status::no_mass) {
    r.sample = sample_by_weights(p.size(), target_weight, u);
    r.used_fallback = true;
  }
  return r;
}

//! The textbook residual norm(max(0, p - q)) (the strict rule's accepted mass min(p, q)).
template <class T>
residual_result sample_residual(std::span<const T> p, std::span<const T> q, double u) {
  return sample_residual(
      p, q, [](double pv, double qv) { return std::min(pv, qv); }, u);
}

}  // namespace specdec
