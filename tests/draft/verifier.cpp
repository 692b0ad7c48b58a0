// SPRINTER's verifier pieces (draft/verifier.hpp): the Verifier and FeatureExtractor concepts, the
// documented draft-row features, model features for a FeatureModel, the adapters, the noisy oracle
// (its acceptance frequencies against eta_tp / eta_fp, within 5.5 standard errors at a fixed printed
// seed) and the bad-input errors (tau, lambda, rates, feature sizes, NaN and out-of-range scores).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/draft/verifier.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/archetypes.hpp"
#include "specdec/models/markov.hpp"

namespace {
using specdec::token_id;
constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("the verifier concepts", "[verifier]") {
  STATIC_REQUIRE(specdec::Verifier<specdec::oracle_noise_verifier>);
  STATIC_REQUIRE(specdec::FeatureExtractor<specdec::draft_row_features>);
  STATIC_REQUIRE(specdec::FeatureExtractor<specdec::oracle_features<specdec::markov_model>>);
  STATIC_REQUIRE(specdec::FeatureExtractor<specdec::model_features<specdec::feature_model_archetype>>);
  STATIC_REQUIRE_FALSE(specdec::Verifier<int>);
  STATIC_REQUIRE_FALSE(specdec::FeatureExtractor<specdec::oracle_noise_verifier>);
  // make_features picks the model's own features for a FeatureModel and the draft-row ones otherwise.
  const auto m = specdec::markov_model::categorical({0.5, 0.5});
  STATIC_REQUIRE(std::is_same_v<decltype(specdec::make_features(m)), specdec::draft_row_features>);
  const specdec::feature_model_archetype fm;
  STATIC_REQUIRE(std::is_same_v<decltype(specdec::make_features(fm)), specdec::model_features<specdec::feature_model_archetype>>);
}

TEST_CASE("draft_row_features computes the documented vector", "[verifier]") {
  const std::vector<float> q{0.1f, 0.4f, 0.05f, 0.3f, 0.15f};
  specdec::draft_row_features f;
  std::vector<float> out(specdec::draft_row_features::size);
  specdec::verifier_query query{{}, 4, q, {}, 0};
  f.extract(query, out);
  const double entropy =
      -(0.1 * std::log(0.1) + 0.4 * std::log(0.4) + 0.05 * std::log(0.05) + 0.3 * std::log(0.3) + 0.15 * std::log(0.15));
  CHECK(out[0] == Approx(0.15));
  CHECK(out[1] == Approx(std::log(0.15)));
  CHECK(out[2] == Approx(std::log1p(2.0)));  // rank 2: 0.4 and 0.3 are larger
  CHECK(out[3] == Approx(0.4));
  CHECK(out[4] == Approx(0.3));
  CHECK(out[5] == Approx(0.15));
  CHECK(out[6] == Approx(0.1));
  CHECK(out[7] == Approx(entropy));
  CHECK(out[8] == Approx(std::log(0.15 / 0.4)));
  CHECK(out[9] == 0.0f);
  query.token = 1;  // the argmax
  f.extract(query, out);
  CHECK(out[2] == 0.0f);
  CHECK(out[8] == Approx(0.0).margin(1e-7));
  CHECK(out[9] == 1.0f);
  SECTION("fewer than four tokens: the missing ranks read 0; q(x) = 0 is floored in the logs") {
    const std::vector<float> q2{1.0f, 0.0f};
    f.extract(specdec::verifier_query{{}, 1, q2, {}, 0}, out);
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == Approx(std::log(1e-12)));
    CHECK(out[5] == 0.0f);
    CHECK(out[6] == 0.0f);
    CHECK(std::isfinite(out[8]));
  }
  SECTION("bad input") {
    std::vector<float> small(3);
    CHECK_THROWS_AS(f.extract(query, small), specdec::error);
    query.token = 5;
    CHECK_THROWS_AS(f.extract(query, out), specdec::error);
    query.token = -1;
    CHECK_THROWS_AS(f.extract(query, out), specdec::error);
  }
}

