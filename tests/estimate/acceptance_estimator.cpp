// SV's acceptance estimator P(accept | S, A) (estimate/acceptance_estimator.hpp) and its binnings
// (estimate/binning.hpp): cell lookup, bin means, the empty/thin-bin fallback, adaptive equal-frequency
// bins, save/load, and clear errors on bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "specdec/estimate/acceptance_estimator.hpp"
#include "specdec/random/stream.hpp"

namespace {
namespace est = specdec::estimate;

// n samples with S, A uniform on [0, 1] and x = f(S, A), from a fixed Philox stream.
template <class F>
std::vector<est::indicator_sample> synthetic(std::size_t n, std::uint64_t seed, F f) {
  specdec::random::philox_stream r(specdec::random::stream_address{seed, 0, 0, 0, specdec::random::purpose::user});
  std::vector<est::indicator_sample> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double s = r.uniform(), a = r.uniform();
    out.push_back({s, a, f(s, a, r)});
  }
  return out;
}
}  // namespace

TEST_CASE("uniform binning: cells, edges and the closed last bin", "[estimate][binning]") {
  const auto b = est::binning::uniform(5, 4);
  CHECK(b.rows() == 5);
  CHECK(b.cells() == 20);
  CHECK(b.name() == "uniform 5x4");
  CHECK(b.cell(0.0, 0.0) == 0);
  CHECK(b.cell(0.0, 0.25) == 1);         // bins are [e_k, e_k+1)
  CHECK(b.cell(0.2, 0.0) == 4);          // second S row
  CHECK(b.cell(1.0, 1.0) == 19);         // the last bin is closed
  CHECK(b.cell(1.0 + 1e-9, 1.0) == 19);  // rounding just above 1 is clamped
  CHECK(b.row_of_cell(19) == 4);
  CHECK(b.row_of_cell(4) == 1);
  CHECK(b.row(0.3999) == 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(b.cell(nan, 0.5), specdec::error);
  CHECK_THROWS_AS(b.cell(0.5, nan), specdec::error);
  CHECK_THROWS_AS(b.cell(1.01, 0.5), specdec::error);
  CHECK_THROWS_AS(b.cell(0.5, -0.01), specdec::error);
  CHECK_THROWS_AS(est::binning::uniform(0, 3), specdec::error);
  CHECK_THROWS_AS(est::binning({0.0, 0.6, 0.5, 1.0}, {{0.0, 1.0}, {0.0, 1.0}, {0.0, 1.0}}), specdec::error);  // not increasing
  CHECK_THROWS_AS(est::binning({0.0, 1.0}, {{0.0, 1.0}, {0.0, 1.0}}), specdec::error);                        // rows mismatch
  CHECK_THROWS_AS(est::binning({0.0, 1.0}, {{0.1, 1.0}}), specdec::error);                                    // must start at 0
}

TEST_CASE("raw estimates are the bin means of x", "[estimate][estimator]") {
  const auto samples = synthetic(20000, 11, [](double s, double a, auto&) { return 0.1 + 0.8 * s * a; });
  const auto bins = est::binning::uniform(10, 10);
  const auto e = est::acceptance_estimator::fit(samples, bins, {0.0, 1});
  std::vector<double> sum(100, 0.0);
  std::vector<int> count(100, 0);
  for (const auto& x : samples) {
    const auto c = static_cast<std::size_t>(std::min(9.0, std::floor(x.s * 10)) * 10 + std::min(9.0, std::floor(x.a * 10)));
    sum[c] += x.x;
    ++count[c];
  }
  double total = 0.0;
  for (const auto& x : samples) total += x.x;
  CHECK(e.overall() == Approx(total / double(samples.size())).epsilon(1e-12));
  CHECK(e.samples() == samples.size());
  for (std::size_t c = 0; c < 100; ++c) {
    REQUIRE(count[c] > 0);
    CHECK(e.count(c) == static_cast<std::uint64_t>(count[c]));
    CHECK(e.value(c) == Approx(sum[c] / count[c]).epsilon(1e-12));
  }
  // The cell mean tracks f at the cell centre within the variation of f across a cell.
  CHECK(e(0.55, 0.55) == Approx(0.1 + 0.8 * 0.55 * 0.55).margin(0.02));
  CHECK(e(0.05, 0.95) == Approx(0.1 + 0.8 * 0.05 * 0.95).margin(0.02));
  // Batched form.
  const std::vector<double> s{0.05, 0.55}, a{0.95, 0.55};
  std::vector<double> out(2);
  e.estimate(s, a, out);
  CHECK(out[0] == e(0.05, 0.95));
  CHECK(out[1] == e(0.55, 0.55));
}

TEST_CASE("observed accept bits estimate the acceptance probability", "[estimate][estimator]") {
  // x ~ Bernoulli(f(S, A)): the bin mean estimates the mean of f over the bin (seed printed by the stream address).
  const auto samples =
      synthetic(200000, 12, [](double s, double a, auto& r) { return r.uniform() < 0.2 + 0.7 * a * s ? 1.0 : 0.0; });
  const auto e = est::acceptance_estimator::fit(samples, est::binning::uniform(5, 5));
  for (const double s : {0.1, 0.5, 0.9})
    for (const double a : {0.1, 0.5, 0.9}) {
      const double expected = 0.2 + 0.7 * s * a;  // f is bilinear: its bin mean is its value at the bin centre
      CAPTURE(s, a);
      CHECK(e(s, a) == Approx(expected).margin(0.02));  // > 5 standard errors (about 8000 samples a bin)
    }
}

TEST_CASE("empty and thin bins fall back to their row, empty rows to the overall mean", "[estimate][estimator][fallback]") {
  // 2 x 2 grid, hand-made counts: row 0 has a full bin (10 samples, sum 8) and an empty one;
  // row 1 has a thin bin (2 samples, sum 0) and a full one (10 samples, sum 3).
  const auto bins = est::binning::uniform(2, 2);
  const est::acceptance_estimator e(bins, {10, 0, 2, 10}, {8.0, 0.0, 0.0, 3.0}, {/*prior_weight=*/2.0, /*min_count=*/5});
  const double mu = 11.0 / 22.0;
  const double row0 = (8.0 + 2 * mu) / (10 + 2), row1 = (3.0 + 2 * mu) / (12 + 2);
  CHECK(e.overall() == Approx(mu));
  CHECK(e.given_similarity(0.1) == Approx(row0));
  CHECK(e.given_similarity(0.9) == Approx(row1));
  CHECK(e(0.1, 0.1) == Approx((8.0 + 2 * row0) / (10 + 2)));  // shrunk toward its row
  CHECK(e(0.1, 0.9) == Approx(row0));                         // empty: the row's estimate
  CHECK(e(0.9, 0.1) == Approx(row1));                         // thin (2 < 5): the row's estimate
  CHECK(e(0.9, 0.9) == Approx((3.0 + 2 * row1) / (10 + 2)));
  CHECK(e.thin_cells() == 2);
  // An empty row takes the overall mean.
  const est::acceptance_estimator f(bins, {0, 0, 4, 6}, {0.0, 0.0, 4.0, 0.0}, {0.0, 1});
  CHECK(f(0.2, 0.2) == Approx(0.4));
  CHECK(f(0.2, 0.9) == Approx(0.4));
  CHECK(f(0.7, 0.2) == Approx(1.0));  // prior_weight 0 and min_count 1: the raw mean
  CHECK(f(0.7, 0.7) == Approx(0.0));
}

TEST_CASE("adaptive bins hold about equal counts and give the atom A = 1 its own bin", "[estimate][binning][adaptive]") {
  // 40% of the samples have A = 1 exactly (the companion would accept for sure), the rest uniform.
  const auto samples = synthetic(50000, 13, [](double, double, auto&) { return 0.5; });
  std::vector<est::indicator_sample> mixed = samples;
  for (std::size_t i = 0; i < mixed.size(); i += 5) mixed[i].a = 1.0, mixed[i + 1].a = 1.0;
  const auto b = est::binning::adaptive(mixed, 4, 4);
  CHECK(b.rows() == 4);
  CHECK(b.name() == "adaptive 4x4");
  std::vector<std::size_t> per_cell(b.cells(), 0), ones(b.cells(), 0);
  for (const auto& x : mixed) {
    ++per_cell[b.cell(x.s, x.a)];
    ones[b.cell(x.s, x.a)] += x.a == 1.0;
  }
  for (std::size_t r = 0; r < b.rows(); ++r) {
    const auto& e = b.a_edges(r);
    CAPTURE(r, e.size());
    REQUIRE(e.size() >= 3);
    CHECK(e[e.size() - 2] == 1.0);  // the last bin is [1, 1]
    const std::size_t last = b.row_begin(r + 1) - 1;
    CHECK(ones[last] == per_cell[last]);  // ... and holds exactly the atom
    CHECK(double(per_cell[last]) == Approx(0.4 * double(mixed.size()) / 4).epsilon(0.05));
  }
  // Rows hold about N / 4 samples each (equal-frequency S).
  for (std::size_t r = 0; r < b.rows(); ++r) {
    std::size_t n = 0;
    for (std::size_t c = b.row_begin(r); c < b.row_begin(r + 1); ++c) n += per_cell[c];
    CHECK(double(n) == Approx(double(mixed.size()) / 4.0).epsilon(0.02));
  }
  CHECK_THROWS_AS(est::binning::adaptive(std::vector<est::indicator_sample>{}, 4, 4), specdec::error);
}

TEST_CASE("save and load round-trip a profile exactly", "[estimate][estimator][io]") {
  const auto samples = synthetic(3000, 14, [](double s, double a, auto&) { return std::sqrt(s * a); });
  for (const auto& bins : {est::binning::uniform(5, 5), est::binning::adaptive(samples, 7, 6)}) {
    const auto e = est::acceptance_estimator::fit(samples, bins, {1.5, 3});
    std::stringstream ss;
    e.save(ss);
    const std::string text = ss.str();
    CHECK(text.rfind("specdec-sv-acceptance-profile 1\n", 0) == 0);
    const auto f = est::acceptance_estimator::load(ss);
    CAPTURE(bins.name());
    CHECK(f.bins().name() == bins.name());
    CHECK(f.bins().cells() == e.bins().cells());
    CHECK(f.options().prior_weight == 1.5);
    CHECK(f.options().min_count == 3);
    for (std::size_t c = 0; c < e.bins().cells(); ++c) {
      CHECK(f.count(c) == e.count(c));
      CHECK(f.sum(c) == e.sum(c));
      CHECK(f.value(c) == e.value(c));
    }
    std::stringstream again;
    f.save(again);
    CHECK(again.str() == text);
  }
}

TEST_CASE("load refuses malformed profiles with a message", "[estimate][estimator][io][bad-input]") {
  const auto samples = synthetic(500, 15, [](double s, double, auto&) { return s; });
  std::stringstream ss;
  est::acceptance_estimator::fit(samples, est::binning::uniform(2, 2)).save(ss);
  const std::string good = ss.str();
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  const auto fails = [](const std::string& text, const std::string& expect) {
    std::stringstream in(text);
    try {
      est::acceptance_estimator::load(in);
      FAIL("load accepted a bad profile: " << expect);
    } catch (const specdec::error& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(expect) != std::string::npos);
    }
  };
  fails("", "expected 'specdec-sv-acceptance-profile'");
  fails(replaced("specdec-sv-acceptance-profile 1", "something-else 1"), "expected 'specdec-sv-acceptance-profile'");
  fails(replaced("specdec-sv-acceptance-profile 1", "specdec-sv-acceptance-profile 2"), "unsupported version");
  fails(replaced("s_edges 3 0 0.5 1", "s_edges 3 0 0.7 0.5"), "s_edges");
  fails(replaced("row 1 a_edges", "row 0 a_edges"), "rows out of order");
  fails(good.substr(0, good.size() / 2), "");  // truncated
  fails(replaced("\nend", "\nfinish"), "expected 'end'");
  fails(replaced("min_count 5", "min_count 0"), "min_count");
  // A cell whose sum exceeds its count.
  std::string t = good;
  const auto cells = t.find("row 0 cells 2 ");
  REQUIRE(cells != std::string::npos);
  std::istringstream line(t.substr(cells + 14));
  std::string count;
  line >> count;
  t.replace(cells + 14 + count.size() + 1, t.find(' ', cells + 14 + count.size() + 1) - (cells + 14 + count.size() + 1), "1e9");
  fails(t, "sum");
}

