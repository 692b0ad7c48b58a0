// Latency profiles for SV's optimisers (optimize/latency_table.hpp): a measured table with monotone
// interpolation, the constant-then-linear profile of Assumption D.10, the offset adaptor, the checks
// of the optimisers' assumptions, and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "specdec/optimize/latency_table.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace {
namespace opt = specdec::optimize;
static_assert(specdec::theory::LatencyProfile<opt::latency_table>);
static_assert(specdec::theory::LatencyProfile<opt::saturating_latency>);
static_assert(specdec::theory::LatencyProfile<opt::offset_latency<opt::saturating_latency>>);
}  // namespace

TEST_CASE("latency_table: exact at the points, linear between, flat below, extrapolated above", "[optimize][latency]") {
  // A profile measured at powers of two (a typical profiling sweep).
  const opt::latency_table t({1, 2, 4, 8, 16}, {10.0, 10.0, 10.5, 12.0, 16.0});
  CHECK(t(1) == 10.0);
  CHECK(t(4) == 10.5);
  CHECK(t(16) == 16.0);
  CHECK(t(3) == Approx(10.25));
  CHECK(t(12) == Approx(14.0));
  CHECK(t(0) == 10.0);                 // below the first point: the smallest measured latency
  CHECK(t(24) == Approx(16.0 + 4.0));  // beyond: the last slope, 0.5 per token
  CHECK(specdec::theory::latency_at(t, 6) == Approx(11.25));
  CHECK(opt::is_convex_profile(t, 0, 32));
  CHECK_NOTHROW(opt::check_latency_profile(t, 0, 64));
  const opt::latency_table single({4}, {3.0});
  CHECK(single(0) == 3.0);
  CHECK(single(100) == 3.0);
}

TEST_CASE("latency_table: PCHIP is exact at the points and never decreases", "[optimize][latency]") {
  specdec::random::philox_stream r(specdec::random::stream_address{0x1A7E, 0, 0, 0, specdec::random::purpose::user});
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> k{1}, l{1.0 + r.uniform()};
    const int n = 2 + static_cast<int>(r.uniform() * 8);
    for (int i = 1; i < n; ++i) {
      k.push_back(k.back() + 1 + std::floor(r.uniform() * 6));
      l.push_back(l.back() + (r.uniform() < 0.3 ? 0.0 : r.uniform() * r.uniform() * 3));  // flat stretches too
    }
    const opt::latency_table t(k, l, opt::interpolation::pchip);
    for (std::size_t i = 0; i < k.size(); ++i) CHECK(t(k[i]) == Approx(l[i]).epsilon(1e-14));
    double previous = t(0.0);
    for (double x = 0.0; x <= k.back() + 5; x += 0.125) {
      const double v = t(x);
      CHECK(v >= previous - 1e-12);
      previous = v;
    }
    // A flat stretch stays flat (no overshoot).
    for (std::size_t i = 0; i + 1 < k.size(); ++i)
      if (l[i] == l[i + 1]) CHECK(t(0.5 * (k[i] + k[i + 1])) == Approx(l[i]).epsilon(1e-14));
  }
}

TEST_CASE("saturating_latency is Assumption D.10's flat-then-linear profile, convex", "[optimize][latency]") {
  const opt::saturating_latency s{2.0, 8.0, 0.25};
  CHECK(s(0) == 2.0);
  CHECK(s(8) == 2.0);
  CHECK(s(12) == Approx(3.0));
  CHECK(opt::is_convex_profile(s, 0, 64));
  CHECK_NOTHROW(opt::check_latency_profile(s, 0, 64));
  // Offset: a batch of 6 requests, drafting 0.5 before the target call; L(K) = 0.5 + s(6 + K).
  const opt::offset_latency<opt::saturating_latency> step{&s, 6, 0.5};
  CHECK(step(0) == Approx(2.5));
  CHECK(step(2) == Approx(2.5));
  CHECK(step(6) == Approx(3.5));
  CHECK_THROWS_AS((opt::saturating_latency{0.0, 1.0, 1.0}(1)), specdec::error);
  CHECK_THROWS_AS((opt::saturating_latency{1.0, -1.0, 1.0}(1)), specdec::error);
  CHECK_THROWS_AS((opt::saturating_latency{1.0, 1.0, -1.0}(1)), specdec::error);
  CHECK_THROWS_AS((opt::offset_latency<opt::saturating_latency>{nullptr, 0, 0.0}(1)), specdec::error);
  CHECK_THROWS_AS((opt::offset_latency<opt::saturating_latency>{&s, 0, -1.0}(1)), specdec::error);
}

TEST_CASE("latency profiles: not increasing, not convex, bad values", "[optimize][latency][bad-input]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  try {
    opt::latency_table({1, 2, 3}, {1.0, 2.0, 1.5});
    FAIL("a decreasing table was accepted");
  } catch (const specdec::error& e) {
    CHECK(std::string(e.what()).find("not increasing") != std::string::npos);
  }
  CHECK_THROWS_AS(opt::latency_table({1, 1}, {1.0, 2.0}), specdec::error);  // k not increasing
  CHECK_THROWS_AS(opt::latency_table({2, 1}, {1.0, 2.0}), specdec::error);
  CHECK_THROWS_AS(opt::latency_table({}, {}), specdec::error);         // empty
  CHECK_THROWS_AS(opt::latency_table({1, 2}, {1.0}), specdec::error);  // lengths differ
  CHECK_THROWS_AS(opt::latency_table({1, 2}, {1.0, nan}), specdec::error);
  CHECK_THROWS_AS(opt::latency_table({1, 2}, {0.0, 1.0}), specdec::error);  // latency must be > 0
  CHECK_THROWS_AS(opt::latency_table({1, nan}, {1.0, 2.0}), specdec::error);
  const opt::latency_table t({1, 2}, {1.0, 2.0});
  CHECK_THROWS_AS(t(nan), specdec::error);
  const auto falling = [](int k) { return 5.0 - k; };
  try {
    opt::check_latency_profile(falling, 0, 3);
    FAIL("a decreasing profile passed the check");
  } catch (const specdec::error& e) {
    CHECK(std::string(e.what()).find("L(1) < L(0)") != std::string::npos);
  }
  CHECK_THROWS_AS(opt::check_latency_profile([](int) { return 0.0; }, 0, 3), specdec::error);
  const auto stairs = [](int k) { return 1.0 + (k / 4); };  // tile quantisation: not convex
  CHECK_FALSE(opt::is_convex_profile(stairs, 0, 16));
  CHECK_NOTHROW(opt::check_latency_profile(stairs, 0, 16));  // still non-decreasing
}
