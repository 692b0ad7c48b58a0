// SPRINTER closed forms (theory/sprinter.hpp): Theorem 3.1 (token distribution and its TV to p),
// Theorem A.4 (acceptance rate), Theorem 3.3 (law and mean of N, eq. (3)), Theorem 3.4 (expected
// stopping time, eq. (4)), the variance of N, and the FLOPs of eqs. (5)-(6). Checked against exact
// enumeration of the processes the theorems describe and against Monte-Carlo simulations of them
// (Philox, fixed seeds printed, 5 standard errors).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "monte_carlo.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/errors.hpp"
#include "specdec/theory/sd.hpp"
#include "specdec/theory/sprinter.hpp"

namespace sprinter = specdec::theory::sprinter;
using cspan = std::span<const double>;
using specdec_test::moments;
using specdec_test::within_se;

namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();

double rel_err(double got, long double want) {
  if (want == 0) return std::abs(got);
  return static_cast<double>(std::abs((got - want) / want));
}

// The exact output distribution and keep-probability of one SPRINTER position (proof A.1): x ~ q;
// acceptable x (q <= p) is kept whether the verifier accepts it (eta_tp) or sends it to the target
// (which keeps it since p/q >= 1); unacceptable x is kept by a verifier false positive (eta_fp) or
// by the target with probability p/q, else replaced by a draw from norm(max(0, p - q)).
struct one_position {
  std::vector<long double> out;
  long double kept = 0;
};
one_position enumerate_position(const std::vector<double>& p, const std::vector<double>& q, double eta_tp, double eta_fp) {
  const std::size_t n = p.size();
  one_position r;
  r.out.assign(n, 0.0L);
  long double residual_mass = 0, to_residual = 0;
  for (std::size_t y = 0; y < n; ++y) residual_mass += std::max(0.0L, static_cast<long double>(p[y]) - q[y]);
  for (std::size_t x = 0; x < n; ++x) {
    if (q[x] == 0.0) continue;
    if (q[x] <= p[x]) {
      const long double keep = eta_tp + (1.0L - eta_tp) * 1.0L;  // verifier or target keeps it
      r.out[x] += q[x] * keep;
      r.kept += q[x] * keep;
    } else {
      const long double ratio = static_cast<long double>(p[x]) / q[x];
      const long double keep = eta_fp + (1.0L - eta_fp) * ratio;
      r.out[x] += q[x] * keep;
      r.kept += q[x] * keep;
      to_residual += q[x] * (1.0L - eta_fp) * (1.0L - ratio);
    }
  }
  for (std::size_t y = 0; y < n; ++y)
    if (residual_mass > 0) r.out[y] += to_residual * std::max(0.0L, static_cast<long double>(p[y]) - q[y]) / residual_mass;
  return r;
}

// P(N = i) by walking the verifier's decisions: position k (1-based) is acceptable iff k <= r and
// passes with eta_tp, else eta_fp; N = i means i passes then a rejection.
long double law_by_walk(int i, long double tp, long double fp, int r) {
  long double prob = 1;
  for (int k = 1; k <= i; ++k) prob *= (k <= r ? tp : fp);
  return prob * (1.0L - (i + 1 <= r ? tp : fp));
}

// Simulates N: verifier decisions until the first rejection.
template <class Stream>
int simulate_n(Stream& s, double tp, double fp, int r) {
  int n = 0;
  while (s.uniform() < (n + 1 <= r ? tp : fp)) ++n;
  return n;
}

struct rows {
  std::vector<double> p, q;
};
std::vector<rows> row_pairs() {
  return {
      {{0.5, 0.2, 0.15, 0.1, 0.05, 0.0}, {0.1, 0.3, 0.3, 0.1, 0.0, 0.2}},
      {{0.25, 0.25, 0.25, 0.25}, {0.7, 0.1, 0.1, 0.1}},
      {{1.0, 0.0, 0.0}, {0.0, 0.5, 0.5}},  // disjoint supports, TV = 1
      {{0.3, 0.3, 0.4}, {0.3, 0.3, 0.4}},  // p = q
  };
}

}  // namespace

