// SV's single-request verification length (optimize/sv_length.hpp): the incremental search of section 5
// equals brute force under its assumptions (non-increasing gains, convex non-decreasing latency), on
// random instances; both agree with theory::sv; the two token countings; what happens when the
// assumptions fail; bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/optimize/latency_table.hpp"
#include "specdec/optimize/sv_length.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/theory/sv.hpp"

namespace {
namespace opt = specdec::optimize;
using counting = opt::token_counting;

// A random convex, non-decreasing latency table L(0..n): L(0) in [0.5, 1.5], sorted increments.
std::vector<double> random_convex_latency(specdec::random::philox_stream& r, std::size_t n) {
  std::vector<double> inc(n);
  for (auto& d : inc) d = r.uniform() < 0.3 ? 0.0 : 0.5 * r.uniform() * r.uniform();
  std::sort(inc.begin(), inc.end());
  std::vector<double> l{0.5 + r.uniform()};
  for (const double d : inc) l.push_back(l.back() + d);
  return l;
}

// Random acceptance estimates in [0, 1], some exactly 0 or 1.
std::vector<double> random_acceptance(specdec::random::philox_stream& r, std::size_t n) {
  std::vector<double> a(n);
  for (auto& x : a) {
    const double u = r.uniform();
    x = u < 0.05 ? 0.0 : u < 0.15 ? 1.0 : r.uniform();
  }
  return a;
}
}  // namespace

TEST_CASE("incremental search equals brute force on random instances (convex latency)", "[optimize][sv_length]") {
  specdec::random::philox_stream r(specdec::random::stream_address{0x5E7, 0, 0, 0, specdec::random::purpose::user});
  int nonzero = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const auto n = static_cast<std::size_t>(r.uniform() * 12);
    const auto a = random_acceptance(r, n);
    const auto l = random_convex_latency(r, n);
    REQUIRE(opt::is_convex_profile(l, 0, static_cast<int>(n)));
    for (const auto c : {counting::accepted_drafts, counting::with_target_token}) {
      const auto inc = opt::incremental_length(a, l, c);
      const auto brute = opt::brute_force_length(a, l, c);
      CAPTURE(trial, n, static_cast<int>(c));
      CHECK(inc.length == brute.length);
      CHECK(inc.goodput == Approx(brute.goodput).epsilon(1e-12));
      CHECK(inc.expected_tokens == Approx(brute.expected_tokens).epsilon(1e-12));
      nonzero += inc.length > 0;
    }
  }
  CHECK(nonzero > 1000);  // the instances are not all trivial
}

TEST_CASE("brute force matches theory::sv's goodput curve and E(N | gamma)", "[optimize][sv_length]") {
  specdec::random::philox_stream r(specdec::random::stream_address{0x5E8, 0, 0, 0, specdec::random::purpose::user});
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + static_cast<std::size_t>(r.uniform() * 10);
    const auto a = random_acceptance(r, n);
    const auto l = random_convex_latency(r, n);
    std::vector<double> curve(n + 1);
    specdec::theory::sv::estimated_goodput(std::span<const double>(a), l, std::span<double>(curve));
    const auto best = opt::brute_force_length(a, l, counting::accepted_drafts);
    CHECK(best.goodput == Approx(*std::max_element(curve.begin(), curve.end())).epsilon(1e-14));
    CHECK(best.expected_tokens ==
          Approx(specdec::theory::sv::expected_accepted(std::span<const double>(a), best.length)).epsilon(1e-14));
    for (std::size_t g = 0; g <= n; ++g) CHECK(opt::sv_goodput(a, g, l) == Approx(curve[g]).epsilon(1e-14));
    // Gains are prefix products and sum to E(N | gamma).
    std::vector<double> gains(n);
    opt::acceptance_to_gains(a, gains);
    double e = 0.0;
    for (std::size_t g = 0; g < n; ++g) {
      e += gains[g];
      CHECK(e == Approx(specdec::theory::sv::expected_accepted(std::span<const double>(a), g + 1)).epsilon(1e-13));
      if (g > 0) CHECK(gains[g] <= gains[g - 1]);  // E is concave (SV Lemma D.11)
    }
  }
}

