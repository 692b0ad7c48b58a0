// The result types of the simulators (simulate/tally.hpp): moments (Welford / pairwise merge),
// count_tally (histogram, growth, overflow, exact merge), and the estimate helpers (affine map,
// delta method, Bernoulli estimate, z-score), checked against direct two-pass computations.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"

namespace sim = specdec::simulate;

namespace {
struct two_pass {
  double mean = 0, variance = 0;
};
two_pass direct(const std::vector<double>& xs) {
  two_pass r;
  for (const double x : xs) r.mean += x;
  r.mean /= static_cast<double>(xs.size());
  for (const double x : xs) r.variance += (x - r.mean) * (x - r.mean);
  r.variance /= static_cast<double>(xs.size() - 1);
  return r;
}
}  // namespace

TEST_CASE("moments: Welford updates and pairwise merges equal the two-pass formulas", "[simulate][tally]") {
  std::vector<double> xs;
  auto s = sim::draw_stream({11, 0, 0, 0}, 0);
  for (int i = 0; i < 1000; ++i) xs.push_back(1e6 + 3.0 * s.uniform());  // a large offset: no cancellation
  sim::moments all, left, right;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    all.add(xs[i]);
    (i < 377 ? left : right).add(xs[i]);
  }
  const two_pass d = direct(xs);
  CHECK(all.count() == 1000);
  CHECK(all.mean() == Approx(d.mean).epsilon(1e-15));
  CHECK(all.variance() == Approx(d.variance).epsilon(1e-9));
  left.merge(right);
  CHECK(left.mean() == Approx(d.mean).epsilon(1e-15));
  CHECK(left.variance() == Approx(d.variance).epsilon(1e-9));
  CHECK(all.std_error() == Approx(std::sqrt(d.variance / 1000)).epsilon(1e-9));
  // Repeated values, empty accumulators.
  sim::moments rep;
  rep.add(2.0, 3);
  rep.add(5.0, 1);
  CHECK(rep.mean() == 2.75);
  CHECK(rep.variance() == Approx(2.25));
  sim::moments empty;
  CHECK(empty.summary().count == 0);
  CHECK(empty.std_error() == 0.0);
  empty.merge(rep);
  CHECK(empty.mean() == rep.mean());
  rep.merge(sim::moments{});
  CHECK(rep.count() == 4);
}

TEST_CASE("count_tally: histogram, growth, overflow, exact merge", "[simulate][tally]") {
  sim::count_tally t(4);
  for (const std::uint64_t v : {0u, 1u, 1u, 3u, 3u, 3u}) t.add(v);
  CHECK(t.count() == 6);
  CHECK(t.histogram().size() == 4);
  t.add(9);  // grows
  CHECK(t.histogram().size() >= 10);
  CHECK(t.count_of(9) == 1);
  CHECK(t.count_of(1000) == 0);
  CHECK(t.frequency(3) == Approx(3.0 / 7.0));
  const std::vector<double> values{0, 1, 1, 3, 3, 3, 9};
  const two_pass d = direct(values);
  CHECK(t.summary().mean == Approx(d.mean));
  CHECK(t.summary().variance == Approx(d.variance));
  // Values beyond the histogram limit go to the overflow accumulator and still count.
  const std::uint64_t huge = sim::count_tally::histogram_limit + 5;
  t.add(huge);
  CHECK(t.overflow_count() == 1);
  CHECK(t.count() == 8);
  CHECK(t.histogram().size() <= sim::count_tally::histogram_limit);
  CHECK(t.summary().mean == Approx((d.mean * 7 + static_cast<double>(huge)) / 8));
  sim::count_tally u;
  u.add(2);
  u.add(huge);
  u.merge(t);
  CHECK(u.count() == 10);
  CHECK(u.overflow_count() == 2);
  CHECK(u.count_of(3) == 3);
  CHECK(u.count_of(2) == 1);
  sim::count_tally none;
  CHECK(none.frequency(0) == 0.0);
  CHECK(none.summary().count == 0);
}

TEST_CASE("estimate helpers: affine map, delta method, Bernoulli estimate, z-score", "[simulate][tally]") {
  const sim::estimate e{100, 2.0, 4.0, 0.2};
  const sim::estimate a = sim::affine(e, -3.0, 1.0);
  CHECK(a.mean == -5.0);
  CHECK(a.variance == 36.0);
  CHECK(a.std_error == Approx(0.6));
  const sim::estimate g = sim::delta_method(e, 1.0 / e.mean, -1.0 / (e.mean * e.mean));
  CHECK(g.mean == 0.5);
  CHECK(g.std_error == Approx(0.05));
  const sim::estimate b = sim::bernoulli_estimate(30, 100);
  CHECK(b.mean == 0.3);
  CHECK(b.variance == Approx(0.21 * 100.0 / 99.0));
  CHECK(b.std_error == Approx(std::sqrt(0.21 / 99.0)));
  CHECK(sim::bernoulli_estimate(0, 0).count == 0);
  CHECK(sim::bernoulli_estimate(1, 1).variance == 0.0);
  CHECK(e.z_score(1.0) == Approx(5.0));
  const sim::estimate exact{10, 1.0, 0.0, 0.0};
  CHECK(exact.z_score(1.0) == 0.0);
  CHECK(std::isinf(exact.z_score(2.0)));
}

TEST_CASE("draw_stream: addresses (seed, stream, draw index) under purpose::simulate", "[simulate][tally]") {
  const sim::run_options o{7, 2, 0, 0};
  auto a = sim::draw_stream(o, (std::uint64_t{3} << 32) | 5u);
  const auto& addr = a.address();
  CHECK(addr.seed == 7);
  CHECK(addr.request == 2);
  CHECK(addr.step == 3);
  CHECK(addr.position == 5);
  CHECK(addr.what == specdec::random::purpose::simulate);
  auto b = sim::draw_stream(o, 5);
  CHECK(a.uniform() != b.uniform());
}

TEST_CASE("count_tally: add(v, n) ends as n calls of add(v)", "[simulate][tally]") {
  sim::count_tally bulk(4), single(4);
  const std::uint64_t values[] = {0, 3, 3, 17, 40, 2, 40, 1000};
  const std::uint64_t counts[] = {5, 0, 2, 1, 3, 7, 1, 2};
  for (std::size_t k = 0; k < 8; ++k) {
    bulk.add(values[k], counts[k]);
    for (std::uint64_t n = 0; n < counts[k]; ++n) single.add(values[k]);
  }
  REQUIRE(bulk.histogram().size() == single.histogram().size());  // the same growth (n = 0 grows nothing)
  for (std::size_t v = 0; v < bulk.histogram().size(); ++v) CHECK(bulk.histogram()[v] == single.histogram()[v]);
  CHECK(bulk.count() == 21);
  sim::count_tally big;
  big.add(sim::count_tally::histogram_limit + 5, 3);
  CHECK(big.overflow_count() == 3);
  CHECK(big.summary().mean == static_cast<double>(sim::count_tally::histogram_limit + 5));
}
