// Standard speculative decoding closed forms (theory/sd.hpp): Leviathan eq. (1), Thm 3.8, Thm 3.11,
// optimal gamma, acceptance rate 1 - TV; position-dependent acceptance, latency profiles and the
// variance of tokens per iteration. Checked against exact enumeration of the 2^gamma accept/reject
// patterns (long double), against independent long-double formulas, and against a Monte-Carlo
// simulation of the accept/reject chain (Philox, fixed seeds, 5 standard errors).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "monte_carlo.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/errors.hpp"
#include "specdec/theory/sd.hpp"

namespace sd = specdec::theory::sd;
using cspan = std::span<const double>;
using specdec_test::moments;
using specdec_test::within_se;

namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

// Exact law of T by enumerating the 2^gamma accept/reject patterns of the drafts: T = 1 + (index
// of the first rejection), independent positions with P(accept i) = alphas[i]. Moments are taken
// from the law in a second pass (central variance, no cancellation).
struct enumerated {
  long double mean = 0, var = 0, total = 0;
  long double variance() const { return var; }
};
enumerated enumerate_patterns(const std::vector<double>& alphas) {
  const std::size_t g = alphas.size();
  std::vector<long double> law(g + 2, 0.0L);
  for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << g); ++mask) {
    long double prob = 1;
    std::size_t accepted = 0;
    bool stopped = false;
    for (std::size_t i = 0; i < g; ++i) {
      const bool acc = (mask >> i) & 1u;
      prob *= acc ? static_cast<long double>(alphas[i]) : 1.0L - alphas[i];
      if (!stopped && acc) ++accepted;
      if (!acc) stopped = true;
    }
    law[1 + accepted] += prob;
  }
  enumerated e;
  for (std::size_t t = 0; t < law.size(); ++t) {
    e.total += law[t];
    e.mean += law[t] * t;
  }
  for (std::size_t t = 0; t < law.size(); ++t) e.var += law[t] * (t - e.mean) * (t - e.mean);
  return e;
}

// Var(T) by the direct O(gamma) sum in long double (independent of the library's sinh form).
long double variance_by_sum(long double a, std::size_t n) {
  long double s1 = 0, s2 = 0, t = 1;
  for (std::size_t k = 1; k <= n; ++k) {
    t *= a;
    s1 += t;
    s2 += (2.0L * k - 1.0L) * t;
  }
  return s2 - s1 * s1;
}

double rel_err(double got, long double want) {
  if (want == 0) return std::abs(got);
  return static_cast<double>(std::abs((got - want) / want));
}

// One simulated iteration: drafts accepted left to right with probabilities alphas; returns T.
template <class Stream>
int simulate_iteration(Stream& s, std::span<const double> alphas) {
  int t = 1;
  for (const double a : alphas) {
    if (!(s.uniform() < a)) break;
    ++t;
  }
  return t;
}

}  // namespace

TEST_CASE("expected_tokens equals enumeration of accept/reject patterns and Leviathan eq. (1)", "[theory][sd]") {
  const std::array<double, 9> alphas{0.0, 1e-9, 0.1, 0.37, 0.5, 0.8, 0.99, 1.0 - 1e-12, 1.0};
  for (const double a : alphas) {
    for (std::size_t gamma = 0; gamma <= 12; ++gamma) {
      CAPTURE(a, gamma);
      const enumerated e = enumerate_patterns(std::vector<double>(gamma, a));
      CHECK(std::abs(static_cast<double>(e.total) - 1.0) < 1e-15);
      CHECK(rel_err(sd::expected_tokens(a, gamma), e.mean) < 1e-14);
      CHECK(rel_err(sd::tokens_variance(a, gamma), e.variance()) < 1e-12);
      // eq. (1) literally, in long double, away from alpha = 1.
      if (a < 0.999) {
        const long double lit = (1.0L - std::pow(static_cast<long double>(a), gamma + 1)) / (1.0L - a);
        CHECK(rel_err(sd::expected_tokens(a, gamma), lit) < 1e-14);
      }
    }
  }
}

