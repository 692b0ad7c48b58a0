// Request `id` of a test batch on a vocabulary of V tokens: a two-token prompt derived from the id, the
// seed `seed_base + id`, the id as request id, and the draft length and token budget given.
#pragma once

#include <cstddef>
#include <cstdint>

#include "specdec/core/token.hpp"
#include "specdec/decode/batch_decoder.hpp"

namespace specdec_test {

template <std::size_t V>
specdec::request_options numbered_request(std::uint32_t id, std::uint64_t seed_base, std::size_t gamma,
                                          std::size_t max_new_tokens) {
  specdec::request_options o;
  o.prompt = {static_cast<specdec::token_id>(id % V), static_cast<specdec::token_id>((id * 5 + 2) % V)};
  o.seed = seed_base + id;
  o.request_id = id;
  o.gamma = gamma;
  o.max_new_tokens = max_new_tokens;
  return o;
}

}  // namespace specdec_test
