// Information gain I(X; S, A) = H(X) - H(X | S, A) (estimate/information_gain.hpp): hand-computed toy
// tables, zero gain for indicators independent of acceptance, positive gain for informative ones,
// the Miller-Madow correction, and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "specdec/estimate/information_gain.hpp"
#include "specdec/random/stream.hpp"

namespace {
namespace est = specdec::estimate;

double h2(std::initializer_list<double> p) {
  double h = 0.0;
  for (const double x : p)
    if (x > 0) h -= x * std::log2(x);
  return h;
}
}  // namespace

TEST_CASE("toy table: H(X), H(X | S, A) and the gain by hand", "[estimate][information]") {
  // Two S rows (one A bin each). Row 0: x = 1, 1, 1, 0; row 1: x = 1, 0, 0, 0. X in two bins.
  const std::vector<est::indicator_sample> samples{{0.25, 0.5, 1.0}, {0.25, 0.5, 1.0}, {0.25, 0.5, 1.0}, {0.25, 0.5, 0.0},
                                                   {0.75, 0.5, 1.0}, {0.75, 0.5, 0.0}, {0.75, 0.5, 0.0}, {0.75, 0.5, 0.0}};
  const auto bins = est::binning::uniform(2, 1);
  auto r = est::information_gain(samples, bins, {2, false});
  CHECK(r.h_x == Approx(1.0).epsilon(1e-14));
  CHECK(r.h_x_given == Approx(h2({0.75, 0.25})).epsilon(1e-14));  // 0.811278 bits in each row
  CHECK(r.gain == Approx(1.0 - h2({0.75, 0.25})).epsilon(1e-14));
  CHECK(r.samples == 8);
  CHECK(r.occupied == 2);
  CHECK(r.relative_gain() == Approx(r.gain));
  // Miller-Madow: + (m - 1) / (2 N ln 2) per entropy of N samples with m occupied bins.
  const double mm = 1.0 / (2.0 * 8.0 * std::log(2.0));
  r = est::information_gain(samples, bins, {2, true});
  CHECK(r.h_x == Approx(1.0 + mm).epsilon(1e-14));
  CHECK(r.h_x_given == Approx(h2({0.75, 0.25}) + 2 * mm).epsilon(1e-14));
  CHECK(r.gain == Approx(1.0 - h2({0.75, 0.25}) - mm).epsilon(1e-14));

  // Three X bins [0, 1/3), [1/3, 2/3), [2/3, 1]: row 0 holds x = .1, .5, .9, .9; row 1 x = .1 four times.
  const std::vector<est::indicator_sample> t{{0.1, 0.5, 0.1}, {0.1, 0.5, 0.5}, {0.1, 0.5, 0.9}, {0.1, 0.5, 0.9},
                                             {0.9, 0.5, 0.1}, {0.9, 0.5, 0.1}, {0.9, 0.5, 0.1}, {0.9, 0.5, 0.1}};
  r = est::information_gain(t, bins, {3, false});
  CHECK(r.h_x == Approx(h2({5.0 / 8, 1.0 / 8, 2.0 / 8})).epsilon(1e-14));
  CHECK(r.h_x_given == Approx(0.5 * 1.5).epsilon(1e-14));
  CHECK(r.gain == Approx(h2({5.0 / 8, 1.0 / 8, 2.0 / 8}) - 0.75).epsilon(1e-14));
  // Conditioning on A within the same S row changes nothing here (one A bin); x = 1 falls in the last bin.
  CHECK(est::x_bin(1.0, 3) == 2);
  CHECK(est::x_bin(0.0, 3) == 0);
  CHECK(est::x_bin(1.0 / 3.0, 3) == 1);
}

