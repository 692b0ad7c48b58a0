// SPECDEC_TEST_LABELS: statistical
// Monte-Carlo simulator of SV's accepted length (simulate/sv.hpp) against theory/sv.hpp: the law
// P_gamma(N = n) (appendix D eq. (3)), E(N | gamma) (eq. (4)), Var(N | gamma) and the goodput
// estimate of eq. (6) over span and callable latency profiles. Within 5 standard errors, fixed
// printed seeds.
#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <span>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/errors.hpp"
#include "specdec/simulate/sv.hpp"
#include "specdec/theory/sv.hpp"

namespace sim = specdec::simulate;
namespace sv = specdec::theory::sv;
using cspan = std::span<const double>;
using specdec_sim_test::law_matches;
using specdec_sim_test::variance_of;
using specdec_sim_test::within;

TEST_CASE("SV: N of gamma verified drafts with acceptance a[] (eqs. (3), (4)) and goodput (eq. (6))", "[simulate][sv]") {
  constexpr std::uint64_t seed = 1001;
  constexpr std::uint64_t draws = 300000;
  std::cout << "SV Monte-Carlo: seed " << seed << ", " << draws << " verifications per case\n";
  const std::vector<std::vector<double>> profiles{
      {0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2},
      {0.6, 0.9, 0.99, 0.3, 1.0, 0.5},
      {1.0, 1.0, 0.0, 0.5},
  };
  // Latency of a step that verifies k drafts: flat up to 3, then linear (SV's profiled shape).
  const auto latency = [](int k) { return 1.0 + 0.12 * (k > 3 ? k - 3 : 0); };
  std::vector<double> latency_span(11);
  for (int k = 0; k <= 10; ++k) latency_span[static_cast<std::size_t>(k)] = latency(k);
  std::uint32_t stream = 0;
  for (const auto& a : profiles) {
    for (std::size_t gamma = 0; gamma <= a.size(); ++gamma) {
      CAPTURE(a, gamma);
      const auto r = sim::sv::accepted(cspan(a), gamma, {seed, stream++, 0, draws});
      CHECK(law_matches("P_gamma(N = n)", r.accepted, gamma + 1,
                        [&](std::size_t n) { return sv::prob_accepted(n, cspan(a), gamma); }));
      CHECK(within("E(N | gamma)", r.accepted.summary(), sv::expected_accepted(cspan(a), gamma)));
      CHECK(within("Var(N | gamma)", variance_of(r.accepted), sv::variance_accepted(cspan(a), gamma)));
      CHECK(within("goodput (callable profile)", sim::sv::goodput(r, latency), sv::estimated_goodput(cspan(a), gamma, latency)));
      CHECK(within("goodput (span profile)", sim::sv::goodput(r, latency_span),
                   sv::estimated_goodput(cspan(a), gamma, latency_span)));
      CHECK(within("goodput counting the target's token", sim::sv::goodput(r, latency, true),
                   sv::goodput(sv::expected_accepted(cspan(a), gamma) + 1.0, latency(static_cast<int>(gamma)))));
    }
  }
}

TEST_CASE("SV simulator: invalid arguments", "[simulate][sv]") {
  const std::vector<double> a{0.5, 0.5};
  const sim::run_options o{1, 0, 0, 10};
  CHECK_THROWS_AS(sim::sv::accepted(cspan(a), 3, o), specdec::error);
  const std::vector<double> bad{0.5, 1.5};
  CHECK_THROWS_AS(sim::sv::accepted(cspan(bad), 2, o), specdec::error);
  const auto r = sim::sv::accepted(cspan(a), 2, o);
  const std::vector<double> short_profile{1.0, 1.0};
  CHECK_THROWS_AS(sim::sv::goodput(r, short_profile), specdec::error);
}