TEST_CASE("expected_tokens at the edges: alpha -> 1, huge gamma, gamma = 0", "[theory][sd]") {
  CHECK(sd::expected_tokens(1.0, 7) == 8.0);
  CHECK(sd::expected_tokens(0.0, 7) == 1.0);
  CHECK(sd::expected_tokens(0.6, 0) == 1.0);
  // alpha = 1 - 1e-12: the naive (1 - a^(g+1))/(1 - a) loses ~4 digits; the expm1 form keeps all.
  const double a = 1.0 - 1e-12;
  for (const std::size_t gamma : {1u, 5u, 100u, 100000u}) {
    long double sum = 0, t = 1;
    for (std::size_t k = 0; k <= gamma; ++k, t *= a) sum += t;
    CAPTURE(gamma);
    CHECK(rel_err(sd::expected_tokens(a, gamma), sum) < 1e-14);
  }
  // Huge gamma: limit 1/(1 - a), finite, no overflow of gamma + 1. INT_MAX (the int lengths' largest):
  // (gamma + 1) log(a) is still ~ -2e-3 at a = 1 - 1e-12, so the expm1 form is tested, not a limit.
  const auto big = static_cast<std::size_t>(std::numeric_limits<int>::max());
  CHECK(rel_err(sd::expected_tokens(0.9, big), 10.0L) < 1e-14);
  CHECK(sd::expected_tokens(1.0, big) == 2147483648.0);
  const long double d = 1.0L - a;  // exact: a is the double nearest 1 - 1e-12
  const long double ref = -std::expm1l((big + 1.0L) * std::log1pl(-d)) / d;
  CHECK(rel_err(sd::expected_tokens(a, big), ref) < 1e-14);
  CHECK(std::isfinite(sd::speedup(a, big, 0.01)));
  // SIZE_MAX: beyond the closed forms' int64 (clamped there, where alpha^gamma is 0 in double) and
  // gamma + 1 wraps to 0 in std::size_t; P(T = k) must not use it.
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  CHECK(rel_err(sd::expected_tokens(0.9, huge), 10.0L) < 1e-14);
  CHECK(sd::expected_tokens(1.0, huge) == 0x1p64);
  CHECK(rel_err(sd::expected_tokens(a, huge), 1.0L / d) < 1e-14);
  CHECK(rel_err(sd::tokens_variance(0.5, huge), 2.0L) < 1e-14);
  CHECK(sd::prob_tokens(1, 0.5, huge) == 0.5);
  CHECK(sd::prob_tokens(3, 0.5, huge) == 0.125);
  CHECK(sd::prob_tokens(huge, 1.0, huge) == 0.0);
  CHECK(sd::prob_tokens(huge, 1.0, huge - 1) == 1.0);
  // The constant-evaluation path (Horner) agrees with the run-time path (expm1).
  constexpr double ce = sd::expected_tokens(0.7, 9);
  CHECK(rel_err(ce, sd::expected_tokens(0.7, 9)) < 1e-15);
}

TEST_CASE("prob_tokens is a distribution whose mean and variance are the closed forms", "[theory][sd]") {
  for (const double a : {0.0, 0.25, 0.5, 0.9, 1.0 - 1e-12, 1.0}) {
    for (const std::size_t gamma : {0u, 1u, 2u, 7u, 40u}) {
      CAPTURE(a, gamma);
      long double total = 0, mean = 0, second = 0;
      for (std::size_t k = 0; k <= gamma + 3; ++k) {
        const long double pk = sd::prob_tokens(k, a, gamma);
        CHECK(pk >= 0);
        total += pk;
        mean += k * pk;
        second += static_cast<long double>(k) * k * pk;
      }
      CHECK(std::abs(static_cast<double>(total) - 1.0) < 1e-14);
      CHECK(rel_err(sd::expected_tokens(a, gamma), mean) < 1e-13);
      const long double var = second - mean * mean;
      CHECK(std::abs(sd::tokens_variance(a, gamma) - static_cast<double>(var)) < 1e-9 * (1 + mean * mean));
    }
  }
}

