// MTAD closed forms (theory/mtad.hpp): perplexity (eq. (1)), Theorem 3.2's limit, the bounds of
// Lemma A.1, Lemma 3.4, Theorem 3.5 and Theorem 3.6, and the energy model (eq. (9)). The bounds are
// checked on a Monte-Carlo run of MTAD's verification on context-free draft/target models (where the
// exact MTJD output is known: the target's argmax repeated), with Philox streams and printed seeds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "monte_carlo.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/errors.hpp"
#include "specdec/theory/mtad.hpp"

namespace mtad = specdec::theory::mtad;
using cspan = std::span<const double>;
using specdec_test::moments;
using specdec_test::within_se;

namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

template <class Stream>
std::size_t draw(Stream& s, const std::vector<double>& w) {
  double u = s.uniform(), cum = 0;
  std::size_t x = 0;
  while (x + 1 < w.size() && u >= (cum += w[x])) ++x;
  while (w[x] == 0.0) --x;
  return x;
}

double max_abs_log_ratio(const std::vector<double>& p, const std::vector<double>& q) {
  double u = 0;
  for (std::size_t x = 0; x < p.size(); ++x) u = std::max(u, std::abs(std::log(p[x]) - std::log(q[x])));
  return u;
}

// One MTAD run on context-free models: each iteration drafts gamma tokens (from `draft_token`),
// accepts the LONGEST prefix whose joint ratio p/q exceeds tau (Algorithm 1, strict test), then
// samples one token from p. Returns the summed log p and log q of the output, and Gamma_N.
struct run_result {
  double sum_log_p = 0, sum_log_q = 0;
  std::uint64_t tokens = 0, iterations = 0;
  int min_accepted = std::numeric_limits<int>::max();
  double gamma_bar() const { return static_cast<double>(tokens) / static_cast<double>(iterations); }
};
template <class Stream, class Draft>
run_result run_mtad(Stream& s, const std::vector<double>& p, const std::vector<double>& q, double tau, int gamma, int iterations,
                    Draft draft_token) {
  run_result r;
  std::vector<std::size_t> drafts(static_cast<std::size_t>(gamma));
  for (int it = 0; it < iterations; ++it) {
    for (auto& x : drafts) x = draft_token(s);
    double log_ratio = 0;
    int accepted = 0;
    for (int j = 1; j <= gamma; ++j) {
      const std::size_t x = drafts[static_cast<std::size_t>(j - 1)];
      log_ratio += std::log(p[x]) - std::log(q[x]);
      if (tau < std::min(1.0, std::exp(log_ratio))) accepted = j;  // longest accepted prefix so far
    }
    for (int j = 0; j < accepted; ++j) {
      r.sum_log_p += std::log(p[drafts[static_cast<std::size_t>(j)]]);
      r.sum_log_q += std::log(q[drafts[static_cast<std::size_t>(j)]]);
    }
    const std::size_t t = draw(s, p);  // the target's token
    r.sum_log_p += std::log(p[t]);
    r.sum_log_q += std::log(q[t]);
    r.tokens += static_cast<std::uint64_t>(accepted) + 1;
    ++r.iterations;
    r.min_accepted = std::min(r.min_accepted, accepted);
  }
  return r;
}

}  // namespace

