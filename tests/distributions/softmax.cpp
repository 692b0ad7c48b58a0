// softmax, log_softmax, log_sum_exp and argmax: accuracy against long double, extreme logits,
// unusable rows and temperature.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "specdec/distributions/softmax.hpp"
#include "specdec/errors.hpp"
#include "specdec/random/stream.hpp"

namespace {

constexpr double k_inf = std::numeric_limits<double>::infinity();
constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

std::vector<long double> reference_softmax(const std::vector<double>& logits, long double temperature = 1.0L) {
  long double m = -INFINITY;
  for (const double x : logits) m = std::max(m, static_cast<long double>(x));
  long double sum = 0.0L;
  std::vector<long double> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    out[i] = std::exp((static_cast<long double>(logits[i]) - m) / temperature);
    sum += out[i];
  }
  for (auto& x : out) x /= sum;
  return out;
}

std::vector<double> random_logits(std::size_t n, double scale, std::uint32_t request) {
  specdec::random::philox_stream s(specdec::random::stream_address{99, request, 0, 0, specdec::random::purpose::user});
  std::vector<double> l(n);
  for (auto& x : l) x = scale * (s.uniform() - 0.5);
  return l;
}

// Relative accuracy that softmax can promise for logit x: the rounding of (x - max) / T is
// amplified by exp's condition number |x - max| / T, and the recursive sum of n terms adds up to
// (n - 1) roundings (a common factor of the whole row).
double tolerance(const std::vector<double>& logits, std::size_t i, double temperature, double eps) {
  double m = -k_inf;
  for (const double x : logits) m = std::max(m, x);
  return eps * (8.0 + std::abs(logits[i] - m) / temperature + static_cast<double>(logits.size()));
}

template <class U>
std::vector<U> run_softmax(const std::vector<double>& logits, double temperature, specdec::row_status& status) {
  std::vector<U> out(logits.size(), U(7));
  status = specdec::softmax(std::span<const double>(logits), std::span<U>(out), temperature);
  return out;
}

}  // namespace

TEST_CASE("softmax equals a long double reference", "[distributions][softmax]") {
  for (const std::size_t n : {1u, 2u, 7u, 100u, 5000u}) {
    for (const double scale : {1.0, 20.0, 200.0}) {
      CAPTURE(n, scale);
      const auto logits = random_logits(n, scale, static_cast<std::uint32_t>(n));
      const auto ref = reference_softmax(logits);
      specdec::row_status s{};
      const auto p = run_softmax<double>(logits, 1.0, s);
      REQUIRE(s == specdec::row_status::ok);
      const auto pf = run_softmax<float>(logits, 1.0, s);
      REQUIRE(s == specdec::row_status::ok);
      double sum = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const double r = static_cast<double>(ref[i]);
        CHECK(std::abs(p[i] - r) <= tolerance(logits, i, 1.0, 0x1.0p-53) * r + 1e-300);
        CHECK(std::abs(static_cast<double>(pf[i]) - r) <= 2e-7 * r + 1e-38);
        sum += p[i];
      }
      CHECK(std::abs(sum - 1.0) < 1e-13);
    }
  }
}

TEST_CASE("softmax with temperature is softmax of logits / T", "[distributions][softmax]") {
  const auto logits = random_logits(50, 10.0, 3);
  for (const double t : {0.05, 0.5, 1.0, 3.0, 100.0}) {
    CAPTURE(t);
    specdec::row_status s{};
    const auto p = run_softmax<double>(logits, t, s);
    REQUIRE(s == specdec::row_status::ok);
    const auto ref = reference_softmax(logits, t);
    for (std::size_t i = 0; i < logits.size(); ++i)
      CHECK(std::abs(p[i] - static_cast<double>(ref[i])) <=
            tolerance(logits, i, t, 0x1.0p-53) * static_cast<double>(ref[i]) + 1e-300);
  }
  // Temperature > 1 flattens, < 1 sharpens: the largest probability moves accordingly.
  const std::vector<double> l{0.0, 1.0, 2.0};
  specdec::row_status s{};
  const auto cold = run_softmax<double>(l, 0.5, s), warm = run_softmax<double>(l, 2.0, s), one = run_softmax<double>(l, 1.0, s);
  CHECK(cold[2] > one[2]);
  CHECK(warm[2] < one[2]);
}

