// SPECDEC_TEST_LABELS: statistical
//
// sample_residual: norm(max(0, p - a)) with a = min(p, q) (strict) or a rule's accepted mass,
// the zero-mass fallback to p, and the bonus path (q empty = q 0).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/lenient.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::stream_address;
using row = std::vector<double>;

row random_distribution(std::size_t n, std::uint32_t request, double zero_fraction) {
  philox_stream s(stream_address{0xD15, request, 0, 0, purpose::user});
  row p(n);
  double z = 0.0;
  for (auto& x : p) {
    const double e = s.exponential();
    x = s.uniform() < zero_fraction ? 0.0 : e;
    z += x;
  }
  if (z == 0.0) p[0] = z = 1.0;
  for (auto& x : p) x /= z;
  return p;
}

row normalised_positive_part(const row& p, const row& a) {
  row r(p.size());
  double z = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) z += r[v] = std::max(0.0, p[v] - a[v]);
  for (auto& x : r) x /= z;
  return r;
}

struct draws {
  std::vector<std::uint64_t> counts;
  std::uint64_t bad = 0, fallbacks = 0;
};

template <class Sampler>
draws draw(std::size_t V, std::uint64_t n, std::uint64_t seed, Sampler&& sampler) {
  draws d;
  d.counts.assign(V, 0);
  philox_stream s(stream_address{seed, 0, 0, 0, purpose::simulate});
  for (std::uint64_t i = 0; i < n; ++i) {
    const specdec::residual_result r = sampler(s.uniform());
    if (r.used_fallback) ++d.fallbacks;
    if (r.sample.status != specdec::row_status::ok || !specdec::in_vocabulary(r.sample.token, V)) {
      ++d.bad;
      continue;
    }
    ++d.counts[static_cast<std::size_t>(r.sample.token)];
  }
  return d;
}

}  // namespace

TEST_CASE("the strict residual is norm(max(0, p - q)) (chi-squared)", "[sampling][residual][statistical]") {
  for (const std::size_t V : {6u, 50u, 3000u}) {
    const row p = random_distribution(V, static_cast<std::uint32_t>(V), 0.2),
              q = random_distribution(V, static_cast<std::uint32_t>(V) + 1, 0.2);
    row a(V);
    for (std::size_t v = 0; v < V; ++v) a[v] = std::min(p[v], q[v]);
    const row expected = normalised_positive_part(p, a);
    const std::uint64_t seed = 0x7E51D0 + V, n = V > 1000 ? 200'000 : 1'000'000;
    const auto d = draw(V, n, seed, [&](double u) {
      return specdec::sample_residual(std::span<const double>(p), std::span<const double>(q), u);
    });
    REQUIRE(d.bad == 0);
    CHECK(d.fallbacks == 0);
    const auto g = specdec_test::chi_squared_gof(d.counts, expected);
    std::cout << "[residual] strict V = " << V << ", seed = " << seed << ": " << g << "\n";
    CAPTURE(V, seed, g.statistic, g.p_value);
    CHECK(g.impossible == 0);  // never a token with p <= q
    CHECK(g.p_value > specdec_test::gof_alpha);
    // Negative control: the same draws are not distributed as p.
    CHECK(specdec_test::chi_squared_gof(d.counts, p).p_value < specdec_test::gof_alpha);
  }
}

TEST_CASE("a rule's accepted mass defines the residual (lenient l = 0.5)", "[sampling][residual][statistical]") {
  const std::size_t V = 8;
  const row p = random_distribution(V, 500, 0.0), q = random_distribution(V, 501, 0.0);
  const specdec::lenient_rule rule{0.5};
  const auto mass = [&](double pv, double qv) { return rule.accepted_mass(pv, qv); };
  row a(V);
  for (std::size_t v = 0; v < V; ++v) a[v] = rule.accepted_mass(p[v], q[v]);
  const auto d = draw(V, 1'000'000, 0x1E1, [&](double u) {
    return specdec::sample_residual(std::span<const double>(p), std::span<const double>(q), mass, u);
  });
  REQUIRE(d.bad == 0);
  const auto g = specdec_test::chi_squared_gof(d.counts, normalised_positive_part(p, a));
  std::cout << "[residual] lenient 0.5: " << g << "\n";
  CHECK(g.p_value > specdec_test::gof_alpha);
}

