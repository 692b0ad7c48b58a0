// Warpers: temperature, top-k, top-p, min-p, their order, greedy T = 0, and parameter validation.
// Probabilities below are dyadic (sums of powers of two) so that boundary cases are exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/errors.hpp"
#include "specdec/random/stream.hpp"

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

using row = std::vector<double>;

row warp_p(row p, const specdec::warp_params& w, specdec::row_status* status = nullptr) {
  const auto s = specdec::warp_probs(std::span<double>(p), w);
  if (status) *status = s;
  return p;
}

row warp_l(const row& logits, const specdec::warp_params& w, specdec::row_status* status = nullptr) {
  row p(logits.size(), -1.0);
  const auto s = specdec::warp_logits(std::span<const double>(logits), std::span<double>(p), w);
  if (status) *status = s;
  return p;
}

row logs(const row& p) {
  row l(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) l[i] = std::log(p[i]);
  return l;
}

specdec::warp_params top_k(int k) { return {1.0, k, 1.0, 0.0}; }
specdec::warp_params top_p(double p) { return {1.0, 0, p, 0.0}; }
specdec::warp_params min_p(double m) { return {1.0, 0, 1.0, m}; }

void check_rows(const row& got, const row& expected, double tol = 1e-15) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i, got[i], expected[i]);
    CHECK(std::abs(got[i] - expected[i]) <= tol);
  }
}

}  // namespace

TEST_CASE("top-k keeps the k largest, and every tie at the boundary", "[distributions][warp]") {
  const row p{0.25, 0.125, 0.375, 0.125, 0.0625, 0.0625};
  check_rows(warp_p(p, top_k(1)), {0, 0, 1, 0, 0, 0});
  check_rows(warp_p(p, top_k(2)), {0.25 / 0.625, 0, 0.375 / 0.625, 0, 0, 0});
  // k = 3: the 3rd largest (0.125) is tied with the 4th: both kept (4 survivors).
  check_rows(warp_p(p, top_k(3)), {0.25 / 0.875, 0.125 / 0.875, 0.375 / 0.875, 0.125 / 0.875, 0, 0});
  check_rows(warp_p(p, top_k(4)), {0.25 / 0.875, 0.125 / 0.875, 0.375 / 0.875, 0.125 / 0.875, 0, 0});
  // k = 5: tie at 0.0625 keeps all six; k >= V and k = 0 are no-ops.
  for (const int k : {0, 5, 6, 100}) check_rows(warp_p(p, top_k(k)), p);
  // All equal: every token is tied with the k-th.
  check_rows(warp_p({0.25, 0.25, 0.25, 0.25}, top_k(1)), {0.25, 0.25, 0.25, 0.25});
  // keep_top_k does not renormalise.
  row raw = p;
  specdec::keep_top_k(std::span<double>(raw), 2);
  check_rows(raw, {0.25, 0, 0.375, 0, 0, 0});
}

TEST_CASE("top-p keeps the smallest head reaching the mass, with ties", "[distributions][warp]") {
  const row p{0.125, 0.5, 0.25, 0.125};
  // Exactly reaching the mass: 0.5 + 0.25 = 0.75 >= 0.75 stops at the second token.
  check_rows(warp_p(p, top_p(0.75)), {0, 0.5 / 0.75, 0.25 / 0.75, 0});
  check_rows(warp_p(p, top_p(0.5)), {0, 1, 0, 0});
  check_rows(warp_p(p, top_p(0.25)), {0, 1, 0, 0});
  check_rows(warp_p(p, top_p(std::nextafter(0.5, 1.0))), {0, 0.5 / 0.75, 0.25 / 0.75, 0});
  // Just above 0.75: the boundary value 0.125 is tied, so both 0.125 entries are kept (all of p).
  check_rows(warp_p(p, top_p(std::nextafter(0.75, 1.0))), p);
  check_rows(warp_p(p, top_p(1.0)), p);
  // Ties inside the head: {0.5, 0.1875, 0.1875, ...}, top_p 0.6 is reached by the first 0.1875,
  // and its twin is kept too.
  const row t{0.0625, 0.1875, 0.5, 0.1875, 0.0625};
  check_rows(warp_p(t, top_p(0.6)), {0, 0.1875 / 0.875, 0.5 / 0.875, 0.1875 / 0.875, 0});
  // Relative to the row's mass: an unnormalised row (sum 2) behaves like the normalised one.
  row twice = p;
  for (auto& x : twice) x *= 2;
  check_rows(warp_p(twice, top_p(0.75)), {0, 0.5 / 0.75, 0.25 / 0.75, 0});
  // A tiny top_p keeps only the largest token (and its ties).
  check_rows(warp_p({0.375, 0.375, 0.25}, top_p(1e-9)), {0.5, 0.5, 0});
}