TEST_CASE("softmax of extreme and infinite logits", "[distributions][softmax]") {
  specdec::row_status s{};
  SECTION("huge finite logits") {
    const auto p = run_softmax<double>({1e30, -1e30, 0.0, 1e30 - 1e15}, 1.0, s);
    REQUIRE(s == specdec::row_status::ok);
    CHECK(p[0] == 1.0);
    CHECK(p[1] == 0.0);
    CHECK(p[2] == 0.0);
    CHECK(p[3] == 0.0);
    const auto q = run_softmax<double>({1e308, 1e308}, 1.0, s);  // x - max never overflows
    REQUIRE(s == specdec::row_status::ok);
    CHECK(q[0] == 0.5);
    CHECK(q[1] == 0.5);
    const auto f = run_softmax<float>({1e30, -1e30}, 1.0, s);
    CHECK(f[0] == 1.0f);
    CHECK(f[1] == 0.0f);
  }
  SECTION("-k_inf entries get probability 0") {
    const auto p = run_softmax<double>({-k_inf, 0.0, -k_inf, 0.0}, 1.0, s);
    REQUIRE(s == specdec::row_status::ok);
    CHECK(p == std::vector<double>{0.0, 0.5, 0.0, 0.5});
  }
  SECTION("all -k_inf: no_mass, zero-filled") {
    const auto p = run_softmax<double>({-k_inf, -k_inf, -k_inf}, 1.0, s);
    CHECK(s == specdec::row_status::no_mass);
    CHECK(p == std::vector<double>{0.0, 0.0, 0.0});
  }
  SECTION("NaN or +k_inf: not_finite, zero-filled") {
    for (const auto& row : {std::vector<double>{0.0, k_nan, 1.0}, std::vector<double>{k_nan}, std::vector<double>{0.0, k_inf},
                            std::vector<double>{-k_inf, k_nan}}) {
      const auto p = run_softmax<double>(row, 1.0, s);
      CHECK(s == specdec::row_status::not_finite);
      for (const double x : p) CHECK(x == 0.0);
    }
  }
  SECTION("empty row: no mass") {
    const auto p = run_softmax<double>({}, 1.0, s);
    CHECK(s == specdec::row_status::no_mass);
  }
}

TEST_CASE("softmax preconditions", "[distributions][softmax]") {
  const std::vector<double> l{1.0, 2.0};
  std::vector<double> out(3);
  CHECK_THROWS_AS(specdec::softmax(std::span<const double>(l), std::span<double>(out)), specdec::error);
  std::vector<double> ok(2);
  for (const double t : {0.0, -1.0, k_nan, k_inf})
    CHECK_THROWS_AS(specdec::softmax(std::span<const double>(l), std::span<double>(ok), t), specdec::error);
  CHECK_THROWS_AS(specdec::log_sum_exp(std::span<const double>(l), 0.0), specdec::error);
}