TEST_CASE("perplexity (eq. (1))", "[theory][mtad]") {
  const std::vector<double> quarter(7, 0.25);
  CHECK(std::abs(mtad::perplexity(cspan(quarter)) - 4.0) < 1e-14);
  const std::vector<double> probs{0.5, 0.125, 1.0, 0.25};
  // Inverse geometric mean: (0.5 * 0.125 * 1 * 0.25)^(-1/4) = 2^(6/4).
  CHECK(std::abs(mtad::perplexity(cspan(probs)) - std::pow(2.0, 1.5)) < 1e-14);
  std::vector<double> logs(probs.size());
  std::transform(probs.begin(), probs.end(), logs.begin(), [](double x) { return std::log(x); });
  CHECK(std::abs(mtad::perplexity_from_log_probs(cspan(logs)) - mtad::perplexity(cspan(probs))) < 1e-14);
  const std::vector<float> pf(probs.begin(), probs.end()), lf(logs.begin(), logs.end());
  CHECK(std::abs(mtad::perplexity(std::span<const float>(pf)) - std::pow(2.0, 1.5)) < 1e-6);
  CHECK(std::abs(mtad::perplexity_from_log_probs(std::span<const float>(lf)) - std::pow(2.0, 1.5)) < 1e-6);
  CHECK(mtad::perplexity(cspan(std::vector<double>{1.0, 1.0})) == 1.0);
  const std::vector<double> with_zero{0.5, 0.0}, with_ninf{-1.0, -inf_v};
  CHECK(mtad::perplexity(cspan(with_zero)) == inf_v);
  CHECK(mtad::perplexity_from_log_probs(cspan(with_ninf)) == inf_v);
  // Long sequences: no underflow of the product (1e5 tokens of probability 1e-3).
  const std::vector<double> tiny(100000, 1e-3);
  CHECK(std::abs(mtad::perplexity(cspan(tiny)) - 1000.0) < 1e-8);

  // Monte-Carlo: tokens drawn i.i.d. from p have log-perplexity -> H(p).
  constexpr std::uint64_t seed = 5;
  constexpr int n = 200000;
  std::cout << "perplexity Monte-Carlo: seed " << seed << ", " << n << " tokens\n";
  const std::vector<double> p{0.4, 0.3, 0.15, 0.1, 0.05};
  auto s = specdec_test::mc_stream(seed, 0);
  std::vector<double> sampled(n);
  moments m(specdec::entropy(cspan(p)));
  for (auto& x : sampled) {
    x = p[draw(s, p)];
    m.add(-std::log(x));
  }
  CHECK(within_se("log PPL vs H(p)", std::log(mtad::perplexity(cspan(sampled))), specdec::entropy(cspan(p)), m.se_mean()));

  // Errors.
  CHECK_THROWS_AS(mtad::perplexity(cspan()), specdec::error);
  CHECK_THROWS_AS(mtad::perplexity_from_log_probs(cspan()), specdec::error);
  for (const double bad : {nan_v, -0.1, 1.5}) {
    const std::vector<double> v{0.5, bad};
    CHECK_THROWS_AS(mtad::perplexity(cspan(v)), specdec::error);
  }
  for (const double bad : {nan_v, 0.1, inf_v}) {
    const std::vector<double> v{-0.5, bad};
    CHECK_THROWS_AS(mtad::perplexity_from_log_probs(cspan(v)), specdec::error);
  }
}

