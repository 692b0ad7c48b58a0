// Optimal draft lengths (optimize/gamma.hpp): the real optimum of Leviathan's Thm 3.8 against a
// dense grid and golden-section search; the integer optimum against the exhaustive
// theory::sd::optimal_gamma on a fine grid; position-dependent and latency-profile forms against brute
// force; a Monte-Carlo check that the chosen gamma is fastest.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "specdec/errors.hpp"
#include "specdec/optimize/gamma.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/theory/sd.hpp"

namespace opt = specdec::optimize;
namespace theory = specdec::theory;
using cspan = std::span<const double>;

namespace {
// Thm 3.8 for real gamma, the plain textbook formula (long double), as an independent reference.
double reference_speedup(double alpha, double g, double c) {
  const long double a = alpha;
  return static_cast<double>((1.0L - std::pow(a, g + 1.0L)) / ((1.0L - a) * (g * c + 1.0L)));
}
}  // namespace

TEST_CASE("real_optimal_gamma: maximiser of Thm 3.8 over real gamma", "[optimize][gamma]") {
  for (const double alpha : {0.05, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99}) {
    for (const double c : {0.0, 0.01, 0.05, 0.1, 0.3, 0.6, 1.0, 2.0}) {
      CAPTURE(alpha, c);
      const auto best = opt::sd::real_optimal_gamma(alpha, c, 64.0);
      REQUIRE(best.x >= 0.0);
      REQUIRE(best.x <= 64.0);
      CHECK(best.value == Approx(reference_speedup(alpha, best.x, c)).epsilon(1e-12));
      // No point of a dense grid does better.
      double grid_best = 0.0;
      for (int i = 0; i <= 32000; ++i) grid_best = std::max(grid_best, reference_speedup(alpha, i / 500.0, c));
      CHECK(best.value >= grid_best * (1.0 - 1e-13));
      // Golden-section search on the same function agrees (to its flat-top resolution).
      const auto golden = opt::maximize_unimodal([&](double g) { return reference_speedup(alpha, g, c); }, 0.0, 64.0, 1e-13);
      CHECK(golden.value <= best.value * (1.0 + 1e-13));
      // (With c = 0 the speedup saturates in double precision: a flat top, any point of which is a maximum.)
      if (c > 0.0) CHECK(std::abs(golden.x - best.x) <= 1e-5 * (1.0 + best.x));
    }
  }
  // Edges.
  CHECK(opt::sd::real_optimal_gamma(0.0, 0.1).x == 0.0);
  CHECK(opt::sd::real_optimal_gamma(1.0, 0.5, 10.0).x == 10.0);
  CHECK(opt::sd::real_optimal_gamma(1.0, 0.5, 10.0).value == Approx(11.0 / 6.0));
  CHECK(opt::sd::real_optimal_gamma(1.0, 1.0, 10.0).x == 0.0);
  CHECK(opt::sd::real_optimal_gamma(0.5, 0.0, 20.0).x == 20.0);
  CHECK(opt::sd::real_optimal_gamma(0.5, 0.5, 0.0).x == 0.0);
  CHECK_THROWS_AS(opt::sd::real_optimal_gamma(1.5, 0.1), specdec::error);
  CHECK_THROWS_AS(opt::sd::real_optimal_gamma(0.5, -0.1), specdec::error);
  CHECK_THROWS_AS(opt::sd::real_optimal_gamma(0.5, 0.1, -1.0), specdec::error);
}

TEST_CASE("integer_optimal_gamma equals the exhaustive theory::sd::optimal_gamma", "[optimize][gamma]") {
  int compared = 0;
  for (int i = 0; i <= 1000; ++i) {
    const double alpha = i / 1000.0;
    for (const double c : {0.0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.9, 1.0, 3.0}) {
      for (const int max_gamma : {0, 1, 7, 128}) {
        CAPTURE(alpha, c, max_gamma);
        const auto best = opt::sd::integer_optimal_gamma(alpha, c, max_gamma);
        const std::size_t exhaustive = theory::sd::optimal_gamma(alpha, c, static_cast<std::size_t>(max_gamma));
        CHECK(best.x == static_cast<int>(exhaustive));
        CHECK(best.value == theory::sd::speedup(alpha, exhaustive, c));
        ++compared;
      }
    }
  }
  std::cout << "integer_optimal_gamma: " << compared << " (alpha, c, max_gamma) points equal the exhaustive search\n";
  // Large max_gamma costs nothing: alpha = 1 - 1e-6, c = 1e-4.
  const auto big = opt::sd::integer_optimal_gamma(1.0 - 1e-6, 1e-4, 1000000);
  CHECK(big.x == static_cast<int>(theory::sd::optimal_gamma(1.0 - 1e-6, 1e-4, 1000000)));
  CHECK_THROWS_AS(opt::sd::integer_optimal_gamma(0.5, 0.1, -1), specdec::error);
}