TEST_CASE("Theorem 3.1: token distribution equals the enumerated SPRINTER step; TV = eta_fp TV(p, q)", "[theory][sprinter]") {
  for (const auto& [p, q] : row_pairs()) {
    const double tv = specdec::total_variation(cspan(p), cspan(q));
    for (const double fp : {0.0, 1e-12, 0.1, 0.5, 0.9, 1.0}) {
      for (const double tp : {0.0, 0.3, 0.8, 1.0}) {
        CAPTURE(p, q, fp, tp);
        std::vector<double> out(p.size());
        sprinter::token_distribution(cspan(p), cspan(q), fp, std::span<double>(out));
        const one_position e = enumerate_position(p, q, tp, fp);
        long double sum = 0;
        for (std::size_t x = 0; x < p.size(); ++x) {
          CHECK(std::abs(out[x] - static_cast<double>(e.out[x])) < 1e-15);
          sum += out[x];
        }
        CHECK(std::abs(static_cast<double>(sum) - 1.0) < 1e-15);
        CHECK(std::abs(specdec::total_variation(cspan(p), cspan(out)) - sprinter::total_variation(fp, tv)) < 1e-15);
        // Theorem A.4: the probability that the draft token is kept.
        CHECK(std::abs(static_cast<double>(e.kept) - sprinter::acceptance_rate(fp, tv)) < 1e-15);
      }
      // Edges: eta_fp = 0 gives p (lossless), eta_fp = 1 gives q.
      std::vector<double> out(p.size());
      sprinter::token_distribution(cspan(p), cspan(q), 0.0, std::span<double>(out));
      CHECK(out == p);
      sprinter::token_distribution(cspan(p), cspan(q), 1.0, std::span<double>(out));
      CHECK(out == q);
    }
  }
  // float rows, and aliasing out = p.
  std::vector<float> pf{0.5f, 0.25f, 0.25f}, qf{0.25f, 0.25f, 0.5f};
  std::vector<float> outf(3);
  sprinter::token_distribution(std::span<const float>(pf), std::span<const float>(qf), 0.5, std::span<float>(outf));
  CHECK(outf[0] == 0.375f);
  CHECK(outf[2] == 0.375f);
  std::vector<double> pa{0.5, 0.25, 0.25}, qa{0.25, 0.25, 0.5};
  sprinter::token_distribution(cspan(pa), cspan(qa), 0.5, std::span<double>(pa));
  CHECK(pa == std::vector<double>{0.375, 0.25, 0.375});
  // Remark A.5: eta_fp = 0 gives standard SD's acceptance rate.
  CHECK(sprinter::acceptance_rate(0.0, 0.3) == 1.0 - 0.3);
  CHECK(sprinter::total_variation(1.0, 0.3) == 0.3);
}

