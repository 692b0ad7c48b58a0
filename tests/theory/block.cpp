// Block-verification theory (theory/block.hpp): the exact laws of block and token-wise verification of
// one draft block by enumeration. The paper's example (Sun et al., arXiv 2403.10444: V = 2,
// p = (1/3, 2/3), q = (2/3, 1/3), gamma = 2) gives 10/9 and 11/9; block >= token-wise on random
// context-independent and context-dependent (Markov) pairs, equal at gamma = 1; the enumerated
// token-wise mean equals the closed form sum alpha^i.
#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <span>
#include <vector>

#include "random_row.hpp"
#include "specdec/errors.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/theory/block.hpp"

namespace block = specdec::theory::block;
using cspan = std::span<const double>;
using specdec_test::random_row;
using specdec::token_id;

namespace {

// The row function of a Markov model after the verified context `context` and the drafted prefix.
auto markov_rows(const specdec::markov_model& m, std::vector<token_id> context) {
  return [&m, context](std::span<const token_id> prefix, std::span<double> out) {
    std::vector<token_id> full = context;
    full.insert(full.end(), prefix.begin(), prefix.end());
    m.next_probs(full, out);
  };
}

double total(const std::vector<double>& law) {
  double s = 0.0;
  for (const double x : law) s += x;
  return s;
}

}  // namespace

TEST_CASE("The paper's example: token-wise 10/9, block 11/9", "[theory][block]") {
  const std::vector<double> p{1.0 / 3.0, 2.0 / 3.0}, q{2.0 / 3.0, 1.0 / 3.0};
  const auto laws = block::accepted_length_laws(p, q, 2);
  CHECK(std::abs(laws.token_wise_mean() - 10.0 / 9.0) < 1e-12);
  CHECK(std::abs(laws.block_mean() - 11.0 / 9.0) < 1e-12);
  CHECK(std::abs(block::block_expected_accepted(p, q, 2) - 11.0 / 9.0) < 1e-12);
  CHECK(std::abs(block::token_wise_expected_accepted(p, q, 2) - 10.0 / 9.0) < 1e-12);
  CHECK(std::abs(total(laws.token_wise) - 1.0) < 1e-14);
  CHECK(std::abs(total(laws.block) - 1.0) < 1e-14);
}

TEST_CASE("Block >= token-wise on random pairs, equal at gamma = 1; token-wise = sum alpha^i", "[theory][block]") {
  int strictly_better = 0;
  for (std::uint64_t seed = 1; seed <= 120; ++seed) {
    const std::size_t v = 2 + seed % 3;  // 2..4
    const auto p = random_row(v, seed, 0.5, seed % 3 == 0 ? 0.3 : 0.0);
    const auto q = seed % 10 == 0 ? p : random_row(v, 100 + seed, 1.0, seed % 4 == 0 ? 0.3 : 0.0);  // some p = q
    for (std::size_t gamma = 1; gamma <= 5; ++gamma) {
      CAPTURE(seed, v, gamma);
      const auto laws = block::accepted_length_laws(p, q, gamma);
      CHECK(std::abs(total(laws.block) - 1.0) < 1e-12);
      CHECK(std::abs(total(laws.token_wise) - 1.0) < 1e-12);
      CHECK(laws.token_wise_mean() == Approx(block::token_wise_expected_accepted(p, q, gamma)).margin(1e-12));
      CHECK(laws.block_mean() >= laws.token_wise_mean() - 1e-12);
      if (gamma == 1) CHECK(std::abs(laws.block_mean() - laws.token_wise_mean()) < 1e-12);
      if (laws.block_mean() > laws.token_wise_mean() + 1e-9) ++strictly_better;
      if (seed % 10 == 0) CHECK(laws.block_mean() == Approx(gamma));  // p = q: everything passes
    }
  }
  std::cout << "block verification strictly better in " << strictly_better << " of 600 (pair, gamma) cases\n";
  CHECK(strictly_better > 300);
}

TEST_CASE("Context-dependent pairs (Markov, order 1 and 2): block >= token-wise, laws sum to 1", "[theory][block]") {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const std::size_t v = 3, order = 1 + seed % 2;
    const auto target = specdec::random_markov_model(v, order, seed, 0.5, seed % 3 == 0 ? 0.2 : 0.0);
    const auto draft = specdec::random_markov_model(v, order, 50 + seed, 1.0);
    const std::vector<token_id> context{static_cast<token_id>(seed % v)};
    for (std::size_t gamma = 1; gamma <= 4; ++gamma) {
      CAPTURE(seed, order, gamma);
      const auto laws = block::accepted_length_laws(markov_rows(target, context), markov_rows(draft, context), v, gamma);
      CHECK(std::abs(total(laws.block) - 1.0) < 1e-12);
      CHECK(std::abs(total(laws.token_wise) - 1.0) < 1e-12);
      CHECK(laws.block_mean() >= laws.token_wise_mean() - 1e-12);
      if (gamma == 1) CHECK(std::abs(laws.block_mean() - laws.token_wise_mean()) < 1e-12);
    }
  }
  // A context-independent pair given as row functions gives the span overload's laws.
  const auto p = random_row(3, 7, 0.5, 0.0), q = random_row(3, 8, 1.0, 0.0);
  const auto a = block::accepted_length_laws(p, q, 3);
  const auto b = block::accepted_length_laws(block::constant_row(p), block::constant_row(q), 3, 3);
  CHECK(a.block == b.block);
  CHECK(a.token_wise == b.token_wise);
}

TEST_CASE("Stop probabilities: no cancellation at a = 1, 0 at a = 0", "[theory][block]") {
  const std::vector<double> p{0.1, 0.2, 0.7};
  CHECK(block::stop_probability(1.0, p, p) == 1.0);  // R = 0 and 1 - a = 0: the block continues
  CHECK(block::stop_probability(0.0, p, p) == 0.0);
  CHECK(block::residual_mass(0.5, p, std::vector<double>{0.0, 0.0, 1.0}) == Approx(0.15));
}

TEST_CASE("theory::block preconditions", "[theory][block]") {
  const std::vector<double> p{0.5, 0.5}, q{0.25, 0.75};
  CHECK_THROWS_AS(block::accepted_length_laws(p, q, 0), specdec::error);
  CHECK_THROWS_AS(block::accepted_length_laws(p, std::vector<double>{1.0}, 2), specdec::error);
  CHECK_THROWS_AS(block::accepted_length_laws(p, q, 25), specdec::error);  // 2^25 blocks > max_blocks
  const auto not_normalised = [](std::span<const token_id>, std::span<double> out) {
    for (double& x : out) x = 0.75;
  };
  CHECK_THROWS_AS(block::accepted_length_laws(not_normalised, block::constant_row(q), 2, 2), specdec::error);
  CHECK_THROWS_AS(block::token_wise_expected_accepted(p, std::vector<double>{0.5, 0.6}, 2), specdec::error);
}
