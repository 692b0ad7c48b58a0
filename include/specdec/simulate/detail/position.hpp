//! \file simulate/detail/position.hpp
//! \brief Internals of the token-level simulators: checking a (p, q) pair of rows, drafting a token
//! from q, and the target's verification of one drafted token with a rejection-family rule
//! (accept test, then the residual on rejection).
//!
//! The per-draw steps (`verify_drafted` here, `sd_token_iteration` in simulate/sd.hpp,
//! `sprinter_position` in simulate/sprinter.hpp) are host/device templates over a *rows* object
//! that knows the rule, reads p(x) and q(x), and samples q, p and the rule's residual:
//!   - `host_rows` (the CPU simulators) samples with the library's own pieces, `sample_categorical`
//!     and `sample_residual`, so the simulators exercise the code an engine runs;
//!   - `table_rows` (simulate/detail/sampling_table.hpp; the cuda backend) looks the same tokens up
//!     in tables precomputed from the rows.
#pragma once

#include <cstddef>
#include <span>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::simulate::detail {

//! True when p and q are probability rows of the same, non-zero length (sums 1 within 1e-6).
inline bool valid_row_pair(std::span<const double> p, std::span<const double> q) noexcept {
  return p.size() == q.size() && !p.empty() && theory::detail::is_probability_row(p, theory::detail::row_sum_tolerance<double>) &&
         theory::detail::is_probability_row(q, theory::detail::row_sum_tolerance<double>);
}

//! A token sampled from the probability row w with the uniform u (w has positive mass).
inline std::size_t draw_token(std::span<const double> w, double u) {
  return static_cast<std::size_t>(sample_categorical(w, u).token);
}

//! A token drawn from a rule's residual, and whether the residual had no mass (p was sampled).
struct residual_draw {
  std::size_t token = 0;
  bool fallback = false;
};

//! The rows of a context-free pair as the CPU simulators read them: p(x), q(x), and samples from q,
//! from p and from the residual norm(max(0, p - a)), a(v) = rule.accepted_mass(p(v), q(v)), through
//! `sample_categorical` and `sample_residual` (which falls back to p when the residual has no mass).
template <RejectionRule Rule>
struct host_rows {
  Rule rule;
  std::span<const double> p, q;

  double p_at(std::size_t x) const { return p[x]; }
  double q_at(std::size_t x) const { return q[x]; }
  std::size_t sample_p(double u) const { return draw_token(p, u); }
  std::size_t sample_q(double u) const { return draw_token(q, u); }
  residual_draw sample_residual(double u) const {
    const residual_result r = specdec::sample_residual(
        p, q, [this](double pv, double qv) { return static_cast<double>(rule.accepted_mass(pv, qv)); }, u);
    return {static_cast<std::size_t>(r.sample.token), r.used_fallback};
  }
};

//! What one verified position emitted.
struct position_outcome {
  std::size_t token = 0;  //!< the emitted token: the draft x if accepted, else the correction
  bool accepted = false;  //!< the draft token passed the rule's test
  bool fallback = false;  //!< the residual had no mass and p itself was sampled
};

//! The target's check of the drafted token x: accept iff rows.rule.accepts(p(x), q(x), u); on
//! rejection sample the rule's residual. Two uniforms at most. Host and device.
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Rows, class Stream>
SPECDEC_HOST_DEVICE position_outcome verify_drafted(const Rows& rows, std::size_t x, Stream& s) {
  if (rows.rule.accepts(rows.p_at(x), rows.q_at(x), s.uniform())) return {x, true, false};
  const residual_draw r = rows.sample_residual(s.uniform());
  return {r.token, false, r.fallback};
}

}  // namespace specdec::simulate::detail