TEST_CASE("Theorem 3.1 / A.4: Monte-Carlo of one SPRINTER position", "[theory][sprinter][montecarlo]") {
  constexpr std::uint64_t seed = 31;
  constexpr int n = 500000;
  std::cout << "SPRINTER one-position Monte-Carlo: seed " << seed << ", " << n << " draws per case\n";
  const std::vector<double> p{0.5, 0.2, 0.15, 0.1, 0.05, 0.0}, q{0.1, 0.3, 0.3, 0.1, 0.0, 0.2};
  const double tv = specdec::total_variation(cspan(p), cspan(q));
  std::vector<double> residual(p.size());
  double mass = 0;
  for (std::size_t y = 0; y < p.size(); ++y) mass += residual[y] = std::max(0.0, p[y] - q[y]);
  const auto draw = [](auto& s, const std::vector<double>& w, double total) {
    double u = s.uniform() * total, cum = 0;
    std::size_t x = 0;
    while (x + 1 < w.size() && u >= (cum += w[x])) ++x;
    while (w[x] == 0.0) --x;
    return x;
  };
  std::uint32_t request = 0;
  for (const auto& [tp, fp] : {std::pair{0.9, 0.3}, std::pair{0.5, 0.5}, std::pair{1.0, 0.0}}) {
    CAPTURE(tp, fp);
    auto s = specdec_test::mc_stream(seed, request++);
    std::vector<double> theory(p.size());
    sprinter::token_distribution(cspan(p), cspan(q), fp, std::span<double>(theory));
    std::vector<std::uint64_t> counts(p.size(), 0);
    moments kept(sprinter::acceptance_rate(fp, tv));
    for (int i = 0; i < n; ++i) {
      const std::size_t x = draw(s, q, 1.0);
      const bool acceptable = q[x] <= p[x];
      const bool verifier_accepts = s.uniform() < (acceptable ? tp : fp);
      std::size_t y = x;
      bool keep = true;
      if (!verifier_accepts && s.uniform() * q[x] >= p[x]) {  // target rejects
        keep = false;
        y = draw(s, residual, mass);
      }
      kept.add(keep ? 1.0 : 0.0);
      ++counts[y];
    }
    CHECK(within_se("beta_SPRINTER (Thm A.4)", kept.mean(), sprinter::acceptance_rate(fp, tv), kept.se_mean()));
    for (std::size_t y = 0; y < p.size(); ++y) {
      const double f = static_cast<double>(counts[y]) / n;
      const double se = std::sqrt(theory[y] * (1 - theory[y]) / n);
      CHECK(within_se("p_SPRINTER(" + std::to_string(y) + ") (Thm 3.1)", f, theory[y], se));
    }
  }
}

TEST_CASE("Theorem 3.3: P(N = i) sums to 1, matches the decision walk, mean is eq. (3)", "[theory][sprinter]") {
  const std::array<double, 7> tps{0.0, 0.2, 0.5, 0.8, 0.95, 1.0 - 1e-12, 1.0};
  const std::array<double, 6> fps{0.0, 1e-12, 0.1, 0.5, 0.8, 0.95};
  for (const double tp : tps) {
    for (const double fp : fps) {
      for (const int r : {0, 1, 2, 5, 12}) {
        CAPTURE(tp, fp, r);
        // Sum the law up to a cut-off and add the exact tail P(N >= cut) = tp^r fp^(cut - r).
        const int cut = r + 4000;
        long double total = 0, mean = 0;
        std::vector<long double> law(static_cast<std::size_t>(cut), 0.0L);
        for (int i = 0; i < cut; ++i) {
          const double pi = sprinter::prob_tokens(i, tp, fp, r);
          CHECK(pi >= 0.0);
          law[static_cast<std::size_t>(i)] = pi;
          total += pi;
          mean += static_cast<long double>(i) * pi;
          if (i <= r + 40) CHECK(std::abs(pi - static_cast<double>(law_by_walk(i, tp, fp, r))) < 1e-15);
        }
        const long double tail = std::pow(static_cast<long double>(tp), r) * std::pow(static_cast<long double>(fp), cut - r);
        CHECK(std::abs(static_cast<double>(total + tail) - 1.0) < 1e-13);
        // eq. (3) literally, in long double, where it does not cancel badly (the library's form is
        // exact at tp = 1, where eq. (3)'s first term is 0/0 -> r - 1); always against the law's mean.
        const long double tpr = std::pow(static_cast<long double>(tp), r);
        if (tp < 0.999) {
          const long double eq3 = (tp - tpr) / (1.0L - tp) + tpr / (1.0L - fp);
          CHECK(std::abs(sprinter::expected_tokens(tp, fp, r) - static_cast<double>(eq3)) < 1e-13 * (1.0 + eq3));
        }
        CHECK(rel_err(sprinter::expected_tokens(tp, fp, r), mean) < 1e-12);
        // Variance: central second moment of the law.
        long double var = 0;
        for (int i = 0; i < cut; ++i) var += law[static_cast<std::size_t>(i)] * (i - mean) * (i - mean);
        CHECK(std::abs(sprinter::tokens_variance(tp, fp, r) - static_cast<double>(var)) <
              1e-11 * (1.0 + static_cast<double>(var)));
        // eq. (4): expected stopping time, literal and as t_d E[N + 1].
        const double td = 0.1;
        if (tp < 0.999) {
          const long double eq4 = (1.0L - tpr) * td / (1.0L - tp) + tpr * td / (1.0L - fp);
          CHECK(rel_err(sprinter::expected_stopping_time(tp, fp, r, td), eq4) < 1e-13);
        }
        CHECK(rel_err(sprinter::expected_stopping_time(tp, fp, r, td), td * (mean + 1.0L)) < 1e-12);
      }
    }
  }
}

