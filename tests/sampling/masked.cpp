// `sample_masked` (sampling/categorical.hpp, backend/simd/categorical.hpp): a row with some entries
// left out samples exactly as a copy of the row with those entries set to 0 (token, status, mass), on
// seq and on simd, for rows spanning several tiles and masks at round and tile boundaries.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "specdec/backend/simd/categorical.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/sampling/categorical.hpp"

TEST_CASE("sampling with masked entries equals sampling the zeroed copy, on seq and simd", "[sampling][simd]") {
  using specdec::token_id;
  std::mt19937_64 rng(20261124);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const std::size_t V : {std::size_t{7}, std::size_t{64}, std::size_t{2048}, std::size_t{5000}, std::size_t{9000}}) {
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<float> row(V);
      for (auto& x : row) x = static_cast<float>(unit(rng) * unit(rng));
      std::vector<token_id> masked;
      for (const std::size_t edge :
           {std::size_t{0}, std::size_t{31}, std::size_t{32}, std::size_t{2047}, std::size_t{2048}, V - 1})
        if (edge < V && trial % 2 == 0) masked.push_back(static_cast<token_id>(edge));
      for (int k = 0; k < 1 + trial % 5; ++k) masked.push_back(static_cast<token_id>(rng() % V));
      // Put most of the mass on a masked token sometimes, so that leaving it out matters.
      if (trial % 3 == 0) row[static_cast<std::size_t>(masked.back())] = 1000.0f;
      std::sort(masked.begin(), masked.end());
      masked.erase(std::unique(masked.begin(), masked.end()), masked.end());
      std::vector<float> zeroed = row;
      for (const token_id t : masked) zeroed[static_cast<std::size_t>(t)] = 0.0f;
      for (int k = 0; k < 8; ++k) {
        const double u = unit(rng);
        const auto expected = specdec::sample_categorical(std::span<const float>(zeroed), u);
        const auto seq = specdec::sample_masked(std::span<const float>(row), std::span<const token_id>(masked), u);
        const auto simd = specdec::backend::simd::sample_masked<xsimd::default_arch>(std::span<const float>(row),
                                                                                     std::span<const token_id>(masked), u);
        REQUIRE(seq.token == expected.token);
        REQUIRE(seq.status == expected.status);
        REQUIRE(seq.mass == expected.mass);
        REQUIRE(simd.token == expected.token);
        REQUIRE(simd.status == expected.status);
        REQUIRE(simd.mass == expected.mass);
        REQUIRE(std::find(masked.begin(), masked.end(), seq.token) == masked.end());
      }
    }
  }
}
