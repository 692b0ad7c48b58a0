// SPECDEC_TEST_LABELS: statistical
// Monte-Carlo simulators of SPRINTER (simulate/sprinter.hpp) against theory/sprinter.hpp: the
// i.i.d. verifier on r acceptable tokens (Thm 3.3 law and eq. (3), Thm 3.4 eq. (4), the variance),
// including the grid of the paper's Figures 5 and 6; one position on actual tokens (Thm 3.1's law,
// Thm A.4's acceptance rate). Within 5 standard errors, fixed printed seeds; negative controls.
#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/errors.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/theory/sprinter.hpp"

namespace sim = specdec::simulate;
namespace sprinter = specdec::theory::sprinter;
using cspan = std::span<const double>;
using specdec_sim_test::law_matches;
using specdec_sim_test::variance_of;
using specdec_sim_test::within;

TEST_CASE("SPRINTER verifier chain: law (Thm 3.3), E[N] (eq. (3)), Var(N), E[T_stop] (eq. (4))", "[simulate][sprinter]") {
  constexpr std::uint64_t seed = 3003;
  constexpr std::uint64_t draws = 300000;
  std::cout << "SPRINTER verifier Monte-Carlo: seed " << seed << ", " << draws << " runs per case\n";
  std::uint32_t stream = 0;
  for (const double tp : {0.0, 0.3, 0.8, 0.97, 1.0}) {
    for (const double fp : {0.0, 0.1, 0.5, 0.9}) {
      for (const int r : {0, 1, 5, 30}) {
        CAPTURE(tp, fp, r);
        std::cout << "eta_tp " << tp << ", eta_fp " << fp << ", r " << r << "\n";
        const auto res = sim::sprinter::verifier_chain(tp, fp, r, {seed, stream++, 0, draws});
        CHECK(within("E[N]", res.tokens(), sprinter::expected_tokens(tp, fp, r)));
        CHECK(within("Var(N)", variance_of(res.accepted), sprinter::tokens_variance(tp, fp, r)));
        CHECK(within("E[T_stop], t_d = 0.1", res.stopping_time(0.1), sprinter::expected_stopping_time(tp, fp, r, 0.1)));
        // The law, cell by cell, up to well past the largest value seen.
        const std::size_t cells = res.accepted.histogram().size();
        CHECK(law_matches("P(N = i)", res.accepted, cells,
                          [&](std::size_t i) { return sprinter::prob_tokens(static_cast<int>(i), tp, fp, r); }));
        CHECK(res.draft_tokens ==
              static_cast<std::uint64_t>(static_cast<double>(draws) * (res.tokens().mean + 1.0) + 0.5));  // N + 1 each
      }
    }
  }
}

TEST_CASE("SPRINTER Figures 5 and 6 grid: r = 5, t_d = 0.1, eta_fp in {0.1, 0.5}", "[simulate][sprinter]") {
  constexpr std::uint64_t seed = 5005;
  constexpr std::uint64_t draws = 200000;
  std::cout << "SPRINTER Figures 5/6 Monte-Carlo: seed " << seed << ", " << draws << " runs per point\n";
  std::uint32_t stream = 0;
  for (const double fp : {0.1, 0.5}) {
    for (int i = 0; i <= 20; ++i) {
      const double tp = i / 20.0;
      CAPTURE(tp, fp);
      const auto res = sim::sprinter::verifier_chain(tp, fp, 5, {seed, stream++, 0, draws});
      CHECK(within("Fig. 5 E[N]", res.tokens(), sprinter::expected_tokens(tp, fp, 5)));
      CHECK(within("Fig. 6 E[T_stop]", res.stopping_time(0.1), sprinter::expected_stopping_time(tp, fp, 5, 0.1)));
    }
  }
}

