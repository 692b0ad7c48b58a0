// specdec-sim sd: standard speculative decoding (Leviathan, Kalman and Matias 2023): expected tokens
// per iteration (eq. (1)), walltime speedup (Thm 3.8), operations factor (Thm 3.11) and the optimal
// gamma over grids of alpha, gamma and c, with Monte-Carlo estimates.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "monte_carlo.hpp"
#include "output.hpp"
#include "registry.hpp"
#include "specdec/optimize/gamma.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/theory/sd.hpp"

namespace {

namespace sd = specdec::theory::sd;
namespace sim = specdec::simulate;
namespace opt = specdec::optimize;
using namespace specdec_sim;

constexpr double nan_v = NAN;

struct settings {
  std::vector<double> alphas, cs;
  std::vector<std::size_t> gammas;
  std::optional<double> c_hat;  // nullopt: the operations factor uses c_hat = c
  int max_gamma = 128;
  std::uint64_t draws = 0, seed = 1;
  specdec::exec::backend policy = specdec::exec::backend::seq;
};

// Simulated SD iterations per (alpha, gamma), each run once (the stream depends on the point only,
// so a point draws the same numbers in every grid).
class mc_cache {
 public:
  explicit mc_cache(const settings& s) : s_(s) {}
  const sim::sd::iteration_tally& at(double alpha, std::size_t gamma) {
    const auto key = std::make_pair(alpha, gamma);
    auto it = cache_.find(key);
    if (it == cache_.end())
      it = cache_
               .emplace(key, sd_chain(s_.policy, alpha, gamma,
                                      {s_.seed, point_stream({1.0, alpha, static_cast<double>(gamma)}), 0, s_.draws}))
               .first;
    return it->second;
  }

