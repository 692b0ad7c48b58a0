//! \file length/fixed.hpp
//! \brief The fixed draft length gamma of standard speculative decoding.
#pragma once

#include <cstddef>

#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! Always gamma.
struct fixed_length {
  std::size_t gamma = 4;  //!< the draft length of every round
  //! gamma, whatever the counters.
  constexpr std::size_t next_length(const decode_stats&) const noexcept { return gamma; }
};

}  // namespace specdec