TEST_CASE("bound functions: values, monotonicity and edges", "[theory][mtad]") {
  // Lemma A.1.
  CHECK(mtad::lemma_a1_bound(1.0, 3.0) == 1.0);
  CHECK(mtad::lemma_a1_bound(0.0, 3.0) == inf_v);
  CHECK(std::abs(mtad::lemma_a1_bound(0.25, 2.0) - 2.0) < 1e-15);
  CHECK(mtad::lemma_a1_bound(0.1, 5.0) < mtad::lemma_a1_bound(0.1, 2.0));
  CHECK(std::abs(mtad::lemma_a1_bound(1e-300, 1.0) / 1e300 - 1.0) < 1e-12);  // exp(690.8): ~700 ulps amplification
  // Theorem 3.2.
  CHECK(std::abs(mtad::theorem_3_2_perplexity(-3.0, 2.0) - std::exp(1.5)) < 1e-14);
  CHECK(mtad::theorem_3_2_perplexity(0.0, 2.0) == 1.0);
  CHECK(mtad::theorem_3_2_perplexity(-inf_v, 2.0) == inf_v);
  // Lemma 3.4.
  CHECK(std::abs(mtad::lemma_3_4_bound(2.0, 0.0, -1.0, 0.5) - std::exp(0.75)) < 1e-14);
  CHECK(std::abs(mtad::lemma_3_4_bound(2.0, -0.5, -1.0, 0.5) - std::exp(1.0)) < 1e-14);
  // Theorem 3.5: stated and as derived agree when epsilon = 0 or gamma_bar = 1; otherwise the
  // stated one is smaller. Both are >= the Lemma A.1 factor.
  for (const double tau : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    for (const double gb : {1.0, 1.5, 3.0, 10.0}) {
      for (const double eps : {0.0, -0.1, -1.0}) {
        for (const double h : {0.0, 0.7, 2.0}) {
          for (const double u : {0.0, 0.05, 0.5}) {
            CAPTURE(tau, gb, eps, h, u);
            const double stated = mtad::theorem_3_5_bound(tau, gb, eps, h, u);
            const double derived = mtad::theorem_3_5_bound_from_proof(tau, gb, eps, h, u);
            if (tau == 0.0) {
              CHECK(stated == inf_v);
              continue;
            }
            const double expect = std::pow(tau, -1.0 / gb) * std::exp(((1 - eps * gb) * h + (1 - eps + gb) * u) / gb);
            CHECK(std::abs(stated - expect) <= 1e-13 * expect);
            CHECK(derived >= stated * (1 - 1e-15));
            if (eps == 0.0 || gb == 1.0 || u == 0.0) CHECK(std::abs(derived - stated) <= 1e-14 * stated);
            CHECK(stated >= mtad::lemma_a1_bound(tau, gb) * (1 - 1e-15));
          }
        }
      }
    }
  }
  CHECK(mtad::theorem_3_5_bound(1.0, 1.0, 0.0, 0.0, 0.0) == 1.0);  // q = p, exact beam: MTAD = MTJD
  // Theorem 3.6 and its capped version.
  CHECK(std::abs(mtad::theorem_3_6_bound(0.5, 0.1) - std::log(2.0) / 0.1) < 1e-13);
  CHECK(mtad::theorem_3_6_bound(1.0, 0.0) == 0.0);
  CHECK(mtad::theorem_3_6_bound(0.5, 0.0) == inf_v);
  CHECK(mtad::theorem_3_6_bound(0.0, 0.3) == inf_v);
  CHECK(mtad::guaranteed_tokens_per_iteration(0.5, 0.0, 6) == 7);
  CHECK(mtad::guaranteed_tokens_per_iteration(0.0, 0.2, 6) == 7);
  CHECK(mtad::guaranteed_tokens_per_iteration(1.0, 0.2, 6) == 1);
  CHECK(mtad::guaranteed_tokens_per_iteration(std::exp(-1.0), 0.3, 6) == 1 + 3);  // 3 * 0.3 < 1 < 4 * 0.3
  CHECK(mtad::guaranteed_tokens_per_iteration(std::exp(-1.0), 0.3, 2) == 1 + 2);  // capped by gamma
  CHECK(mtad::guaranteed_tokens_per_iteration(std::exp(-1.0), 2.0, 6) == 1);      // |log tau| < U
  for (const double tau : {0.01, 0.3, 0.77}) {
    for (const double u : {0.01, 0.2, 1.0}) {
      for (const int gamma : {0, 1, 4, 100}) {
        const auto g = static_cast<int>(mtad::guaranteed_tokens_per_iteration(tau, u, static_cast<std::size_t>(gamma)));
        CHECK(g >= 1);
        CHECK(g <= gamma + 1);
        CHECK(static_cast<double>(g) >= std::min(mtad::theorem_3_6_bound(tau, u), gamma + 1.0) - 1e-12);
      }
    }
  }
  // Errors.
  for (const double bad : {nan_v, -0.1, 1.1}) {
    CHECK_THROWS_AS(mtad::lemma_a1_bound(bad, 2.0), specdec::error);
    CHECK_THROWS_AS(mtad::theorem_3_5_bound(bad, 2.0, 0.0, 1.0, 0.1), specdec::error);
    CHECK_THROWS_AS(mtad::theorem_3_6_bound(bad, 0.1), specdec::error);
    CHECK_THROWS_AS(mtad::guaranteed_tokens_per_iteration(bad, 0.1, 3), specdec::error);
  }
  for (const double bad_gb : {0.5, 0.0, -1.0, nan_v, inf_v}) {
    CHECK_THROWS_AS(mtad::lemma_a1_bound(0.5, bad_gb), specdec::error);
    CHECK_THROWS_AS(mtad::theorem_3_5_bound(0.5, bad_gb, 0.0, 1.0, 0.1), specdec::error);
    CHECK_THROWS_AS(mtad::theorem_3_2_perplexity(-1.0, bad_gb), specdec::error);
    CHECK_THROWS_AS(mtad::lemma_3_4_bound(bad_gb, 0.0, -1.0, 1.0), specdec::error);
  }
  CHECK_THROWS_AS(mtad::theorem_3_5_bound(0.5, 2.0, 0.1, 1.0, 0.1), specdec::error);   // epsilon > 0
  CHECK_THROWS_AS(mtad::theorem_3_5_bound(0.5, 2.0, 0.0, -1.0, 0.1), specdec::error);  // H < 0
  CHECK_THROWS_AS(mtad::theorem_3_5_bound_from_proof(0.5, 2.0, 0.0, 1.0, -0.1), specdec::error);
  CHECK_THROWS_AS(mtad::theorem_3_6_bound(0.5, -0.1), specdec::error);
  CHECK_THROWS_AS(mtad::theorem_3_6_bound(0.5, nan_v), specdec::error);
  CHECK_THROWS_AS(mtad::theorem_3_2_perplexity(0.5, 2.0), specdec::error);
  CHECK_THROWS_AS(mtad::lemma_3_4_bound(2.0, 0.0, 0.5, 1.0), specdec::error);
  CHECK_THROWS_AS(mtad::lemma_3_4_bound(2.0, 0.0, -0.5, -1.0), specdec::error);
}

