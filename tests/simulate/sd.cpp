// SPECDEC_TEST_LABELS: statistical
// Monte-Carlo simulators of standard SD (simulate/sd.hpp) against the closed forms of theory/sd.hpp
// (Leviathan et al. 2023 eq. (1), Thm 3.8, Thm 3.11, the position-dependent and variance forms)
// and against exact enumeration of the 2^gamma accept/reject patterns; the token process against
// the exact one-position law of acceptance/distribution.hpp. Every comparison: within 5 standard
// errors, fixed printed seeds.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/acceptance/distribution.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/errors.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/theory/sd.hpp"

namespace sim = specdec::simulate;
namespace theory = specdec::theory;
using cspan = std::span<const double>;
using specdec_sim_test::law_matches;
using specdec_sim_test::variance_of;
using specdec_sim_test::within;

namespace {

// P(A = k) for position-dependent acceptance by enumerating the 2^gamma accept/reject patterns:
// A is the number of leading accepts.
std::vector<double> enumerate_law(const std::vector<double>& alphas) {
  const std::size_t g = alphas.size();
  std::vector<double> law(g + 1, 0.0);
  for (std::uint32_t mask = 0; mask < (1u << g); ++mask) {
    double prob = 1.0;
    std::size_t lead = 0;
    bool leading = true;
    for (std::size_t i = 0; i < g; ++i) {
      const bool accept = (mask >> i) & 1u;
      prob *= accept ? alphas[i] : 1.0 - alphas[i];
      if (leading && accept)
        ++lead;
      else
        leading = false;
    }
    law[lead] += prob;
  }
  return law;
}

}  // namespace

TEST_CASE("SD chain with i.i.d. alpha: E[T] (eq. (1)), Var(T), law, speedup (Thm 3.8), operations (Thm 3.11)", "[simulate][sd]") {
  constexpr std::uint64_t seed = 20230101;
  constexpr std::uint64_t draws = 400000;
  std::cout << "SD chain Monte-Carlo: seed " << seed << ", " << draws << " iterations per case\n";
  std::uint32_t stream = 0;
  for (const double alpha : {0.0, 0.3, 0.6, 0.8, 0.95, 1.0 - 1e-9, 1.0}) {
    for (const std::size_t gamma : {0u, 1u, 4u, 8u, 20u}) {
      CAPTURE(alpha, gamma);
      const auto r = sim::sd::chain(alpha, gamma, {seed, stream++, 0, draws});
      std::cout << "alpha " << alpha << ", gamma " << gamma << "\n";
      CHECK(r.gamma == gamma);
      // alpha = 1 - 1e-9: a rejection has probability <= 2e-8 per iteration, so 4e5 iterations most
      // likely see none (se = 0) while the closed forms differ from the degenerate law by < 1e-5.
      const double slack = alpha > 0.9999 && alpha < 1.0 ? 1e-5 : 1e-12;
      CHECK(within("E[T]", r.tokens(), theory::sd::expected_tokens(alpha, gamma), 5.0, slack));
      CHECK(within("Var(T)", variance_of(r.accepted), theory::sd::tokens_variance(alpha, gamma), 5.0, slack));
      CHECK(law_matches("P(T = k)", r.accepted, gamma + 1,
                        [&](std::size_t a) { return theory::sd::prob_tokens(a + 1, alpha, gamma); }));
      for (const double c : {0.0, 0.05, 0.5}) {
        CHECK(within("speedup c = " + std::to_string(c), r.speedup(c), theory::sd::speedup(alpha, gamma, c), 5.0, slack));
        CHECK(within("operations factor c_hat = " + std::to_string(c), r.operations_factor(c),
                     theory::sd::operations_factor(alpha, gamma, c), 5.0, slack));
      }
      // The latency-profile form: t_target(k) = 1 + 0.05 k, t_draft = 0.1.
      const auto profile = [](int k) { return 1.0 + 0.05 * k; };
      CHECK(within("speedup, latency profile", r.speedup(0.1, profile), theory::sd::speedup(alpha, gamma, 0.1, profile), 5.0,
                   slack));
      // Bookkeeping: a draft is examined at positions 1..min(A + 1, gamma).
      std::uint64_t examined = 0;
      for (std::size_t a = 0; a < r.accepted.histogram().size(); ++a)
        examined += r.accepted.count_of(a) * std::min<std::uint64_t>(a + 1, gamma);
      CHECK(examined == r.draft_tokens);
    }
  }
}

