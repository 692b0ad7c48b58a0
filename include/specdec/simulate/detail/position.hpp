//! \file simulate/detail/position.hpp
//! \brief Internals of the token-level simulators: checking a (p, q) pair of rows, drafting a token
//! from q, and the target's verification of one drafted token with a rejection-family rule
//! (accept test, then the residual on rejection). The pieces are the library's own:
//! `sample_categorical`, the rule's `accepts` / `accepted_mass`, and `sample_residual`, so the
//! simulators exercise the code an engine runs.
#pragma once

#include <cstddef>
#include <span>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::simulate::detail {

//! True when p and q are probability rows of the same, non-zero length (sums 1 within 1e-6).
inline bool valid_row_pair(std::span<const double> p, std::span<const double> q) noexcept {
  return p.size() == q.size() && !p.empty() &&
         theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>) &&
         theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<double>);
}

//! A token sampled from the probability row w with the uniform u (w has positive mass).
inline std::size_t draw_token(std::span<const double> w, double u) {
  return static_cast<std::size_t>(sample_categorical(w, u).token);
}

//! What one verified position emitted.
struct position_outcome {
  std::size_t token = 0;  //!< the emitted token: the draft x if accepted, else the correction
  bool accepted = false;  //!< the draft token passed the rule's test
  bool fallback = false;  //!< the residual had no mass and p itself was sampled
};

//! The target's check of the drafted token x: accept iff rule.accepts(p(x), q(x), u); on rejection
//! sample norm(max(0, p - a)), a(v) = rule.accepted_mass(p(v), q(v)). Two uniforms at most.
template <RejectionRule Rule, class Stream>
position_outcome verify_drafted(const Rule& rule, std::span<const double> p, std::span<const double> q,
                                std::size_t x, Stream& s) {
  if (rule.accepts(p[x], q[x], s.uniform())) return {x, true, false};
  const residual_result r = sample_residual(
      p, q, [&rule](double pv, double qv) { return static_cast<double>(rule.accepted_mass(pv, qv)); }, s.uniform());
  return {static_cast<std::size_t>(r.sample.token), false, r.used_fallback};
}

}  // namespace specdec::simulate::detail