TEST_CASE("Theorem 3.3 / 3.4 edges: perfect verifier, eta_tp -> 1, eta_fp -> 0, large r", "[theory][sprinter]") {
  CHECK(sprinter::expected_tokens(1.0, 0.0, 5) == 5.0);  // stops exactly at r
  CHECK(sprinter::tokens_variance(1.0, 0.0, 5) == 0.0);
  CHECK(sprinter::expected_tokens(0.0, 0.3, 5) == 0.0);  // rejects the first token
  CHECK(sprinter::expected_tokens(0.0, 1.0, 5) == 0.0);  // eta_fp = 1 is harmless here
  CHECK(sprinter::tokens_variance(0.0, 1.0, 5) == 0.0);
  CHECK(sprinter::expected_stopping_time(0.0, 1.0, 5, 0.1) == 0.1);
  CHECK(rel_err(sprinter::expected_tokens(1.0, 0.5, 5), 6.0L) < 1e-15);
  // r = 0: N is geometric, mean f/(1 - f), variance f/(1 - f)^2.
  CHECK(rel_err(sprinter::expected_tokens(0.7, 0.25, 0), 1.0L / 3) < 1e-15);
  CHECK(rel_err(sprinter::tokens_variance(0.7, 0.25, 0), 0.25L / (0.75L * 0.75L)) < 1e-15);
  // eta_fp = 0: N = min(G_tp, r), the SD law without the bonus token.
  for (const double tp : {0.3, 0.9, 1.0 - 1e-12}) {
    for (const int r : {1, 4, 30}) {
      CAPTURE(tp, r);
      const auto gamma = static_cast<std::size_t>(r);  // SD with gamma = r drafts
      CHECK(rel_err(sprinter::expected_tokens(tp, 0.0, r), specdec::theory::sd::expected_tokens(tp, gamma) - 1.0L) < 1e-13);
      CHECK(rel_err(sprinter::tokens_variance(tp, 0.0, r), specdec::theory::sd::tokens_variance(tp, gamma)) < 1e-13);
    }
  }
  // eta_tp = 1 - 1e-12 with large r: close to r + f/(1 - f), finite, no cancellation.
  const double tp = 1.0 - 1e-12;
  for (const int r : {1000, 1000000, std::numeric_limits<int>::max() / 2}) {
    CAPTURE(r);
    const long double d = 1.0L - tp;  // exact
    const long double tpr = std::exp(r * std::log1pl(-d));
    const long double ref = -tp * std::expm1l(r * std::log1pl(-d)) / d + tpr * 0.5L / 0.5L;
    CHECK(rel_err(sprinter::expected_tokens(tp, 0.5, r), ref) < 1e-12);
    CHECK(std::isfinite(sprinter::tokens_variance(tp, 0.5, r)));
    CHECK(std::isfinite(sprinter::expected_stopping_time(tp, 0.5, r, 0.1)));
  }
  // Large r with eta_tp < 1: the law never reaches r; mean -> tp / (1 - tp).
  CHECK(rel_err(sprinter::expected_tokens(0.9, 0.5, 100000), 9.0L) < 1e-13);
  CHECK(rel_err(sprinter::tokens_variance(0.9, 0.5, 100000), 0.9L / 0.01L) < 1e-12);
  // Figures 5 and 6 of the paper: with eta_fp <= 0.5 the gap over a perfect-FP verifier stays <= 1
  // token and <= t_d (r = 5, t_d = 0.1).
  for (int i = 0; i <= 100; ++i) {
    const double tpi = i / 100.0;
    for (const double fp : {0.1, 0.5}) {
      CHECK(sprinter::expected_tokens(tpi, fp, 5) - sprinter::expected_tokens(tpi, 0.0, 5) <= 1.0 + 1e-15);
      CHECK(sprinter::expected_stopping_time(tpi, fp, 5, 0.1) - sprinter::expected_stopping_time(tpi, 0.0, 5, 0.1) <=
            0.1 + 1e-15);
    }
  }
  // Constant evaluation agrees with the run-time path.
  constexpr double ce = sprinter::expected_tokens(0.8, 0.3, 7);
  CHECK(rel_err(ce, sprinter::expected_tokens(0.8, 0.3, 7)) < 1e-15);
}

