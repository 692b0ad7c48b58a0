//! \file core/token.hpp
//! \brief Token ids.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

//! A token id: an index into the vocabulary, in [0, V).
using token_id = std::int32_t;

//! Padding in output buffers: "no token here". Never a valid id.
inline constexpr token_id no_token = -1;

//! True when `t` is a valid id for a vocabulary of `vocab_size` tokens.
constexpr bool in_vocabulary(token_id t, std::size_t vocab_size) noexcept {
  return t >= 0 && static_cast<std::size_t>(t) < vocab_size;
}

}  // namespace specdec
