// SPECDEC_TEST_LABELS: statistical
// Monte-Carlo simulator of block and token-wise verification (simulate/block.hpp) against the exact
// laws of theory/block.hpp: the paper's example (Sun et al., arXiv 2403.10444), random
// context-independent pairs, a context-dependent Markov pair and the n-gram pair on a truncated
// vocabulary; means and the paired gain within 5 standard errors, histograms cell by cell. Negative
// controls: the simulated block mean against the token-wise value and a naive block formula
// (h_i = a_i) must be rejected by the same check. The n-gram case needs the default corpus: it is
// tagged [needs_corpus] and runs as the CTest test simulate/block:needs_corpus, which reports
// "Skipped" where there is none (support/skip.hpp).
// SPECDEC_TEST_SPLIT: needs_corpus
#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "simulate/check.hpp"
#include "theory/random_row.hpp"
#include "support/skip.hpp"
#include "specdec/errors.hpp"
#include "specdec/models/corpus.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/models/ngram.hpp"
#include "specdec/simulate/block.hpp"
#include "specdec/theory/block.hpp"

namespace sim = specdec::simulate;
namespace block = specdec::theory::block;
using specdec::token_id;
using specdec_sim_test::law_matches;
using specdec_sim_test::within;

namespace {

constexpr std::uint64_t seed = 20250403, draws = 200000;

// Mean, gain and both histograms of a simulation against the exact laws.
void check_against(const sim::block::verification_result& r, const block::length_laws& laws) {
  const std::size_t cells = laws.block.size();
  CHECK(within("E[tau] (block)", r.block_accepted(), laws.block_mean()));
  CHECK(within("E[A] (token-wise)", r.token_wise_accepted(), laws.token_wise_mean()));
  CHECK(within("E[tau - A]", r.block_gain(), laws.block_mean() - laws.token_wise_mean()));
  CHECK(law_matches("P(tau = i)", r.block, cells, [&](std::size_t i) { return laws.block[i]; }));
  CHECK(law_matches("P(A = i)", r.token_wise, cells, [&](std::size_t i) { return laws.token_wise[i]; }));
}

auto markov_rows(const specdec::markov_model& m) {
  return [&m](std::span<const token_id> prefix, std::span<double> out) { m.next_probs(prefix, out); };
}

}  // namespace

TEST_CASE("Block simulation: the paper's example (10/9 and 11/9)", "[simulate][block]") {
  std::cout << "block verification Monte-Carlo: seed " << seed << ", " << draws << " blocks per case\n";
  const std::vector<double> p{1.0 / 3.0, 2.0 / 3.0}, q{2.0 / 3.0, 1.0 / 3.0};
  const auto r = sim::block::verification(p, q, 2, {seed, 0, 0, draws});
  CHECK(r.gamma == 2);
  check_against(r, block::accepted_length_laws(p, q, 2));
  CHECK(within("E[tau] = 11/9", r.block_accepted(), 11.0 / 9.0));
  CHECK(within("E[A] = 10/9", r.token_wise_accepted(), 10.0 / 9.0));
}

TEST_CASE("Block simulation: random context-independent pairs and a Markov pair", "[simulate][block]") {
  std::uint32_t stream = 1;
  for (std::uint64_t pair = 1; pair <= 3; ++pair) {
    const auto p = specdec_test::random_row(4, pair, 0.5, pair == 2 ? 0.25 : 0.0);
    const auto q = specdec_test::random_row(4, 100 + pair, 1.0);
    for (const std::size_t gamma : {1u, 3u, 5u}) {
      CAPTURE(pair, gamma);
      std::cout << "pair " << pair << ", gamma " << gamma << "\n";
      check_against(sim::block::verification(p, q, gamma, {seed, stream++, 0, draws}), block::accepted_length_laws(p, q, gamma));
    }
  }
  const auto target = specdec::random_markov_model(3, 1, 11, 0.5, 0.2), draft = specdec::random_markov_model(3, 1, 12, 1.0);
  for (const std::size_t gamma : {2u, 4u}) {
    CAPTURE(gamma);
    std::cout << "Markov pair, gamma " << gamma << "\n";
    check_against(sim::block::verification(markov_rows(target), markov_rows(draft), 3, gamma, {seed, stream++, 0, draws}),
                  block::accepted_length_laws(markov_rows(target), markov_rows(draft), 3, gamma));
  }
}

TEST_CASE("Block simulation: the n-gram pair with a truncated vocabulary (30 words + specials)",
          "[simulate][block][needs_corpus]") {
  const auto paths = specdec::default_corpus_paths();
  if (paths.empty()) {
    SPECDEC_SKIP("no default corpus under " << specdec::default_corpus_directory);
    return;
  }
  const auto pair = specdec::make_ngram_pair(specdec::load_text_files(paths), 4, 2, 30);
  const std::vector<token_id> context = pair.target.vocab().encode("this program is free software");
  const auto rows = [&context](const specdec::ngram_model& m) {
    return [&m, &context](std::span<const token_id> prefix, std::span<double> out) {
      std::vector<token_id> full = context;
      full.insert(full.end(), prefix.begin(), prefix.end());
      m.next_probs(full, out);
    };
  };
  const std::size_t v = pair.target.vocab_size();
  std::cout << "n-gram pair (orders 4 and 2), V = " << v << ", gamma 3\n";
  const auto laws = block::accepted_length_laws(rows(pair.target), rows(pair.draft), v, 3);
  CHECK(laws.block_mean() > laws.token_wise_mean());
  check_against(sim::block::verification(rows(pair.target), rows(pair.draft), v, 3, {seed, 50, 0, 100000}), laws);
}

TEST_CASE("Block simulation negative controls: wrong formulas are rejected", "[simulate][block]") {
  const std::vector<double> p{1.0 / 3.0, 2.0 / 3.0}, q{2.0 / 3.0, 1.0 / 3.0};
  const auto r = sim::block::verification(p, q, 2, {seed, 99, 0, draws});
  // A naive "block" rule that stops at h_i = a_i (no residual mass): its E[tau] by enumeration.
  double naive = 0.0;
  for (std::size_t x1 = 0; x1 < 2; ++x1)
    for (std::size_t x2 = 0; x2 < 2; ++x2) {
      const double a1 = specdec::block_weight(1.0, p[x1], q[x1]), a2 = specdec::block_weight(a1, p[x2], q[x2]);
      const double law[] = {(1 - a1) * (1 - a2), a1 * (1 - a2), a2};
      naive += q[x1] * q[x2] * (law[1] + 2 * law[2]);
    }
  std::cout << "negative controls (expected to be rejected):\n";
  CHECK_FALSE(within("E[tau] against token-wise 10/9", r.block_accepted(), 10.0 / 9.0));
  CHECK_FALSE(within("E[tau] against h_i = a_i", r.block_accepted(), naive));
  CHECK_FALSE(within("E[A] against block 11/9", r.token_wise_accepted(), 11.0 / 9.0));
}

TEST_CASE("Block simulation preconditions", "[simulate][block]") {
  const std::vector<double> p{0.5, 0.5}, q{0.25, 0.75};
  CHECK_THROWS_AS(sim::block::verification(p, q, 0, {1, 0, 0, 10}), specdec::error);
  CHECK_THROWS_AS(sim::block::verification(p, std::vector<double>{0.5, 0.6}, 2, {1, 0, 0, 10}), specdec::error);
  CHECK_THROWS_AS(sim::block::verification(p, q, 2, {1, 0, ~std::uint64_t{0}, 10}), specdec::error);
}
