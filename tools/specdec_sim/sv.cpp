// specdec-sim sv: Speculative Verification (Kim et al., appendix D): E(N | gamma) (eq. (4)) and the
// goodput estimate E(N | gamma) / Latency(gamma) (eq. (6)) against gamma for an acceptance profile
// a[] and a latency profile, the goodput-optimal gamma marked, with Monte-Carlo estimates.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "monte_carlo.hpp"
#include "output.hpp"
#include "registry.hpp"
#include "specdec/optimize/sv_length.hpp"
#include "specdec/simulate/sv.hpp"
#include "specdec/theory/sv.hpp"

namespace {

namespace sv = specdec::theory::sv;
namespace sim = specdec::simulate;
namespace opt = specdec::optimize;
using namespace specdec_sim;

constexpr double nan_v = NAN;

// Columns of the CSV table.
enum column : std::size_t {
  c_gamma,
  c_expected,
  c_sd,
  c_latency,
  c_goodput,
  c_optimal,
  c_mc_accepted,
  c_mc_accepted_se,
  c_mc_goodput,
  c_mc_goodput_se,
  c_mc_draws
};

// Two panels: E(N | gamma), and the goodput with its optimum marked.
std::string plot_body(const table& csv, std::size_t best, bool count_target, std::uint64_t draws) {
  std::ostringstream g;
  table theory, mc_n, mc_g;
  for (const auto& row : csv.rows) {
    theory.add({row[c_gamma], row[c_expected], row[c_goodput], row[c_latency]});
    if (draws > 0) {
      mc_n.add({row[c_gamma], row[c_mc_accepted], 1.96 * row[c_mc_accepted_se]});
      mc_g.add({row[c_gamma], row[c_mc_goodput], 1.96 * row[c_mc_goodput_se]});
    }
  }
  g << datablock("theory", theory) << datablock("mcN", mc_n) << datablock("mcG", mc_g);
  g << "set encoding utf8\nset multiplot layout 1,2\nset grid\nset key bottom right Left reverse opaque\n"
    << "set xlabel 'verified draft length γ'\nset xrange [-0.5:" << csv.rows.back()[c_gamma] + 0.5 << "]\n"
    << "set yrange [0:*]\n";
  g << "set title 'Accepted drafts E(N | γ) (App. D eq. 4)'\nset ylabel 'E(N | γ)'\nplot "
    << "$theory using 1:2 with linespoints lw 2 pt 6 lc " << color(0) << " title 'theory, eq. (4)'";
  if (draws > 0) g << ", \\\n  " << mc_series("mcN", 1) << ", \\\n  " << mc_key(draws);
  g << "\nset title "
    << quoted(count_target ? "Goodput (N + 1) / L(γ), target token counted" : "Goodput E(N | γ) / L(γ) (App. D eq. 6)")
    << "\nset ylabel 'tokens per unit time'\n"
    << "set arrow 1 from " << best << ", graph 0 to " << best << ", graph 1 nohead dt 2 lw 1.5 lc rgb '#555555'\n"
    << "set label 1 " << quoted("optimum γ = " + std::to_string(best)) << " at " << best << ", graph 0.75 offset 0.6,0\n"
    << "set y2label 'latency L(γ)'\nset y2tics\nset y2range [0:*]\n"
    << "plot $theory using 1:3 with linespoints lw 2 pt 6 lc " << color(0) << " title 'theory, eq. (6)', \\\n"
    << "  $theory using 1:4 axes x1y2 with lines dt 2 lw 1.5 lc rgb '#777777' title 'latency profile (right axis)', \\\n"
    << "  $theory every ::" << best << "::" << best << " using 1:3 with points pt 7 ps 2 lc " << color(2)
    << " title 'goodput-optimal γ'";
  if (draws > 0) g << ", \\\n  " << mc_series("mcG", 1) << ", \\\n  " << mc_key(draws);
  g << "\nunset multiplot\n";
  return g.str();
}

int run(std::span<const std::string> args) {
  option_parser o("specdec-sim sv",
                  "Speculative Verification (Kim et al., appendix D): with a[i] the probability that drafted token\n"
                  "i + 1 is accepted given tokens 1..i were, N is the accepted prefix of gamma verified drafts;\n"
                  "E(N | gamma) is eq. (4) and the goodput estimate E(N | gamma) / L(gamma) eq. (6). One CSV row per\n"
                  "gamma, the goodput-optimal gamma flagged; Monte-Carlo columns from simulate::sv::accepted.\n"
                  "Latency L(k) of a step verifying k drafts: --latency L0,L1,..., or t_base + t_per_token max(0, k - knee).");
  o.value("a", "LIST", "0.95,0.93,0.9,0.88,0.85,0.82,0.8,0.77,0.74,0.7,0.66,0.62,0.58,0.54,0.5,0.46",
          "acceptance probabilities a[0], a[1], ... in [0, 1]");
  o.value("max-gamma", "N", "", "largest gamma (default: the length of --a)");
  o.value("latency", "LIST", "", "latency profile L(0), L(1), ..., L(max-gamma): > 0, non-decreasing");
  o.value("t-base", "X", "1", "L(k) for k <= knee");
  o.value("t-per-token", "X", "0.1", "extra latency per verified draft beyond the knee");
  o.value("knee", "K", "4", "drafts verified at no extra latency (the memory-bound region)");
  o.flag("count-target-token", "goodput counts N + 1 tokens (the target's own token too)");
  o.common(100000);
  if (!o.parse(args)) return 0;

  const std::vector<double> a = o.numbers("a");
  for (const double x : a)
    if (!(x >= 0 && x <= 1)) throw usage_error("--a values must be in [0, 1]");
  std::size_t max_gamma = a.size();
  if (o.given("max-gamma")) {
    const std::vector<int> m = o.integers("max-gamma");
    if (m.size() != 1 || m[0] < 0 || static_cast<std::size_t>(m[0]) > a.size())
      throw usage_error("--max-gamma takes one integer in [0, length of --a]");
    max_gamma = static_cast<std::size_t>(m[0]);
  }
  std::vector<double> latency(max_gamma + 1);
  if (o.given("latency")) {
    latency = o.numbers("latency");
    if (latency.size() < max_gamma + 1) throw usage_error("--latency needs max-gamma + 1 values L(0)..L(max-gamma)");
  } else {
    const double base = o.number("t-base"), per = o.number("t-per-token");
    const std::vector<int> knee = o.integers("knee");
    if (knee.size() != 1 || knee[0] < 0) throw usage_error("--knee takes one integer >= 0");
    const auto knee_at = static_cast<std::size_t>(knee[0]);
    for (std::size_t k = 0; k <= max_gamma; ++k) latency[k] = base + per * static_cast<double>(k > knee_at ? k - knee_at : 0);
  }
  for (const double l : latency)
    if (!(l > 0) || !std::isfinite(l)) throw usage_error("latencies must be finite and > 0");
  const bool count_target = o.flag_set("count-target-token");
  const std::uint64_t draws = o.draws();
  const specdec::exec::backend policy = policy_of(o);
  const std::span<const double> as(a), ls(latency);

  // The goodput curve and its optimum (optimize/sv_length.hpp's brute force: smallest gamma on ties).
  const auto counting = count_target ? opt::token_counting::with_target_token : opt::token_counting::accepted_drafts;
  const auto goodput_at = [&](std::size_t gamma) {
    const double n = sv::expected_accepted(as, gamma);
    return count_target ? sv::goodput(n + 1.0, latency[gamma]) : sv::estimated_goodput(as, gamma, ls);
  };
  const std::size_t best = opt::brute_force_length(as.first(max_gamma), ls, counting).length;

  table csv{{"gamma", "expected_accepted", "accepted_sd", "latency", "goodput", "optimal", "mc_accepted", "mc_accepted_se",
             "mc_goodput", "mc_goodput_se", "mc_draws"},
            {}};
  progress bar("specdec-sim sv", static_cast<std::uint64_t>(max_gamma) + 1, o.quiet());
  for (std::size_t gamma = 0; gamma <= max_gamma; ++gamma) {
    std::vector<double> row{static_cast<double>(gamma),
                            sv::expected_accepted(as, gamma),
                            std::sqrt(sv::variance_accepted(as, gamma)),
                            latency[gamma],
                            goodput_at(gamma),
                            gamma == best ? 1.0 : 0.0,
                            nan_v,
                            nan_v,
                            nan_v,
                            nan_v,
                            static_cast<double>(draws)};
    if (draws > 0) {
      const auto r = sv_accepted(policy, as, gamma, {o.seed(), point_stream({4.0, static_cast<double>(gamma)}), 0, draws});
      put_estimate(row, c_mc_accepted, r.accepted.summary());
      put_estimate(row, c_mc_goodput, sim::sv::goodput(r, ls, count_target));
    }
    csv.add(row);
    bar.advance();
  }
  write_csv(csv, o.csv_path());
  if (!o.quiet()) std::cerr << "specdec-sim sv: goodput-optimal gamma = " << best << "\n";
  if (const auto png = o.plot_path()) return render_png(*png, 1400, 560, plot_body(csv, best, count_target, draws), o.quiet());
  return 0;
}

[[maybe_unused]] const bool registered = add_subcommand(
    {"sv", "SV appendix D: E(N | gamma) (eq. 4) and goodput (eq. 6) against gamma, optimum marked; Monte-Carlo", &run});

}  // namespace
