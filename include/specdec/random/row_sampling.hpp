//! \file random/row_sampling.hpp
//! \brief `row_sampling`: where the uniform of each row of a batched sampling call comes from.
#pragma once

#include <cstdint>

#include "specdec/random/stream.hpp"

namespace specdec {

//! Where the uniform of a batched sampling call comes from: row b draws
//! `streams[b].open(position, what).uniform()`.
struct row_sampling {
  std::uint32_t position = 0;                             //!< the position in the request's stream
  random::purpose what = random::purpose::target_sample;  //!< the purpose of the draw
};

}  // namespace specdec
