// SPECDEC_TEST_LABELS: statistical
//
// Sequence-level distribution tests of chain speculative decoding (docs/design.md, 'Principles' 4 and 'Tests').
//
// A small order-1 Markov target p and draft q (V = 5, draft = target mixed with another random table,
// mean TV(p, q) around 0.4) are decoded speculatively from a fixed prompt for H tokens: draft gamma
// tokens from q, verify them with specdec::verify_chain, append what it emits, repeat; truncate to H.
// The exact distribution of the V^H sequences is enumerated (tests/support/sequence_enumeration.hpp)
// and compared with 10^6 simulated sequences by Pearson's chi-squared test (Boost.Math), failing
// when p < 1e-6. Negative controls (a wrong q, a wrong residual, a lossy rule checked against the
// target) must fail the same test: they show that it has the power to catch a broken verifier.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/sample_scale.hpp"

namespace {

using specdec::token_id;
using specdec_test::markov_pair;

constexpr std::size_t vocab = 5;
constexpr std::size_t prompt = 0;
constexpr std::uint64_t table_seed = 20240611;
constexpr double draft_mix = 0.8;
const std::uint64_t num_samples = specdec_test::scaled_sample_count(1'000'000);

const markov_pair& pair() {
  static const markov_pair m = specdec_test::make_markov_pair(vocab, table_seed, draft_mix);
  return m;
}

struct simulation {
  int horizon = 4;
  std::size_t gamma = 2;
  std::uint64_t seed = 1;
  std::uint64_t n = num_samples;
  //! When set, sequences are compared with this one (counted in `unexpected`) instead of being
  //! tallied in V^H cells (for long horizons).
  const std::vector<token_id>* expect_exactly = nullptr;
};

struct simulation_result {
  std::vector<std::uint64_t> counts;
  std::uint64_t invalid = 0;        // outputs with an error status or a bad token: must stay 0
  std::uint64_t unexpected = 0;     // sequences different from sim.expect_exactly
  std::uint64_t verifications = 0;  // verify_chain calls
  std::uint64_t accepted = 0;       // drafted tokens accepted
  double seconds = 0.0;
};

// Speculative decoding of `sim.n` sequences. The drafter samples from `m.draft`; the verifier is given
// the rows of `declared_q` (the true q unless a test lies to it on purpose). Sequence i uses request
// id i and step = the iteration number, so every draw has its own Philox address.
template <class Rule>
simulation_result simulate(const Rule& rule, const markov_pair& m, const std::vector<double>& declared_q, const simulation& sim) {
  using specdec::random::purpose;
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t V = m.vocab, G = sim.gamma;
  simulation_result r;
  if (!sim.expect_exactly) r.counts.assign(specdec_test::num_sequences(V, sim.horizon), 0);
  std::vector<token_id> drafts(G), sequence;
  std::vector<double> q_rows(G * V), p_rows((G + 1) * V);
  sequence.reserve(static_cast<std::size_t>(sim.horizon) + G + 1);
  for (std::uint64_t i = 0; i < sim.n; ++i) {
    sequence.clear();
    std::size_t last = prompt;
    std::uint32_t step = 0;
    while (sequence.size() < static_cast<std::size_t>(sim.horizon)) {
      const specdec::random::request_stream stream{sim.seed, static_cast<std::uint32_t>(i), step++};
      std::size_t prev = last;
      for (std::size_t j = 0; j < G; ++j) {
        std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                    p_rows.begin() + static_cast<std::ptrdiff_t>(j * V));
        std::copy_n(declared_q.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                    q_rows.begin() + static_cast<std::ptrdiff_t>(j * V));
        const auto x =
            specdec::sample_categorical(m.q_row(prev), stream.open(static_cast<std::uint32_t>(j), purpose::draft).uniform());
        drafts[j] = x.token;
        prev = static_cast<std::size_t>(x.token);
      }
      std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                  p_rows.begin() + static_cast<std::ptrdiff_t>(G * V));
      const auto out = specdec::verify_chain(specdec::exec::seq, rule, std::span<const token_id>(drafts),
                                             std::span<const double>(q_rows), std::span<const double>(p_rows), V, stream);
      ++r.verifications;
      r.accepted += static_cast<std::uint64_t>(out.num_accepted);
      if (!specdec::is_valid(out.status) || out.tokens.size() != static_cast<std::size_t>(out.num_accepted) + 1) {
        ++r.invalid;
        break;
      }
      for (const token_id t : out.tokens) {
        if (!specdec::in_vocabulary(t, V)) ++r.invalid;
        sequence.push_back(t);
      }
      last = static_cast<std::size_t>(sequence.back());
    }
    if (sequence.size() < static_cast<std::size_t>(sim.horizon)) continue;
    if (sim.expect_exactly) {
      if (!std::equal(sim.expect_exactly->begin(), sim.expect_exactly->end(), sequence.begin())) ++r.unexpected;
      continue;
    }
    std::size_t index = 0;
    for (int k = 0; k < sim.horizon; ++k) index = index * V + static_cast<std::size_t>(sequence[static_cast<std::size_t>(k)]);
    ++r.counts[index];
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

specdec_test::gof_result report(const std::string& name, const simulation& sim, const simulation_result& r,
                                const std::vector<double>& expected) {
  const auto g = specdec_test::chi_squared_gof(r.counts, expected);
  std::cout << "[distribution] " << name << ": seed = 0x" << std::hex << sim.seed << std::dec << ", table seed = " << table_seed
            << ", gamma = " << sim.gamma << ", H = " << sim.horizon << ", " << g
            << ", acceptance/verify = " << static_cast<double>(r.accepted) / static_cast<double>(r.verifications) << ", "
            << r.seconds << " s\n";
  return g;
}

std::vector<double> target_distribution(int horizon) {
  return specdec_test::target_sequence_distribution(pair(), prompt, horizon);
}

double total_variation(const std::vector<double>& a, const std::vector<double>& b) {
  return specdec::total_variation(std::span<const double>(a), std::span<const double>(b));
}

// A deliberately broken rule: strict's accept test, but the residual is p itself (accepted mass 0)
// instead of norm(max(0, p - q)).
struct residual_is_p_rule {
  static constexpr specdec::rule_family family = specdec::rule_family::rejection;
  bool accepts(double p, double q, double u) const noexcept { return u * q < p; }
  double accepted_mass(double, double) const noexcept { return 0.0; }
};
static_assert(specdec::AcceptanceRule<residual_is_p_rule>);

// Sharpened draft rows q^(1/T) / Z (T < 1): a plausible "forgot to pass the warped q" bug.
std::vector<double> temperature_shifted(const std::vector<double>& table, double temperature) {
  std::vector<double> out = table;
  for (std::size_t a = 0; a < vocab; ++a) {
    const auto row = std::span<double>(out).subspan(a * vocab, vocab);
    specdec::warp_probs(row, specdec::warp_params{temperature, 0, 1.0, 0.0});
  }
  return out;
}

}  // namespace

