// specdec-sim lengths: draft-length policies on a simulated acceptance profile (length/,
// simulate/lengths.hpp): goodput (tokens per unit time) of fixed gamma, transformers' heuristic
// schedule and vLLM's dynamic goodput, each against its parameter, with the oracle's bound.
#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "monte_carlo.hpp"
#include "output.hpp"
#include "registry.hpp"
#include "specdec/length/dynamic_goodput.hpp"
#include "specdec/length/heuristic.hpp"
#include "specdec/length/oracle.hpp"
#include "specdec/simulate/lengths.hpp"

namespace {

using namespace specdec_sim;

// Policies of the CSV's first column.
enum policy_code { fixed = 0, heuristic = 1, dynamic = 2, oracle = 3 };
const char* const policy_names[] = {"fixed gamma", "heuristic (max)", "dynamic goodput (warm-up)", "oracle"};

struct settings {
  std::vector<double> alpha;
  double t_d = 0.05, slope = 0.08;
  double latency(int k) const { return 1.0 + slope * k; }
};

// Goodput against each policy's parameter, one panel, the oracle as a horizontal line.
std::string plot_body(const table& csv, double oracle_rate) {
  std::ostringstream g;
  for (int p = fixed; p <= dynamic; ++p) {
    table points;
    for (const auto& row : csv.rows)
      if (row[0] == p) points.add({row[1], row[2]});
    g << datablock(std::to_string(p).insert(0, 1, 'p'), points);
  }
  g << "set encoding utf8\nset grid\nset key bottom right\nset xlabel 'parameter (gamma, max length, warm-up rounds)'\n"
    << "set ylabel 'tokens per unit time'\nset logscale x 2\nset title 'draft-length policies on a simulated profile'\n"
    << "plot " << oracle_rate << " with lines dt 2 lw 1.5 lc rgb '#555555' title 'oracle bound'";
  for (int p = fixed; p <= dynamic; ++p) {
    std::ostringstream title;
    title << policy_names[p] << " (x = parameter + 1)";
    g << ", \\\n  $p" << p << " using ($1 + 1):2 with linespoints lw 2 lc " << color(static_cast<std::size_t>(p)) << " title "
      << quoted(title.str());
  }
  g << "\n";
  return g.str();
}

int run(std::span<const std::string> args) {
  option_parser o("specdec-sim lengths",
                  "Draft-length policies on a simulated profile: draft j is accepted with the independent\n"
                  "probability alpha_j until the first rejection, a round of k drafts costs k t_d + L(k) with\n"
                  "L(k) = 1 + slope k. One CSV row per (policy, parameter): the simulated tokens per unit time\n"
                  "(simulate::length_policy_rate over --draws rounds) and the oracle's bound max_k E(k) / T(k)\n"
                  "(length/oracle.hpp). Policies: fixed gamma (parameter gamma), transformers' heuristic schedule\n"
                  "(parameter: its maximum length), vLLM's dynamic goodput (parameter: warm-up rounds).");
  o.value("alpha", "LIST", "0.95,0.85,0.7,0.6,0.45,0.3,0.2,0.1", "acceptance of draft j given the drafts before it");
  o.value("t-d", "X", "0.05", "time of one draft step");
  o.value("slope", "X", "0.08", "verification latency L(k) = 1 + slope k");
  o.common(100000);
  if (!o.parse(args)) return 0;
  settings s{o.numbers("alpha"), o.number("t-d"), o.number("slope")};
  if (s.alpha.empty()) throw usage_error("--alpha needs at least one value");
  for (const double a : s.alpha)
    if (!(a >= 0 && a <= 1)) throw usage_error("--alpha values must be in [0, 1]");
  if (!(s.t_d >= 0) || !(s.slope >= 0)) throw usage_error("--t-d and --slope must be >= 0");
  if (policy_of(o) != specdec::exec::backend::seq) throw usage_error("specdec-sim lengths runs on the seq policy only");
  const std::uint64_t rounds = o.draws();
  if (rounds == 0) throw usage_error("--draws (rounds) must be > 0");
  const auto latency = [&s](int k) { return s.latency(k); };
  const std::size_t n = s.alpha.size();
  const specdec::oracle_length best(s.alpha, s.t_d, latency);
  const auto none = [](const specdec::round_record&) {};
  const auto rate = [&](auto&& choose, auto&& record, double point) {
    return specdec::simulate::length_policy_rate(s.alpha, s.t_d, latency, rounds, o.seed() + point_stream({point}), choose,
                                                 record);
  };

  table csv{{"policy", "parameter", "rate", "oracle_rate", "oracle_gamma", "rounds"}, {}};
  const auto add = [&](int policy, double parameter, double r) {
    csv.add({double(policy), parameter, r, best.rate(), double(best.next_length({})), double(rounds)});
  };
  progress bar("specdec-sim lengths", 2 * n + 6, o.quiet());
  for (std::size_t k = 0; k <= n; ++k, bar.advance())
    add(fixed, double(k), rate([k](const specdec::decode_stats&) { return k; }, none, 10.0 + double(k)));
  for (std::size_t m = 1; m <= n; ++m, bar.advance()) {
    specdec::heuristic_length h(std::min<std::size_t>(5, m), 1, m);
    add(heuristic, double(m),
        rate([&](const specdec::decode_stats& st) { return h.next_length(st); },
             [&](const specdec::round_record& r) { h.record(r); }, 100.0 + double(m)));
  }
  std::vector<double> itl;
  for (std::size_t k = 0; k <= n; ++k) itl.push_back(latency(int(k)) + s.t_d * double(k));
  for (const std::size_t warmup : {std::size_t{0}, std::size_t{1}, std::size_t{10}, std::size_t{100}, std::size_t{1000}}) {
    specdec::dynamic_goodput_length d(specdec::step_latency_table({1.0}, {itl}), warmup);
    add(dynamic, double(warmup), rate(specdec::simulate::single_request_choice(d, n), none, 1000.0 + double(warmup)));
    bar.advance();
  }
  add(oracle, double(best.next_length({})),
      rate([&](const specdec::decode_stats& st) { return best.next_length(st); }, none, 5000.0));
  write_csv(csv, o.csv_path());
  if (const auto png = o.plot_path()) return render_png(*png, 1000, 620, plot_body(csv, best.rate()), o.quiet());
  return 0;
}

[[maybe_unused]] const bool registered = add_subcommand(
    {"lengths", "draft-length policies (fixed, heuristic, dynamic goodput) against the oracle on a simulated profile", &run});

}  // namespace
