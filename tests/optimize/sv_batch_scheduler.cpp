// SV's greedy batch scheduler (optimize/batch_scheduler.hpp): equal to the exhaustive optimum over all
// length vectors on random small instances under the paper's assumptions (concave E, convex latency);
// what happens when they fail (a staircase latency, rising gains); every request's progress; bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "specdec/optimize/batch_scheduler.hpp"
#include "specdec/optimize/latency_table.hpp"
#include "specdec/random/stream.hpp"

namespace {
namespace opt = specdec::optimize;
using counting = opt::token_counting;

struct instance {
  std::vector<double> a;
  std::vector<std::size_t> drafted;
  std::vector<double> latency;  // L(0..sum drafted), convex and non-decreasing
};

instance random_instance(specdec::random::philox_stream& r) {
  instance x;
  const std::size_t B = 1 + static_cast<std::size_t>(r.uniform() * 4);
  std::size_t total = 0;
  for (std::size_t b = 0; b < B; ++b) {
    const auto d = static_cast<std::size_t>(r.uniform() * 5);
    x.drafted.push_back(d);
    total += d;
    for (std::size_t j = 0; j < d; ++j) {
      const double u = r.uniform();
      x.a.push_back(u < 0.05 ? 0.0 : u < 0.15 ? 1.0 : r.uniform());
    }
  }
  // Flat up to a random saturation point, then sorted random increments (SV Assumption D.10).
  const auto saturation = static_cast<std::size_t>(r.uniform() * double(total + 1));
  std::vector<double> inc;
  for (std::size_t k = 0; k < total; ++k) inc.push_back(k < saturation ? 0.0 : 0.6 * r.uniform());
  std::sort(inc.begin(), inc.end());
  x.latency.push_back(0.2 + r.uniform());
  for (const double d : inc) x.latency.push_back(x.latency.back() + d);
  return x;
}

std::size_t sum(const std::vector<std::size_t>& v) {
  std::size_t s = 0;
  for (const auto x : v) s += x;
  return s;
}
}  // namespace

TEST_CASE("greedy equals the exhaustive optimum on random instances (concave E, convex latency)", "[optimize][scheduler]") {
  specdec::random::philox_stream r(specdec::random::stream_address{0xBA7C, 0, 0, 0, specdec::random::purpose::user});
  int scheduled = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const instance x = random_instance(r);
    REQUIRE(opt::is_convex_profile(x.latency, 0, static_cast<int>(x.latency.size()) - 1));
    for (const auto c : {counting::accepted_drafts, counting::with_target_token})
      for (const auto stop : {opt::stop_rule::first_drop, opt::stop_rule::best_prefix}) {
        const opt::batch_scheduler_options o{c, stop};
        const auto greedy = opt::schedule_batch(x.a, x.drafted, x.latency, o);
        const auto best = opt::exhaustive_schedule(x.a, x.drafted, x.latency, o);
        CAPTURE(trial, static_cast<int>(c), static_cast<int>(stop), x.drafted.size(), sum(x.drafted));
        CHECK(greedy.goodput == Approx(best.goodput).epsilon(1e-12));
        REQUIRE(greedy.lengths.size() == x.drafted.size());
        for (std::size_t b = 0; b < x.drafted.size(); ++b) CHECK(greedy.lengths[b] <= x.drafted[b]);
        CHECK(greedy.total == sum(greedy.lengths));
        if (c == counting::with_target_token) CHECK(greedy.expected_tokens >= double(x.drafted.size()));  // one token per request
        scheduled += greedy.total > 0;
      }
  }
  CHECK(scheduled > 2000);
}

TEST_CASE("the greedy takes the largest gains across requests, in prefix order", "[optimize][scheduler]") {
  // Request 0 is confident, request 1 is not: with a flat latency up to 3 tokens and a steep one after,
  // the three tokens go to request 0 first, then to the best heads.
  const std::vector<double> a{0.95, 0.9, 0.9, 0.3, 0.9};
  const std::vector<std::size_t> drafted{3, 2};
  const opt::saturating_latency sat{1.0, 3.0, 1.0};
  const auto s = opt::schedule_batch(a, drafted, sat);
  CHECK(s.lengths == std::vector<std::size_t>{3, 0});
  CHECK(s.expected_tokens == Approx(0.95 + 0.95 * 0.9 + 0.95 * 0.9 * 0.9));
  // Each request keeps its own prefix order: request 1's second token (gain 0.27) never comes before its first.
  const auto all = opt::schedule_batch(a, drafted, [](int) { return 1.0; });
  CHECK(all.lengths == std::vector<std::size_t>{3, 2});
}

