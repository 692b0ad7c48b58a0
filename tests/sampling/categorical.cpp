// SPECDEC_TEST_LABELS: statistical
//
// sample_categorical / sample_by_weights: distribution (chi-squared, several V including V not a
// multiple of the 2048-entry tile), zero weights never drawn, unnormalised weights, unusable rows,
// and u at the ends of [0, 1).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::stream_address;

constexpr double u_max = 0x1.fffffffffffffp-1;  // std::nextafter(1.0, 0.0): the largest uniform
static_assert(u_max < 1.0);

// Random non-negative weights: Exp(1)^2, a fraction set to exactly 0, scaled by `scale` (unnormalised).
std::vector<double> random_weights(std::size_t n, std::uint32_t request, double zero_fraction, double scale) {
  philox_stream s(stream_address{0xCA7, request, 0, 0, purpose::user});
  std::vector<double> w(n);
  bool any = false;
  for (auto& x : w) {
    const double e = s.exponential();
    x = s.uniform() < zero_fraction ? 0.0 : scale * e * e;
    any = any || x > 0.0;
  }
  if (!any) w[n / 2] = scale;
  return w;
}

std::vector<double> normalised(const std::vector<double>& w) {
  double z = 0.0;
  for (const double x : w) z += x;
  std::vector<double> p(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) p[i] = w[i] / z;
  return p;
}

template <class T>
std::vector<std::uint64_t> draw_counts(const std::vector<T>& w, std::uint64_t n, std::uint64_t seed, std::uint64_t& bad) {
  std::vector<std::uint64_t> counts(w.size(), 0);
  bad = 0;
  philox_stream s(stream_address{seed, 0, 0, 0, purpose::simulate});
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto r = specdec::sample_categorical(std::span<const T>(w), s.uniform());
    if (r.status != specdec::row_status::ok || r.token < 0 || static_cast<std::size_t>(r.token) >= w.size()) {
      ++bad;
      continue;
    }
    ++counts[static_cast<std::size_t>(r.token)];
  }
  return counts;
}

}  // namespace

