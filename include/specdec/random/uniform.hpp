//! \file random/uniform.hpp
//! \brief Turning random bits into variates: uniforms in [0, 1) (never 1), exponential, Gumbel.
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/config.hpp"

namespace specdec::random {

//! A double in [0, 1) with 53 random bits: k * 2^-53 for k in [0, 2^53). Never exactly 1.
SPECDEC_HOST_DEVICE constexpr double uniform_double(std::uint32_t hi, std::uint32_t lo) noexcept {
  const std::uint64_t bits = (static_cast<std::uint64_t>(hi) << 21) ^ (static_cast<std::uint64_t>(lo) >> 11);
  return static_cast<double>(bits & ((std::uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

//! A float in [0, 1) with 24 random bits. Never exactly 1.
SPECDEC_HOST_DEVICE constexpr float uniform_float(std::uint32_t bits) noexcept {
  return static_cast<float>(bits >> 8) * 0x1.0p-24f;
}

//! An Exp(1) variate from a uniform u in [0, 1): -log(1 - u), finite because 1 - u > 0.
SPECDEC_HOST_DEVICE inline double exponential_from_uniform(double u) noexcept { return -std::log1p(-u); }

//! A standard Gumbel variate from a uniform u in [0, 1): -log(Exp(1)).
//! u = 0 gives Exp = 0 and so +inf; callers that need finiteness draw u from (0, 1).
SPECDEC_HOST_DEVICE inline double gumbel_from_uniform(double u) noexcept { return -std::log(exponential_from_uniform(u)); }

}  // namespace specdec::random
