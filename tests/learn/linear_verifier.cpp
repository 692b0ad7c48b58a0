// SPRINTER's learned verifier (learn/linear_verifier.hpp, learn/train.hpp): one linear layer +
// sigmoid trained with Adam on binary cross-entropy with early stopping. It must learn a linearly
// separable toy problem (held-out AUC > 0.99), save and load its weights exactly, and reject bad
// input (wrong feature sizes, NaN features, malformed files, bad options) with clear errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "specdec/draft/verifier.hpp"
#include "specdec/learn/dataset.hpp"
#include "specdec/learn/linear_verifier.hpp"
#include "specdec/learn/roc.hpp"
#include "specdec/learn/train.hpp"
#include "specdec/random/stream.hpp"

namespace {
namespace learn = specdec::learn;

// Points in [-1, 1]^3; label 1 iff 2 s0 - s1 + 0.5 > 0 (s2 is noise); points within 0.05 of the
// boundary are dropped, so the classes are separable with a margin. Stored in the q/p slots as a
// label source: q = 1, p = 1 (acceptable) or p = 0.
learn::verifier_dataset separable(std::size_t n, std::uint64_t seed) {
  learn::verifier_dataset d;
  d.feature_size = 3;
  d.lambda = 1.0;
  auto s = specdec::random::request_stream{seed, 0, 0}.open(0, specdec::random::purpose::user);
  while (d.size() < n) {
    const float x[3] = {static_cast<float>(2 * s.uniform() - 1), static_cast<float>(2 * s.uniform() - 1),
                        static_cast<float>(2 * s.uniform() - 1)};
    const double margin = 2.0 * x[0] - x[1] + 0.5;
    if (std::abs(margin) < 0.05) continue;
    d.add(std::span<const float>(x, 3), 1.0, margin > 0 ? 1.0 : 0.0, 0.0, learn::prefix_category::original);
  }
  return d;
}
}  // namespace

TEST_CASE("the linear verifier learns a separable toy problem", "[learn]") {
  const auto train = separable(4000, 11);
  const auto test = separable(2000, 12);
  learn::train_options o;
  o.seed = 3;
  const auto t = learn::train_linear_verifier(train, o);
  const auto scores = learn::score_all(t.verifier, test);
  const auto roc = learn::compute_roc(scores, test.labels);
  const auto at = learn::rates_at(scores, test.labels, 0.5);
  std::cout << "[learn] separable toy (seeds 11/12/3): AUC " << roc.auc << ", eta_tp " << at.eta_tp << ", eta_fp " << at.eta_fp
            << ", epochs " << t.report.epochs << " (best " << t.report.best_epoch << "), validation loss "
            << t.report.best_validation_loss << "\n";
  CHECK(roc.auc > 0.99);
  CHECK(at.eta_tp > 0.95);
  CHECK(at.eta_fp < 0.05);
  CHECK(t.report.train_size + t.report.validation_size == train.size());
  CHECK(t.report.validation_size == 800);
  CHECK(t.report.best_epoch >= 1);
  CHECK(t.report.best_epoch <= t.report.epochs);
  // The learned direction is (2, -1, 0) up to scale (standardised features have similar spreads).
  const auto& w = t.verifier.weights();
  CHECK(w[0] > 0.0);
  CHECK(w[1] < 0.0);
  CHECK(std::abs(w[2]) < 0.25 * std::abs(w[0]));
  SECTION("training is reproducible") {
    const auto again = learn::train_linear_verifier(train, o);
    CHECK(again.verifier.weights() == t.verifier.weights());
    CHECK(again.verifier.bias() == t.verifier.bias());
  }
  SECTION("early stopping: patience 1 stops before max_epochs") {
    learn::train_options quick = o;
    quick.patience = 1;
    quick.max_epochs = 500;
    quick.min_delta = 1e-2;
    const auto q = learn::train_linear_verifier(train, quick);
    CHECK(q.report.stopped_early);
    CHECK(q.report.epochs < 500);
    CHECK(q.report.epochs == q.report.best_epoch + 1);
  }
}

