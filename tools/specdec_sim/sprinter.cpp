// specdec-sim sprinter: SPRINTER's Figures 5 and 6 (Zhong, Teku and Tandon; Theorems 3.3, 3.4):
// E[N] and E[T_stop] against eta_tp for each eta_fp, theory curves with Monte-Carlo points.
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
#include "specdec/simulate/sprinter.hpp"
#include "specdec/theory/sprinter.hpp"

namespace {

namespace sprinter = specdec::theory::sprinter;
namespace sim = specdec::simulate;
using namespace specdec_sim;

constexpr double nan_v = NAN;

// Columns of the CSV table (see run()).
enum column : std::size_t { c_eta_tp, c_eta_fp, c_mc_tokens = 8, c_mc_stopping_time = 10 };

struct settings {
  std::vector<double> tps, fps;
  int r = 5;
  double t_d = 0.1, t_v = 0.0;
};

// The two panels: Fig. 5 (E[N]) and Fig. 6 (E[T_stop]).
std::string plot_body(const settings& s, const table& csv, std::uint64_t draws) {
  std::ostringstream g;
  const double per_token = s.t_d + s.t_v;
  // Theory curves on a fine eta_tp grid: columns eta_tp, then E[N] and E[T_stop] per eta_fp.
  table curves;
  for (int i = 0; i <= 200; ++i) {
    const double tp = i / 200.0;
    std::vector<double> row{tp};
    for (const double fp : s.fps) row.push_back(sprinter::expected_tokens(tp, fp, s.r));
    for (const double fp : s.fps) row.push_back(sprinter::expected_stopping_time(tp, fp, s.r, per_token));
    curves.add(row);
  }
  g << datablock("theory", curves);
  // Monte-Carlo points per eta_fp: eta_tp, mean, 1.96 se (columns of the CSV table).
  for (std::size_t f = 0; f < s.fps.size(); ++f) {
    table n, t;
    for (const auto& row : csv.rows) {
      if (row[c_eta_fp] != s.fps[f] || std::isnan(row[c_mc_tokens])) continue;
      n.add({row[c_eta_tp], row[c_mc_tokens], 1.96 * row[c_mc_tokens + 1]});
      t.add({row[c_eta_tp], row[c_mc_stopping_time], 1.96 * row[c_mc_stopping_time + 1]});
    }
    g << datablock("mcN" + std::to_string(f), n) << datablock("mcT" + std::to_string(f), t);
  }
  const bool have_mc = !csv.rows.empty() && !std::isnan(csv.rows.front()[c_mc_tokens]);
  g << "set encoding utf8\nset multiplot layout 1,2\nset grid\nset key top left Left reverse\n"
    << "set xlabel 'true-positive rate η_{TP}'\nset xrange [0:1]\nset yrange [0:*]\n";
  for (int panel = 0; panel < 2; ++panel) {
    const bool tokens = panel == 0;
    g << "set title "
      << quoted(tokens ? "Fig. 5: tokens accepted by the verifier, r = " + std::to_string(s.r)
                       : "Fig. 6: expected stopping time, r = " + std::to_string(s.r) + ", t_d = " + short_number(s.t_d))
      << "\nset ylabel " << quoted(tokens ? "E[N_{SPRINTER}]" : "E[T_{stop}]") << "\n";
    // The perfect verifier (eta_tp = 1, eta_fp = 0): N = r, T_stop = (r + 1) t_d.
    const double ideal = tokens ? s.r : (s.r + 1) * per_token;
    g << "plot " << ideal << " with lines dt 2 lw 1.5 lc rgb '#555555' title "
      << quoted(tokens ? "perfect verifier: r" : "perfect verifier: (r+1) t_d");
    for (std::size_t f = 0; f < s.fps.size(); ++f) {
      const int column = 2 + static_cast<int>(f) + (tokens ? 0 : static_cast<int>(s.fps.size()));
      g << ", \\\n  " << line_series("theory", column, f, "theory, η_{FP} = " + short_number(s.fps[f]));
      if (have_mc) g << ", \\\n  " << mc_series(std::string(tokens ? "mcN" : "mcT") + std::to_string(f), f);
    }
    if (have_mc) g << ", \\\n  " << mc_key(draws);
    g << "\n";
  }
  g << "unset multiplot\n";
  return g.str();
}

int run(std::span<const std::string> args) {
  option_parser o("specdec-sim sprinter",
                  "SPRINTER with an i.i.d. verifier (Zhong, Teku, Tandon; Theorems 3.3 and 3.4): when the first r\n"
                  "draft tokens are acceptable, N is the number of tokens the verifier accepts before its first\n"
                  "rejection (eq. (3)) and T_stop = (t_d + t_v)(N + 1) the drafting time until then (eq. (4), t_v = 0).\n"
                  "One CSV row per (eta_tp, eta_fp): closed forms, and Monte-Carlo estimates from\n"
                  "simulate::sprinter::verifier_chain with standard errors. The defaults reproduce Figures 5 and 6.");
  o.value("eta-tp", "LIST", "0:1:0.05", "true-positive rates (list a,b or range start:stop:step)");
  o.value("eta-fp", "LIST", "0.1,0.5", "false-positive rates, each < 1");
  o.value("r", "N", "5", "acceptable tokens at the head of every draft");
  o.value("t-d", "X", "0.1", "draft time per token");
  o.value("t-v", "X", "0", "verifier time per token (the paper neglects it)");
  o.common(100000);
  if (!o.parse(args)) return 0;

  settings s{o.numbers("eta-tp"), o.numbers("eta-fp"), 0, o.number("t-d"), o.number("t-v")};
  const std::vector<int> r = o.integers("r");
  if (r.size() != 1 || r[0] < 0) throw usage_error("--r takes one integer >= 0");
  s.r = r[0];
  for (const double x : s.tps)
    if (!(x >= 0 && x <= 1)) throw usage_error("--eta-tp values must be in [0, 1]");
  for (const double x : s.fps)
    if (!(x >= 0 && x < 1)) throw usage_error("--eta-fp values must be in [0, 1) (E[N] is infinite at 1)");
  if (!(s.t_d >= 0) || !(s.t_v >= 0)) throw usage_error("--t-d and --t-v must be >= 0");
  const std::uint64_t draws = o.draws();
  const specdec::exec::backend policy = policy_of(o);

  table csv{{"eta_tp", "eta_fp", "r", "t_d", "t_v", "expected_tokens", "tokens_sd", "expected_stopping_time", "mc_tokens",
             "mc_tokens_se", "mc_stopping_time", "mc_stopping_time_se", "mc_draws"},
            {}};
  progress bar("specdec-sim sprinter", s.tps.size() * s.fps.size(), o.quiet());
  for (const double fp : s.fps) {
    for (const double tp : s.tps) {
      std::vector<double> row{tp,
                              fp,
                              static_cast<double>(s.r),
                              s.t_d,
                              s.t_v,
                              sprinter::expected_tokens(tp, fp, s.r),
                              std::sqrt(sprinter::tokens_variance(tp, fp, s.r)),
                              sprinter::expected_stopping_time(tp, fp, s.r, s.t_d + s.t_v),
                              nan_v,
                              nan_v,
                              nan_v,
                              nan_v,
                              static_cast<double>(draws)};
      if (draws > 0) {
        const auto mc =
            sprinter_chain(policy, tp, fp, s.r, {o.seed(), point_stream({3.0, tp, fp, static_cast<double>(s.r)}), 0, draws});
        put_estimate(row, c_mc_tokens, mc.tokens());
        put_estimate(row, c_mc_stopping_time, mc.stopping_time(s.t_d, s.t_v));
      }
      csv.add(row);
      bar.advance();
    }
  }
  write_csv(csv, o.csv_path());
  if (const auto png = o.plot_path()) return render_png(*png, 1400, 560, plot_body(s, csv, draws), o.quiet());
  return 0;
}

[[maybe_unused]] const bool registered = add_subcommand(
    {"sprinter", "SPRINTER Figures 5 and 6: E[N] and E[T_stop] against eta_tp (Thm 3.3, 3.4) with Monte-Carlo", &run});

}  // namespace