TEST_CASE("the Markov pair has a substantial draft/target distance", "[distribution][setup]") {
  const double tv = pair().mean_total_variation();
  std::cout << "[distribution] V = " << vocab << ", table seed = " << table_seed << ", mix = " << draft_mix
            << ", mean TV(p, q) = " << tv << "\n";
  CHECK(tv > 0.25);
  CHECK(tv < 0.6);
  for (std::size_t a = 0; a < vocab; ++a) {
    double sp = 0.0, sq = 0.0;
    for (std::size_t b = 0; b < vocab; ++b) {
      sp += pair().p_row(a)[b];
      sq += pair().q_row(a)[b];
      CHECK(pair().q_row(a)[b] > 0.0);
    }
    CHECK(sp == Approx(1.0).epsilon(1e-14));
    CHECK(sq == Approx(1.0).epsilon(1e-14));
  }
}

TEST_CASE("single-position emission distribution matches the closed forms", "[distribution][exact]") {
  const auto& m = pair();
  for (std::size_t a = 0; a < vocab; ++a) {
    const auto p = m.p_row(a), q = m.q_row(a);
    std::vector<double> out(vocab);
    specdec::token_distribution(specdec::strict, p, q, std::span<double>(out));
    for (std::size_t v = 0; v < vocab; ++v) CHECK(std::abs(out[v] - p[v]) < 1e-15);
    for (const double l : {1.0, 1.5, 2.0, 10.0}) {
      specdec::token_distribution(specdec::lenient_rule{l}, p, q, std::span<double>(out));
      for (std::size_t v = 0; v < vocab; ++v) CHECK(std::abs(out[v] - p[v]) < 1e-15);
    }
    for (const double l : {0.25, 0.5, 0.9}) {
      // P_l(v) = min(q, p/l) + (1 - sum min(q, p/l)) norm(max(0, p - q))(v)   (acceptance/lenient.hpp)
      double accepted = 0.0, residual = 0.0;
      for (std::size_t v = 0; v < vocab; ++v) {
        accepted += std::min(q[v], p[v] / l);
        residual += std::max(0.0, p[v] - q[v]);
      }
      specdec::token_distribution(specdec::lenient_rule{l}, p, q, std::span<double>(out));
      double sum = 0.0;
      for (std::size_t v = 0; v < vocab; ++v) {
        const double expected = std::min(q[v], p[v] / l) + (1.0 - accepted) * std::max(0.0, p[v] - q[v]) / residual;
        CHECK(std::abs(out[v] - expected) < 1e-14);
        sum += out[v];
      }
      CHECK(std::abs(sum - 1.0) < 1e-14);
      CHECK(specdec::total_variation(std::span<const double>(out), p) <= specdec::total_variation(p, q) + 1e-15);
    }
  }
}

