// The power of the conformance kit's exact-law check: how often it catches a verifier that claims to
// be lossless but is not, as a function of the total-variation distance between the verifier's law of
// the first H tokens and the target's.
//
// The lossy verifier is specdec's lenient rule (accept x with probability min(1, p(x) / (l q(x)))),
// whose exact law is known (acceptance/lenient.hpp), so each run's distance is computed exactly from
// the kit's own model pair: TV = 1/2 sum_s |P_l(s) - P(s)| over the V^H sequences. Each row runs the
// check at the kit's defaults (100000 requests, alpha = 1e-6) with R kit seeds (different model pairs
// and coins) and lenience l in {1, 0.95, 0.9, 0.8, 0.7, 0.5}, then reports the fraction of runs that
// failed per band of TV. l = 1 is the strict rule: the false-failure control.
//
// Second table: the independence check (independence/request_id, 20000 pairs) against a verifier that
// lets a fraction s of the pairs share their coins (the second copy draws with the first copy's
// request id), with s in {0, 0.01, 0.02, 0.05, 0.1, 0.2}; s = 0 is the control.
//
//   specdec_conformance_power [--seeds R] [--smoke]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/specdec_verifiers.hpp"
#include "specdec/random/stream.hpp"

namespace sc = specdec::conformance;

int main(int argc, char** argv) {
  int seeds = 20;
  std::vector<double> lenience{1.0, 0.95, 0.9, 0.8, 0.7, 0.5};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      seeds = 2;
      lenience = {1.0, 0.5};
    } else if (std::strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
      seeds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--seeds R] [--smoke]\n", argv[0]);
      return 2;
    }
  }
  // One run: a configuration, a lenience, a kit seed -> the exact TV and whether the check failed.
  struct run {
    std::size_t config;
    double lenience, tv;
    bool detected;
  };
  std::vector<run> runs;
  const auto names = sc::chain_law_configs(0);
  for (std::size_t config = 0; config < names.size(); ++config) {
    for (const double l : lenience) {
      const specdec::lenient_rule rule(l);
      const auto claimed = sc::guarantee::of_rule(rule, "lenient");
      for (int s = 0; s < seeds; ++s) {
        sc::kit_options o;
        o.seed = 1000 + static_cast<std::uint64_t>(s);
        const auto c = sc::chain_law_configs(o.seed)[config];
        o.only = {"exact_law/" + c.model.name};
        // The exact distance of this seed's model pair.
        const sc::model_tables m(c.model);
        std::vector<std::size_t> per_gamma(c.max_gamma + 1, 0);
        for (std::size_t r = 0; r < o.law_requests; ++r) ++per_gamma[c.gamma_of(r)];
        const auto lossy = sc::detail::claimed_law(c, m, claimed, per_gamma);
        const auto exact = sc::detail::claimed_law(c, m, sc::guarantee::lossless(), per_gamma);
        double tv = 0.0;
        for (std::size_t k = 0; k < exact.size(); ++k) tv += 0.5 * std::abs(lossy[k] - exact[k]);
        const auto report = sc::check_chain_verifier("lenient", sc::specdec_chain_verifier(specdec::exec::seq, rule),
                                                     sc::guarantee::lossless(), o);
        runs.push_back({config, l, tv, !report.passed()});
      }
    }
  }
  int control_failures = 0, controls = 0;
  for (const auto& r : runs)
    if (r.lenience == 1.0) controls += 1, control_failures += r.detected ? 1 : 0;
  std::printf("false failures (l = 1, the strict rule): %d of %d runs\n\n", control_failures, controls);
  const double edges[] = {0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 1.0};
  std::printf("| TV of the first-H-token law | detected |");
  for (const auto& c : names) std::printf(" %s |", c.model.name.c_str());
  std::printf("\n|---|---|");
  for (std::size_t c = 0; c < names.size(); ++c) std::printf("---|");
  std::printf("\n");
  for (std::size_t e = 0; e + 1 < std::size(edges); ++e) {
    const auto in_bin = [&](const run& r) { return r.lenience < 1.0 && r.tv >= edges[e] && r.tv < edges[e + 1]; };
    const auto cell = [&](std::size_t config, bool all) {
      int n = 0, d = 0;
      for (const auto& r : runs)
        if (in_bin(r) && (all || r.config == config)) n += 1, d += r.detected ? 1 : 0;
      return n == 0 ? std::string("-") : std::to_string(d) + " / " + std::to_string(n);
    };
    std::printf("| [%g, %g) | %s |", edges[e], edges[e + 1], cell(0, true).c_str());
    for (std::size_t c = 0; c < names.size(); ++c) std::printf(" %s |", cell(c, false).c_str());
    std::printf("\n");
  }

  // Independence: a fraction `share` of the pairs (chosen by a hash of the pair) draw the same coins.
  std::printf("\n| pairs sharing their coins | detected by independence/request_id |\n|---|---|\n");
  const std::vector<double> shares =
      lenience.size() > 2 ? std::vector<double>{0.0, 0.01, 0.02, 0.05, 0.1, 0.2} : std::vector<double>{0.0, 0.2};
  for (const double share : shares) {
    int detected = 0;
    for (int s = 0; s < seeds; ++s) {
      const auto inner = sc::specdec_chain_verifier(specdec::exec::seq, specdec::strict);
      const auto shared_coins = [&](const sc::chain_inputs& in) {
        sc::chain_inputs changed = in;
        for (auto& id : changed.request_ids) {
          const auto pair = specdec::random::uniform_at(
              specdec::random::stream_address{static_cast<std::uint64_t>(s), static_cast<std::uint32_t>(id / 2), 0, 0,
                                              specdec::random::purpose::user},
              0);
          if (pair < share) id -= id % 2;  // the second copy uses the first copy's id
        }
        return inner(changed);
      };
      sc::kit_options o;
      o.seed = 2000 + static_cast<std::uint64_t>(s);
      o.only = {"independence/request_id"};
      detected += sc::check_chain_verifier("shared coins", shared_coins, sc::guarantee::lossless(), o).passed() ? 0 : 1;
    }
    std::printf("| %.2f | %d / %d |\n", share, detected, seeds);
  }
  return 0;
}