TEST_CASE("model_features reads the FeatureModel's features after prefix + x", "[verifier]") {
  // Features = {context length, last token}.
  struct toy {
    std::size_t vocab_size() const { return 3; }
    void next_logits(std::span<const token_id>, std::span<float> l) const { std::fill(l.begin(), l.end(), 0.0f); }
    std::size_t feature_size() const { return 2; }
    void features(std::span<const token_id> c, std::span<float> f) const {
      f[0] = static_cast<float>(c.size());
      f[1] = c.empty() ? -1.0f : static_cast<float>(c.back());
    }
  };
  STATIC_REQUIRE(specdec::FeatureModel<toy>);
  const toy model;
  auto f = specdec::make_features(model);
  CHECK(f.feature_size() == 2);
  const std::vector<token_id> prefix{0, 1};
  const std::vector<float> q{0.2f, 0.3f, 0.5f};
  std::vector<float> out(2);
  f.extract(specdec::verifier_query{prefix, 2, q, {}, 0}, out);
  CHECK(out[0] == 3.0f);
  CHECK(out[1] == 2.0f);
}

TEST_CASE("the adapters wrap users' classifiers and feature functions", "[verifier]") {
  const auto v = specdec::make_verifier(2, [](std::span<const float> s) { return s[0] > s[1] ? 0.9 : 0.1; });
  STATIC_REQUIRE(specdec::Verifier<std::remove_const_t<decltype(v)>>);
  const std::vector<float> a{2.0f, 1.0f}, b{1.0f, 2.0f};
  CHECK(specdec::verifier_accepts(v, a, 0.5));
  CHECK_FALSE(specdec::verifier_accepts(v, b, 0.5));
  CHECK(specdec::verifier_accepts(v, b, 0.0));  // tau = 0 accepts everything
  CHECK(specdec::checked_score(v, a) == Approx(0.9));
  auto f = specdec::make_feature_extractor(
      1, [](const specdec::verifier_query& q, std::span<float> out) { out[0] = static_cast<float>(q.prefix.size()); });
  STATIC_REQUIRE(specdec::FeatureExtractor<decltype(f)>);
  std::vector<float> out(1);
  const std::vector<token_id> prefix{1, 2, 3};
  const std::vector<float> q{1.0f};
  f.extract(specdec::verifier_query{prefix, 0, q, {}, 0}, out);
  CHECK(out[0] == 3.0f);
  std::vector<float> wrong(2);
  CHECK_THROWS_AS(f.extract(specdec::verifier_query{prefix, 0, q, {}, 0}, wrong), specdec::error);
  CHECK_THROWS_AS(specdec::make_verifier(0, [](std::span<const float>) { return 0.5; }), specdec::error);
}

TEST_CASE("checked_score and the threshold checks reject bad input", "[verifier][errors]") {
  const auto nan_verifier = specdec::make_verifier(1, [](std::span<const float>) { return nan_v; });
  const auto high = specdec::make_verifier(1, [](std::span<const float>) { return 1.0 + 1e-9; });
  const auto low = specdec::make_verifier(1, [](std::span<const float>) { return -0.25; });
  const auto ok = specdec::make_verifier(1, [](std::span<const float>) { return 0.5; });
  const std::vector<float> one{0.0f}, two{0.0f, 0.0f};
  CHECK_THROWS_AS(specdec::checked_score(nan_verifier, one), specdec::numerical_error);
  CHECK_THROWS_WITH(specdec::checked_score(nan_verifier, one), Catch::Contains("NaN"));
  CHECK_THROWS_AS(specdec::checked_score(high, one), specdec::numerical_error);
  CHECK_THROWS_AS(specdec::checked_score(low, one), specdec::numerical_error);
  CHECK_THROWS_AS(specdec::checked_score(ok, two), specdec::error);  // wrong feature size
  CHECK_THROWS_WITH(specdec::checked_score(ok, two), Catch::Contains("feature_size"));
  for (const double tau : {-0.01, 1.01, nan_v, std::numeric_limits<double>::infinity()}) {
    CHECK_THROWS_AS(specdec::validate_threshold(tau), specdec::error);
    CHECK_THROWS_AS(specdec::verifier_accepts(ok, one, tau), specdec::error);
  }
  CHECK_NOTHROW(specdec::validate_threshold(0.0));
  CHECK_NOTHROW(specdec::validate_threshold(1.0));
  for (const double lambda : {0.99, 0.0, -1.0, nan_v, std::numeric_limits<double>::infinity()}) {
    CHECK_THROWS_AS(specdec::validate_lambda(lambda), specdec::error);
    CHECK_THROWS_AS(specdec::oracle_noise_verifier(0.5, 0.5, lambda), specdec::error);
  }
  for (const double rate : {-0.1, 1.1, nan_v}) {
    CHECK_THROWS_AS(specdec::oracle_noise_verifier(rate, 0.5), specdec::error);
    CHECK_THROWS_AS(specdec::oracle_noise_verifier(0.5, rate), specdec::error);
  }
  const specdec::oracle_noise_verifier oracle(0.5, 0.5);
  CHECK_THROWS_AS(oracle.score(one), specdec::error);
}