TEST_CASE("exact enumeration: lossless rules give the target's sequence distribution", "[distribution][exact]") {
  for (const int horizon : {1, 3, 4}) {
    const auto target = target_distribution(horizon);
    double sum = 0.0;
    for (const double x : target) sum += x;
    CHECK(std::abs(sum - 1.0) < 1e-12);
    for (const std::size_t gamma : {0u, 1u, 2u, 3u, 4u, 6u}) {
      CAPTURE(horizon, gamma);
      const auto strict = specdec_test::speculative_sequence_distribution(specdec::strict, pair(), prompt, horizon, gamma);
      CHECK(specdec_test::max_abs_difference(strict, target) < 1e-12);
      for (const double l : {1.0, 2.0, 5.0}) {
        CAPTURE(l);
        const auto lenient =
            specdec_test::speculative_sequence_distribution(specdec::lenient_rule{l}, pair(), prompt, horizon, gamma);
        CHECK(specdec_test::max_abs_difference(lenient, target) < 1e-12);
      }
    }
  }
  // A lossy rule is visibly different from the target (so negative control (c) has something to find).
  const auto lossy = specdec_test::speculative_sequence_distribution(specdec::lenient_rule{0.5}, pair(), prompt, 4, 2);
  double sum = 0.0;
  for (const double x : lossy) sum += x;
  CHECK(std::abs(sum - 1.0) < 1e-12);
  const double tv = total_variation(lossy, target_distribution(4));
  std::cout << "[distribution] TV(lenient l = 0.5 sequences, target sequences) = " << tv << " (H = 4, gamma = 2)\n";
  CHECK(tv > 0.02);
}

TEST_CASE("strict rule: sequences follow the target distribution", "[distribution][statistical]") {
  const std::vector<std::pair<std::size_t, std::uint64_t>> configs{{1, 0x5EED0001}, {2, 0x5EED0002}, {4, 0x5EED0004}};
  for (const auto& [gamma, seed] : configs) {
    const simulation sim{4, gamma, seed, num_samples};
    const auto r = simulate(specdec::strict, pair(), pair().draft, sim);
    const auto g = report("strict vs target", sim, r, target_distribution(sim.horizon));
    CAPTURE(gamma, seed, sim.n, g.statistic, g.dof, g.p_value);
    REQUIRE(r.invalid == 0);
    CHECK(g.n == sim.n);
    CHECK(g.impossible == 0);
    CHECK(g.p_value > specdec_test::gof_alpha);
  }
}

TEST_CASE("lenient rule: sequences follow the enumerated distribution", "[distribution][statistical]") {
  const std::vector<std::pair<double, std::uint64_t>> configs{{0.5, 0x5EED0105}, {2.0, 0x5EED0120}};
  for (const auto& [l, seed] : configs) {
    const simulation sim{4, 2, seed, num_samples};
    const specdec::lenient_rule rule{l};
    const auto expected = specdec_test::speculative_sequence_distribution(rule, pair(), prompt, sim.horizon, sim.gamma);
    const auto r = simulate(rule, pair(), pair().draft, sim);
    const auto g = report("lenient l = " + std::to_string(l) + " vs enumeration", sim, r, expected);
    CAPTURE(l, seed, sim.n, g.statistic, g.dof, g.p_value);
    REQUIRE(r.invalid == 0);
    CHECK(g.impossible == 0);
    CHECK(g.p_value > specdec_test::gof_alpha);
    if (l >= 1.0) {  // lossless: the target itself
      const auto t = specdec_test::chi_squared_gof(r.counts, target_distribution(sim.horizon));
      CAPTURE(t.statistic, t.p_value);
      CHECK(t.p_value > specdec_test::gof_alpha);
    }
  }
}