TEST_CASE("SPRINTER verifier chain: negative control and invalid arguments", "[simulate][sprinter]") {
  constexpr std::uint64_t seed = 6006;
  std::cout << "SPRINTER negative control: seed " << seed << "\n";
  const auto res = sim::sprinter::verifier_chain(0.9, 0.5, 5, {seed, 0, 0, 1000000});
  CHECK(within("E[N] right r", res.tokens(), sprinter::expected_tokens(0.9, 0.5, 5)));
  CHECK_FALSE(within("E[N] with r = 6 (must fail)", res.tokens(), sprinter::expected_tokens(0.9, 0.5, 6)));
  CHECK_FALSE(within("E[N] with eta_fp = 0.52 (must fail)", res.tokens(), sprinter::expected_tokens(0.9, 0.52, 5)));
  // Paper's eq. (4) neglects the verifier; charging t_v shifts the mean by t_v E[N + 1].
  CHECK(within("E[T_stop] with t_v", res.stopping_time(0.1, 0.02), sprinter::expected_stopping_time(0.9, 0.5, 5, 0.1) * 1.2));
  const sim::run_options o{1, 0, 0, 10};
  CHECK_THROWS_AS(sim::sprinter::verifier_chain(0.5, 1.0, 1, o), specdec::error);  // never ends
  CHECK_NOTHROW(sim::sprinter::verifier_chain(0.0, 1.0, 1, o));                    // ends at once
  CHECK_THROWS_AS(sim::sprinter::verifier_chain(1.1, 0.5, 1, o), specdec::error);
  CHECK_THROWS_AS(sim::sprinter::verifier_chain(0.5, -0.5, 1, o), specdec::error);
  CHECK_THROWS_AS(sim::sprinter::verifier_chain(0.5, 0.5, -1, o), specdec::error);
  CHECK_THROWS_AS(res.stopping_time(-0.1), specdec::error);
  CHECK_THROWS_AS(res.token_rate(0.0, 0.0, 0.0), specdec::error);
}

TEST_CASE("SPRINTER token process: emitted law (Thm 3.1), acceptance (Thm A.4), verifier rate", "[simulate][sprinter]") {
  constexpr std::uint64_t seed = 3131;
  constexpr std::uint64_t draws = 300000;
  std::cout << "SPRINTER token process Monte-Carlo: seed " << seed << ", " << draws << " positions per case\n";
  const auto pairs = specdec_sim_test::row_pairs();
  std::uint32_t stream = 0;
  for (const auto& [p, q] : pairs) {
    const double tv = specdec::total_variation(cspan(p), cspan(q));
    double acceptable_mass = 0;  // Q_acc = sum of q(x) over x with q(x) <= p(x)
    for (std::size_t x = 0; x < p.size(); ++x)
      if (q[x] <= p[x]) acceptable_mass += q[x];
    for (const auto& [tp, fp] : {std::pair{0.9, 0.3}, std::pair{0.2, 0.3}, std::pair{1.0, 0.0}, std::pair{0.5, 1.0}}) {
      CAPTURE(p, q, tp, fp);
      const auto res = sim::sprinter::token_process(cspan(p), cspan(q), tp, fp, {seed, stream++, 0, draws});
      std::vector<double> law(p.size());
      sprinter::token_distribution(cspan(p), cspan(q), fp, std::span<double>(law));
      CHECK(law_matches("p_SPRINTER (Thm 3.1)", res.token, p.size(), [&](std::size_t v) { return law[v]; }));
      CHECK(within("beta_SPRINTER (Thm A.4)", res.acceptance(), sprinter::acceptance_rate(fp, tv)));
      CHECK(within("P(verifier accepts)", res.verifier_acceptance(), tp * acceptable_mass + fp * (1 - acceptable_mass)));
      CHECK(res.fallbacks == 0);
    }
  }
  // Negative control: with eta_fp = 0.5 the output is not p (TV(p, q) = 0.45 here).
  const auto res = sim::sprinter::token_process(cspan(pairs[1].p), cspan(pairs[1].q), 0.9, 0.5, {seed, 777, 0, draws});
  CHECK_FALSE(law_matches("SPRINTER output vs p (must fail)", res.token, 4, [&](std::size_t v) { return pairs[1].p[v]; }));
  const sim::run_options o{1, 0, 0, 10};
  const std::vector<double> p{0.5, 0.5}, q{0.5, 0.6};
  CHECK_THROWS_AS(sim::sprinter::token_process(cspan(p), cspan(q), 0.5, 0.5, o), specdec::error);
  CHECK_THROWS_AS(sim::sprinter::token_process(cspan(p), cspan(p), 2.0, 0.5, o), specdec::error);
}
