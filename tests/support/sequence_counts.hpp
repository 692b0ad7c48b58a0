// Sequence-level sampling on the step decoder for the chi-squared tests: 40000 requests of `horizon`
// tokens after the prompt {1} (seed `seed`, ids 0.., gamma 1 + id % 4, then `configure(options)`, which
// may ask for more tokens), run in batches of 2000; counts the first H tokens x_0..x_{H-1} of each
// output at index sum_i x_i V^(H-1-i) (`sequence_cell`) and sums the tokens drafted.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "specdec/decode/batch_decoder.hpp"
#include "support/sequence_enumeration.hpp"

namespace specdec_test {

struct sequence_counts {
  std::vector<std::uint64_t> counts;
  std::size_t drafted = 0;
};

template <class Decoder, class Configure>
sequence_counts count_sequences(Decoder& decoder, std::size_t vocab, int horizon, std::size_t cells, std::uint64_t seed,
                                Configure configure) {
  sequence_counts out{std::vector<std::uint64_t>(cells, 0), 0};
  constexpr std::uint32_t n = 40000, per_batch = 2000;
  std::size_t length = static_cast<std::size_t>(horizon);  // the tokens each request emits
  for (std::uint32_t first = 0; first < n; first += per_batch) {
    for (std::uint32_t id = first; id < first + per_batch; ++id) {
      specdec::request_options o;
      o.prompt = {1};
      o.seed = seed;
      o.request_id = id;
      o.gamma = 1 + id % 4;
      o.max_new_tokens = static_cast<std::size_t>(horizon);
      configure(o);
      length = o.max_new_tokens;
      decoder.add(o);
    }
    std::map<specdec::request_handle, std::vector<specdec::token_id>> tokens;
    while (decoder.active() > 0)
      for (const auto& e : decoder.step()) {
        tokens[e.request].insert(tokens[e.request].end(), e.tokens.begin(), e.tokens.end());
        out.drafted += e.drafted;
      }
    REQUIRE(length >= static_cast<std::size_t>(horizon));
    for (const auto& [h, t] : tokens) {
      REQUIRE(t.size() == length);
      ++out.counts[sequence_cell(t, vocab, horizon)];
    }
  }
  return out;
}

}  // namespace specdec_test