TEST_CASE("SD chain with position-dependent alphas equals enumeration and the closed forms", "[simulate][sd]") {
  constexpr std::uint64_t seed = 77;
  constexpr std::uint64_t draws = 400000;
  std::cout << "SD position-dependent Monte-Carlo: seed " << seed << ", " << draws << " iterations per case\n";
  const std::vector<std::vector<double>> cases{
      {0.9, 0.8, 0.7, 0.6, 0.5, 0.4},
      {0.99, 0.2, 0.95, 0.95},
      {1.0, 1.0, 0.5, 0.0, 0.7},  // a sure rejection at position 4
      {0.5},
      {},
  };
  std::uint32_t stream = 0;
  for (const auto& alphas : cases) {
    CAPTURE(alphas);
    const auto r = sim::sd::chain(cspan(alphas), {seed, stream++, 0, draws});
    const std::vector<double> law = enumerate_law(alphas);
    CHECK(law_matches("P(A = k) vs enumeration", r.accepted, alphas.size() + 1, [&](std::size_t k) { return law[k]; }));
    double mean = 1.0;
    for (std::size_t k = 0; k < law.size(); ++k) mean += static_cast<double>(k) * law[k];
    CHECK(within("E[T] vs enumeration", r.tokens(), mean));
    CHECK(within("E[T] vs closed form", r.tokens(), theory::sd::expected_tokens(cspan(alphas))));
    CHECK(within("Var(T) vs closed form", variance_of(r.accepted), theory::sd::tokens_variance(cspan(alphas))));
    CHECK(within("speedup c = 0.1", r.speedup(0.1), theory::sd::speedup(cspan(alphas), 0.1)));
  }
  // Constant alphas reproduce the i.i.d. simulator draw for draw (same streams, same trials).
  const std::vector<double> same(6, 0.7);
  const auto a = sim::sd::chain(cspan(same), {seed, 99, 0, 10000});
  const auto b = sim::sd::chain(0.7, 6, {seed, 99, 0, 10000});
  CHECK(std::equal(a.accepted.histogram().begin(), a.accepted.histogram().end(), b.accepted.histogram().begin()));
  CHECK(a.draft_tokens == b.draft_tokens);
}

TEST_CASE("simulators are reproducible, chunkable and stream-separated", "[simulate][sd]") {
  const sim::run_options whole{5, 3, 0, 100000};
  const auto r1 = sim::sd::chain(0.8, 6, whole);
  const auto r2 = sim::sd::chain(0.8, 6, whole);
  CHECK(std::equal(r1.accepted.histogram().begin(), r1.accepted.histogram().end(), r2.accepted.histogram().begin()));
  // [0, 30000) + [30000, 100000) merged = [0, 100000), exactly.
  auto first = sim::sd::chain(0.8, 6, {5, 3, 0, 30000});
  const auto second = sim::sd::chain(0.8, 6, {5, 3, 30000, 70000});
  first.accepted.merge(second.accepted);
  CHECK(std::equal(first.accepted.histogram().begin(), first.accepted.histogram().end(), r1.accepted.histogram().begin()));
  CHECK(first.draft_tokens + second.draft_tokens == r1.draft_tokens);
  // Another stream (or seed) draws other numbers.
  const auto other = sim::sd::chain(0.8, 6, {5, 4, 0, 100000});
  CHECK_FALSE(std::equal(other.accepted.histogram().begin(), other.accepted.histogram().end(), r1.accepted.histogram().begin()));
  const auto other_seed = sim::sd::chain(0.8, 6, {6, 3, 0, 100000});
  CHECK_FALSE(std::equal(other_seed.accepted.histogram().begin(), other_seed.accepted.histogram().end(),
                         r1.accepted.histogram().begin()));
  // Zero draws: an empty result.
  const auto none = sim::sd::chain(0.8, 6, {5, 3, 0, 0});
  CHECK(none.accepted.count() == 0);
  CHECK(none.draft_tokens == 0);
}

TEST_CASE("negative control: the 5-standard-error check rejects a slightly wrong alpha", "[simulate][sd]") {
  constexpr std::uint64_t seed = 4242;
  std::cout << "SD negative control: seed " << seed << "\n";
  const auto r = sim::sd::chain(0.8, 8, {seed, 0, 0, 1000000});
  // alpha 0.8 vs 0.805: E[T] differs by ~0.07, about 30 standard errors at 10^6 iterations.
  CHECK(within("E[T] vs the right alpha", r.tokens(), theory::sd::expected_tokens(0.8, 8)));
  CHECK_FALSE(within("E[T] vs alpha + 0.005 (must fail)", r.tokens(), theory::sd::expected_tokens(0.805, 8)));
  CHECK_FALSE(law_matches("law vs alpha + 0.005 (must fail)", r.accepted, 9,
                          [](std::size_t k) { return theory::sd::prob_tokens(k + 1, 0.805, 8); }));
}

