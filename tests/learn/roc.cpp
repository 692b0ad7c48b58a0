// ROC curve, AUC and operating points (learn/roc.hpp): known small cases, ties, the AUC against a
// brute-force Mann-Whitney count on random scores, the rates at a threshold from the data and from the
// curve, and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "specdec/learn/roc.hpp"
#include "specdec/random/stream.hpp"

namespace learn = specdec::learn;

TEST_CASE("ROC and AUC of small known cases", "[learn][roc]") {
  SECTION("perfect separation: AUC 1") {
    const std::vector<double> s{0.9, 0.8, 0.3, 0.1};
    const std::vector<std::uint8_t> y{1, 1, 0, 0};
    const auto roc = learn::compute_roc(s, y);
    CHECK(roc.auc == 1.0);
    CHECK(roc.positives == 2);
    CHECK(roc.negatives == 2);
    REQUIRE(roc.points.size() == 5);
    CHECK(roc.points.front().eta_tp == 0.0);
    CHECK(roc.points.front().eta_fp == 0.0);
    CHECK(roc.points.front().threshold > 0.9);
    CHECK(roc.points[2].threshold == 0.8);
    CHECK(roc.points[2].eta_tp == 1.0);
    CHECK(roc.points[2].eta_fp == 0.0);
    CHECK(roc.points.back().eta_tp == 1.0);
    CHECK(roc.points.back().eta_fp == 1.0);
  }
  SECTION("reversed: AUC 0; all tied: AUC 1/2") {
    CHECK(learn::compute_roc(std::vector<double>{0.1, 0.9}, std::vector<std::uint8_t>{1, 0}).auc == 0.0);
    CHECK(learn::compute_roc(std::vector<double>{0.5, 0.5, 0.5}, std::vector<std::uint8_t>{1, 0, 1}).auc == 0.5);
  }
  SECTION("a mixed case: 3 of 4 positive-negative pairs ordered") {
    const std::vector<double> s{0.9, 0.6, 0.7, 0.2};
    const std::vector<std::uint8_t> y{1, 1, 0, 0};
    CHECK(learn::compute_roc(s, y).auc == Approx(0.75));
    const auto r = learn::rates_at(s, y, 0.65);
    CHECK(r.eta_tp == 0.5);
    CHECK(r.eta_fp == 0.5);
    CHECK(learn::rates_at(s, y, 0.0).eta_fp == 1.0);
    CHECK(learn::rates_at(s, y, 1.0).eta_tp == 0.0);
    CHECK(learn::rates_at(s, y, 0.7).eta_fp == 0.5);  // score >= tau accepts
  }
}

TEST_CASE("AUC equals the Mann-Whitney probability with ties counted half", "[learn][roc]") {
  auto rng = specdec::random::request_stream{77, 0, 0}.open(0, specdec::random::purpose::user);
  std::vector<double> s(600);
  std::vector<std::uint8_t> y(600);
  for (std::size_t i = 0; i < s.size(); ++i) {
    y[i] = rng.uniform() < 0.4 ? 1 : 0;
    s[i] = std::floor((rng.uniform() + 0.3 * y[i]) * 20.0) / 20.0;  // coarse scores: many ties
  }
  double wins = 0.0, pairs = 0.0;
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = 0; j < s.size(); ++j)
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1.0;
        wins += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
      }
  const auto roc = learn::compute_roc(s, y);
  CHECK(roc.auc == Approx(wins / pairs).epsilon(1e-12));
  // The curve's step function gives the data's rates at every threshold.
  for (const double tau : {0.0, 0.05, 0.33, 0.5, 0.65, 0.999, 1.2}) {
    const auto a = learn::rates_at(s, y, tau);
    const auto b = learn::rates_at(roc, tau);
    CHECK(a.eta_tp == Approx(b.eta_tp));
    CHECK(a.eta_fp == Approx(b.eta_fp));
  }
  // Monotone: both rates fall as the threshold rises.
  for (std::size_t k = 1; k < roc.points.size(); ++k) {
    CHECK(roc.points[k].threshold < roc.points[k - 1].threshold);
    CHECK(roc.points[k].eta_tp >= roc.points[k - 1].eta_tp);
    CHECK(roc.points[k].eta_fp >= roc.points[k - 1].eta_fp);
  }
}

TEST_CASE("ROC rejects bad input", "[learn][roc][errors]") {
  const double nan_v = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(learn::compute_roc(std::vector<double>{0.1, 0.2}, std::vector<std::uint8_t>{1}), specdec::error);
  CHECK_THROWS_AS(learn::compute_roc(std::vector<double>{0.1, nan_v}, std::vector<std::uint8_t>{1, 0}), specdec::error);
  CHECK_THROWS_WITH(learn::compute_roc(std::vector<double>{0.1, 0.2}, std::vector<std::uint8_t>{1, 1}),
                    Catch::Contains("both positive and negative"));
  CHECK_THROWS_AS(learn::compute_roc(std::vector<double>{0.1, 0.2}, std::vector<std::uint8_t>{1, 2}), specdec::error);
  CHECK_THROWS_AS(learn::rates_at(std::vector<double>{0.1, 0.2}, std::vector<std::uint8_t>{1, 0}, nan_v), specdec::error);
  CHECK_THROWS_AS(learn::rates_at(learn::roc_curve{}, 0.5), specdec::error);
}
