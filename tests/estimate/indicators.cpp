// SV's indicators S and A (estimate/indicators.hpp): hand-computed values, the batched form, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "specdec/estimate/indicators.hpp"
#include "specdec/random/stream.hpp"
#include "support/batch_builder.hpp"

namespace {
using specdec::token_id;
namespace est = specdec::estimate;

std::span<const double> sp(const std::vector<double>& v) { return std::span<const double>(v); }
}  // namespace

TEST_CASE("S and A on hand-computed rows", "[estimate][indicators]") {
  const std::vector<double> d{0.5, 0.3, 0.2, 0.0}, c{0.2, 0.3, 0.1, 0.4};
  // S = min(.5,.2) + min(.3,.3) + min(.2,.1) + min(0,.4) = 0.6
  CHECK(est::similarity(sp(d), sp(c)) == Approx(0.6).epsilon(1e-15));
  CHECK(est::similarity(sp(c), sp(d)) == Approx(0.6).epsilon(1e-15));  // symmetric
  CHECK(est::similarity(sp(d), sp(d)) == Approx(1.0).epsilon(1e-15));
  CHECK(est::companion_acceptance(sp(d), sp(c), 0) == Approx(0.4).epsilon(1e-15));  // 0.2 / 0.5
  CHECK(est::companion_acceptance(sp(d), sp(c), 1) == 1.0);                         // P_c == P_d
  CHECK(est::companion_acceptance(sp(d), sp(c), 2) == Approx(0.5).epsilon(1e-15));
  // Disjoint supports: S = 0 and A = 0.
  const std::vector<double> x{1.0, 0.0}, y{0.0, 1.0};
  CHECK(est::similarity(sp(x), sp(y)) == 0.0);
  CHECK(est::companion_acceptance(sp(x), sp(y), 0) == 0.0);
}

TEST_CASE("S = 1 - TV and the batched form equals the per-row one", "[estimate][indicators]") {
  constexpr std::size_t V = 37, n = 9;
  specdec::random::philox_stream s(specdec::random::stream_address{0x1D1CA7, 0, 0, 0, specdec::random::purpose::user});
  std::vector<float> d_rows, c_rows;
  std::vector<token_id> tokens;
  for (std::size_t i = 0; i < n; ++i) {
    const auto d = specdec_test::random_probability_row<float>(s, V, 0.3);
    const auto c = specdec_test::random_probability_row<float>(s, V, 0.3);
    d_rows.insert(d_rows.end(), d.begin(), d.end());
    c_rows.insert(c_rows.end(), c.begin(), c.end());
    token_id t = 0;
    while (d[static_cast<std::size_t>(t)] == 0.0f) ++t;  // a token the draft row can produce
    tokens.push_back(t);
  }
  std::vector<double> S(n), A(n);
  est::compute_indicators(specdec::exec::seq, specdec::row_batch<const float>(d_rows, V),
                          specdec::row_batch<const float>(c_rows, V), std::span<const token_id>(tokens), std::span<double>(S),
                          std::span<double>(A));
  for (std::size_t i = 0; i < n; ++i) {
    const auto d = std::span<const float>(d_rows).subspan(i * V, V), c = std::span<const float>(c_rows).subspan(i * V, V);
    CHECK(S[i] == est::similarity(d, c));
    CHECK(S[i] == Approx(1.0 - specdec::total_variation(d, c)).margin(1e-6));
    CHECK(A[i] == est::companion_acceptance(d, c, tokens[i]));
    CHECK(A[i] >= 0.0);
    CHECK(A[i] <= 1.0);
  }
}

TEST_CASE("indicators: bad input gives clear errors", "[estimate][indicators][bad-input]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> good{0.5, 0.5}, with_nan{nan, 0.5}, with_inf{inf, 0.5}, negative{-0.1, 1.1}, unnormalised{0.5, 0.6},
      zero_first{0.0, 1.0};
  for (const auto* bad : {&with_nan, &with_inf, &negative, &unnormalised}) {
    CHECK_THROWS_AS(est::similarity(sp(*bad), sp(good)), specdec::error);
    CHECK_THROWS_AS(est::similarity(sp(good), sp(*bad)), specdec::error);
  }
  CHECK_THROWS_AS(est::similarity(sp(good), sp(std::vector<double>{1.0})), specdec::error);  // lengths differ
  CHECK_THROWS_AS(est::similarity(std::span<const double>(), std::span<const double>()), specdec::error);
  CHECK_THROWS_AS(est::companion_acceptance(sp(good), sp(good), 2), specdec::error);  // token outside [0, V)
  CHECK_THROWS_AS(est::companion_acceptance(sp(good), sp(good), -1), specdec::error);
  CHECK_THROWS_AS(est::companion_acceptance(sp(zero_first), sp(good), 0), specdec::error);  // P_d(t) = 0: not drafted from it
  CHECK_THROWS_AS(est::companion_acceptance(sp(with_nan), sp(good), 0), specdec::error);
  CHECK_THROWS_AS(est::companion_acceptance(sp(good), sp(with_nan), 0), specdec::error);
  try {
    est::similarity(sp(with_nan), sp(good));
  } catch (const specdec::error& e) {
    CHECK(std::string(e.what()).find("similarity") != std::string::npos);  // the message names the function
  }
  // Shapes of the batched form.
  std::vector<double> S(1), A(1);
  const std::vector<token_id> one{0}, two{0, 1};
  CHECK_THROWS_AS(est::compute_indicators(specdec::exec::seq, specdec::row_batch<const double>(sp(good), 2),
                                          specdec::row_batch<const double>(sp(good), 2), std::span<const token_id>(two),
                                          std::span<double>(S), std::span<double>(A)),
                  specdec::error);
  CHECK_THROWS_AS(est::compute_indicators(specdec::exec::seq, specdec::row_batch<const double>(sp(good), 0),
                                          specdec::row_batch<const double>(sp(good), 0), std::span<const token_id>(one),
                                          std::span<double>(S), std::span<double>(A)),
                  specdec::error);
  CHECK_THROWS_AS(est::compute_indicators(specdec::exec::seq, specdec::row_batch<const double>(sp(good), 2),
                                          specdec::row_batch<const double>(sp(with_nan), 2), std::span<const token_id>(one),
                                          std::span<double>(S), std::span<double>(A)),
                  specdec::error);
  CHECK_NOTHROW(est::compute_indicators(specdec::exec::seq, specdec::row_batch<const double>(sp(good), 2),
                                        specdec::row_batch<const double>(sp(good), 2), std::span<const token_id>(one),
                                        std::span<double>(S), std::span<double>(A)));
  CHECK(S[0] == 1.0);
  CHECK(A[0] == 1.0);
}