TEST_CASE("SD token process: strict rule emits p, accepts with 1 - TV; lenient rule matches its exact law", "[simulate][sd]") {
  constexpr std::uint64_t seed = 1717;
  constexpr std::uint64_t draws = 200000;
  std::cout << "SD token process Monte-Carlo: seed " << seed << ", " << draws << " iterations per case\n";
  const auto pairs = specdec_sim_test::row_pairs();
  std::uint32_t stream = 0;
  for (const auto& pair : pairs) {
    const auto& p = pair.p;  // named, not a structured binding: clang < 16 cannot capture bindings
    const auto& q = pair.q;
    CAPTURE(p, q);
    const double beta = theory::sd::acceptance_rate(cspan(p), cspan(q));
    for (const std::size_t gamma : {1u, 4u}) {
      const auto r = sim::sd::token_process(specdec::strict, cspan(p), cspan(q), gamma, {seed, stream++, 0, draws});
      CHECK(within("acceptance 1 - TV", r.acceptance(), beta));
      CHECK(within("E[T] = eq. (1) with alpha = 1 - TV", r.chain.tokens(), theory::sd::expected_tokens(beta, gamma)));
      CHECK(law_matches("first emitted token ~ p", r.first_token, p.size(), [&](std::size_t v) { return p[v]; }));
      if (r.bonus_token.count() > 0)
        CHECK(law_matches("bonus token ~ p", r.bonus_token, p.size(), [&](std::size_t v) { return p[v]; }));
      CHECK(r.fallbacks == 0);
    }
    // Lenient rule l = 0.5: its exact one-position law (acceptance/distribution.hpp).
    const specdec::lenient_rule lenient(0.5);
    std::vector<double> law(p.size());
    specdec::token_distribution(lenient, cspan(p), cspan(q), std::span<double>(law));
    double rate = 0;
    for (std::size_t v = 0; v < p.size(); ++v) rate += lenient.accepted_mass(p[v], q[v]);
    const auto l = sim::sd::token_process(lenient, cspan(p), cspan(q), 3, {seed, stream++, 0, draws});
    CHECK(within("lenient acceptance sum min(q, p/l)", l.acceptance(), rate));
    CHECK(law_matches("lenient first token", l.first_token, p.size(), [&](std::size_t v) { return law[v]; }));
    CHECK(within("lenient E[T]", l.chain.tokens(), theory::sd::expected_tokens(rate, 3)));
  }
  // Negative control: the strict rule's output is p, not q; the cell check must see it.
  const auto r = sim::sd::token_process(specdec::strict, cspan(pairs[1].p), cspan(pairs[1].q), 1, {seed, 999, 0, draws});
  CHECK_FALSE(law_matches("first token vs q (must fail)", r.first_token, 4, [&](std::size_t v) { return pairs[1].q[v]; }));
}

TEST_CASE("SD simulators reject invalid arguments", "[simulate][sd]") {
  const sim::run_options o{1, 0, 0, 10};
  const double nan_v = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(sim::sd::chain(1.5, 4, o), specdec::error);
  CHECK_THROWS_AS(sim::sd::chain(nan_v, 4, o), specdec::error);
  const std::vector<double> bad{0.5, -0.1};
  CHECK_THROWS_AS(sim::sd::chain(cspan(bad), o), specdec::error);
  CHECK_THROWS_AS(sim::sd::chain(0.5, 4, {1, 0, ~std::uint64_t{0}, 2}), specdec::error);
  const std::vector<double> p{0.5, 0.5}, q{0.2, 0.8}, short_q{1.0}, unnormalised{0.5, 0.6};
  CHECK_THROWS_AS(sim::sd::token_process(specdec::strict, cspan(p), cspan(short_q), 2, o), specdec::error);
  CHECK_THROWS_AS(sim::sd::token_process(specdec::strict, cspan(p), cspan(unnormalised), 2, o), specdec::error);
  CHECK_THROWS_AS(sim::sd::token_process(specdec::strict, cspan(p), cspan(q), 0, o), specdec::error);
  const auto r = sim::sd::chain(0.5, 2, o);
  CHECK_THROWS_AS(r.speedup(-1.0), specdec::error);
  CHECK_THROWS_AS(r.operations_factor(nan_v), specdec::error);
}