TEST_CASE("Monte-Carlo: Lemma A.1 and Theorem 3.6 on MTAD runs with sampled drafts", "[theory][mtad][montecarlo]") {
  constexpr std::uint64_t seed = 909;
  constexpr int iterations = 100000;
  std::cout << "MTAD Lemma A.1 / Thm 3.6 Monte-Carlo: seed " << seed << ", " << iterations << " iterations per case\n";
  const std::vector<double> p{0.35, 0.25, 0.2, 0.12, 0.08}, q{0.2, 0.3, 0.25, 0.15, 0.1};
  const double u = max_abs_log_ratio(p, q);
  std::uint32_t request = 0;
  for (const double tau : {0.05, 0.3, 0.6, 0.9}) {
    for (const int gamma : {2, 4, 8}) {
      CAPTURE(tau, gamma);
      auto s = specdec_test::mc_stream(seed, request++);
      const run_result r = run_mtad(s, p, q, tau, gamma, iterations, [&](auto& st) { return draw(st, q); });
      const double gb = r.gamma_bar();
      const double ratio = std::exp(-(r.sum_log_p - r.sum_log_q) / static_cast<double>(r.tokens));  // PPL_p / PPL_q
      const double bound = std::pow(tau, -static_cast<double>(r.iterations) / static_cast<double>(r.tokens));
      std::cout << "  tau " << tau << ", gamma " << gamma << ": gamma_bar " << gb << ", PPL_p/PPL_q " << ratio << " <= Lemma A.1 "
                << mtad::lemma_a1_bound(tau, gb) << "\n";
      CHECK(ratio <= bound);
      CHECK(std::abs(bound - mtad::lemma_a1_bound(tau, gb)) < 1e-12 * bound);
      // Theorem 3.6 (capped): every iteration emits at least guaranteed_tokens_per_iteration tokens.
      const auto guaranteed = static_cast<int>(mtad::guaranteed_tokens_per_iteration(tau, u, static_cast<std::size_t>(gamma)));
      CHECK(r.min_accepted + 1 >= guaranteed);
      CHECK(gb >= std::min(mtad::theorem_3_6_bound(tau, u), gamma + 1.0));
    }
  }
}

