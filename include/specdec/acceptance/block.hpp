//! \file acceptance/block.hpp
//! \brief Block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, ICLR 2025,
//! arXiv 2403.10444): the drafted block is verified jointly instead of token by token.
//!
//! With drafts X_1..X_g drawn from q, target rows p_1..p_{g+1} and draft rows q_1..q_g:
//!   a_0 = 1,  a_i = min(1, a_{i-1} p_i(X_i) / q_i(X_i))                (running weight)
//!   R_i = sum_v max(0, a_i p_{i+1}(v) - q_{i+1}(v))                     (residual mass after X^i)
//!   h_i = R_i / (R_i + (1 - a_i)) for i < g (0/0 = 1),  h_g = a_g
//!   tau = max { i : eta_i < h_i }, eta_i ~ U[0, 1) (tau = 0 if none; h_0 = 1 always passes)
//! emit X_1..X_tau, then Y ~ p_{g+1} if tau = g, else Y ~ norm(max(0, a_tau p_{tau+1} - q_{tau+1})).
//! **Guarantee:** lossless (the emitted sequence has the target's law), and the expected number of
//! accepted drafts is the largest of any valid verifier that sees the same rows, so never below
//! token-wise `strict` (equal at g = 1). Tested by exact enumeration (tests/acceptance/block.cpp).
//!
//! **Numerics.** The denominator is R_i + (1 - a_i), never (R_i + 1) - a_i: when a_i = 1 the latter
//! cancels to h_i = 1 - ulp and can pick a prefix whose residual has no mass. A residual that has
//! no mass in floating point anyway falls back to p_{tau+1} and flags `residual_fallback`.
//!
//! **Streams.** eta_i is the first uniform of (position i - 1, accept): for g = 1 the test
//! eta q(X) < p(X) and the residual are exactly strict's, so the tokens equal strict's. The residual
//! or bonus after tau uses (position tau, resample), as every chain rule does.
//!
//! **Cost.** The scan runs from i = g down and stops at the first passing i. Since R_i <= a_i, h_i <= a_i:
//! a prefix with eta_i >= a_i fails without reading anything; otherwise its row pair (p_{i+1},
//! q_{i+1}) is read once, and that pass also samples the candidate residual. So position i < g costs a
//! row pair with probability at most a_i; token-wise verification reads one row pair in all.
#pragma once

#include <type_traits>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/lane_ops.hpp"
#include "specdec/config.hpp"

namespace specdec {

//! The block verification rule (a chain rule: `specdec::verify(policy, block, ...)`).
struct block_rule {
  //! Decided jointly over the whole chain (rule_family::block).
  static constexpr rule_family family = rule_family::block;
};

//! The block verification rule, as a value: `specdec::verify(policy, specdec::block, ...)`.
inline constexpr block_rule block{};

//! a_i = min(1, a_{i-1} p / q) from a_{i-1} and the scalars p = p_i(X_i), q = q_i(X_i); 0 when q = 0
//! (q is then not what X_i was drawn from, and the block cannot pass this position).
SPECDEC_HOST_DEVICE constexpr double block_weight(double previous, double p, double q) noexcept {
  if (!(q > 0.0)) return 0.0;
  const double a = previous * p / q;
  return a < 1.0 ? a : 1.0;
}

//! h_i = R_i / (R_i + (1 - a_i)), with 0/0 = 1 (a_i = 1 and R_i = 0: the block always continues).
SPECDEC_HOST_DEVICE constexpr double block_stop_probability(double residual_mass, double weight) noexcept {
  const double denominator = residual_mass + (1.0 - weight);
  return denominator > 0.0 ? residual_mass / denominator : 1.0;
}

//! The residual of block verification as a rejection-rule residual: max(0, a p - q) is proportional
//! to max(0, p - q / a), the weight `sample_residual` computes from accepted_mass(p, q) = min(p, q / a).
//! With a = 1 it is strict's residual, to the bit.
struct block_residual {
  double inverse_weight = 1.0;  //!< 1 / a_tau, a_tau > 0
  //! Accept with probability min(1, a p / q) (the rule whose residual this is).
  SPECDEC_HOST_DEVICE constexpr bool accepts(double p, double q, double u) const noexcept { return u * q * inverse_weight < p; }
  //! min(p, q / a): the mass of a token the rule already emits, so the residual is norm(max(0, a p - q)).
  //! (T: double, or a batch of doubles the simd backend evaluates it on: acceptance/lane_ops.hpp.)
  template <class T = double>
  SPECDEC_HOST_DEVICE constexpr T accepted_mass(std::type_identity_t<T> p, std::type_identity_t<T> q) const noexcept {
    const T scaled = product_rn(q, T(inverse_weight));
    return lane_min(scaled, p);
  }
};

}  // namespace specdec
