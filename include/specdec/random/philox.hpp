//! \file random/philox.hpp
//! \brief Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw,
//! "Parallel random numbers: as easy as 1, 2, 3" (SC 2011).
//!
//! A counter-based generator is a pure function of (counter, key): any draw can be recomputed
//! from its address alone, on the host or on a device, in any order. That is what makes
//! specdec's tokens independent of batch composition, thread count and backend (docs/design.md, 'Randomness').
#pragma once

#include <array>
#include <cstdint>

#include "specdec/config.hpp"

namespace specdec::random {

//! Philox's constants (Salmon et al. 2011, section 4): the round multipliers and the Weyl key increments.
inline constexpr std::uint32_t philox_m0 = 0xD2511F53u;
//! The second round multiplier.
inline constexpr std::uint32_t philox_m1 = 0xCD9E8D57u;
//! The first Weyl key increment (the golden ratio).
inline constexpr std::uint32_t philox_w0 = 0x9E3779B9u;
//! The second Weyl key increment (sqrt(3) - 1).
inline constexpr std::uint32_t philox_w1 = 0xBB67AE85u;

namespace detail {
struct philox_state {
  std::uint32_t c0, c1, c2, c3, k0, k1;
};

SPECDEC_HOST_DEVICE constexpr void philox_round(philox_state& s) noexcept {
  const std::uint64_t p0 = static_cast<std::uint64_t>(philox_m0) * s.c0;
  const std::uint64_t p1 = static_cast<std::uint64_t>(philox_m1) * s.c2;
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  s = philox_state{hi1 ^ s.c1 ^ s.k0, lo1, hi0 ^ s.c3 ^ s.k1, lo0, s.k0, s.k1};
}
}  // namespace detail

//! The Philox4x32-10 block function: ten rounds, the key bumped by the Weyl constants between rounds.
//! Matches the Random123 known-answer vectors (tests/random/philox.cpp).
SPECDEC_HOST_DEVICE constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                                                         std::array<std::uint32_t, 2> key) noexcept {
  detail::philox_state s{counter[0], counter[1], counter[2], counter[3], key[0], key[1]};
  detail::philox_round(s);
  for (int round = 1; round < 10; ++round) {
    s.k0 += philox_w0;
    s.k1 += philox_w1;
    detail::philox_round(s);
  }
  return {s.c0, s.c1, s.c2, s.c3};
}

}  // namespace specdec::random