TEST_CASE("counting the target's token verifies no more drafts than eq. (6)", "[optimize][sv_length][counting]") {
  specdec::random::philox_stream r(specdec::random::stream_address{0x5E9, 0, 0, 0, specdec::random::purpose::user});
  int fewer = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t n = static_cast<std::size_t>(r.uniform() * 10);
    const auto a = random_acceptance(r, n);
    const auto l = random_convex_latency(r, n);
    const auto paper = opt::incremental_length(a, l, counting::accepted_drafts);
    const auto with_target = opt::incremental_length(a, l, counting::with_target_token);
    CHECK(with_target.length <= paper.length);
    CHECK(with_target.expected_tokens ==
          Approx(specdec::theory::sv::expected_accepted(std::span<const double>(a), with_target.length) + 1));
    fewer += with_target.length < paper.length;
  }
  CHECK(fewer > 100);
  // gamma = 0: goodput 0 without reading L(0) for eq. (6); 1 / L(0) with the target's token.
  const std::vector<double> none{};
  const auto throwing_at_0 = [](int k) {
    if (k == 0) throw std::runtime_error("L(0) read");
    return 1.0;
  };
  CHECK(opt::incremental_length(none, throwing_at_0, counting::accepted_drafts).goodput == 0.0);
  CHECK(opt::brute_force_length(
            none, [](int) { return 4.0; }, counting::with_target_token)
            .goodput == 0.25);
}

TEST_CASE("when the assumptions fail the incremental search can stop early", "[optimize][sv_length][assumptions]") {
  // (1) A staircase latency (not convex): L = 1 for k <= 1, 2 for k >= 2. The goodput falls from
  // gamma = 1 to 2 and then climbs again; section 5's search stops at 1, brute force finds 8.
  const std::vector<double> a(8, 0.9);
  const auto stairs = [](int k) { return k <= 1 ? 1.0 : 2.0; };
  CHECK_FALSE(opt::is_convex_profile(stairs, 0, 8));
  const auto inc = opt::incremental_length(a, stairs);
  const auto brute = opt::brute_force_length(a, stairs);
  CHECK(inc.length == 1);
  CHECK(brute.length == 8);
  CHECK(brute.goodput > 2.5 * inc.goodput);
  // (2) Gains that rise (exact SV: position 1 judged on P(accept | S) alone, position 2 on a confident
  // A): the incremental search stops at 0, brute force takes all three.
  const std::vector<double> gains{0.1, 0.9, 0.9};
  const auto linear = [](int k) { return 1.0 + 0.2 * k; };
  CHECK(opt::incremental_length_from_gains(gains, linear, counting::with_target_token).length == 0);
  CHECK(opt::best_length_from_gains(gains, linear, counting::with_target_token).length == 3);
  // With a convex latency and falling gains they agree again.
  const std::vector<double> falling{0.9, 0.9, 0.1};
  CHECK(opt::incremental_length_from_gains(falling, linear, counting::with_target_token).length ==
        opt::best_length_from_gains(falling, linear, counting::with_target_token).length);
}

TEST_CASE("sv_length: bad input gives clear errors", "[optimize][sv_length][bad-input]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto linear = [](int k) { return 1.0 + 0.1 * k; };
  const std::vector<double> ok{0.9, 0.8};
  CHECK_THROWS_AS(opt::incremental_length(std::vector<double>{0.9, nan}, linear), specdec::error);
  CHECK_THROWS_AS(opt::brute_force_length(std::vector<double>{1.5}, linear), specdec::error);
  CHECK_THROWS_AS(opt::incremental_length_from_gains(std::vector<double>{-0.1}, linear), specdec::error);
  CHECK_THROWS_AS(opt::incremental_length(ok, [](int k) { return 2.0 - 0.5 * k; }), specdec::error);  // decreasing
  try {
    opt::brute_force_length(ok, [](int k) { return 2.0 - 0.5 * k; });
    FAIL("a decreasing profile was accepted");
  } catch (const specdec::error& e) {
    CHECK(std::string(e.what()).find("not increasing") != std::string::npos);
  }
  CHECK_THROWS_AS(opt::brute_force_length(ok, [nan](int) { return nan; }), specdec::error);
  CHECK_THROWS_AS(opt::brute_force_length(ok, [](int k) { return k == 2 ? 0.0 : 1.0; }), specdec::error);
  CHECK_THROWS_AS(opt::brute_force_length(ok, std::vector<double>{1.0, 1.1}), specdec::error);  // span too short
  CHECK_THROWS_AS(opt::sv_goodput(ok, 3, linear), specdec::error);
  std::vector<double> gains(3);
  CHECK_THROWS_AS(opt::acceptance_to_gains(ok, gains), specdec::error);
}
