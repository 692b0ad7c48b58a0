// SPRINTER's threshold choice (optimize/threshold.hpp): the renewal-reward token rate against a
// Monte-Carlo simulation of the i.i.d. verifier, the constrained choice against brute force on a
// binormal ROC curve, ties, the r mixture, infeasible bounds and invalid arguments.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/errors.hpp"
#include "specdec/optimize/threshold.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/theory/sprinter.hpp"

namespace opt = specdec::optimize::sprinter;
namespace sim = specdec::simulate;
using specdec_sim_test::within;

namespace {
// A binormal ROC curve: verifier scores N(0, 1) for unacceptable tokens and N(d, 1) for acceptable
// ones; threshold t gives eta_fp = P(N(0,1) > t), eta_tp = P(N(d,1) > t).
std::vector<opt::roc_point> binormal_roc(double d, int points) {
  std::vector<opt::roc_point> roc;
  for (int i = 0; i < points; ++i) {
    const double t = -3.0 + 7.0 * i / (points - 1);
    roc.push_back({t, 0.5 * std::erfc((t - d) / std::sqrt(2.0)), 0.5 * std::erfc(t / std::sqrt(2.0))});
  }
  roc.push_back({std::numeric_limits<double>::infinity(), 0.0, 0.0});  // reject everything: always feasible
  return roc;
}
}  // namespace

TEST_CASE("token_rate: renewal-reward closed form vs the simulated verifier", "[optimize][threshold]") {
  constexpr std::uint64_t seed = 4711;
  constexpr std::uint64_t draws = 300000;
  std::cout << "SPRINTER token rate Monte-Carlo: seed " << seed << ", " << draws << " runs per case\n";
  const opt::costs c{0.1, 0.02, 1.0};
  std::uint32_t stream = 0;
  for (const double tp : {0.5, 0.9, 1.0}) {
    for (const double fp : {0.0, 0.1, 0.5}) {
      for (const int r : {0, 3, 8}) {
        CAPTURE(tp, fp, r);
        const auto res = sim::sprinter::verifier_chain(tp, fp, r, {seed, stream++, 0, draws});
        CHECK(within("tokens per unit time", res.token_rate(c.t_draft, c.t_verifier, c.t_target), opt::token_rate(tp, fp, r, c)));
      }
    }
  }
  // A perfect verifier on r acceptable tokens: r + 1 tokens per run of (r + 1)(t_d + t_v) + t_t.
  CHECK(opt::token_rate(1.0, 0.0, 5, c) == Approx(6.0 / (6.0 * 0.12 + 1.0)).epsilon(1e-15));
  // The verifier never stops: the limit 1 / (t_d + t_v).
  CHECK(opt::token_rate(0.9, 1.0, 5, c) == Approx(1.0 / 0.12));
  // The r mixture is the average of E[N].
  const std::vector<double> pmf{0.0, 0.25, 0.0, 0.75};
  const double mixed_n = 0.25 * specdec::theory::sprinter::expected_tokens(0.8, 0.2, 1) +
                         0.75 * specdec::theory::sprinter::expected_tokens(0.8, 0.2, 3);
  CHECK(opt::token_rate(0.8, 0.2, std::span<const double>(pmf), c) ==
        Approx((mixed_n + 1.0) / ((mixed_n + 1.0) * 0.12 + 1.0)).epsilon(1e-14));
  const std::vector<double> delta{0.0, 0.0, 1.0};
  CHECK(opt::token_rate(0.8, 0.2, std::span<const double>(delta), c) == opt::token_rate(0.8, 0.2, 2, c));
}