TEST_CASE("the noisy oracle accepts with eta_tp / eta_fp, i.i.d. from Philox", "[verifier][statistical]") {
  // Token 0 is acceptable (q = 0.2 <= p = 0.5), token 1 unacceptable at lambda = 1 (q = 0.8 > 0.5 p)
  // but acceptable at lambda = 2.
  const auto target = specdec::markov_model::categorical({0.5, 0.5});
  const std::vector<float> q{0.2f, 0.8f};
  const double eta_tp = 0.8, eta_fp = 0.3;
  const std::uint64_t seed = 101, n = 200'000;
  specdec::oracle_features features(target);
  std::vector<float> s(3);
  for (const double lambda : {1.0, 2.0}) {
    const specdec::oracle_noise_verifier v(eta_tp, eta_fp, lambda);
    for (const token_id x : {token_id{0}, token_id{1}}) {
      std::uint64_t accepted = 0, mismatched = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        const specdec::random::request_stream stream{seed, static_cast<std::uint32_t>(i % 1000),
                                                     static_cast<std::uint32_t>(i / 1000)};
        features.extract(specdec::verifier_query{{}, x, q, stream, static_cast<std::uint32_t>(i % 7)}, s);
        mismatched += s[0] != q[static_cast<std::size_t>(x)] || s[1] != 0.5f || !(s[2] >= 0.0f && s[2] < 1.0f);
        accepted += specdec::checked_score(v, s) == 1.0;
      }
      CHECK(mismatched == 0);
      const double want = v.accept_probability(0.5, q[static_cast<std::size_t>(x)]);
      const double rate = double(accepted) / double(n);
      std::cout << "[verifier] oracle lambda " << lambda << " token " << x << " (seed " << seed << "): accept rate " << rate
                << ", expected " << want << "\n";
      CHECK(std::abs(rate - want) <= 5.5 * std::sqrt(want * (1.0 - want) / double(n)));
    }
  }
  CHECK(specdec::oracle_noise_verifier(eta_tp, eta_fp).accept_probability(0.5, 0.8) == eta_fp);
  CHECK(specdec::oracle_noise_verifier(eta_tp, eta_fp, 2.0).accept_probability(0.5, 0.8) == eta_tp);
  CHECK(specdec::is_acceptable(0.5, 0.5));
  CHECK_FALSE(specdec::is_acceptable(0.5, 0.6));
  CHECK(specdec::is_acceptable(0.5, 0.6, 1.2));
}

TEST_CASE("oracle_features rejects a draft row of another vocabulary", "[verifier][errors]") {
  const auto target = specdec::markov_model::categorical({0.5, 0.5});
  specdec::oracle_features features(target);
  const std::vector<float> q{0.2f, 0.3f, 0.5f};
  std::vector<float> s(3);
  CHECK_THROWS_AS(features.extract(specdec::verifier_query{{}, 0, q, {}, 0}, s), specdec::error);
  CHECK_THROWS_AS(specdec::oracle_features(target, specdec::warp_params{.temperature = -1.0}), specdec::error);
}