TEST_CASE("min-p keeps tokens with p >= min_p * max p", "[distributions][warp]") {
  const row p{0.125, 0.5, 0.25, 0.125};
  check_rows(warp_p(p, min_p(0.3)), {0, 0.5 / 0.75, 0.25 / 0.75, 0});
  check_rows(warp_p(p, min_p(0.25)), p);  // 0.125 == 0.25 * 0.5 is kept
  check_rows(warp_p(p, min_p(std::nextafter(0.25, 1.0))), {0, 0.5 / 0.75, 0.25 / 0.75, 0});
  check_rows(warp_p(p, min_p(1.0)), {0, 1, 0, 0});
  check_rows(warp_p(p, min_p(0.0)), p);
}

TEST_CASE("filters apply in the documented order: top-k, then top-p on the survivors, then min-p", "[distributions][warp]") {
  // p = {0.4, 0.3, 0.2, 0.1}. top-k 2 leaves {0.4, 0.3} (mass 0.7); top-p 0.5 of that is 0.35, reached
  // by 0.4 alone -> one-hot. Applying top-p to the whole row first would keep {0.4, 0.3}.
  const row p{0.1, 0.4, 0.2, 0.3};
  check_rows(warp_l(logs(p), {1.0, 2, 0.5, 0.0}), {0, 1, 0, 0}, 1e-15);
  check_rows(warp_p(p, {1.0, 2, 0.5, 0.0}), {0, 1, 0, 0}, 1e-15);
  // top-k 3 then min-p 0.6: survivors {0.4, 0.3, 0.2}; cut 0.24 removes 0.2.
  check_rows(warp_p(p, {1.0, 3, 1.0, 0.6}), {0, 0.4 / 0.7, 0, 0.3 / 0.7}, 1e-15);
  // Temperature first: T = 0.5 squares the probabilities (16, 9, 4, 1)/30; top-p 0.5 -> 16/30 alone
  // reaches it (at T = 1, 0.4 < 0.5 would not).
  check_rows(warp_p(p, {0.5, 0, 0.5, 0.0}), {0, 1, 0, 0}, 1e-15);
  check_rows(warp_p(p, {1.0, 0, 0.5, 0.0}), {0, 0.4 / 0.7, 0, 0.3 / 0.7}, 1e-15);
}

TEST_CASE("temperature", "[distributions][warp]") {
  const row p{0.1, 0.4, 0.2, 0.3};
  for (const double t : {0.25, 0.5, 2.0, 10.0}) {
    CAPTURE(t);
    // warp_probs: p^(1/T) renormalised; warp_logits: softmax(log p / T). Both agree.
    row expected(p.size());
    double z = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) z += expected[i] = std::pow(p[i], 1.0 / t);
    for (auto& x : expected) x /= z;
    check_rows(warp_p(p, {t, 0, 1.0, 0.0}), expected, 1e-14);
    check_rows(warp_l(logs(p), {t, 0, 1.0, 0.0}), expected, 1e-14);
  }
  // A very small temperature does not underflow to an empty row.
  specdec::row_status s{};
  const auto sharp = warp_p({1e-300, 2e-300}, {1e-3, 0, 1.0, 0.0}, &s);
  CHECK(s == specdec::row_status::ok);
  CHECK(sharp[1] == 1.0);
  // The identity.
  CHECK(specdec::warp_params{}.is_identity());
  CHECK_FALSE(specdec::warp_params{0.9, 0, 1.0, 0.0}.is_identity());
}

