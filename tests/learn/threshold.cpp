// What SPRINTER's ROC-aware threshold choice needs from data (learn/generate.hpp, learn/roc.hpp):
// the law of Theorem 3.3's r (leading acceptable draft tokens), checked exactly on order-0 models where
// r is a truncated geometric law (chi-squared, 1e-6, fixed printed seed, with a negative control), and
// the learned verifier's ROC feeding optimize::sprinter::choose_threshold (optimize/threshold.hpp).
// SPECDEC_TEST_LABELS: statistical
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <vector>

#include "specdec/learn/generate.hpp"
#include "specdec/learn/roc.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/optimize/threshold.hpp"
#include "support/chi_squared.hpp"

namespace learn = specdec::learn;
using specdec::token_id;

TEST_CASE("estimate_acceptable_runs: r is a truncated geometric law on order-0 models", "[learn][threshold][statistical]") {
  const std::vector<double> p{0.35, 0.25, 0.2, 0.1, 0.06, 0.04};
  const std::vector<double> q{0.1, 0.15, 0.3, 0.25, 0.05, 0.15};
  const auto target = specdec::markov_model::categorical(p);
  const auto draft = specdec::markov_model::categorical(q);
  const std::vector<std::vector<token_id>> docs{{0, 1, 2, 3, 4, 5}};
  for (const double lambda : {1.0, 1.6}) {  // 1.5 would tie q(2) = 1.5 p(2) (float rounding decides)
    double alpha = 0.0;                     // P_{x ~ q}(q(x) <= lambda p(x)), the same at every position
    for (std::size_t x = 0; x < p.size(); ++x) alpha += q[x] <= lambda * p[x] ? q[x] : 0.0;
    learn::generation_options o;
    o.examples = 40000;
    o.lambda = lambda;
    o.seed = 404;
    const std::size_t max_r = 6;
    const auto pmf = learn::estimate_acceptable_runs(target, draft, docs, o, max_r);
    REQUIRE(pmf.size() == max_r + 1);
    std::vector<std::uint64_t> counts(pmf.size());
    std::vector<double> expected(pmf.size()), wrong(pmf.size());
    for (std::size_t k = 0; k <= max_r; ++k) {
      counts[k] = static_cast<std::uint64_t>(std::llround(pmf[k] * double(o.examples)));
      expected[k] = k < max_r ? std::pow(alpha, double(k)) * (1.0 - alpha) : std::pow(alpha, double(max_r));
      const double a2 = alpha * 0.95;  // a slightly wrong acceptable share
      wrong[k] = k < max_r ? std::pow(a2, double(k)) * (1.0 - a2) : std::pow(a2, double(max_r));
    }
    const auto g = specdec_test::chi_squared_gof(counts, expected);
    std::cout << "[threshold] r law, lambda " << lambda << " (seed 404): alpha " << alpha << ", " << g << "\n";
    CHECK(g.p_value >= specdec_test::gof_alpha);
    CHECK(specdec_test::chi_squared_gof(counts, wrong).p_value < specdec_test::gof_alpha);
  }
  learn::generation_options bad;
  bad.examples = 10;
  CHECK_THROWS_AS(learn::estimate_acceptable_runs(target, draft, docs, bad, 0), specdec::error);
  bad.lambda = 0.5;
  CHECK_THROWS_AS(learn::estimate_acceptable_runs(target, draft, docs, bad, 4), specdec::error);
}

TEST_CASE("a roc_curve feeds optimize::sprinter::choose_threshold", "[learn][threshold]") {
  // Scores of a verifier whose positives score higher on average.
  std::vector<double> s;
  std::vector<std::uint8_t> y;
  for (int i = 0; i < 100; ++i) {
    s.push_back((i % 10) / 10.0 + 0.05);
    y.push_back(i % 10 >= 4 ? (i % 3 != 0) : (i % 5 == 0));
  }
  const auto roc = learn::compute_roc(s, y);
  const specdec::optimize::sprinter::costs c{.t_draft = 0.05, .t_verifier = 0.001, .t_target = 1.0};
  const double tv = 0.3, bound = 0.05;
  const auto choice =
      specdec::optimize::sprinter::choose_threshold(std::span<const learn::roc_point>(roc.points), 3, c, tv, bound);
  REQUIRE(choice.has_value());
  CHECK(choice->point.eta_fp * tv <= bound);
  // Every feasible point is at most as fast.
  for (const auto& pt : roc.points)
    if (pt.eta_fp * tv <= bound)
      CHECK(specdec::optimize::sprinter::token_rate(pt.eta_tp, pt.eta_fp, 3, c) <= choice->token_rate + 1e-12);
  // The chosen threshold reproduces its rates on the data (accept iff score >= threshold).
  const auto at = learn::rates_at(s, y, choice->point.threshold);
  CHECK(at.eta_tp == Approx(choice->point.eta_tp));
  CHECK(at.eta_fp == Approx(choice->point.eta_fp));
}