TEST_CASE("Theorem 3.5 on a context-free pair with exact argmax drafting (epsilon = 0)", "[theory][mtad]") {
  // Exact deterministic MTJD on a context-free p emits argmax p forever: PPL_p(x*) = 1 / max p.
  // Approximate MTAD with an exact beam (epsilon = 0) drafts argmax q repeated; the bound must hold.
  constexpr std::uint64_t seed = 1234;
  constexpr int iterations = 100000;
  std::cout << "MTAD Thm 3.5 Monte-Carlo: seed " << seed << ", " << iterations << " iterations per case\n";
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> pairs{
      {{0.35, 0.25, 0.2, 0.12, 0.08}, {0.2, 0.3, 0.25, 0.15, 0.1}},
      {{0.6, 0.2, 0.1, 0.1}, {0.5, 0.3, 0.1, 0.1}},
      {{0.3, 0.3, 0.4}, {0.3, 0.3, 0.4}}};
  std::uint32_t request = 0;
  for (const auto& [p, q] : pairs) {
    const std::size_t argmax_q = static_cast<std::size_t>(std::max_element(q.begin(), q.end()) - q.begin());
    const double ppl_star = 1.0 / *std::max_element(p.begin(), p.end());
    const double u = max_abs_log_ratio(p, q);
    const double h = specdec::entropy(cspan(p));
    for (const double tau : {0.1, 0.5, 0.9}) {
      for (const int gamma : {1, 4}) {
        CAPTURE(p, q, tau, gamma);
        auto s = specdec_test::mc_stream(seed, request++);
        const run_result r = run_mtad(s, p, q, tau, gamma, iterations, [&](auto&) { return argmax_q; });
        const double ppl = std::exp(-r.sum_log_p / static_cast<double>(r.tokens));
        const double gb = r.gamma_bar();
        const double bound = mtad::theorem_3_5_bound(tau, gb, 0.0, h, u);
        std::cout << "  tau " << tau << ", gamma " << gamma << ": PPL_p / PPL_p(x*) " << ppl / ppl_star << " <= Thm 3.5 " << bound
                  << "\n";
        CHECK(ppl / ppl_star <= bound);
        CHECK(mtad::theorem_3_5_bound_from_proof(tau, gb, 0.0, h, u) == bound);
      }
    }
  }
}

TEST_CASE("energy model (eq. (9))", "[theory][mtad]") {
  CHECK(mtad::energy(100.0, 0.5, 300.0, 2.0) == 650.0);
  CHECK(mtad::energy(250.0, 0.0, 300.0, 0.0) == 0.0);
  // Memory-bound decoding: PW_mem > PW_flop and T_mem >> T_flop, so memory energy dominates and
  // halving T_mem (fewer target runs) nearly halves the total (section 4's argument).
  const double e1 = mtad::energy(150.0, 0.01, 300.0, 1.0), e2 = mtad::energy(150.0, 0.02, 300.0, 0.5);
  CHECK(e2 / e1 < 0.51);
  for (const double bad : {-1.0, nan_v, inf_v}) {
    CHECK_THROWS_AS(mtad::energy(bad, 1.0, 1.0, 1.0), specdec::error);
    CHECK_THROWS_AS(mtad::energy(1.0, bad, 1.0, 1.0), specdec::error);
    CHECK_THROWS_AS(mtad::energy(1.0, 1.0, bad, 1.0), specdec::error);
    CHECK_THROWS_AS(mtad::energy(1.0, 1.0, 1.0, bad), specdec::error);
  }
}