TEST_CASE("when the assumptions fail: a staircase latency and rising gains", "[optimize][scheduler][assumptions]") {
  // (1) Staircase (not convex): L = 1 for K <= 1, 2 after. The goodput does not improve at K = 2 and
  // the paper's rule stops at K = 1; the best prefix (and the optimum) takes all 8 tokens.
  const std::vector<double> a(8, 0.9);
  const std::vector<std::size_t> drafted{4, 4};
  const auto stairs = [](int k) { return k <= 1 ? 1.0 : 2.0; };
  const auto first = opt::schedule_batch(a, drafted, stairs);
  const auto scan = opt::schedule_batch(a, drafted, stairs, {counting::accepted_drafts, opt::stop_rule::best_prefix});
  const auto best = opt::exhaustive_schedule(a, drafted, stairs);
  CHECK(first.total == 1);
  CHECK(scan.total == 8);
  CHECK(scan.goodput == Approx(best.goodput));
  CHECK(first.goodput < 0.5 * best.goodput);
  // (2) Rising gains inside a request (exact SV's gains): request 0 = [0.1, 0.9], request 1 = [0.5],
  // and a latency that only affords two tokens. The greedy order is 0.5, 0.1, 0.9: its best 2-token
  // prefix is worth 0.6, while request 0's two tokens are worth 1.0.
  const std::vector<double> gains{0.1, 0.9, 0.5};
  const std::vector<std::size_t> d{2, 1};
  const auto budget = [](int k) { return k <= 2 ? 1.0 : 10.0; };
  const auto greedy = opt::schedule_batch_from_gains(gains, d, budget, {counting::accepted_drafts, opt::stop_rule::best_prefix});
  const auto optimum = opt::exhaustive_schedule_from_gains(gains, d, budget);
  CHECK(greedy.expected_tokens == Approx(0.6));
  CHECK(optimum.expected_tokens == Approx(1.0));
  CHECK(optimum.lengths == std::vector<std::size_t>{2, 0});
}

TEST_CASE("batch scheduler: empty batches, zero gains and bad input", "[optimize][scheduler][bad-input]") {
  const auto flat = [](int) { return 1.0; };
  const std::vector<double> none;
  const std::vector<std::size_t> zero_requests, two_empty{0, 0};
  CHECK(opt::schedule_batch(none, zero_requests, flat).lengths.empty());
  const auto idle = opt::schedule_batch(none, two_empty, flat, {counting::with_target_token, opt::stop_rule::first_drop});
  CHECK(idle.total == 0);
  CHECK(idle.goodput == 2.0);  // two target tokens per step
  const std::vector<double> zeros(3, 0.0);
  CHECK(opt::schedule_batch(zeros, std::vector<std::size_t>{3}, flat).total == 0);  // nothing to gain

  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(opt::schedule_batch(std::vector<double>{0.5, nan}, std::vector<std::size_t>{2}, flat), specdec::error);
  CHECK_THROWS_AS(opt::schedule_batch(std::vector<double>{0.5}, std::vector<std::size_t>{2}, flat), specdec::error);  // shapes
  CHECK_THROWS_AS(opt::schedule_batch_from_gains(std::vector<double>{1.5}, std::vector<std::size_t>{1}, flat), specdec::error);
  const auto falling = [](int k) { return 3.0 - k; };
  try {
    opt::schedule_batch(std::vector<double>{0.9, 0.9}, std::vector<std::size_t>{2}, falling);
    FAIL("a decreasing latency was accepted");
  } catch (const specdec::error& e) {
    CHECK(std::string(e.what()).find("not increasing") != std::string::npos);
  }
  CHECK_THROWS_AS(opt::exhaustive_schedule(std::vector<double>{0.9, 0.9}, std::vector<std::size_t>{2}, falling), specdec::error);
  const std::vector<double> many(40, 0.5);
  const std::vector<std::size_t> wide(10, 4);
  CHECK_THROWS_AS(opt::exhaustive_schedule(many, wide, flat, {}, 1000), specdec::error);
}