TEST_CASE("tokens_variance: accurate for every alpha and gamma, limits", "[theory][sd]") {
  // Grid against the long-double O(gamma) sum (which is accurate away from alpha = 1).
  for (const double a : {1e-300, 1e-6, 0.01, 0.2, 0.5, 0.75, 0.9, 0.97}) {
    for (const std::size_t gamma : {1u, 2u, 3u, 5u, 10u, 31u, 100u, 1000u}) {
      CAPTURE(a, gamma);
      CHECK(rel_err(sd::tokens_variance(a, gamma), variance_by_sum(a, gamma)) < 1e-12);
    }
  }
  // A dense sweep across the switch between the series (x = (2 gamma + 1) w < 3) and direct forms.
  double worst = 0;
  for (int i = 0; i < 60; ++i) {
    const double a = 1.0 - std::pow(10.0, -0.05 * i - 0.3);  // 0.5 .. 1 - 1e-3.25
    for (std::size_t gamma = 1; gamma <= 300; gamma += (gamma < 40 ? 1u : 7u))
      worst = std::max(worst, rel_err(sd::tokens_variance(a, gamma), variance_by_sum(a, gamma)));
  }
  CHECK(worst < 1e-12);
  // gamma = 1: Bernoulli variance; gamma -> infinity: geometric a / (1 - a)^2.
  for (const double a : {0.1, 0.5, 0.9, 0.999}) {
    CHECK(rel_err(sd::tokens_variance(a, 1), static_cast<long double>(a) * (1.0L - a)) < 1e-13);
    CHECK(rel_err(sd::tokens_variance(a, std::size_t{std::numeric_limits<int>::max()}),
                  static_cast<long double>(a) / ((1.0L - a) * (1.0L - a))) < 1e-10);
  }
  // alpha = 1 - 1e-12: Var ~ u * sum k^2 to first order in u = -log(alpha); the textbook formula
  // returns noise here, the library keeps full relative accuracy.
  const double a = 1.0 - 1e-12;
  const long double u = -std::log1pl(-(1.0L - a));  // 1 - a is exact in long double
  for (const std::size_t gamma : {1u, 5u, 50u}) {
    const long double sum_k2 = static_cast<long double>(gamma) * (gamma + 1) * (2 * gamma + 1) / 6;
    CAPTURE(gamma);
    CHECK(rel_err(sd::tokens_variance(a, gamma), u * sum_k2) < 1e-9);
  }
  CHECK(sd::tokens_variance(1.0, 10) == 0.0);
  CHECK(sd::tokens_variance(0.0, 10) == 0.0);
  CHECK(sd::tokens_variance(0.5, 0) == 0.0);
  CHECK(std::isfinite(sd::tokens_variance(a, std::size_t{std::numeric_limits<int>::max()})));
  CHECK(sd::tokens_variance(a, std::size_t{std::numeric_limits<int>::max()}) > 0.0);
  // Constant evaluation (covariance sum) agrees with the run-time sinh/series form.
  constexpr double ce = sd::tokens_variance(0.8, 12);
  CHECK(rel_err(ce, sd::tokens_variance(0.8, 12)) < 1e-13);
}

TEST_CASE("position-dependent acceptance: enumeration, reduction to eq. (1)", "[theory][sd]") {
  const std::vector<std::vector<double>> cases{{},
                                               {0.3},
                                               {0.9, 0.8, 0.7, 0.6, 0.5},
                                               {1.0, 1.0, 0.0, 0.9},
                                               {0.99, 1.0 - 1e-12, 0.5, 0.25, 1.0, 0.75, 0.6, 0.1},
                                               {0.0, 0.5},
                                               {1.0, 1.0, 1.0}};
  for (const auto& alphas : cases) {
    CAPTURE(alphas);
    const enumerated e = enumerate_patterns(alphas);
    CHECK(rel_err(sd::expected_tokens(cspan(alphas)), e.mean) < 1e-14);
    CHECK(std::abs(sd::tokens_variance(cspan(alphas)) - static_cast<double>(e.variance())) < 1e-13);
  }
  for (const double a : {0.0, 0.4, 0.8, 1.0 - 1e-12, 1.0}) {
    for (const std::size_t gamma : {0u, 1u, 6u, 64u}) {
      const std::vector<double> alphas(gamma, a);
      CAPTURE(a, gamma);
      CHECK(rel_err(sd::expected_tokens(cspan(alphas)), sd::expected_tokens(a, gamma)) < 1e-13);
      CHECK(rel_err(sd::tokens_variance(cspan(alphas)), sd::tokens_variance(a, gamma)) < 1e-10);
      CHECK(rel_err(sd::speedup(cspan(alphas), 0.1), sd::speedup(a, gamma, 0.1)) < 1e-13);
      CHECK(rel_err(sd::operations_factor(cspan(alphas), 0.1), sd::operations_factor(a, gamma, 0.1)) < 1e-13);
    }
  }
}

