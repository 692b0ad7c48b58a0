// The weights of sampling from logits (distributions/logit_weights.hpp): the reference rule, the
// fixed-point masses (exact, order-free, within their stated resolution), and the seq warp and
// sampler built on them (a top-p cut that the order of the row does not move, ties kept, masses
// that a rounding of the row's double sum would have moved). The vector twin of `weight_exp` against
// this scalar one, bit for bit: tests/backend/simd_top_p_cut.cpp; seq against simd on whole rows:
// tests/backend/simd_cases.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/distributions/logit_weights.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/sample_logits.hpp"
#include "support/logits_reference.hpp"

namespace {

namespace d = specdec::detail;
constexpr float inf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("weight_reference: the first finite chunk's maximum, or the row's when it is more than 64 T above",
          "[distributions][weights]") {
  constexpr std::size_t chunk = d::weight_chunk;
  std::vector<float> l(3 * chunk, 0.0f);
  l[10] = 2.0f;  // the first chunk's maximum
  l[2 * chunk + 5] = 50.0f;
  CHECK(d::weight_reference(std::span<const float>(l), 50.0, 1.0) == 2.0);   // 48 T above: within the headroom
  CHECK(d::weight_reference(std::span<const float>(l), 50.0, 0.5) == 50.0);  // 96 T above: the maximum
  std::fill(l.begin(), l.begin() + chunk, -inf);  // the first chunk has no finite logit: the second's maximum
  l[chunk + 1] = 1.0f;
  CHECK(d::weight_reference(std::span<const float>(l), 50.0, 1.0) == 1.0);
  // The weights: the maximum's is e^((m - R) / T), every one within 2 ulp of exp of its argument.
  std::vector<float> e(l.size());
  const float top = d::logit_weights(std::span<const float>(l), 50.0, 1.0, std::span<float>(e));
  CHECK(top == e[2 * chunk + 5]);
  CHECK(std::abs(static_cast<double>(top) - std::exp(49.0)) <= 2.0 * 0x1p-23 * std::exp(49.0));
  CHECK(e[0] == 0.0f);
  CHECK(e[chunk + 1] == 1.0f);
}

TEST_CASE("fixed-point masses: the stated resolution, no overflow, exact sums in any order", "[distributions][weights]") {
  for (const std::size_t V : {std::size_t{1}, std::size_t{7}, std::size_t{128256}, std::size_t{1} << 20})
    for (const double top : {1.0, 1.5, std::exp(64.0), 1e-300, 1e300, std::numeric_limits<double>::denorm_min()}) {
      const d::fixed_mass_scale f(top, V);
      const int bits = std::min(51, 62 - static_cast<int>(std::bit_width(V)));
      CAPTURE(V, top, f.exponent);
      const std::int64_t c = f(top);
      CHECK(c < (std::int64_t{1} << bits));         // a row of V such entries sums below 2^62
      CHECK(c >= (std::int64_t{1} << (bits - 1)));  // and top is resolved to 2^-(bits - 1)
      CHECK(f(0.0) == 0);
    }
  // At V = 128256 and top = 1 a count is 2^-44, and nearbyint rounds ties to even.
  const d::fixed_mass_scale f(1.0, 128256);
  CHECK(f.exponent == 44);
  CHECK(f(0x1p-45) == 0);
  CHECK(f(0x1.8p-44) == 2);
  CHECK(f(0x1p-44) == 1);
  CHECK(f.least_counted<float>() == std::nextafter(0x1p-45f, 1.0f));
  CHECK(std::abs(f.inverse(std::int64_t{1} << 44) - 1.0) == 0.0);
  CHECK(d::fixed_goal(0.5, 10) == 5);
  CHECK(d::fixed_goal(0.91, 10) == 10);
  for (const std::int64_t m : {std::int64_t{7}, (std::int64_t{1} << 53) + 3, (std::int64_t{1} << 60) + 1})
    CHECK(d::fixed_goal(1.0 - 0x1p-53, m) <= m);  // never above the mass
}

TEST_CASE("keep_top_p: the same kept set whatever the order of the row; ties at the cut kept", "[distributions][weights]") {
  specdec::random::philox_stream s(specdec::random::stream_address{0x1097, 1, 0, 0, specdec::random::purpose::user});
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> row(5000);
    for (float& x : row) x = static_cast<float>(std::exp(4.0 * s.uniform() - 2.0) * s.uniform());
    for (std::size_t v = 0; v < 40; ++v) row[v] = row[40];  // a tie group
    for (const double top_p : {0.3, 0.9, 0.999}) {
      std::vector<float> a(row);
      specdec::keep_top_p(std::span<float>(a), top_p);
      // The row reversed: the same entries kept (a double cumulation would round differently).
      std::vector<float> b(row.rbegin(), row.rend());
      specdec::keep_top_p(std::span<float>(b), top_p);
      std::reverse(b.begin(), b.end());
      CAPTURE(trial, top_p);
      REQUIRE(a == b);
      // The kept set is {x >= c}, and the fixed-point masses put the cut where its definition says.
      float c = inf;
      for (const float x : a)
        if (x > 0.0f) c = std::min(c, x);
      const d::fixed_mass_scale f(static_cast<double>(*std::max_element(row.begin(), row.end())), row.size());
      std::int64_t total = 0, at_least = 0, above = 0;
      for (const float x : row) {
        total += f(x);
        at_least += x >= c ? f(x) : 0;
        above += x > c ? f(x) : 0;
      }
      const std::int64_t goal = d::fixed_goal(top_p, total);
      CHECK(above < goal);
      CHECK(at_least >= goal);
      for (std::size_t v = 0; v < row.size(); ++v) REQUIRE((a[v] > 0.0f) == (row[v] >= c));
    }
  }
}

