//! \file backend/walks/steps.hpp
//! \brief The small steps every verification walk shares (backend/walks/), on the host and on the
//! device: the first uniform of a stream address, a product rounded once, the drafted ids' check, the
//! read of the scalars p_i(x), q_i(x), the emission of a sampled token, and the results a walk's row
//! operations return (`row_scalar`, `row_draw`, `greedy_row`, `residual_mass`).
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/acceptance/lane_ops.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::walks {

//! A scalar read from a row that was checked first: `flags` says why the row could not be used
//! (ok: `value` is the entry).
struct row_scalar {
  verify_status flags = verify_status::ok;  //!< why the row could not be used (ok: it could)
  double value = 0.0;                       //!< the entry, when `flags` is ok
};

//! A token drawn from a row that was checked first, in the backend's sample type (with `token` and
//! `status`); `fallback`: a residual without mass, so p itself was sampled.
template <class Sample>
struct row_draw {
  verify_status flags = verify_status::ok;  //!< why the row could not be used (ok: it could)
  Sample sample{};                          //!< the token drawn and its status
  bool fallback = false;                    //!< the residual had no mass: p itself was sampled
};

//! Greedy's view of a row: usable (no NaN, infinite or negative entry, and some entry > 0, as seq's
//! `greedy_usable`) and its argmax (the lowest index of the largest entry, as `specdec::argmax`).
struct greedy_row {
  bool usable;     //!< the row can be used by greedy
  token_id token;  //!< its argmax (lowest index on ties)
};

//! A residual's mass as the residual sampler sees it (sampling/residual.hpp): `fallback` when it has
//! none and the sampler falls back to p (`mass` is then not used).
struct residual_mass {
  verify_status flags = verify_status::ok;  //!< why the rows could not be used (ok: they could)
  double mass = 0.0;                        //!< the residual's mass Z
  bool fallback = false;                    //!< no mass: the sampler falls back to p
};

//! Whether the residual sampler falls back to p for a residual whose weights were all usable (`usable`)
//! and summed to `total`: exactly when that sum is finite and not positive (sampling/residual.hpp).
SPECDEC_HOST_DEVICE inline bool residual_falls_back(bool usable, double total) noexcept {
  return usable && specdec::detail::usable_weight(total) && !(total > 0.0);
}

//! The first uniform of the request's stream at (position, what): `stream.open(pos, what).uniform()`.
SPECDEC_HOST_DEVICE inline double first_uniform(const random::request_stream& stream, std::int64_t position,
                                                random::purpose what) {
  return stream.open(static_cast<std::uint32_t>(position), what).uniform();
}

//! Whether every id is in [0, V); flags `bad_draft_token` otherwise (the caller's bug: the whole
//! request is refused, whatever an earlier rejection would have done).
SPECDEC_HOST_DEVICE inline bool drafts_in_vocabulary(const token_id* drafts, std::int32_t n, std::size_t vocab,
                                                     verify_status& status) {
  for (std::int32_t i = 0; i < n; ++i)
    if (!in_vocabulary(drafts[i], vocab)) {
      status |= verify_status::bad_draft_token;
      return false;
    }
  return true;
}

//! p = p_i(x), then q = q_i(x) (`Ops::target_at`, `draft_at`), their rows' flags added to `status`;
//! false once the request has an error (q is then not read after a failing p).
SPECDEC_DETAIL_EXEC_CHECK_DISABLE
template <class Ops>
SPECDEC_HOST_DEVICE bool read_scalars(Ops& ops, std::int32_t i, token_id x, verify_status& status, double& p, double& q) {
  const row_scalar pr = ops.target_at(i, x);
  status |= pr.flags;
  if (!is_valid(status)) return false;
  const row_scalar qr = ops.draft_at(i, x);
  status |= qr.flags;
  if (!is_valid(status)) return false;
  p = pr.value;
  q = qr.value;
  return true;
}

//! Writes a sampled token to `slot`, or flags `invalid_row` for an unusable row or a token outside [0, V).
template <class Sample>
SPECDEC_HOST_DEVICE void emit_sample(const Sample& s, std::size_t vocab, token_id& slot, verify_status& status) {
  if (s.status != row_status::ok || !in_vocabulary(s.token, vocab))
    status |= verify_status::invalid_row;
  else
    slot = s.token;
}

}  // namespace specdec::backend::walks