TEST_CASE("Monte-Carlo: tokens per iteration, i.i.d. and position-dependent", "[theory][sd][montecarlo]") {
  constexpr std::uint64_t seed = 20240917;
  constexpr int n = 400000;
  std::cout << "sd Monte-Carlo: seed " << seed << ", " << n << " iterations per case\n";
  const std::vector<std::vector<double>> cases{std::vector<double>(4, 0.8),
                                               std::vector<double>(8, 0.5),
                                               {0.95, 0.9, 0.8, 0.6, 0.4, 0.3},
                                               std::vector<double>(3, 1.0 - 1e-12),
                                               {0.0, 0.9},
                                               std::vector<double>(1, 0.3)};
  std::uint32_t request = 0;
  for (const auto& alphas : cases) {
    CAPTURE(alphas);
    auto s = specdec_test::mc_stream(seed, request++);
    const double mean = sd::expected_tokens(cspan(alphas));
    const double var = sd::tokens_variance(cspan(alphas));
    moments m(mean);
    for (int i = 0; i < n; ++i) m.add(simulate_iteration(s, cspan(alphas)));
    CHECK(within_se("E[T]", m.mean(), mean, m.se_mean()));
    CHECK(within_se("Var(T)", m.variance(), var, m.se_variance()));
    bool constant = true;
    for (const double a : alphas) constant = constant && a == alphas[0];
    if (constant) {
      const std::size_t gamma = alphas.size();
      CHECK(within_se("E[T] eq. (1)", m.mean(), sd::expected_tokens(alphas[0], gamma), m.se_mean()));
      CHECK(within_se("Var(T) closed form", m.variance(), sd::tokens_variance(alphas[0], gamma), m.se_variance()));
    }
  }
}

TEST_CASE("speedup (Thm 3.8), operations factor (Thm 3.11) and latency profiles", "[theory][sd]") {
  for (const double a : {0.0, 0.3, 0.7, 0.95, 1.0}) {
    for (const std::size_t gamma : {0u, 1u, 3u, 8u}) {
      for (const double c : {0.0, 0.05, 0.5, 2.0}) {
        CAPTURE(a, gamma, c);
        const long double e = sd::expected_tokens(a, gamma);
        CHECK(rel_err(sd::speedup(a, gamma, c), e / (gamma * static_cast<long double>(c) + 1)) < 1e-15);
        CHECK(rel_err(sd::operations_factor(a, gamma, c), (gamma * static_cast<long double>(c) + gamma + 1) / e) < 1e-15);
        if (a < 1.0) {
          const long double lit = (1.0L - std::pow(static_cast<long double>(a), gamma + 1)) /
                                  ((1.0L - a) * (gamma * static_cast<long double>(c) + 1));
          CHECK(rel_err(sd::speedup(a, gamma, c), lit) < 1e-14);
        }
        // A constant latency profile with t_draft = c t_target reproduces Thm 3.8 (callable, vector, array).
        const double t_target = 3.5;
        const auto flat = [&](int) { return t_target; };
        const std::vector<double> vec(gamma + 1, t_target);
        CHECK(rel_err(sd::speedup(a, gamma, c * t_target, flat), sd::speedup(a, gamma, c)) < 1e-15);
        CHECK(rel_err(sd::speedup(a, gamma, c * t_target, vec), sd::speedup(a, gamma, c)) < 1e-15);
        const std::vector<double> alphas(gamma, a);
        CHECK(rel_err(sd::speedup(cspan(alphas), c * t_target, flat), sd::speedup(a, gamma, c)) < 1e-15);
      }
    }
  }
  // A growing profile: t_target(k) = 1 + 0.1 k (compute-bound growth) and t_draft = 0.05.
  const auto growing = [](int k) { return 1.0 + 0.1 * k; };
  const std::vector<double> alphas{0.9, 0.85, 0.8, 0.7};
  const double expect = sd::expected_tokens(cspan(alphas)) * 1.0 / (4 * 0.05 + 1.4);
  CHECK(rel_err(sd::speedup(cspan(alphas), 0.05, growing), expect) < 1e-15);
  CHECK(rel_err(sd::speedup(0.8, 4, 0.05, growing), sd::expected_tokens(0.8, 4) / (4 * 0.05 + 1.4)) < 1e-15);
  const std::array<double, 5> arr{1.0, 1.1, 1.2, 1.3, 1.4};
  CHECK(rel_err(sd::speedup(cspan(alphas), 0.05, arr), expect) < 1e-15);
  // Errors: a span profile too short, a non-positive or NaN latency, a negative t_draft.
  const std::vector<double> short_profile{1.0, 1.0};
  CHECK_THROWS_AS(sd::speedup(cspan(alphas), 0.05, short_profile), specdec::error);
  CHECK_THROWS_AS(sd::speedup(0.5, 2, 0.1, [](int) { return 0.0; }), specdec::error);
  CHECK_THROWS_AS(sd::speedup(0.5, 2, 0.1, [](int) { return nan_v; }), specdec::error);
  CHECK_THROWS_AS(sd::speedup(0.5, 2, -0.1, growing), specdec::error);
  CHECK_THROWS_AS(sd::speedup(0.5, 2, inf_v, growing), specdec::error);
}