TEST_CASE("the linear verifier scores: sigmoid of the standardised affine map", "[learn]") {
  Eigen::VectorXd w(2), mean(2), scale(2);
  w << 2.0, -1.0;
  mean << 1.0, 0.0;
  scale << 2.0, 1.0;
  const learn::linear_verifier v(w, 0.5, mean, scale);
  STATIC_REQUIRE(specdec::Verifier<learn::linear_verifier>);
  const std::vector<float> s{3.0f, 1.0f};  // z = 2 (3 - 1) / 2 - 1 + 0.5 = 1.5
  CHECK(v.logit(s) == Approx(1.5));
  CHECK(v.score(s) == Approx(1.0 / (1.0 + std::exp(-1.5))));
  CHECK(learn::linear_verifier::sigmoid(-800.0) == 0.0);
  CHECK(learn::linear_verifier::sigmoid(800.0) == 1.0);
  CHECK(learn::linear_verifier::sigmoid(0.0) == 0.5);
  const learn::linear_verifier zero(4);
  CHECK(zero.score(std::vector<float>(4, 7.0f)) == 0.5);
  // Bad input: wrong size, NaN feature (NaN score, rejected by checked_score).
  CHECK_THROWS_AS(v.score(std::vector<float>{1.0f}), specdec::error);
  const std::vector<float> nan_s{std::numeric_limits<float>::quiet_NaN(), 0.0f};
  CHECK(std::isnan(v.score(nan_s)));
  CHECK_THROWS_AS(specdec::checked_score(v, nan_s), specdec::numerical_error);
  CHECK_THROWS_AS(learn::linear_verifier(0), specdec::error);
  Eigen::VectorXd bad_scale(2);
  bad_scale << 1.0, 0.0;
  CHECK_THROWS_AS(learn::linear_verifier(w, 0.0, mean, bad_scale), specdec::error);
  CHECK_THROWS_AS(learn::linear_verifier(w, std::numeric_limits<double>::quiet_NaN(), mean, scale), specdec::error);
  CHECK_THROWS_AS(learn::linear_verifier(w, 0.0, Eigen::VectorXd::Zero(3), scale), specdec::error);
}

TEST_CASE("save and load round-trip the weights exactly", "[learn]") {
  const auto t = learn::train_linear_verifier(separable(500, 21));
  std::stringstream ss;
  t.verifier.save(ss);
  const std::string text = ss.str();
  CHECK(text.rfind("specdec-linear-verifier 1\nfeatures 3\nmean ", 0) == 0);
  const auto back = learn::linear_verifier::load(ss);
  CHECK(back.weights() == t.verifier.weights());
  CHECK(back.mean() == t.verifier.mean());
  CHECK(back.scale() == t.verifier.scale());
  CHECK(back.bias() == t.verifier.bias());
  SECTION("through a file") {
    const auto path = std::filesystem::temp_directory_path() / "specdec_test_linear_verifier.txt";
    t.verifier.save(path);
    const auto f = learn::linear_verifier::load(path);
    CHECK(f.weights() == t.verifier.weights());
    std::filesystem::remove(path);
    CHECK_THROWS_AS(learn::linear_verifier::load(path), specdec::error);
  }
}

TEST_CASE("load rejects malformed files with clear errors", "[learn][errors]") {
  const auto load = [](const std::string& text) {
    std::istringstream in(text);
    return learn::linear_verifier::load(in);
  };
  const std::string good = "specdec-linear-verifier 1\nfeatures 2\nmean 0 0\nscale 1 1\nweights 1 -1\nbias 0.5\n";
  CHECK(load(good).score(std::vector<float>{0.0f, 0.0f}) == Approx(1.0 / (1.0 + std::exp(-0.5))));
  CHECK_THROWS_WITH(load("not-a-verifier 1\n"), Catch::Contains("expected 'specdec-linear-verifier'"));
  CHECK_THROWS_WITH(load("specdec-linear-verifier 2\nfeatures 2\n"), Catch::Contains("version"));
  CHECK_THROWS_AS(load("specdec-linear-verifier 1\nfeatures 0\n"), specdec::error);
  CHECK_THROWS_AS(load("specdec-linear-verifier 1\nfeatures 1.5\n"), specdec::error);
  CHECK_THROWS_AS(load("specdec-linear-verifier 1\nfeatures 2\nmean 0\nscale 1 1\nweights 1 1\nbias 0\n"), specdec::error);
  CHECK_THROWS_AS(load("specdec-linear-verifier 1\nfeatures 2\nmean 0 0\nscale 1 0\nweights 1 1\nbias 0\n"), specdec::error);
  CHECK_THROWS_WITH(load("specdec-linear-verifier 1\nfeatures 2\nmean 0 x\nscale 1 1\nweights 1 1\nbias 0\n"),
                    Catch::Contains("bad number"));
  CHECK_THROWS_AS(load("specdec-linear-verifier 1\nfeatures 2\nmean 0 nan\nscale 1 1\nweights 1 1\nbias 0\n"), specdec::error);
  CHECK_THROWS_AS(load("specdec-linear-verifier 1\nfeatures 2\nmean 0 0\nscale 1 1\nweights 1 1\n"), specdec::error);
  CHECK_THROWS_WITH(load(good + "extra\n"), Catch::Contains("unexpected text"));
  // A short file declaring a huge feature count: refused at the first missing number, having
  // allocated for the numbers read only (it allocated 8 bytes per declared feature, 800 MB here; found
  // by the fuzz harness tests/fuzz/linear_verifier_load.cpp, whose corpus replay under ASan caps
  // allocations at 256 MB).
  CHECK_THROWS_WITH(load("specdec-linear-verifier 1\nfeatures 100000000\nmean 0 1\nscale 1 1\n"), Catch::Contains("in mean"));
}

