// SPECDEC_TEST_LABELS: statistical
// Monte-Carlo simulator of MTAD's verification (simulate/mtad.hpp) on context-free draft/target
// pairs: the law of the tokens per iteration against exact enumeration of the V^gamma drafts, and
// the bounds of theory/mtad.hpp (Theorem 3.6 with ||log p - log q||_inf <= U, Lemma A.1) on the
// simulated runs. Within 5 standard errors, fixed printed seeds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <span>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/errors.hpp"
#include "specdec/simulate/mtad.hpp"
#include "specdec/theory/mtad.hpp"

namespace sim = specdec::simulate;
namespace mtad = specdec::theory::mtad;
using cspan = std::span<const double>;
using specdec_sim_test::law_matches;
using specdec_sim_test::within;

namespace {

// The exact law of gamma_i = j + 1 by enumerating every draft x_1..x_gamma (probability prod q(x_t))
// and applying Algorithm 1's test to each prefix.
std::vector<double> enumerate_tokens_law(const std::vector<double>& p, const std::vector<double>& q, double tau,
                                         std::size_t gamma) {
  std::vector<double> law(gamma + 2, 0.0);
  const std::size_t v = p.size();
  std::size_t sequences = 1;
  for (std::size_t i = 0; i < gamma; ++i) sequences *= v;
  for (std::size_t code = 0; code < sequences; ++code) {
    double prob = 1.0, log_ratio = 0.0;
    std::size_t rest = code;
    std::size_t accepted = 0;
    for (std::size_t j = 1; j <= gamma; ++j) {
      const std::size_t x = rest % v;
      rest /= v;
      prob *= q[x];
      log_ratio += std::log(p[x]) - std::log(q[x]);
      if (tau < std::min(1.0, std::exp(log_ratio))) accepted = j;
    }
    law[accepted + 1] += prob;
  }
  return law;
}

double max_abs_log_ratio(const std::vector<double>& p, const std::vector<double>& q) {
  double u = 0;
  for (std::size_t x = 0; x < p.size(); ++x) u = std::max(u, std::abs(std::log(p[x]) - std::log(q[x])));
  return u;
}

}  // namespace

TEST_CASE("MTAD: tokens per iteration equal enumeration; Theorem 3.6 and Lemma A.1 hold", "[simulate][mtad]") {
  constexpr std::uint64_t seed = 9009;
  constexpr std::uint64_t draws = 200000;
  std::cout << "MTAD Monte-Carlo: seed " << seed << ", " << draws << " iterations per case\n";
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> pairs{
      {{0.35, 0.25, 0.2, 0.12, 0.08}, {0.2, 0.3, 0.25, 0.15, 0.1}},
      {{0.6, 0.2, 0.1, 0.1}, {0.4, 0.3, 0.2, 0.1}},
  };
  std::uint32_t stream = 0;
  for (const auto& [p, q] : pairs) {
    const double u = max_abs_log_ratio(p, q);
    for (const double tau : {0.05, 0.3, 0.7, 0.95}) {
      for (const std::size_t gamma : {1u, 3u, 5u}) {
        CAPTURE(p, q, tau, gamma);
        const auto r = sim::mtad::run(cspan(p), cspan(q), tau, gamma, sim::mtad::drafting::sampled, {seed, stream++, 0, draws});
        const std::vector<double> law = enumerate_tokens_law(p, q, tau, gamma);
        double mean = 0;
        for (std::size_t k = 0; k < law.size(); ++k) mean += static_cast<double>(k) * law[k];
        CHECK(law_matches("P(gamma_i = k) vs enumeration", r.tokens, law.size(), [&](std::size_t k) { return law[k]; }));
        CHECK(within("gamma_bar vs enumeration", r.gamma_bar(), mean));
        // Theorem 3.6, per iteration and in the mean.
        const std::size_t guaranteed = mtad::guaranteed_tokens_per_iteration(tau, u, gamma);
        CHECK(r.min_tokens >= static_cast<std::uint64_t>(guaranteed));
        CHECK(r.gamma_bar().mean >= std::min(mtad::theorem_3_6_bound(tau, u), static_cast<double>(gamma) + 1.0));
        // Lemma A.1 on the simulated output: PPL_p / PPL_q <= tau^(-1 / gamma_bar).
        CHECK(r.perplexity_p() / r.perplexity_q() <= mtad::lemma_a1_bound(tau, r.gamma_bar().mean) * (1 + 1e-12));
        CHECK(r.draft_tokens == draws * gamma);
      }
    }
  }
}

TEST_CASE("MTAD: argmax drafting is deterministic in its accepted length", "[simulate][mtad]") {
  const std::vector<double> p{0.35, 0.25, 0.2, 0.12, 0.08}, q{0.2, 0.3, 0.25, 0.15, 0.1};
  // argmax q = 1; log(p/q) per token = log(0.25/0.3) < 0, so the accepted length is the largest j
  // with j log(0.25/0.3) > log tau.
  for (const double tau : {0.1, 0.5, 0.9}) {
    const auto r = sim::mtad::run(cspan(p), cspan(q), tau, 6, sim::mtad::drafting::argmax, {1, 0, 0, 1000});
    int expected = 0;
    for (int j = 1; j <= 6; ++j)
      if (j * std::log(0.25 / 0.3) > std::log(tau)) expected = j;
    CHECK(r.tokens.count_of(static_cast<std::uint64_t>(expected) + 1) == 1000);
    CHECK(r.gamma_bar().variance == 0.0);
  }
}

TEST_CASE("MTAD simulator: edges and invalid arguments", "[simulate][mtad]") {
  const std::vector<double> p{0.5, 0.5}, q{0.25, 0.75};
  const sim::run_options o{1, 0, 0, 1000};
  CHECK(sim::mtad::run(cspan(p), cspan(q), 1.0, 4, sim::mtad::drafting::sampled, o).gamma_bar().mean == 1.0);
  CHECK(sim::mtad::run(cspan(p), cspan(q), 0.0, 4, sim::mtad::drafting::sampled, o).gamma_bar().mean == 5.0);
  CHECK(sim::mtad::run(cspan(p), cspan(q), 0.5, 0, sim::mtad::drafting::sampled, o).gamma_bar().mean == 1.0);
  CHECK(sim::mtad::run(cspan(p), cspan(q), 0.5, 3, sim::mtad::drafting::sampled, {1, 0, 0, 0}).min_tokens == 0);
  CHECK_THROWS_AS(sim::mtad::run(cspan(p), cspan(q), 1.5, 4, sim::mtad::drafting::sampled, o), specdec::error);
  const std::vector<double> bad{0.5, 0.6};
  CHECK_THROWS_AS(sim::mtad::run(cspan(p), cspan(bad), 0.5, 2, sim::mtad::drafting::sampled, o), specdec::error);
}
