//! \file distributions/row_status.hpp
//! \brief What became of a row of scores: usable, or why not.
#pragma once

#include <cstdint>

namespace specdec {

//! The outcome of turning a row of logits or weights into a distribution.
enum class row_status : std::uint8_t {
  ok = 0,          //!< a usable distribution
  not_finite = 1,  //!< the row holds NaN or +inf (or a negative or infinite weight)
  no_mass = 2,     //!< every entry is -inf (logits) or zero (weights)
};

}  // namespace specdec
