//! \file acceptance/status.hpp
//! \brief Per-request verification status flags, and the output buffers of a verification.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/core/token.hpp"

namespace specdec {

//! What happened to a request, as bit flags. Warnings leave the output valid; errors mean the
//! request's rows could not be used and no token was produced from them.
enum class verify_status : std::uint8_t {
  ok = 0,
  residual_fallback = 1 << 0,  //!< warning: the residual had no mass; the correction was sampled from p
  draft_prob_zero = 1 << 1,    //!< warning: q(x) = 0 for a drafted x (q is not what x was sampled from); rejected
  invalid_row = 1 << 2,        //!< error: a row read held NaN, inf, negative entries or no mass
  bad_draft_token = 1 << 3,    //!< error: a drafted id outside [0, V); the request emits nothing
  not_normalised = 1 << 4,     //!< error: a row's sum is off by more than the tolerance (only when checked)
  stage_error = 1 << 5,  //!< error: a stage of the step decoder threw for this request (drafter, verification, verified length)
};

//! The union of two sets of flags.
constexpr verify_status operator|(verify_status a, verify_status b) noexcept {
  return static_cast<verify_status>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
//! Adds the flags of b to a; returns a.
constexpr verify_status& operator|=(verify_status& a, verify_status b) noexcept { return a = a | b; }
//! True iff s and `flag` share a set bit (for a single flag: s has it).
constexpr bool has_flag(verify_status s, verify_status flag) noexcept {
  return (static_cast<std::uint8_t>(s) & static_cast<std::uint8_t>(flag)) != 0;
}
//! True unless an error flag is set. An invalid request emits only the drafts accepted before the
//! unusable row, and no correction token.
constexpr bool is_valid(verify_status s) noexcept {
  return !has_flag(s, verify_status::invalid_row) && !has_flag(s, verify_status::bad_draft_token) &&
         !has_flag(s, verify_status::not_normalised) && !has_flag(s, verify_status::stage_error);
}

//! Where a batch verification writes. Request b's tokens are tokens[b * (max_drafts + 1) + j]:
//! the accepted drafts, then one correction or bonus token, then `no_token` (-1) padding.
struct chain_outputs {
  std::span<token_id> tokens;            //!< [B][max_drafts + 1]
  std::span<std::int32_t> num_accepted;  //!< [B] drafted tokens accepted
  std::span<verify_status> status;       //!< [B]
};

//! Options of a verification.
struct verify_options {
  //! Sum every probability row that is read and flag `not_normalised` when |sum - 1| > tolerance.
  //! Off by default: it reads whole rows that the rule would otherwise only gather from. From
  //! logits, a target sample (sample-and-match's, a bonus) reads no probability row, so nothing is
  //! summed for it; every warped row is normalised by construction.
  bool check_normalisation = false;
  //! The largest |sum - 1| accepted when `check_normalisation` is on.
  double normalisation_tolerance = 1e-3;
};

}  // namespace specdec