TEST_CASE("fit refuses empty profiles and NaN or out-of-range samples", "[estimate][estimator][bad-input]") {
  const auto bins = est::binning::uniform(3, 3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(est::acceptance_estimator::fit(std::vector<est::indicator_sample>{}, bins), specdec::error);
  for (const est::indicator_sample bad :
       {est::indicator_sample{nan, 0.5, 0.5}, est::indicator_sample{0.5, nan, 0.5}, est::indicator_sample{0.5, 0.5, nan},
        est::indicator_sample{0.5, 0.5, 1.5}, est::indicator_sample{-0.5, 0.5, 0.5}}) {
    const std::vector<est::indicator_sample> samples{{0.2, 0.2, 1.0}, bad};
    CHECK_THROWS_AS(est::acceptance_estimator::fit(samples, bins), specdec::error);
  }
  CHECK_THROWS_AS(est::acceptance_estimator(bins, std::vector<std::uint64_t>(9, 0), std::vector<double>(9, 0.0)), specdec::error);
  CHECK_THROWS_AS(est::acceptance_estimator(bins, std::vector<std::uint64_t>(8, 1), std::vector<double>(8, 0.0)), specdec::error);
  CHECK_THROWS_AS(est::acceptance_estimator(bins, std::vector<std::uint64_t>(9, 1), std::vector<double>(9, 0.0), {-1.0, 5}),
                  specdec::error);
  const std::vector<est::indicator_sample> one{{0.5, 0.5, 0.7}};
  const auto e = est::acceptance_estimator::fit(one, bins);
  CHECK(e(0.0, 0.0) == Approx(0.7));  // one sample: every bin falls back to the overall mean
  CHECK_THROWS_AS(e(nan, 0.5), specdec::error);
  CHECK_THROWS_AS(e.given_similarity(nan), specdec::error);
}