TEST_CASE("choose_threshold maximises the rate under eta_fp TV(p, q) <= bound", "[optimize][threshold]") {
  const auto roc = binormal_roc(2.0, 141);
  const opt::costs c{0.1, 0.01, 1.0};
  const double tv_pq = 0.4;
  double previous_rate = 0.0;
  for (const double bound : {0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4}) {
    CAPTURE(bound);
    const auto choice = opt::choose_threshold(std::span<const opt::roc_point>(roc), 5, c, tv_pq, bound);
    REQUIRE(choice.has_value());
    // Brute force over the feasible points.
    double best = -1.0;
    for (const auto& pt : roc) {
      if (pt.eta_fp * tv_pq > bound) continue;
      best = std::max(best, opt::token_rate(pt.eta_tp, pt.eta_fp, 5, c));
    }
    CHECK(choice->token_rate == best);
    CHECK(choice->total_variation <= bound);
    CHECK(choice->total_variation == specdec::theory::sprinter::total_variation(choice->point.eta_fp, tv_pq));
    CHECK(choice->expected_tokens == specdec::theory::sprinter::expected_tokens(choice->point.eta_tp, choice->point.eta_fp, 5));
    CHECK(choice->point.threshold == roc[choice->index].threshold);
    // A looser bound never lowers the best rate.
    CHECK(choice->token_rate >= previous_rate);
    previous_rate = choice->token_rate;
    std::cout << "  TV bound " << bound << ": threshold " << choice->point.threshold << " (eta_tp " << choice->point.eta_tp
              << ", eta_fp " << choice->point.eta_fp << "), E[N] " << choice->expected_tokens << ", rate " << choice->token_rate
              << "\n";
  }
  // The unconstrained choice is the lowest threshold (rate increases with both rates here).
  CHECK(opt::choose_threshold(std::span<const opt::roc_point>(roc), 5, c, tv_pq, 1.0)->index == 0);
}

TEST_CASE("choose_threshold: ties, infeasible bounds, invalid arguments", "[optimize][threshold]") {
  const opt::costs c{0.1, 0.0, 1.0};
  // The same point listed twice: the first one.
  const std::vector<opt::roc_point> twins{{1.0, 0.8, 0.3}, {2.0, 0.8, 0.3}};
  CHECK(opt::choose_threshold(std::span<const opt::roc_point>(twins), 4, c, 0.5, 1.0)->index == 0);
  // eta_fp does not matter when eta_tp = 0 and r >= 1 (the first token is always rejected).
  const std::vector<opt::roc_point> flat{{1.0, 0.0, 0.6}, {2.0, 0.0, 0.2}};
  const auto f = opt::choose_threshold(std::span<const opt::roc_point>(flat), 3, c, 0.5, 1.0);
  REQUIRE(f.has_value());
  CHECK(f->index == 1);  // equal rates, smaller TV
  // No feasible point.
  const std::vector<opt::roc_point> noisy{{0.0, 0.9, 0.5}, {1.0, 0.7, 0.2}};
  CHECK_FALSE(opt::choose_threshold(std::span<const opt::roc_point>(noisy), 5, c, 0.5, 0.05).has_value());
  CHECK_FALSE(opt::choose_threshold(std::span<const opt::roc_point>(), 5, c, 0.5, 0.05).has_value());
  // TV(p, q) = 0: every point is feasible even at bound 0.
  CHECK(opt::choose_threshold(std::span<const opt::roc_point>(noisy), 5, c, 0.0, 0.0)->index == 0);
  // eta_fp = 1 is unbounded in E[N]; it wins when feasible.
  const std::vector<opt::roc_point> all_pass{{-9.0, 1.0, 1.0}, {0.0, 0.9, 0.5}};
  const auto u = opt::choose_threshold(std::span<const opt::roc_point>(all_pass), 5, c, 0.5, 1.0);
  CHECK(u->index == 0);
  CHECK(std::isinf(u->expected_tokens));
  CHECK(u->token_rate == Approx(10.0));
  const double nan_v = std::numeric_limits<double>::quiet_NaN();
  const std::vector<opt::roc_point> bad{{0.0, 1.2, 0.1}};
  CHECK_THROWS_AS(opt::choose_threshold(std::span<const opt::roc_point>(bad), 5, c, 0.5, 0.1), specdec::error);
  CHECK_THROWS_AS(opt::choose_threshold(std::span<const opt::roc_point>(noisy), -1, c, 0.5, 0.1), specdec::error);
  CHECK_THROWS_AS(opt::choose_threshold(std::span<const opt::roc_point>(noisy), 5, c, 1.5, 0.1), specdec::error);
  CHECK_THROWS_AS(opt::choose_threshold(std::span<const opt::roc_point>(noisy), 5, c, 0.5, nan_v), specdec::error);
  CHECK_THROWS_AS(opt::token_rate(0.5, 0.5, 3, opt::costs{0.0, 0.0, 1.0}), specdec::error);
  CHECK_THROWS_AS(opt::token_rate(0.5, 0.5, 3, opt::costs{0.1, -1.0, 1.0}), specdec::error);
  const std::vector<double> not_pmf{0.5, 0.6};
  CHECK_THROWS_AS(opt::token_rate(0.5, 0.5, std::span<const double>(not_pmf), c), specdec::error);
}
