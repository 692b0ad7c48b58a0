//! \file backend/cuda/indicator_status.cuh
//! \brief `indicator_status`: what the SV indicator kernels (indicators.cuh) found at a drafted
//! position, and seq's error message for it.
#pragma once

#include <cstdint>

namespace specdec::backend::cuda {

//! What the GPU found at a drafted position: ok, or the first of seq's checks that failed.
enum class indicator_status : std::uint8_t {
  ok = 0,
  bad_draft_row = 1,           //!< a NaN, infinite or negative entry, or a sum not within 1e-3 of 1
  bad_companion_row = 2,       //!< the same for the companion row
  token_out_of_range = 3,      //!< the drafted token is outside [0, V)
  draft_probability_zero = 4,  //!< P_d(t) is not > 0 (the token cannot have been drafted from P_d)
};

//! Seq's error message for a status (empty for ok).
inline const char* indicator_message(indicator_status s) noexcept {
  switch (s) {
    case indicator_status::bad_draft_row: return "the draft row is not a probability row (NaN, negative, or sum != 1)";
    case indicator_status::bad_companion_row: return "the companion row is not a probability row (NaN, negative, or sum != 1)";
    case indicator_status::token_out_of_range: return "the drafted token is outside [0, V)";
    case indicator_status::draft_probability_zero: return "P_d(t) must be > 0 and finite (the token was drafted from P_d)";
    default: return "";
  }
}

}  // namespace specdec::backend::cuda