TEST_CASE("warp_logits and sample_logits on the weights: normalised rows, kept tokens, the mass relative to top",
          "[distributions][weights]") {
  specdec::random::philox_stream s(specdec::random::stream_address{0x1097, 2, 0, 0, specdec::random::purpose::user});
  const std::vector<specdec::warp_params> cases{{1.0, 0, 0.9, 0.0}, {0.7, 50, 1.0, 0.0}, {1.3, 0, 1.0, 0.1}, {1.0, 0, 1.0, 0.0}};
  for (const auto& w : cases) {
    std::vector<float> l(30000);
    for (float& x : l) x = static_cast<float>(6.0 * s.uniform());
    std::vector<float> p(l.size()), e(l.size());
    REQUIRE(specdec::warp_logits(std::span<const float>(l), std::span<float>(p), w) == specdec::row_status::ok);
    double sum = 0.0;
    for (const float x : p) sum += static_cast<double>(x);
    CAPTURE(w.temperature, w.top_k, w.top_p, w.min_p);
    CHECK(std::abs(sum - 1.0) <= 1e-5);
    const d::kept_weights k = d::keep_logit_weights(std::span<const float>(l), w, std::span<float>(e));
    double kept = 0.0;
    for (std::size_t v = 0; v < l.size(); ++v) {
      REQUIRE((e[v] > 0.0f) == (p[v] > 0.0f));  // the warped row is the kept weights, normalised
      kept += static_cast<double>(e[v]);
    }
    if (w.top_k > 0) CHECK(std::count_if(p.begin(), p.end(), [](float x) { return x > 0.0f; }) == w.top_k);
    const specdec_test::logits_reference<float> reference(std::span<const float>(l), w);
    for (const double u : {0.0, 0.25, 0.999}) {
      const auto r = specdec::sample_logits(std::span<const float>(l), w, u);
      const auto shortcut = reference(u);  // (the tests' helper: the same draw)
      REQUIRE(shortcut.token == r.token);
      REQUIRE(shortcut.mass == r.mass);
      REQUIRE(r.status == specdec::row_status::ok);
      REQUIRE(p[static_cast<std::size_t>(r.token)] > 0.0f);
      CHECK(std::abs(r.mass - kept / k.top) <= 1e-12 * r.mass);
    }
  }
}