TEST_CASE("log_sum_exp", "[distributions][softmax]") {
  const auto lse = [](std::vector<double> v, double t = 1.0) { return specdec::log_sum_exp(std::span<const double>(v), t); };
  CHECK(lse({0.0}) == 0.0);
  CHECK(lse({0.0, 0.0}) == Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(lse({1000.0, 1000.0}) == Approx(1000.0 + std::log(2.0)).epsilon(1e-15));
  CHECK(lse({-1000.0, -1000.0}) == Approx(-1000.0 + std::log(2.0)).epsilon(1e-15));
  CHECK(lse({1e30, 0.0}) == 1e30);
  CHECK(lse({-k_inf, 0.0}) == 0.0);
  CHECK(lse({-k_inf, -k_inf}) == -k_inf);
  CHECK(std::isnan(lse({0.0, k_nan})));
  CHECK(std::isnan(lse({0.0, k_inf})));
  // Temperature: log sum exp(l / T).
  CHECK(lse({2.0, 4.0}, 2.0) == Approx(std::log(std::exp(1.0) + std::exp(2.0))).epsilon(1e-15));
  const auto logits = random_logits(300, 50.0, 8);
  long double ref = 0.0L;
  for (const double x : logits) ref += std::exp(static_cast<long double>(x));
  CHECK(lse(logits) == Approx(static_cast<double>(std::log(ref))).epsilon(1e-14));
}

TEST_CASE("log_softmax", "[distributions][softmax]") {
  const auto logits = random_logits(64, 30.0, 9);
  std::vector<double> ls(logits.size()), p(logits.size());
  REQUIRE(specdec::log_softmax(std::span<const double>(logits), std::span<double>(ls), 0.7) == specdec::row_status::ok);
  REQUIRE(specdec::softmax(std::span<const double>(logits), std::span<double>(p), 0.7) == specdec::row_status::ok);
  for (std::size_t i = 0; i < logits.size(); ++i) CHECK(std::exp(ls[i]) == Approx(p[i]).epsilon(1e-12).margin(1e-300));
  const std::vector<double> with_inf{-k_inf, 0.0};
  std::vector<double> out(2);
  REQUIRE(specdec::log_softmax(std::span<const double>(with_inf), std::span<double>(out)) == specdec::row_status::ok);
  CHECK(out[0] == -k_inf);
  CHECK(out[1] == 0.0);
  // log-sum-exp overflows (max / T beyond DBL_MAX): still log p, not inf - inf = NaN (found by the
  // fuzz harness tests/fuzz/warp_and_sample.cpp).
  const std::vector<double> huge{1e308, 1e308, -k_inf, 1e308 - 1e293};
  std::vector<double> hl(huge.size());
  for (const double t : {0.5, 1e-300}) {
    CAPTURE(t);
    REQUIRE(specdec::log_softmax(std::span<const double>(huge), std::span<double>(hl), t) == specdec::row_status::ok);
    CHECK(hl[0] == Approx(-std::log(2.0)).epsilon(1e-15));
    CHECK(hl[1] == hl[0]);
    CHECK(hl[2] == -k_inf);
    if (t == 0.5)
      CHECK(hl[3] == Approx((huge[3] - huge[0]) / t - std::log(2.0)));
    else
      CHECK(hl[3] == -k_inf);
  }
  const std::vector<float> tiny_t{23.5f, -std::numeric_limits<float>::infinity(), 1.0f};
  std::vector<float> tl(3);
  REQUIRE(specdec::log_softmax(std::span<const float>(tiny_t), std::span<float>(tl), 5e-317) == specdec::row_status::ok);
  CHECK(tl == std::vector<float>{0.0f, -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
  // max / T below -DBL_MAX: log-sum-exp is -inf, yet the row has mass (it was reported no_mass).
  const std::vector<double> negative{-0.5, -0.75};
  std::vector<double> nl(2);
  REQUIRE(specdec::log_softmax(std::span<const double>(negative), std::span<double>(nl), 1e-320) == specdec::row_status::ok);
  CHECK(nl == std::vector<double>{0.0, -k_inf});
  const std::vector<double> bad{k_nan, 0.0}, empty_mass{-k_inf, -k_inf};
  CHECK(specdec::log_softmax(std::span<const double>(bad), std::span<double>(out)) == specdec::row_status::not_finite);
  CHECK(specdec::log_softmax(std::span<const double>(empty_mass), std::span<double>(out)) == specdec::row_status::no_mass);
}

TEST_CASE("argmax: lowest index on ties, NaN skipped", "[distributions][softmax]") {
  const auto am = [](std::vector<double> v) { return specdec::argmax(std::span<const double>(v)); };
  CHECK(am({1.0, 3.0, 3.0, 2.0}) == 1);
  CHECK(am({5.0}) == 0);
  CHECK(am({}) == -1);
  CHECK(am({k_nan, k_nan}) == -1);
  CHECK(am({k_nan, 1.0, k_nan, 2.0}) == 3);
  CHECK(am({-k_inf, -k_inf}) == 0);
  CHECK(am({0.0, k_inf, k_inf}) == 1);
}