TEST_CASE("sample-and-match: sequences follow the target distribution", "[distribution][statistical]") {
  const simulation sim{4, 2, 0x5EED0200, num_samples};
  const auto r = simulate(specdec::sample_and_match, pair(), pair().draft, sim);
  const auto g = report("sample-and-match vs target", sim, r, target_distribution(sim.horizon));
  CAPTURE(sim.seed, sim.n, g.statistic, g.dof, g.p_value);
  REQUIRE(r.invalid == 0);
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
}

TEST_CASE("greedy: output is the target's argmax chain whatever the drafts", "[distribution]") {
  const int horizon = 12;
  std::vector<token_id> expected;
  std::size_t last = prompt;
  for (int t = 0; t < horizon; ++t) {
    last = static_cast<std::size_t>(specdec::argmax(pair().p_row(last)));
    expected.push_back(static_cast<token_id>(last));
  }
  // Drafts from q (often right) and from a uniform table (often wrong).
  const std::vector<double> uniform(vocab * vocab, 1.0 / vocab);
  for (const bool uniform_draft : {false, true}) {
    markov_pair m = pair();
    if (uniform_draft) m.draft = uniform;
    for (const std::size_t gamma : {1u, 2u, 4u}) {
      CAPTURE(uniform_draft, gamma);
      simulation sim{horizon, gamma, 0x5EED0300u + static_cast<std::uint64_t>(gamma), 2000};
      sim.expect_exactly = &expected;  // only the argmax chain may appear
      const auto r = simulate(specdec::greedy, m, m.draft, sim);
      REQUIRE(r.invalid == 0);
      CHECK(r.unexpected == 0);
      if (!uniform_draft) CHECK(r.accepted > 0);
    }
  }
  // Negative control: a sampling rule does leave the argmax chain.
  simulation sim{horizon, 2, 0x5EED0399, 2000};
  sim.expect_exactly = &expected;
  CHECK(simulate(specdec::sample_and_match, pair(), pair().draft, sim).unexpected > 1000);
}

TEST_CASE("negative control (a): a verifier given the wrong q fails the test", "[distribution][statistical][negative]") {
  const auto target = target_distribution(4);
  SECTION("q' = p (the drafter's q not passed at all)") {
    const simulation sim{4, 2, 0x5EED0401, num_samples};
    const auto r = simulate(specdec::strict, pair(), pair().target, sim);
    const auto g = report("NEGATIVE wrong q (q' = p) vs target", sim, r, target);
    CAPTURE(sim.seed, g.statistic, g.p_value);
    REQUIRE(r.invalid == 0);
    CHECK(g.p_value < specdec_test::gof_alpha);
  }
  SECTION("q' = q sharpened with temperature 0.7 (the unwarped row passed)") {
    const simulation sim{4, 2, 0x5EED0402, num_samples};
    const auto r = simulate(specdec::strict, pair(), temperature_shifted(pair().draft, 0.7), sim);
    const auto g = report("NEGATIVE wrong q (q' = q^(1/0.7)) vs target", sim, r, target);
    CAPTURE(sim.seed, g.statistic, g.p_value);
    REQUIRE(r.invalid == 0);
    CHECK(g.p_value < specdec_test::gof_alpha);
  }
}

TEST_CASE("negative control (b): residual sampled from p instead of norm(max(0, p - q)) fails",
          "[distribution][statistical][negative]") {
  const simulation sim{4, 2, 0x5EED0500, num_samples};
  const auto r = simulate(residual_is_p_rule{}, pair(), pair().draft, sim);
  const auto g = report("NEGATIVE residual = p vs target", sim, r, target_distribution(sim.horizon));
  CAPTURE(sim.seed, g.statistic, g.p_value);
  REQUIRE(r.invalid == 0);
  CHECK(g.p_value < specdec_test::gof_alpha);
}

TEST_CASE("negative control (c): lenient l = 0.5 is not the target distribution", "[distribution][statistical][negative]") {
  const simulation sim{4, 2, 0x5EED0600, num_samples};
  const auto r = simulate(specdec::lenient_rule{0.5}, pair(), pair().draft, sim);
  const auto g = report("NEGATIVE lenient l = 0.5 vs target", sim, r, target_distribution(sim.horizon));
  CAPTURE(sim.seed, g.statistic, g.p_value);
  REQUIRE(r.invalid == 0);
  CHECK(g.p_value < specdec_test::gof_alpha);
}