TEST_CASE("optimal_gamma maximises speedup, smallest on ties; Corollary 3.9", "[theory][sd]") {
  for (const double a : {0.0, 0.1, 0.3, 0.5, 0.6, 0.8, 0.9, 0.95, 0.99, 1.0}) {
    for (const double c : {0.0, 0.01, 0.05, 0.1, 0.3, 0.5, 1.0}) {
      CAPTURE(a, c);
      const std::size_t g = sd::optimal_gamma(a, c);
      REQUIRE(g <= 128);
      double best = -1;
      std::size_t arg = 129;
      for (std::size_t gamma = 0; gamma <= 128; ++gamma) {
        const double s = sd::speedup(a, gamma, c);
        if (s > best) {
          best = s;
          arg = gamma;
        }
      }
      CHECK(g == arg);
      // alpha <= c: never speculate; alpha > c: at least (1 + alpha)/(1 + c) (Leviathan Cor. 3.9).
      if (a <= c) CHECK(g == 0);
      if (a > c) {
        CHECK(g >= 1);
        CHECK(sd::speedup(a, g, c) >= (1 + a) / (1 + c) * (1 - 1e-15));
      }
    }
  }
  CHECK(sd::optimal_gamma(1.0, 0.0) == 128);
  CHECK(sd::optimal_gamma(1.0, 0.0, 7) == 7);
  CHECK(sd::optimal_gamma(0.0, 0.0) == 0);  // every gamma ties at speedup 1
  CHECK(sd::optimal_gamma(0.8, 0.05, 0) == 0);
  CHECK_THROWS_AS(sd::optimal_gamma(1.2, 0.05), specdec::error);
  CHECK_THROWS_AS(sd::optimal_gamma(0.8, -0.05), specdec::error);
}

