//! \file length/fixed.hpp
//! \brief The fixed draft length gamma of standard speculative decoding, and the LengthPolicy concept.
#pragma once

#include <concepts>
#include <cstddef>

#include "specdec/decode/stats.hpp"

namespace specdec {

//! Chooses how many tokens to draft in the next round from what the loop has seen so far.
template <class L>
concept LengthPolicy = requires(const L& l, const decode_stats& s) {
  { l.next_length(s) } -> std::convertible_to<std::size_t>;
};

//! Always gamma.
struct fixed_length {
  std::size_t gamma = 4;
  constexpr std::size_t next_length(const decode_stats&) const noexcept { return gamma; }
};

}  // namespace specdec
