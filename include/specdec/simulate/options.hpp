//! \file simulate/options.hpp
//! \brief How a Monte-Carlo run is addressed: `run_options` (seed, stream, first draw, number of
//! draws) and `draw_stream`, the Philox stream of one draw.
//!
//! Every draw (one simulated iteration) reads its own Philox stream,
//!   stream_address{seed, request = stream, step = i >> 32, position = i & 0xFFFFFFFF, purpose::simulate},
//! i = the draw's index. So draw i is the same whatever else is simulated, a run over
//! [first, first + draws) can be split into chunks (or threads) and merged with identical
//! histograms, and two runs with different `stream` values are independent. One draw may use up
//! to 2^25 uniforms (the length of one stream), far more than any simulator here needs.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::simulate {

//! Which draws a simulator runs: indices [first, first + draws) of the streams keyed by `seed`
//! and numbered `stream` (use a different `stream` per configuration, e.g. per grid point).
struct run_options {
  std::uint64_t seed = 0;    //!< Philox key
  std::uint32_t stream = 0;  //!< independent stream family (the `request` field of the address)
  std::uint64_t first = 0;   //!< index of the first draw (for chunked runs)
  std::uint64_t draws = 0;   //!< number of draws (iterations) to simulate
};

//! The Philox stream of draw i (see the file comment for its address). Host and device.
SPECDEC_HOST_DEVICE constexpr random::philox_stream draw_stream(const run_options& options, std::uint64_t i) noexcept {
  return random::philox_stream(random::stream_address{options.seed, options.stream, static_cast<std::uint32_t>(i >> 32),
                                                      static_cast<std::uint32_t>(i & 0xFFFFFFFFu), random::purpose::simulate});
}

namespace detail {
//! Checks that [first, first + draws) does not wrap around 2^64.
constexpr bool valid_range(const run_options& o) noexcept { return o.first + o.draws >= o.first; }
}  // namespace detail

}  // namespace specdec::simulate