TEST_CASE("sample_categorical follows the normalised weights (chi-squared)", "[sampling][statistical]") {
  struct config {
    std::size_t vocab;
    double zero_fraction;
    double scale;
    std::uint64_t n;
  };
  const std::vector<config> configs{
      {2, 0.0, 1.0, 1'000'000},   {7, 0.3, 1.0, 1'000'000},  {100, 0.5, 3.7, 1'000'000},
      {2048, 0.2, 1e-3, 200'000}, {2049, 0.2, 1e5, 200'000}, {5000, 0.25, 0.01, 250'000},
  };
  std::uint64_t seed = 0x5A3D1E00;
  for (const auto& c : configs) {
    ++seed;
    CAPTURE(c.vocab, c.zero_fraction, c.scale, c.n, seed);
    const auto w = random_weights(c.vocab, static_cast<std::uint32_t>(c.vocab), c.zero_fraction, c.scale);
    std::uint64_t bad = 0;
    const auto counts = draw_counts(w, c.n, seed, bad);
    REQUIRE(bad == 0);
    const auto g = specdec_test::chi_squared_gof(counts, normalised(w));
    std::cout << "[categorical] V = " << c.vocab << ", seed = " << seed << ": " << g << "\n";
    CHECK(g.impossible == 0);  // a zero-weight token is never drawn
    for (std::size_t v = 0; v < c.vocab; ++v)
      if (w[v] == 0.0) REQUIRE(counts[v] == 0);
    CHECK(g.p_value > specdec_test::gof_alpha);
  }
}

TEST_CASE("sample_categorical with float weights", "[sampling][statistical]") {
  const auto wd = random_weights(3000, 11, 0.3, 1.0);
  const std::vector<float> w(wd.begin(), wd.end());
  std::vector<double> wf(w.begin(), w.end());
  std::uint64_t bad = 0;
  const auto counts = draw_counts(w, 200'000, 0xF10A7, bad);
  REQUIRE(bad == 0);
  const auto g = specdec_test::chi_squared_gof(counts, normalised(wf));
  std::cout << "[categorical] float V = 3000: " << g << "\n";
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
}

TEST_CASE("negative control: the chi-squared test sees a slightly wrong distribution", "[sampling][statistical][negative]") {
  const auto w = random_weights(7, 7, 0.0, 1.0);
  std::uint64_t bad = 0;
  const auto counts = draw_counts(w, 1'000'000, 0xBAD, bad);
  auto wrong = normalised(w);  // move 0.01 of probability from the likeliest token to another one
  const auto top = static_cast<std::size_t>(std::max_element(wrong.begin(), wrong.end()) - wrong.begin());
  wrong[top] -= 0.01;
  wrong[(top + 1) % wrong.size()] += 0.01;
  CHECK(specdec_test::chi_squared_gof(counts, wrong).p_value < specdec_test::gof_alpha);
}

TEST_CASE("all mass in the last partial tile: ids stay in range", "[sampling]") {
  for (const std::size_t V : {2049u, 4097u, 5000u, 10000u}) {
    std::vector<double> w(V, 0.0);
    const std::size_t first = (V - 1) / specdec::sampling_tile * specdec::sampling_tile;
    for (std::size_t v = first; v < V; ++v) w[v] = 1.0 + static_cast<double>(v % 3);
    philox_stream s(stream_address{1, static_cast<std::uint32_t>(V), 0, 0, purpose::simulate});
    for (int i = 0; i < 2000; ++i) {
      const double u = i == 0 ? 0.0 : i == 1 ? u_max : s.uniform();
      const auto r = specdec::sample_categorical(std::span<const double>(w), u);
      REQUIRE(r.status == specdec::row_status::ok);
      REQUIRE(r.token >= static_cast<specdec::token_id>(first));
      REQUIRE(r.token < static_cast<specdec::token_id>(V));
    }
  }
}

TEST_CASE("u at the ends of [0, 1): a token with positive weight, always in range", "[sampling]") {
  philox_stream s(stream_address{2, 0, 0, 0, purpose::user});
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t sizes[] = {1, 2, 3, 2047, 2048, 2049, 4096, 4097, 5000};
    const std::size_t V = sizes[static_cast<std::size_t>(trial) % 9];
    auto w = random_weights(V, 1000u + static_cast<std::uint32_t>(trial), 0.5, s.uniform() < 0.5 ? 1e-300 : 1e300 / 1e4);
    // Trailing and leading zeros (the last crossing must not land on a zero), tiny weights.
    const std::size_t tail = static_cast<std::size_t>(s.uniform() * static_cast<double>(V));
    for (std::size_t v = tail + 1; v < V; ++v) w[v] = 0.0;
    if (trial % 3 == 0) w[0] = 0.0;
    if (std::all_of(w.begin(), w.end(), [](double x) { return x == 0.0; })) w[tail] = 1e-310;  // subnormal
    CAPTURE(trial, V, tail);
    for (const double u : {0.0, u_max, std::nextafter(u_max, 0.0), 0.5}) {
      const auto r = specdec::sample_categorical(std::span<const double>(w), u);
      REQUIRE(r.status == specdec::row_status::ok);
      REQUIRE(r.token >= 0);
      REQUIRE(static_cast<std::size_t>(r.token) < V);
      REQUIRE(w[static_cast<std::size_t>(r.token)] > 0.0);
      if (u == 0.0) {  // the first positive weight
        std::size_t first = 0;
        while (w[first] == 0.0) ++first;
        CHECK(static_cast<std::size_t>(r.token) == first);
      }
      if (u == u_max) {  // never past the last positive weight
        std::size_t last = V - 1;
        while (w[last] == 0.0) --last;
        CHECK(static_cast<std::size_t>(r.token) <= last);
      }
    }
  }
  // Weights whose sum rounds: u * Z may land past the last crossing; the last positive token is returned.
  std::vector<double> w{1.0, 1e-17, 1e-17, 0.0};
  const auto r = specdec::sample_categorical(std::span<const double>(w), u_max);
  CHECK(r.status == specdec::row_status::ok);
  CHECK(w[static_cast<std::size_t>(r.token)] > 0.0);
}

TEST_CASE("inverse CDF: the token is non-decreasing in u", "[sampling]") {
  const auto w = random_weights(5000, 77, 0.3, 1.0);
  philox_stream s(stream_address{3, 0, 0, 0, purpose::user});
  std::vector<double> us(2000);
  for (auto& u : us) u = s.uniform();
  us.push_back(0.0);
  us.push_back(u_max);
  std::sort(us.begin(), us.end());
  specdec::token_id prev = -1;
  for (const double u : us) {
    const auto t = specdec::sample_categorical(std::span<const double>(w), u).token;
    REQUIRE(t >= prev);
    prev = t;
  }
}

TEST_CASE("scaling the weights by a power of two gives the same tokens", "[sampling]") {
  const auto w = random_weights(3000, 5, 0.2, 1.0);
  auto w4 = w;
  for (auto& x : w4) x *= 4.0;
  philox_stream s(stream_address{4, 0, 0, 0, purpose::user});
  for (int i = 0; i < 2000; ++i) {
    const double u = s.uniform();
    const auto a = specdec::sample_categorical(std::span<const double>(w), u);
    const auto b = specdec::sample_categorical(std::span<const double>(w4), u);
    REQUIRE(a.token == b.token);
    REQUIRE(b.mass == 4.0 * a.mass);
  }
}

TEST_CASE("unusable rows: NaN, inf or negative weights, and rows without mass", "[sampling]") {
  const double nan_v = std::numeric_limits<double>::quiet_NaN(), inf_v = std::numeric_limits<double>::infinity();
  const auto sample = [](std::vector<double> w, double u = 0.5) {
    return specdec::sample_categorical(std::span<const double>(w), u);
  };
  for (const auto& w :
       {std::vector<double>{0.5, nan_v, 0.5}, std::vector<double>{nan_v}, std::vector<double>{0.2, -0.1, 0.9},
        std::vector<double>{0.2, inf_v}, std::vector<double>{-0.0, -1e-300, 1.0}, std::vector<double>{1e308, 1e308}}) {
    for (const double u : {0.0, 0.5, u_max}) {
      const auto r = sample(w, u);
      CHECK(r.status == specdec::row_status::not_finite);
      CHECK(r.token == specdec::no_token);
    }
  }
  for (const auto& w : {std::vector<double>{0.0, 0.0, 0.0}, std::vector<double>{}, std::vector<double>{-0.0}}) {
    const auto r = sample(w);
    CHECK(r.status == specdec::row_status::no_mass);
    CHECK(r.token == specdec::no_token);
    CHECK(r.token == -1);
  }
  // A NaN in the second tile poisons the row too.
  std::vector<double> big(5000, 1.0);
  big[4500] = nan_v;
  CHECK(sample(big).status == specdec::row_status::not_finite);
  // sample_by_weights with a weight function.
  const auto r = specdec::sample_by_weights(
      10, [](std::size_t v) { return v == 7 ? 2.0 : 0.0; }, 0.9);
  CHECK(r.status == specdec::row_status::ok);
  CHECK(r.token == 7);
  CHECK(r.mass == 2.0);
}
