// Divergences between probability rows: identities and edge cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "specdec/distributions/divergence.hpp"
#include "specdec/errors.hpp"
#include "specdec/random/stream.hpp"

namespace {

using row = std::vector<double>;
using cspan = std::span<const double>;

row random_row(std::size_t n, std::uint32_t request, double zero_fraction = 0.0) {
  specdec::random::philox_stream s(specdec::random::stream_address{17, request, 0, 0, specdec::random::purpose::user});
  row r(n);
  double sum = 0.0;
  for (auto& x : r) {
    x = s.uniform() < zero_fraction ? 0.0 : s.exponential();
    sum += x;
  }
  if (sum == 0.0) r[0] = sum = 1.0;
  for (auto& x : r) x /= sum;
  return r;
}

}  // namespace

TEST_CASE("TV = 1 - overlap for normalised rows; bounds and symmetry", "[distributions][divergence]") {
  for (std::uint32_t i = 0; i < 200; ++i) {
    const std::size_t n = 1 + i % 37;
    const row p = random_row(n, 2 * i, i % 3 == 0 ? 0.4 : 0.0), q = random_row(n, 2 * i + 1, i % 5 == 0 ? 0.4 : 0.0);
    CAPTURE(i, n);
    const double tv = specdec::total_variation(cspan(p), cspan(q));
    const double ov = specdec::overlap(cspan(p), cspan(q));
    CHECK(std::abs(tv - (1.0 - ov)) < 1e-14);
    CHECK(tv >= 0.0);
    CHECK(tv <= 1.0 + 1e-15);
    CHECK(tv == specdec::total_variation(cspan(q), cspan(p)));
    CHECK(ov == specdec::overlap(cspan(q), cspan(p)));
    CHECK(specdec::total_variation(cspan(p), cspan(p)) == 0.0);
    CHECK(std::abs(specdec::overlap(cspan(p), cspan(p)) - 1.0) < 1e-14);
  }
  // Disjoint supports: TV 1, overlap 0.
  const row a{0.5, 0.5, 0.0, 0.0}, b{0.0, 0.0, 0.25, 0.75};
  CHECK(specdec::total_variation(cspan(a), cspan(b)) == 1.0);
  CHECK(specdec::overlap(cspan(a), cspan(b)) == 0.0);
  // Mixed float / double rows.
  const std::vector<float> af{0.5f, 0.5f, 0.0f, 0.0f};
  CHECK(specdec::total_variation(std::span<const float>(af), cspan(b)) == 1.0);
}

TEST_CASE("KL divergence, entropy and cross-entropy", "[distributions][divergence]") {
  for (std::uint32_t i = 0; i < 200; ++i) {
    const std::size_t n = 2 + i % 50;
    const row p = random_row(n, 1000 + 2 * i, i % 4 == 0 ? 0.3 : 0.0), q = random_row(n, 1001 + 2 * i);
    CAPTURE(i, n);
    const double kl = specdec::kl_divergence(cspan(p), cspan(q));
    CHECK(kl >= 0.0);
    CHECK(specdec::kl_divergence(cspan(p), cspan(p)) == 0.0);
    const double h = specdec::entropy(cspan(p));
    CHECK(h >= 0.0);
    CHECK(h <= std::log(static_cast<double>(n)) + 1e-14);
    CHECK(std::abs(specdec::cross_entropy(cspan(p), cspan(q)) - (h + kl)) < 1e-12);
    // Pinsker: TV <= sqrt(KL / 2).
    CHECK(specdec::total_variation(cspan(p), cspan(q)) <= std::sqrt(kl / 2.0) + 1e-12);
  }
  for (const std::size_t n : {1u, 2u, 5u, 1000u}) {
    const row u(n, 1.0 / static_cast<double>(n));
    CHECK(std::abs(specdec::entropy(cspan(u)) - std::log(static_cast<double>(n))) < 1e-12);
  }
  // 0 log 0 = 0; q = 0 where p > 0 gives +inf.
  const row p{0.5, 0.5, 0.0}, q{1.0, 0.0, 0.0}, r{0.25, 0.25, 0.5};
  CHECK(specdec::entropy(cspan(q)) == 0.0);
  CHECK(specdec::kl_divergence(cspan(p), cspan(q)) == std::numeric_limits<double>::infinity());
  CHECK(specdec::cross_entropy(cspan(p), cspan(q)) == std::numeric_limits<double>::infinity());
  CHECK(specdec::kl_divergence(cspan(p), cspan(r)) == Approx(std::log(2.0)).epsilon(1e-15));  // entries where p = 0 are skipped
  CHECK(std::isfinite(specdec::kl_divergence(cspan(q), cspan(p))));
}

TEST_CASE("divergences reject rows of different lengths", "[distributions][divergence]") {
  const row a{0.5, 0.5}, b{1.0, 0.0, 0.0};
  CHECK_THROWS_AS(specdec::total_variation(cspan(a), cspan(b)), specdec::error);
  CHECK_THROWS_AS(specdec::overlap(cspan(a), cspan(b)), specdec::error);
  CHECK_THROWS_AS(specdec::kl_divergence(cspan(a), cspan(b)), specdec::error);
  CHECK_THROWS_AS(specdec::cross_entropy(cspan(a), cspan(b)), specdec::error);
}