TEST_CASE("Monte-Carlo: N and T_stop of the i.i.d. verifier on r acceptable tokens", "[theory][sprinter][montecarlo]") {
  constexpr std::uint64_t seed = 2025;
  constexpr int n = 300000;
  constexpr double td = 0.1;
  std::cout << "SPRINTER N Monte-Carlo: seed " << seed << ", " << n << " runs per case\n";
  struct param {
    double tp, fp;
    int r;
  };
  const std::array<param, 7> cases{param{0.9, 0.5, 5}, {0.6, 0.1, 5}, {0.99, 0.3, 20}, {0.5, 0.0, 3},
                                   {0.8, 0.9, 2},      {0.7, 0.4, 0}, {1.0, 0.5, 5}};
  std::uint32_t request = 0;
  for (const auto& c : cases) {
    CAPTURE(c.tp, c.fp, c.r);
    auto s = specdec_test::mc_stream(seed, request++);
    const double mean = sprinter::expected_tokens(c.tp, c.fp, c.r);
    moments m(mean), t(sprinter::expected_stopping_time(c.tp, c.fp, c.r, td));
    for (int i = 0; i < n; ++i) {
      const int k = simulate_n(s, c.tp, c.fp, c.r);
      m.add(k);
      t.add(td * (k + 1));
    }
    CHECK(within_se("E[N] (eq. 3)", m.mean(), mean, m.se_mean()));
    CHECK(within_se("Var(N)", m.variance(), sprinter::tokens_variance(c.tp, c.fp, c.r), m.se_variance()));
    CHECK(within_se("E[T_stop] (eq. 4)", t.mean(), sprinter::expected_stopping_time(c.tp, c.fp, c.r, td), t.se_mean()));
  }
}

TEST_CASE("FLOPs: eqs. (5), (6) and the catch-up variant", "[theory][sprinter]") {
  const double fd = 8.01, fv = 0.001, ft = 64.66;  // GPT-Neo 125M / 1.3B per 20 tokens (Fig. 10), any unit
  for (const std::size_t gamma : {0u, 1u, 2u, 5u, 20u}) {
    CAPTURE(gamma);
    const double g = static_cast<double>(gamma);  // the formulas' gamma (g - 1 is -1 at gamma = 0)
    CHECK(sprinter::flops_sd(gamma, fd, ft) == g * fd + g * ft);
    CHECK(sprinter::flops_sprinter(gamma, fd, fv, ft) == g * fd + g * fv + ft);
    CHECK(sprinter::flops_sprinter_catch_up(gamma, fd, fv, ft) == g * fd + g * fv + g * ft);
    // Section 3.1: with F_v = 0 the saving of eq. (6) over eq. (5) is (gamma - 1) F_t.
    CHECK(std::abs(sprinter::flops_sd(gamma, fd, ft) - sprinter::flops_sprinter(gamma, fd, 0.0, ft) - (g - 1.0) * ft) < 1e-12);
    // With the catch-up counted, SPRINTER costs SD's FLOPs plus the verifier's.
    CHECK(std::abs(sprinter::flops_sprinter_catch_up(gamma, fd, fv, ft) - sprinter::flops_sd(gamma, fd, ft) - g * fv) < 1e-12);
  }
  CHECK_THROWS_AS(sprinter::flops_sd(2, -fd, ft), specdec::error);
  CHECK_THROWS_AS(sprinter::flops_sprinter(2, fd, nan_v, ft), specdec::error);
  CHECK_THROWS_AS(sprinter::flops_sprinter_catch_up(2, fd, fv, std::numeric_limits<double>::infinity()), specdec::error);
}

