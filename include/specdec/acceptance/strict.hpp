//! \file acceptance/strict.hpp
//! \brief Standard speculative sampling (Leviathan et al. 2023, Alg. 1; Chen et al. 2023; seed 004).
//!
//! Accept the draft token x iff u * q(x) < p(x), u ~ U[0, 1): probability min(1, p(x) / q(x)),
//! without a division. On rejection sample norm(max(0, p - q)); after gamma acceptances sample the
//! bonus token from p.
//! **Guarantee:** every emitted token is distributed exactly as p given its prefix, so the output
//! sequence has exactly the target's distribution (Leviathan et al. Thm 3.5; tested at the sequence
//! level by tests/acceptance/distribution.cpp with a negative control).
//! q(x) = 0 for a token the draft produced means q is not the distribution it was sampled from;
//! the verifier rejects it and flags `verify_status::draft_prob_zero` (vLLM rejects too).
#pragma once


#include <type_traits>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/lane_ops.hpp"

namespace specdec {

//! The lossless rule: accept iff u * q(x) < p(x).
struct strict_rule {
  //! A rejection-family rule (acceptance/concepts.hpp).
  static constexpr rule_family family = rule_family::rejection;
  //! On a tree: SpecInfer's multi-step sampling (acceptance/multi_candidate.hpp).
  static constexpr tree_method method = tree_method::multi_step;
  //! True iff u * q < p: accepts x with probability min(1, p / q), where p = p(x), q = q(x), u ~ U[0, 1).
  SPECDEC_HOST_DEVICE constexpr bool accepts(double p, double q, double u) const noexcept { return u * q < p; }
  //! q(v) min(1, p(v)/q(v)) = min(p(v), q(v)): the residual is norm(max(0, p - q)).
  //! (T: double, or a batch of doubles the simd backend evaluates it on: acceptance/lane_ops.hpp.)
  template <class T = double>
  SPECDEC_HOST_DEVICE constexpr T accepted_mass(std::type_identity_t<T> p, std::type_identity_t<T> q) const noexcept {
    return lane_min(q, p);
  }
  //! Its accepted mass on float values is exact (a min selects one of them, no rounding), so a backend
  //! may take it in float before widening (backend/simd/residual.hpp).
  static constexpr bool exact_mass_in_float = true;
};

//! The strict rule, as a value to pass to `verify` or `verify_tree`.
inline constexpr strict_rule strict{};

}  // namespace specdec
