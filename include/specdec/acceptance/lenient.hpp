//! \file acceptance/lenient.hpp
//! \brief Lenient speculative sampling (Leviathan et al. 2023, appendix; seed 004 "Lenience").
//!
//! Accept x iff u * l * q(x) < p(x), i.e. with probability min(1, p(x) / (l q(x))). l < 1 accepts more
//! tokens (lossy), l = 1 is the strict rule, l > 1 accepts fewer. On rejection sample the residual
//! norm(max(0, p - a)) of the mass a(v) = q(v) min(1, p(v)/(l q(v))) = min(q(v), p(v)/l) already accepted.
//!
//! **Exact output distribution of one verified position** (derived here): with
//!   a(v) = min(q(v), p(v) / l),   R = 1 - sum_v a(v)   (the rejection probability),
//!   r(v) = max(0, p(v) - a(v)) / sum_w max(0, p(w) - a(w)),
//! the emitted token has distribution  P_l(v) = a(v) + R r(v).
//!  - l >= 1: p/l <= p, so a <= p everywhere and sum_v (p - a) = R; hence P_l = p exactly (lossless,
//!    with acceptance sum_v min(q, p/l) <= the strict rule's).
//!  - l < 1: where q < p, a = q (since p/l > p > q); where q >= p, a >= p. So r = norm(max(0, p - q)),
//!    the strict residual, and P_l(v) = min(q(v), p(v)/l) + (1 - sum_w min(q(w), p(w)/l)) norm(max(0, p - q))(v).
//!    If p = q then R = 0 and P_l = p. Its distance to p is TV(P_l, p) <= TV(p, q).
//! The bonus token after gamma acceptances is sampled from p, as in the strict rule, so a whole
//! sequence mixes P_l (drafted positions) and p (bonus positions); `emission_distribution`
//! (acceptance/distribution.hpp) gives the two parts a sequence-level enumeration needs.
#pragma once

#include <type_traits>
#include <algorithm>
#include <cmath>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/lane_ops.hpp"
#include "specdec/contracts.hpp"

namespace specdec {

//! Accept iff u * l * q(x) < p(x), lenience l > 0.
class lenient_rule {
 public:
  //! A rejection-family rule (acceptance/concepts.hpp).
  static constexpr rule_family family = rule_family::rejection;

  //! \throws specdec::error unless l is finite and > 0.
  explicit lenient_rule(double lenience) : l_(lenience) {
    SPECDEC_EXPECTS(std::isfinite(lenience) && lenience > 0.0, "lenience must be finite and > 0");
  }
  //! The lenience l.
  double lenience() const noexcept { return l_; }
  //! True iff u * l * q < p: accepts x with probability min(1, p / (l q)), where p = p(x), q = q(x), u ~ U[0, 1).
  SPECDEC_HOST_DEVICE bool accepts(double p, double q, double u) const noexcept { return u * l_ * q < p; }
  //! a = min(q, p / l), the mass of a token the test already emits; the residual is norm(max(0, p - a)).
  //! (T: double, or a batch of doubles the simd backend evaluates it on: acceptance/lane_ops.hpp.)
  template <class T = double>
  SPECDEC_HOST_DEVICE T accepted_mass(std::type_identity_t<T> p, std::type_identity_t<T> q) const noexcept {
    const T cap = p / T(l_);
    return lane_min(cap, q);
  }

  //! Equal lenience.
  bool operator==(const lenient_rule&) const = default;

 private:
  double l_;
};

}  // namespace specdec
