// A random probability row for the tree- and block-verification tests: the table of an order-0
// random_markov_model (Dirichlet(concentration), each entry zeroed with probability zero_fraction,
// at least one kept), deterministic in the seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "specdec/models/markov.hpp"

namespace specdec_test {

inline std::vector<double> random_row(std::size_t v, std::uint64_t seed, double concentration, double zero_fraction = 0.0) {
  const auto m = specdec::random_markov_model(v, 0, seed, concentration, zero_fraction);
  return {m.table().begin(), m.table().end()};
}

}  // namespace specdec_test