TEST_CASE("T = 0 is a one-hot row on the argmax, lowest index on ties", "[distributions][warp]") {
  const specdec::warp_params greedy{0.0, 0, 1.0, 0.0};
  specdec::row_status s{};
  CHECK(warp_l({1.0, 3.0, 3.0, 2.0}, greedy, &s) == row{0, 1, 0, 0});
  CHECK(s == specdec::row_status::ok);
  CHECK(warp_l({-k_inf, -5.0, -k_inf}, greedy) == row{0, 1, 0});
  CHECK(warp_p({0.25, 0.375, 0.375}, greedy, &s) == row{0, 1, 0});
  CHECK(s == specdec::row_status::ok);
  // Filters do not change the argmax: still one-hot.
  CHECK(warp_l({1.0, 3.0, 3.0, 2.0}, {0.0, 1, 0.1, 0.5}) == row{0, 1, 0, 0});
  // Unusable rows.
  CHECK(warp_l({k_nan, 1.0}, greedy, &s) == row{0, 0});
  CHECK(s == specdec::row_status::not_finite);
  CHECK(warp_l({-k_inf, -k_inf}, greedy, &s) == row{0, 0});
  CHECK(s == specdec::row_status::no_mass);
}

TEST_CASE("warping unusable rows", "[distributions][warp]") {
  specdec::row_status s{};
  CHECK(warp_p({0.5, k_nan, 0.5}, {}, &s) == row{0, 0, 0});
  CHECK(s == specdec::row_status::not_finite);
  CHECK(warp_p({0.5, -0.1, 0.6}, {}, &s) == row{0, 0, 0});
  CHECK(s == specdec::row_status::not_finite);
  CHECK(warp_p({0.5, k_inf}, {}, &s) == row{0, 0});
  CHECK(s == specdec::row_status::not_finite);
  warp_p({0.0, 0.0}, {}, &s);
  CHECK(s == specdec::row_status::no_mass);
  CHECK(warp_l({1.0, k_nan}, top_k(1), &s) == row{0, 0});
  CHECK(s == specdec::row_status::not_finite);
  CHECK(warp_l({-k_inf, -k_inf}, top_p(0.9), &s) == row{0, 0});
  CHECK(s == specdec::row_status::no_mass);
}

TEST_CASE("warp_probs: rows whose sum or 1 / sum is not a finite double, temperatures whose inverse is not",
          "[distributions][warp][bad_input]") {
  // Found by the fuzz harness tests/fuzz/warp_and_sample.cpp: a row of subnormal weights (sum below
  // 1 / DBL_MAX) became a row of infinities with status ok, since 1 / sum overflows; a row of entries
  // near DBL_MAX (sum overflows) was reported no_mass and left as it was.
  const double tiny = 0x1p-1070, huge = std::numeric_limits<double>::max();
  for (const auto& w : {specdec::warp_params{}, specdec::warp_params{1.0, 2, 1.0, 0.0}, specdec::warp_params{1.0, 0, 0.9, 0.1}}) {
    specdec::row_status s{};
    const row small = warp_p(row{tiny, 2 * tiny, tiny, 0.0}, w, &s);
    CHECK(s == specdec::row_status::ok);
    CHECK(small[1] == 0.5);
    CHECK(small[3] == 0.0);
    double sum = 0.0;
    for (const double x : small) sum += x;
    CHECK(sum == 1.0);
    const row big = warp_p(row{huge, huge, huge / 2, 0.0}, w, &s);
    CHECK(s == specdec::row_status::ok);
    CHECK(big[0] == (w.top_k == 2 ? 0.5 : 0.4));
    CHECK(big[1] == big[0]);
    CHECK(big[3] == 0.0);
  }
  // A temperature below 1 / DBL_MAX (1 / T overflows): the limit T -> 0+, uniform on the largest entries.
  for (const double t : {0x1p-1070, 1e-310}) {
    specdec::row_status s{};
    const row cold = warp_p(row{0.25, 0.375, 0.375, 0.0}, specdec::warp_params{t, 0, 1.0, 0.0}, &s);
    CHECK(s == specdec::row_status::ok);
    CHECK(cold == row{0.0, 0.5, 0.5, 0.0});
  }
  // float rows: a subnormal float sum is far above 1 / DBL_MAX, and a float sum cannot overflow a double
  std::vector<float> f{0x1p-140f, 0x1p-141f, 0x1p-141f};
  CHECK(specdec::warp_probs(std::span<float>(f), specdec::warp_params{}) == specdec::row_status::ok);
  CHECK(f[0] == 0.5f);
}