TEST_CASE("acceptance_rate(p, q) = 1 - TV(p, q), float rows, Monte-Carlo", "[theory][sd]") {
  const std::vector<double> p{0.5, 0.2, 0.15, 0.1, 0.05, 0.0};
  const std::vector<double> q{0.1, 0.3, 0.3, 0.1, 0.0, 0.2};
  const double beta = sd::acceptance_rate(cspan(p), cspan(q));
  CHECK(std::abs(beta - (1.0 - specdec::total_variation(cspan(p), cspan(q)))) < 1e-15);
  CHECK(std::abs(beta - 0.55) < 1e-15);
  CHECK(sd::acceptance_rate(cspan(p), cspan(p)) == 1.0);
  CHECK(beta == sd::acceptance_rate(cspan(q), cspan(p)));
  const std::vector<double> a{1.0, 0.0}, b{0.0, 1.0};
  CHECK(sd::acceptance_rate(cspan(a), cspan(b)) == 0.0);
  const std::vector<float> pf(p.begin(), p.end()), qf(q.begin(), q.end());
  CHECK(std::abs(sd::acceptance_rate(std::span<const float>(pf), std::span<const float>(qf)) - 0.55) < 1e-7);

  // Monte-Carlo: x ~ q, accepted with probability min(1, p(x)/q(x)).
  constexpr std::uint64_t seed = 777;
  constexpr int n = 400000;
  std::cout << "acceptance-rate Monte-Carlo: seed " << seed << ", " << n << " draws\n";
  auto s = specdec_test::mc_stream(seed, 0);
  moments m(beta);
  for (int i = 0; i < n; ++i) {
    double u = s.uniform(), cum = 0;
    std::size_t x = 0;
    while (x + 1 < q.size() && u >= (cum += q[x])) ++x;
    while (q[x] == 0.0) --x;  // rounding guard: never pick a zero-probability token
    m.add(s.uniform() * q[x] < p[x] ? 1.0 : 0.0);
  }
  CHECK(within_se("beta", m.mean(), beta, m.se_mean()));

  // Errors: length mismatch, empty, NaN, negative, > 1, not normalised.
  const std::vector<double> shorter{0.5, 0.5};
  CHECK_THROWS_AS(sd::acceptance_rate(cspan(p), cspan(shorter)), specdec::error);
  CHECK_THROWS_AS(sd::acceptance_rate(cspan(), cspan()), specdec::error);
  const std::vector<double> with_nan{nan_v, 1.0}, neg{-0.1, 1.1}, unnorm{0.5, 0.4}, half{0.5, 0.5};
  CHECK_THROWS_AS(sd::acceptance_rate(cspan(with_nan), cspan(half)), specdec::error);
  CHECK_THROWS_AS(sd::acceptance_rate(cspan(neg), cspan(half)), specdec::error);
  CHECK_THROWS_AS(sd::acceptance_rate(cspan(half), cspan(unnorm)), specdec::error);
  const std::vector<float> unnorm_f{0.5f, 0.49f}, half_f{0.5f, 0.5f};
  CHECK_THROWS_AS(sd::acceptance_rate(std::span<const float>(unnorm_f), std::span<const float>(half_f)), specdec::error);
}

TEST_CASE("invalid arguments throw specdec::error", "[theory][sd]") {
  for (const double bad : {nan_v, -0.1, 1.0 + 1e-15, inf_v}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(sd::expected_tokens(bad, 3), specdec::error);
    CHECK_THROWS_AS(sd::tokens_variance(bad, 3), specdec::error);
    CHECK_THROWS_AS(sd::prob_tokens(1, bad, 3), specdec::error);
    CHECK_THROWS_AS(sd::speedup(bad, 3, 0.1), specdec::error);
    CHECK_THROWS_AS(sd::operations_factor(bad, 3, 0.1), specdec::error);
    const std::vector<double> alphas{0.5, bad};
    CHECK_THROWS_AS(sd::expected_tokens(cspan(alphas)), specdec::error);
    CHECK_THROWS_AS(sd::tokens_variance(cspan(alphas)), specdec::error);
    CHECK_THROWS_AS(sd::speedup(cspan(alphas), 0.1), specdec::error);
  }
  CHECK_THROWS_AS(sd::speedup(0.5, 3, -1.0), specdec::error);
  CHECK_THROWS_AS(sd::speedup(0.5, 3, nan_v), specdec::error);
  CHECK_THROWS_AS(sd::operations_factor(0.5, 3, inf_v), specdec::error);
  // The message names the function.
  try {
    (void)sd::expected_tokens(2.0, 3);
    FAIL("no exception");
  } catch (const specdec::error& e) {
    CHECK(std::string(e.what()).find("expected_tokens") != std::string::npos);
  }
}
