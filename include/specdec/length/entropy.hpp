//! \file length/entropy.hpp
//! \brief An entropy-based stop in the manner of AdaEDL (Agrawal et al., arXiv 2410.18351): a lower
//! bound on the acceptance of the next draft from the draft distribution's entropy,
//!   beta_j = 1 - sqrt(lambda H(q_j)),  H in nats,
//! and drafting stops (x_j dropped) when beta_j < epsilon. The form of the bound is the one third-party
//! summaries give (not checked against AdaEDL's code); AdaEDL's
//! online adaptation of the threshold is not implemented: lambda and epsilon are fixed. The decision
//! reads q_j only, so strict verification stays exact.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! The entropy H(q) of a probability row, in nats (0 log 0 = 0).
inline double entropy_nats(std::span<const float> q) {
  double h = 0.0;
  for (const float x : q)
    if (x > 0.0f) h -= static_cast<double>(x) * std::log(static_cast<double>(x));
  return h;
}

//! Drop x_j and stop when 1 - sqrt(lambda H(q_j)) < epsilon.
struct entropy_stop {
  double lambda = 0.3;   //!< the scale lambda of H(q_j) in beta_j = 1 - sqrt(lambda H(q_j)), >= 0
  double epsilon = 0.2;  //!< the threshold on beta_j, <= 1
  //! \throws specdec::error unless lambda >= 0 and epsilon <= 1 (both finite).
  draft_decision decide(const draft_view& v) const {
    SPECDEC_EXPECTS(std::isfinite(lambda) && lambda >= 0.0 && std::isfinite(epsilon) && epsilon <= 1.0,
                    "specdec::entropy_stop: lambda >= 0 and epsilon <= 1");
    const double beta = 1.0 - std::sqrt(lambda * entropy_nats(v.q_row()));
    return beta < epsilon ? draft_decision::drop : draft_decision::next;
  }
};

}  // namespace specdec