TEST_CASE("optimal_gamma with position-dependent alphas and with a latency profile", "[optimize][gamma]") {
  const std::vector<double> alphas{0.95, 0.9, 0.9, 0.8, 0.6, 0.5, 0.95, 0.2, 0.1};
  for (const double c : {0.0, 0.02, 0.1, 0.3, 1.0}) {
    CAPTURE(c);
    int brute = 0;
    double brute_value = 1.0;
    for (std::size_t k = 1; k <= alphas.size(); ++k) {
      const double s = theory::sd::speedup(cspan(alphas).first(k), c);
      if (s > brute_value) {
        brute = static_cast<int>(k);
        brute_value = s;
      }
    }
    const auto best = opt::sd::optimal_gamma(cspan(alphas), c);
    CHECK(best.x == brute);
    CHECK(best.value == Approx(brute_value).epsilon(1e-15));
  }
  // Constant alphas: the same answer as the i.i.d. search.
  const std::vector<double> constant(40, 0.8);
  CHECK(opt::sd::optimal_gamma(cspan(constant), 0.05).x == static_cast<int>(theory::sd::optimal_gamma(0.8, 0.05, 40)));
  // A constant latency profile with c = t_draft / t_target reduces to Thm 3.8.
  for (const double alpha : {0.5, 0.8, 0.95}) {
    const auto flat = opt::sd::optimal_gamma(
        alpha, 0.05, [](int) { return 1.0; }, 60);
    CHECK(flat.x == static_cast<int>(theory::sd::optimal_gamma(alpha, 0.05, 60)));
    // A profile that grows with k shortens the optimal draft.
    const auto growing = opt::sd::optimal_gamma(
        alpha, 0.05, [](int k) { return 1.0 + 0.1 * k; }, 60);
    CHECK(growing.x <= flat.x);
    CHECK(growing.value ==
          theory::sd::speedup(alpha, static_cast<std::size_t>(growing.x), 0.05, [](int k) { return 1.0 + 0.1 * k; }));
  }
  const std::vector<double> bad{0.5, 2.0};
  CHECK_THROWS_AS(opt::sd::optimal_gamma(cspan(bad), 0.1), specdec::error);
  CHECK_THROWS_AS(opt::sd::optimal_gamma(cspan(alphas), -1.0), specdec::error);
  CHECK_THROWS_AS(opt::sd::optimal_gamma(
                      0.5, 0.1, [](int) { return 1.0; }, -1),
                  specdec::error);
}

TEST_CASE("Monte-Carlo: the optimal gamma is the fastest in simulation", "[optimize][gamma]") {
  constexpr std::uint64_t seed = 8080;
  constexpr std::uint64_t draws = 400000;
  std::cout << "optimal gamma Monte-Carlo: seed " << seed << ", " << draws << " iterations per gamma\n";
  const double alpha = 0.8, c = 0.05;
  const auto best = static_cast<std::size_t>(opt::sd::integer_optimal_gamma(alpha, c).x);  // x >= 0
  const auto at_best = specdec::simulate::sd::chain(alpha, best, {seed, 0, 0, draws}).speedup(c);
  for (const std::size_t other : {std::size_t{1}, std::size_t{2}, best / 2, best * 2, best + 6}) {
    if (other == best) continue;
    const auto s = specdec::simulate::sd::chain(alpha, other, {seed, static_cast<std::uint32_t>(other + 1), 0, draws}).speedup(c);
    std::cout << "  gamma " << other << ": " << s.mean << " +- " << s.std_error << " vs optimum gamma " << best << ": "
              << at_best.mean << " +- " << at_best.std_error << "\n";
    CHECK(at_best.mean - s.mean > -5.0 * std::hypot(at_best.std_error, s.std_error));
  }
}