 private:
  const settings& s_;
  std::map<std::pair<double, std::size_t>, sim::sd::iteration_tally> cache_;
};

// Column indices of the CSV table (see run()).
enum column : std::size_t { c_alpha, c_gamma, c_c, c_mc_tokens = 10, c_mc_speedup = 12, c_mc_opt_speedup = 14 };

// Three panels: E[T] against alpha per gamma; the optimal gamma and the speedup at it against
// alpha per c (Leviathan et al.'s Figures 2 and 3 in kind), theory curves and Monte-Carlo points.
std::string plot_body(const settings& s, const table& csv) {
  std::ostringstream g;
  // Curves over [0, the largest alpha asked for]: near alpha = 1 the optimal gamma and the speedup
  // grow without bound and would flatten the rest of the figure.
  const double top = std::max(0.05, *std::max_element(s.alphas.begin(), s.alphas.end()));
  table tokens_curves, gamma_curves, speedup_curves;
  for (int i = 0; i <= 300; ++i) {
    const double alpha = top * i / 300.0;
    std::vector<double> t{alpha}, og{alpha}, os{alpha};
    for (const std::size_t gamma : s.gammas) t.push_back(sd::expected_tokens(alpha, gamma));
    for (const double c : s.cs) {
      const auto best = opt::sd::integer_optimal_gamma(alpha, c, s.max_gamma);
      og.push_back(best.x);
      os.push_back(best.value);
    }
    tokens_curves.add(t);
    gamma_curves.add(og);
    speedup_curves.add(os);
  }
  g << datablock("tokens", tokens_curves) << datablock("gammas", gamma_curves) << datablock("speedups", speedup_curves);
  const bool have_mc = s.draws > 0;
  if (have_mc) {
    // Points (alpha, mean, 1.96 se) of the estimate in column `mean` of the rows where column `key`
    // equals `value` and column `other` equals `other_value` (one row per alpha).
    const auto points = [&](const std::string& name, std::size_t mean, std::size_t key, double value, std::size_t other,
                            double other_value) {
      table b;
      for (const auto& row : csv.rows)
        if (row[key] == value && row[other] == other_value) b.add({row[c_alpha], row[mean], 1.96 * row[mean + 1]});
      g << datablock(name, b);
    };
    for (std::size_t k = 0; k < s.gammas.size(); ++k)
      points("mcT" + std::to_string(k), c_mc_tokens, c_gamma, static_cast<double>(s.gammas[k]), c_c, s.cs.front());
    for (std::size_t k = 0; k < s.cs.size(); ++k)
      points("mcS" + std::to_string(k), c_mc_opt_speedup, c_c, s.cs[k], c_gamma, static_cast<double>(s.gammas.front()));
  }
  g << "set encoding utf8\nset multiplot layout 1,3\nset grid\nset key top left Left reverse\n"
    << "set xlabel 'acceptance rate α'\nset xrange [0:" << top << "]\n";
  // Panel 1: E[T] per gamma.
  g << "set title 'Expected tokens per iteration (eq. 1)'\nset ylabel 'E[tokens per iteration]'\nset yrange [1:*]\nplot ";
  for (std::size_t k = 0; k < s.gammas.size(); ++k) {
    g << (k ? ", \\\n  " : "") << line_series("tokens", 2 + static_cast<int>(k), k, "γ = " + std::to_string(s.gammas[k]));
    if (have_mc) g << ", \\\n  " << mc_series("mcT" + std::to_string(k), k);
  }
  if (have_mc) g << ", \\\n  " << mc_key(s.draws);
  // Panel 2: the optimal gamma per c.
  g << "\nset title 'Optimal γ (Thm 3.8), γ ≤ " << s.max_gamma << "'\nset ylabel 'optimal γ'\nset yrange [0:*]\nplot ";
  for (std::size_t k = 0; k < s.cs.size(); ++k)
    g << (k ? ", \\\n  " : "") << "$gammas using 1:" << 2 + k << " with steps lw 2 lc " << color(k) << " title "
      << quoted("c = " + short_number(s.cs[k]));
  // Panel 3: the speedup at the optimal gamma per c.
  g << "\nset title 'Speedup at the optimal γ (Thm 3.8)'\nset ylabel 'walltime improvement'\nset yrange [1:*]\nplot ";
  for (std::size_t k = 0; k < s.cs.size(); ++k) {
    g << (k ? ", \\\n  " : "") << line_series("speedups", 2 + static_cast<int>(k), k, "c = " + short_number(s.cs[k]));
    if (have_mc) g << ", \\\n  " << mc_series("mcS" + std::to_string(k), k);
  }
  if (have_mc) g << ", \\\n  " << mc_key(s.draws);
  g << "\nunset multiplot\n";
  return g.str();
}

int run(std::span<const std::string> args) {
  option_parser o("specdec-sim sd",
                  "Standard speculative decoding (Leviathan, Kalman, Matias 2023) with i.i.d. acceptance alpha:\n"
                  "expected tokens per iteration E[T] (eq. (1), bonus token counted), walltime improvement\n"
                  "(Thm 3.8), operations factor (Thm 3.11) and the optimal gamma for each (alpha, c), plus\n"
                  "Monte-Carlo estimates from simulate::sd::chain (on the GPU with --policy cuda). One CSV row\n"
                  "per (alpha, c, gamma).");
  o.value("alpha", "LIST", "0.1:0.95:0.05", "acceptance rates in [0, 1] (list a,b or range start:stop:step)");
  o.value("gamma", "LIST", "1,2,3,4,6,8,12", "draft lengths >= 0");
  o.value("c", "LIST", "0.01,0.05,0.1,0.2,0.5", "cost ratios: time of a draft call / time of a target call");
  o.value("c-hat", "X", "", "draft / target arithmetic per token for the operations factor (default: c)");
  o.value("max-gamma", "N", "128", "largest gamma the optimum may take");
  o.common(20000);
  if (!o.parse(args)) return 0;

  settings s{o.numbers("alpha"), o.numbers("c"), {}, std::nullopt, 0, o.draws(), o.seed(), policy_of(o)};
  if (o.given("c-hat")) s.c_hat = o.number("c-hat");
  const std::vector<int> mg = o.integers("max-gamma");
  if (mg.size() != 1 || mg[0] < 0) throw usage_error("--max-gamma takes one integer >= 0");
  s.max_gamma = mg[0];
  for (const double a : s.alphas)
    if (!(a >= 0 && a <= 1)) throw usage_error("--alpha values must be in [0, 1]");
  for (const double c : s.cs)
    if (!(c >= 0)) throw usage_error("--c values must be >= 0");
  for (const int gamma : o.integers("gamma")) {
    if (gamma < 0) throw usage_error("--gamma values must be >= 0");
    s.gammas.push_back(static_cast<std::size_t>(gamma));
  }
  if (s.c_hat && !(*s.c_hat >= 0)) throw usage_error("--c-hat must be >= 0");

  table csv{{"alpha", "gamma", "c", "expected_tokens", "tokens_sd", "speedup", "operations_factor", "optimal_gamma",
             "optimal_speedup", "real_optimal_gamma", "mc_tokens", "mc_tokens_se", "mc_speedup", "mc_speedup_se",
             "mc_optimal_speedup", "mc_optimal_speedup_se", "mc_draws"},
            {}};
  mc_cache mc(s);
  progress bar("specdec-sim sd", s.alphas.size() * s.cs.size(), o.quiet());
  for (const double alpha : s.alphas) {
    for (const double c : s.cs) {
      const auto best = opt::sd::integer_optimal_gamma(alpha, c, s.max_gamma);
      const double real_best = opt::sd::real_optimal_gamma(alpha, c, s.max_gamma).x;
      sim::estimate at_best{};
      if (s.draws > 0) at_best = mc.at(alpha, static_cast<std::size_t>(best.x)).speedup(c);
      for (const std::size_t gamma : s.gammas) {
        std::vector<double> row{alpha,
                                static_cast<double>(gamma),
                                c,
                                sd::expected_tokens(alpha, gamma),
                                std::sqrt(sd::tokens_variance(alpha, gamma)),
                                sd::speedup(alpha, gamma, c),
                                sd::operations_factor(alpha, gamma, s.c_hat.value_or(c)),
                                static_cast<double>(best.x),
                                best.value,
                                real_best,
                                nan_v,
                                nan_v,
                                nan_v,
                                nan_v,
                                nan_v,
                                nan_v,
                                static_cast<double>(s.draws)};
        if (s.draws > 0) {
          put_estimate(row, c_mc_tokens, mc.at(alpha, gamma).tokens());
          put_estimate(row, c_mc_speedup, mc.at(alpha, gamma).speedup(c));
          put_estimate(row, c_mc_opt_speedup, at_best);
        }
        csv.add(row);
      }
      bar.advance();
    }
  }
  write_csv(csv, o.csv_path());
  if (const auto png = o.plot_path()) {
    if (s.gammas.empty() || s.cs.empty()) throw usage_error("--plot needs at least one gamma and one c");
    return render_png(*png, 1800, 560, plot_body(s, csv), o.quiet());
  }
  return 0;
}

[[maybe_unused]] const bool registered = add_subcommand(
    {"sd", "standard SD: E[T] (eq. 1), speedup (Thm 3.8), operations (Thm 3.11), optimal gamma; Monte-Carlo", &run});

}  // namespace