TEST_CASE("training rejects bad data and options", "[learn][errors]") {
  auto d = separable(100, 31);
  learn::train_options o;
  CHECK_NOTHROW(learn::train_linear_verifier(d, o));
  const auto bad_option = [&](auto change) {
    learn::train_options b = o;
    change(b);
    return b;
  };
  CHECK_THROWS_AS(learn::train_linear_verifier(d, bad_option([](auto& b) { b.learning_rate = 0.0; })), specdec::error);
  CHECK_THROWS_AS(learn::train_linear_verifier(d, bad_option([](auto& b) { b.beta1 = 1.0; })), specdec::error);
  CHECK_THROWS_AS(learn::train_linear_verifier(d, bad_option([](auto& b) { b.batch_size = 0; })), specdec::error);
  CHECK_THROWS_AS(learn::train_linear_verifier(d, bad_option([](auto& b) { b.validation_fraction = 1.0; })), specdec::error);
  CHECK_THROWS_AS(learn::train_linear_verifier(d, bad_option([](auto& b) { b.l2 = -1.0; })), specdec::error);
  learn::verifier_dataset tiny = separable(1, 1);
  CHECK_THROWS_AS(learn::train_linear_verifier(tiny, o), specdec::error);
  d.features[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(learn::train_linear_verifier(d, o), Catch::Contains("NaN"));
  // Wrong feature count when adding an example; lambda out of range when relabelling.
  const std::vector<float> two{1.0f, 2.0f};
  CHECK_THROWS_AS(d.add(two, 0.1, 0.2, 0.0, learn::prefix_category::mixed), specdec::error);
  CHECK_THROWS_AS(d.relabel(0.5), specdec::error);
  CHECK_THROWS_AS(d.relabel(std::numeric_limits<double>::quiet_NaN()), specdec::error);
  CHECK_THROWS_AS(learn::split(d, 0.0, 1), specdec::error);
}

TEST_CASE("dataset relabelling, subsets and splits", "[learn]") {
  learn::verifier_dataset d;
  d.feature_size = 1;
  d.lambda = 1.0;
  const float s = 0.0f;
  d.add(std::span<const float>(&s, 1), 0.3, 0.2, 0.1, learn::prefix_category::original);  // q/p = 1.5
  d.add(std::span<const float>(&s, 1), 0.22, 0.2, 0.1, learn::prefix_category::mixed);    // q/p = 1.1
  d.add(std::span<const float>(&s, 1), 0.1, 0.2, 0.1, learn::prefix_category::mixed);     // q/p = 0.5
  CHECK(d.labels == std::vector<std::uint8_t>{0, 0, 1});
  d.relabel(1.2);
  CHECK(d.labels == std::vector<std::uint8_t>{0, 1, 1});
  d.relabel(1.5);
  CHECK(d.labels == std::vector<std::uint8_t>{1, 1, 1});
  CHECK(d.positive_fraction() == 1.0);
  CHECK(d.mean_tv() == Approx(0.1));
  const auto [a, b] = learn::split(d, 0.34, 5);
  CHECK(a.size() + b.size() == 3);
  CHECK(b.size() == 1);
  const std::vector<std::size_t> idx{2, 0};
  const auto sub = d.subset(idx);
  CHECK(sub.q == std::vector<double>{0.1, 0.3});
  const std::vector<std::size_t> out_of_range{3};
  CHECK_THROWS_AS(d.subset(out_of_range), specdec::error);
  const auto perm = learn::random_permutation(100, 9);
  std::vector<std::size_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < 100; ++i) CHECK(sorted[i] == i);
  CHECK(perm != sorted);
}
