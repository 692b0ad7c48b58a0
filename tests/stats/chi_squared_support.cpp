// SPECDEC_TEST_LABELS: statistical
//
// Checks of the test-support chi-squared helper (tests/support/chi_squared.hpp) that every
// statistical test relies on: known quantiles, the Boost-free fallback against Boost.Math, pooling,
// impossible cells, and the calibration of the whole procedure under the null hypothesis.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <span>
#include <vector>

#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "support/chi_squared.hpp"

TEST_CASE("chi-squared upper tail: known quantiles", "[stats][support]") {
  // 95% and 99.9999% quantiles (standard tables).
  CHECK(specdec_test::chi_squared_upper_tail(3.841458820694124, 1) == Approx(0.05).epsilon(1e-9));
  CHECK(specdec_test::chi_squared_upper_tail(18.307038053275146, 10) == Approx(0.05).epsilon(1e-9));
  CHECK(specdec_test::chi_squared_upper_tail(124.34211340400407, 100) == Approx(0.05).epsilon(1e-9));
  CHECK(specdec_test::chi_squared_upper_tail(23.928127159026, 1) == Approx(1e-6).epsilon(1e-5));
  // dof = 2: exp(-x / 2) exactly.
  for (const double x : {0.1, 1.0, 10.0, 50.0})
    CHECK(specdec_test::chi_squared_upper_tail(x, 2) == Approx(std::exp(-x / 2)).epsilon(1e-12));
  CHECK(specdec_test::chi_squared_upper_tail(0.0, 5) == 1.0);
}

TEST_CASE("the Boost-free fallback agrees with the tail in use", "[stats][support]") {
  CAPTURE(SPECDEC_STATS_HAVE_BOOST_MATH);
  for (const double dof : {1.0, 2.0, 3.0, 7.0, 30.0, 368.0, 2758.0}) {
    for (const double ratio : {0.2, 0.7, 1.0, 1.3, 2.0}) {
      const double x = ratio * dof + 1.0;
      CAPTURE(dof, x);
      const double a = specdec_test::chi_squared_upper_tail(x, dof);
      const double b = specdec_test::chi_squared_upper_tail_fallback(x, dof);
      if (a > 1e-250) CHECK(b == Approx(a).epsilon(1e-9).margin(1e-300));
    }
  }
}

TEST_CASE("pooling and impossible cells", "[stats][support]") {
  // Expected counts 50, 30, 15, 3, 1, 1 (N = 100): the three small cells are pooled into one of 5.
  const std::vector<double> prob{0.5, 0.3, 0.15, 0.03, 0.01, 0.01};
  const std::vector<std::uint64_t> counts{50, 30, 15, 3, 1, 1};
  const auto g = specdec_test::chi_squared_gof(counts, prob);
  CHECK(g.pooled == 3);
  CHECK(g.cells == 4);
  CHECK(g.dof == 3);
  CHECK(g.statistic == Approx(0.0).margin(1e-12));
  CHECK(g.p_value == Approx(1.0));
  CHECK(g.n == 100);
  // An observation in a cell of probability 0 makes the p-value 0.
  const std::vector<double> with_zero{0.5, 0.5, 0.0};
  const std::vector<std::uint64_t> seen{50, 49, 1};
  const auto z = specdec_test::chi_squared_gof(seen, with_zero);
  CHECK(z.impossible == 1);
  CHECK(z.p_value == 0.0);
  // A clear mismatch.
  const std::vector<std::uint64_t> skewed{75, 15, 5, 3, 1, 1};
  CHECK(specdec_test::chi_squared_gof(skewed, prob).p_value < 1e-4);
  // Misuse.
  CHECK_THROWS(specdec_test::chi_squared_gof(std::span<const std::uint64_t>(counts).first(2), prob));
  const std::vector<double> one{1.0};
  const std::vector<std::uint64_t> one_count{10};
  CHECK_THROWS(specdec_test::chi_squared_gof(one_count, one));
}

TEST_CASE("calibration under the null: p-values are uniform enough", "[stats][support][statistical]") {
  // 4000 experiments of 2000 draws from a 20-token distribution with several small cells (so pooling
  // is exercised). Under the null the rejection rate at level a is about a; the bounds are about
  // 6 standard deviations of the binomial rate (plus the chi-squared approximation's slack).
  std::vector<double> prob(20);
  double z = 0.0;
  for (std::size_t i = 0; i < prob.size(); ++i) z += prob[i] = std::pow(0.7, static_cast<double>(i));
  for (auto& p : prob) p /= z;
  specdec::random::philox_stream s(specdec::random::stream_address{0xCA11B, 0, 0, 0, specdec::random::purpose::simulate});
  constexpr int experiments = 4000, draws = 2000;
  int below_05 = 0, below_01 = 0;
  for (int e = 0; e < experiments; ++e) {
    std::vector<std::uint64_t> counts(prob.size(), 0);
    for (int d = 0; d < draws; ++d)
      ++counts[static_cast<std::size_t>(specdec::sample_categorical(std::span<const double>(prob), s.uniform()).token)];
    const double p = specdec_test::chi_squared_gof(counts, prob).p_value;
    below_05 += p < 0.05;
    below_01 += p < 0.01;
  }
  const double r05 = static_cast<double>(below_05) / experiments, r01 = static_cast<double>(below_01) / experiments;
  std::cout << "[chi_squared] calibration: P(p < 0.05) = " << r05 << ", P(p < 0.01) = " << r01 << " over " << experiments
            << " experiments\n";
  CHECK(r05 > 0.028);
  CHECK(r05 < 0.075);
  CHECK(r01 > 0.002);
  CHECK(r01 < 0.022);
}