TEST_CASE("indicators independent of acceptance give no information", "[estimate][information]") {
  // S, A and X independent uniforms (seed 0x16A1): the plug-in gain is only its small-sample bias,
  // about (cells - 1)(K - 1) / (2 N ln 2); the Miller-Madow gain is 0 within ~6 standard deviations.
  specdec::random::philox_stream r(specdec::random::stream_address{0x16A1, 0, 0, 0, specdec::random::purpose::user});
  std::vector<est::indicator_sample> samples;
  const std::size_t n = 200000;
  for (std::size_t i = 0; i < n; ++i) samples.push_back({r.uniform(), r.uniform(), r.uniform()});
  const auto bins = est::binning::uniform(10, 10);
  const auto plug_in = est::information_gain(samples, bins, {10, false});
  const auto corrected = est::information_gain(samples, bins, {10, true});
  const double bias = 99.0 * 9.0 / (2.0 * n * std::log(2.0));
  std::cout << "[information] independent: H(X) = " << plug_in.h_x << " bits, plug-in gain = " << plug_in.gain
            << " (expected bias " << bias << "), Miller-Madow gain = " << corrected.gain << "\n";
  CHECK(plug_in.h_x == Approx(std::log2(10.0)).margin(1e-3));
  CHECK(plug_in.gain > 0.0);
  CHECK(plug_in.gain == Approx(bias).margin(6 * 1.5e-4));
  CHECK(std::abs(corrected.gain) < 6 * 1.5e-4);
}

TEST_CASE("informative indicators give a clearly positive gain, more with A than with S alone", "[estimate][information]") {
  // X = acceptance probability driven by S and A plus noise.
  specdec::random::philox_stream r(specdec::random::stream_address{0x16A2, 0, 0, 0, specdec::random::purpose::user});
  std::vector<est::indicator_sample> samples;
  for (std::size_t i = 0; i < 100000; ++i) {
    const double s = r.uniform(), a = r.uniform();
    const double x = std::clamp(0.5 * s + 0.5 * a + 0.2 * (r.uniform() - 0.5), 0.0, 1.0);
    samples.push_back({s, a, x});
  }
  for (const auto& bins : {est::binning::uniform(5, 5), est::binning::uniform(10, 10), est::binning::uniform(20, 20),
                           est::binning::adaptive(samples, 16, 16)}) {
    const auto both = est::information_gain(samples, bins, {10, true, est::conditioning::s_and_a});
    const auto s_only = est::information_gain(samples, bins, {10, true, est::conditioning::s_only});
    std::cout << "[information] informative, " << bins.name() << ": H(X) = " << both.h_x << ", H(X|S,A) = " << both.h_x_given
              << ", gain = " << both.gain << " (" << 100 * both.relative_gain() << "%), gain of S alone = " << s_only.gain
              << "\n";
    CAPTURE(bins.name());
    CHECK(both.gain > 0.5);
    CHECK(s_only.gain > 0.1);
    CHECK(both.gain > s_only.gain);
    CHECK(both.h_x_given < both.h_x);
  }
}

TEST_CASE("information gain: bad input", "[estimate][information][bad-input]") {
  const auto bins = est::binning::uniform(2, 2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(est::information_gain(std::vector<est::indicator_sample>{}, bins), specdec::error);
  const std::vector<est::indicator_sample> ok{{0.5, 0.5, 0.5}};
  CHECK_THROWS_AS(est::information_gain(ok, bins, {1, false}), specdec::error);
  for (const est::indicator_sample bad : {est::indicator_sample{nan, 0.5, 0.5}, est::indicator_sample{0.5, nan, 0.5},
                                          est::indicator_sample{0.5, 0.5, nan}, est::indicator_sample{0.5, 0.5, 2.0}}) {
    CHECK_THROWS_AS(est::information_gain(std::vector<est::indicator_sample>{bad}, bins), specdec::error);
  }
  const auto one = est::information_gain(ok, bins);
  CHECK(one.h_x == 0.0);
  CHECK(one.gain == 0.0);
  CHECK(one.relative_gain() == 0.0);
}
