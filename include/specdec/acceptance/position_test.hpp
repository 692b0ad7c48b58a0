//! \file acceptance/position_test.hpp
//! \brief The decision at one drafted position of a rejection-family rule, from its two scalars:
//! the status rules of that decision in one place, for the chain walk (backend/walks/chain.hpp,
//! which seq, simd and the cuda verification plan run).
#pragma once

#include <cstdint>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/config.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! What a drafted position's test decided.
enum class position_outcome : std::uint8_t {
  accepted,         //!< the rule accepts the draft
  rejected,         //!< the rule rejects it: a correction is drawn from the residual
  draft_prob_zero,  //!< q(x) = 0: rejected without a draw (`verify_status::draft_prob_zero`; q must then have mass)
  unusable,         //!< p(x) or q(x) is NaN, infinite or negative (`verify_status::invalid_row`)
};

//! Tests drafted token x with p = p(x), q = q(x) (status.hpp):
//! - p or q NaN, infinite or negative: `unusable`;
//! - q = 0: `draft_prob_zero` (a draft the draft could not have sampled; no uniform is drawn);
//! - otherwise `rule.accepts(p, q, u)` with u = `accept_uniform()`, drawn only here.
template <RejectionRule Rule, class Uniform>
SPECDEC_HOST_DEVICE position_outcome test_position(const Rule& rule, double p, double q, Uniform&& accept_uniform) {
  if (!detail::usable_weight(p) || !detail::usable_weight(q)) return position_outcome::unusable;
  if (q == 0.0) return position_outcome::draft_prob_zero;
  return rule.accepts(p, q, accept_uniform()) ? position_outcome::accepted : position_outcome::rejected;
}

}  // namespace specdec