TEST_CASE("p == q: the residual has no mass and p itself is sampled, flagged", "[sampling][residual]") {
  const std::size_t V = 6;
  const row p = random_distribution(V, 600, 0.3);
  const auto d = draw(V, 1'000'000, 0xFA11, [&](double u) {
    return specdec::sample_residual(std::span<const double>(p), std::span<const double>(p), u);
  });
  REQUIRE(d.bad == 0);
  CHECK(d.fallbacks == 1'000'000);
  const auto g = specdec_test::chi_squared_gof(d.counts, p);
  std::cout << "[residual] fallback (p == q): " << g << "\n";
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
  // q >= p everywhere (q unnormalised) also has no residual mass.
  row q = p;
  for (auto& x : q) x *= 1.5;
  const auto r = specdec::sample_residual(std::span<const double>(p), std::span<const double>(q), 0.3);
  CHECK(r.used_fallback);
  CHECK(r.sample.status == specdec::row_status::ok);
  CHECK(p[static_cast<std::size_t>(r.sample.token)] > 0.0);
}

TEST_CASE("the bonus path (q empty) samples p", "[sampling][residual][statistical]") {
  const std::size_t V = 40;
  const row p = random_distribution(V, 700, 0.25);
  const auto d = draw(V, 1'000'000, 0xB0B, [&](double u) {
    return specdec::sample_residual(std::span<const double>(p), std::span<const double>{}, u);
  });
  REQUIRE(d.bad == 0);
  CHECK(d.fallbacks == 0);
  const auto g = specdec_test::chi_squared_gof(d.counts, p);
  std::cout << "[residual] bonus (q empty): " << g << "\n";
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
  // Same tokens as sample_categorical on p for the same u (one code path).
  philox_stream s(stream_address{9, 0, 0, 0, purpose::user});
  for (int i = 0; i < 1000; ++i) {
    const double u = s.uniform();
    CHECK(specdec::sample_residual(std::span<const double>(p), std::span<const double>{}, u).sample.token ==
          specdec::sample_categorical(std::span<const double>(p), u).token);
  }
}

TEST_CASE("residual: unusable rows and shapes", "[sampling][residual]") {
  const double nan_v = std::numeric_limits<double>::quiet_NaN(), inf_v = std::numeric_limits<double>::infinity();
  const row p{0.25, 0.25, 0.5}, q{0.5, 0.25, 0.25};
  const auto run = [](const row& a, const row& b, double u = 0.5) {
    return specdec::sample_residual(std::span<const double>(a), std::span<const double>(b), u);
  };
  // The residual of p, q: only token 2 (0.5 - 0.25) has mass.
  for (const double u : {0.0, 0.5, 0x1.fffffffffffffp-1}) CHECK(run(p, q, u).sample.token == 2);
  // NaN, inf or negative entries on either side make the row not_finite, even where max(0, .) would hide them.
  for (const row& bad_q : {row{nan_v, 0.25, 0.25}, row{0.5, -1.0, 0.25}, row{inf_v, 0.0, 0.0}}) {
    const auto r = run(p, bad_q);
    CHECK(r.sample.status == specdec::row_status::not_finite);
    CHECK(r.sample.token == specdec::no_token);
    CHECK_FALSE(r.used_fallback);
  }
  for (const row& bad_p : {row{0.25, nan_v, 0.5}, row{-0.25, 0.25, 0.5}, row{0.25, 0.25, inf_v}}) {
    CHECK(run(bad_p, q).sample.status == specdec::row_status::not_finite);
    CHECK(run(bad_p, row{}).sample.status == specdec::row_status::not_finite);
  }
  // p without mass: the fallback has none either.
  const auto r = run(row{0.0, 0.0, 0.0}, q);
  CHECK(r.used_fallback);
  CHECK(r.sample.status == specdec::row_status::no_mass);
  CHECK(r.sample.token == specdec::no_token);
  CHECK(run(row{0.0, 0.0, 0.0}, row{}).sample.status == specdec::row_status::no_mass);
  // Length mismatch.
  CHECK_THROWS_AS(run(p, row{0.5, 0.5}), specdec::error);
  // Float rows.
  const std::vector<float> pf{0.25f, 0.25f, 0.5f}, qf{0.5f, 0.25f, 0.25f};
  CHECK(specdec::sample_residual(std::span<const float>(pf), std::span<const float>(qf), 0.7).sample.token == 2);
}