TEST_CASE("warping random rows: every survivor is in the mask and the row sums to 1", "[distributions][warp]") {
  specdec::random::philox_stream rng(specdec::random::stream_address{5, 0, 0, 0, specdec::random::purpose::user});
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t V = 1 + static_cast<std::size_t>(rng.uniform() * 200);
    row logits(V);
    for (auto& x : logits) x = 4.0 * (rng.uniform() - 0.5);
    const specdec::warp_params w{0.3 + 2.0 * rng.uniform(), static_cast<int>(rng.uniform() * 20), 0.05 + 0.95 * rng.uniform(),
                                 0.3 * rng.uniform()};
    CAPTURE(trial, V, w.temperature, w.top_k, w.top_p, w.min_p);
    specdec::row_status s{};
    const row p = warp_l(logits, w, &s);
    REQUIRE(s == specdec::row_status::ok);
    row soft(V);
    REQUIRE(specdec::softmax(std::span<const double>(logits), std::span<double>(soft), w.temperature) == specdec::row_status::ok);
    double sum = 0.0, max_soft = 0.0;
    std::size_t kept = 0, strictly_larger_than_min_kept = 0;
    double min_kept = 2.0;
    for (std::size_t v = 0; v < V; ++v) {
      sum += p[v];
      max_soft = std::max(max_soft, soft[v]);
      if (p[v] > 0) {
        ++kept;
        min_kept = std::min(min_kept, soft[v]);
      }
    }
    CHECK(std::abs(sum - 1.0) < 1e-12);
    REQUIRE(kept >= 1);
    for (std::size_t v = 0; v < V; ++v) {
      if (soft[v] > min_kept) {
        ++strictly_larger_than_min_kept;
        CHECK(p[v] > 0);  // the survivors are a head of the sorted row
      }
      if (p[v] > 0) {
        CHECK(soft[v] >= w.min_p * max_soft);
        CHECK(std::abs(p[v] - soft[v] / [&] {
                double z = 0.0;
                for (std::size_t u = 0; u < V; ++u)
                  if (p[u] > 0) z += soft[u];
                return z;
              }()) < 1e-12);  // survivors keep their relative weights
      }
    }
    if (w.top_k > 0) CHECK(strictly_larger_than_min_kept < static_cast<std::size_t>(w.top_k));
  }
}

TEST_CASE("invalid warp parameters throw specdec::error", "[distributions][warp]") {
  const row logits{0.0, 1.0};
  row p{0.5, 0.5}, out(2);
  const std::vector<specdec::warp_params> bad{
      {1.0, 0, 0.0, 0.0},  {1.0, 0, 1.5, 0.0},   {1.0, 0, k_nan, 0.0}, {1.0, 0, -0.5, 0.0},  // top_p
      {1.0, -1, 1.0, 0.0},                                                                   // top_k
      {-1.0, 0, 1.0, 0.0}, {k_nan, 0, 1.0, 0.0}, {k_inf, 0, 1.0, 0.0},                       // temperature
      {1.0, 0, 1.0, 2.0},  {1.0, 0, 1.0, -0.1},  {1.0, 0, 1.0, k_nan},                       // min_p
  };
  for (const auto& w : bad) {
    CAPTURE(w.temperature, w.top_k, w.top_p, w.min_p);
    CHECK_THROWS_AS(specdec::validate(w), specdec::error);
    CHECK_THROWS_AS(specdec::warp_logits(std::span<const double>(logits), std::span<double>(out), w), specdec::error);
    CHECK_THROWS_AS(specdec::warp_probs(std::span<double>(p), w), specdec::error);
  }
  CHECK_NOTHROW(specdec::validate(specdec::warp_params{0.0, 0, 1.0, 1.0}));
  CHECK_THROWS_AS(specdec::keep_top_k(std::span<double>(p), -2), specdec::error);
  CHECK_THROWS_AS(specdec::keep_top_p(std::span<double>(p), 0.0), specdec::error);
  CHECK_THROWS_AS(specdec::keep_min_p(std::span<double>(p), 1.5), specdec::error);
  row wrong(3);
  CHECK_THROWS_AS(specdec::warp_logits(std::span<const double>(logits), std::span<double>(wrong), specdec::warp_params{}),
                  specdec::error);
}