TEST_CASE("SPRINTER invalid arguments throw specdec::error", "[theory][sprinter]") {
  // eta_fp = 1 with eta_tp^r > 0: the verifier never stops, the expectations are infinite.
  CHECK_THROWS_AS(sprinter::expected_tokens(0.5, 1.0, 3), specdec::error);
  CHECK_THROWS_AS(sprinter::expected_tokens(0.0, 1.0, 0), specdec::error);
  CHECK_THROWS_AS(sprinter::expected_stopping_time(0.5, 1.0, 3, 0.1), specdec::error);
  CHECK_THROWS_AS(sprinter::tokens_variance(1.0, 1.0, 3), specdec::error);
  CHECK(sprinter::prob_tokens(4, 0.5, 1.0, 3) == 0.0);  // the defective law is still defined pointwise
  for (const double bad : {nan_v, -0.01, 1.01}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(sprinter::expected_tokens(bad, 0.1, 3), specdec::error);
    CHECK_THROWS_AS(sprinter::expected_tokens(0.9, bad, 3), specdec::error);
    CHECK_THROWS_AS(sprinter::prob_tokens(1, bad, 0.1, 3), specdec::error);
    CHECK_THROWS_AS(sprinter::prob_tokens(1, 0.9, bad, 3), specdec::error);
    CHECK_THROWS_AS(sprinter::expected_stopping_time(bad, 0.1, 3, 0.1), specdec::error);
    CHECK_THROWS_AS(sprinter::tokens_variance(0.9, bad, 3), specdec::error);
    CHECK_THROWS_AS(sprinter::total_variation(bad, 0.2), specdec::error);
    CHECK_THROWS_AS(sprinter::total_variation(0.2, bad), specdec::error);
    CHECK_THROWS_AS(sprinter::acceptance_rate(bad, 0.2), specdec::error);
    CHECK_THROWS_AS(sprinter::acceptance_rate(0.2, bad), specdec::error);
  }
  CHECK_THROWS_AS(sprinter::expected_tokens(0.9, 0.1, -1), specdec::error);
  CHECK_THROWS_AS(sprinter::prob_tokens(-1, 0.9, 0.1, 3), specdec::error);
  CHECK_THROWS_AS(sprinter::expected_stopping_time(0.9, 0.1, 3, -0.1), specdec::error);
  const std::vector<double> p{0.5, 0.5}, q{0.25, 0.75}, bad_row{0.5, 0.6}, q3{0.2, 0.3, 0.5};
  std::vector<double> out(2), out3(3);
  CHECK_THROWS_AS(sprinter::token_distribution(cspan(p), cspan(q), 1.5, std::span<double>(out)), specdec::error);
  CHECK_THROWS_AS(sprinter::token_distribution(cspan(p), cspan(bad_row), 0.5, std::span<double>(out)), specdec::error);
  CHECK_THROWS_AS(sprinter::token_distribution(cspan(p), cspan(q3), 0.5, std::span<double>(out3)), specdec::error);
  CHECK_THROWS_AS(sprinter::token_distribution(cspan(p), cspan(q), 0.5, std::span<double>(out3)), specdec::error);
}
