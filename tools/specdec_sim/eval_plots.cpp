// specdec-sim mtad, sv-batch and length-sweep: the figures of the MTAD, SV and draft-length
// evaluations, drawn from the CSV files that specdec_mtad_eval, specdec_sv_eval and
// specdec_length_eval write (--csv). The evaluations run the
// reference n-gram models; these subcommands only read their tables, group the rows into series
// and plot them, so a figure can be redrawn without re-running the evaluation.
//   MTAD (seed 003, Figure 3 / Table 7): tokens per iteration and target perplexity against tau,
//   one line per (beam mode, W), with strict SD and target-only as horizontal references.
//   SV (seed 001, Figure 3): goodput against batch size, one line per method.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "output.hpp"
#include "registry.hpp"

namespace {

using namespace specdec_sim;

// A CSV file of the evaluations: a header line, then comma-separated fields (no quoting is needed:
// no field holds a comma).
struct csv_file {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  std::size_t column(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw usage_error("the CSV has no column '" + name + "' (is it the right evaluation's output?)");
    return static_cast<std::size_t>(it - header.begin());
  }
  double number(const std::vector<std::string>& row, std::size_t c) const {
    if (c >= row.size() || row[c].empty()) return std::nan("");
    return std::stod(row[c]);
  }
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, ',');) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

csv_file read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error("cannot read --from " + path);
  csv_file f;
  std::string line;
  if (!std::getline(in, line)) throw usage_error(path + " is empty");
  f.header = split(line);
  while (std::getline(in, line))
    if (!line.empty()) f.rows.push_back(split(line));
  return f;
}

// Rows grouped into named series, each a table (x, y1, y2, ...) sorted by x.
using series_map = std::map<std::string, table>;

void sort_by_x(series_map& s) {
  for (auto& [name, t] : s) std::sort(t.rows.begin(), t.rows.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
}

// One panel: every series' column `column` against x, one colour each.
std::string panel(const series_map& s, int column, const std::string& title, const std::string& ylabel) {
  std::ostringstream g;
  g << "set title " << quoted(title) << "\nset ylabel " << quoted(ylabel) << "\nplot ";
  std::size_t i = 0;
  for (const auto& [name, t] : s) {
    (void)t;
    // The palette has 8 colours; series 8 and on are dashed, with other points, so no two look alike.
    g << (i ? ", \\\n     " : "") << "$s" << i << " using 1:" << column << " with linespoints lw 2 ps 0.7 pt " << (7 + i / 8)
      << " dt " << (i / 8 + 1) << " lc " << color(i) << " title " << quoted(name);
    ++i;
  }
  return g.str() + "\n";
}

std::string datablocks(const series_map& s) {
  std::string out;
  std::size_t i = 0;
  for (const auto& [name, t] : s) out += datablock(std::to_string(i++).insert(0, 1, 's'), t);
  return out;
}

// Declares and reads the options both subcommands share; false when --help was printed.
bool parse_plot_options(option_parser& o, std::span<const std::string> args) {
  o.value("from", "FILE", "", "the CSV written by the evaluation program (--csv FILE)");
  o.value("csv", "FILE", "", "write the grouped CSV table to FILE instead of stdout");
  o.value("plot", "FILE.png", "", "draw the figure into this PNG (needs gnuplot on PATH)");
  o.flag("quiet", "no messages on stderr");
  o.flag("help", "show this help and exit");
  return o.parse(args);
}

int run_mtad(std::span<const std::string> args) {
  option_parser o("specdec-sim mtad",
                  "MTAD ablation (seed 003, Figure 3 / Table 7): tokens per iteration and target perplexity against tau,\n"
                  "one line per (beam mode, W), from the CSV of `specdec_mtad_eval --csv FILE`. Writes the grouped table\n"
                  "as CSV to stdout and, with --plot, a PNG.");
  if (!parse_plot_options(o, args)) return 0;
  if (!o.given("from")) throw usage_error("--from FILE is required");
  const csv_file f = read_csv(o.text("from"));
  const std::size_t c_method = f.column("method"), c_width = f.column("width"), c_tau = f.column("tau"),
                    c_mode = f.column("mode"), c_tpi = f.column("tokens_per_iteration"), c_ppl = f.column("perplexity"),
                    c_speed = f.column("simulated_speedup");
  series_map series;
  std::map<std::string, std::vector<double>> references;  // method -> {tokens per iteration, perplexity}
  for (const auto& row : f.rows) {
    if (row.size() < f.header.size()) continue;
    if (row[c_method] != "mtad") {
      references[row[c_method]] = {f.number(row, c_tpi), f.number(row, c_ppl)};
      continue;
    }
    const std::string name = row[c_mode] + " W=" + row[c_width];
    auto& t =
        series.try_emplace(name, table{{"tau", "tokens_per_iteration", "perplexity", "simulated_speedup"}, {}}).first->second;
    t.add({f.number(row, c_tau), f.number(row, c_tpi), f.number(row, c_ppl), f.number(row, c_speed)});
  }
  if (series.empty()) throw usage_error(o.text("from") + " holds no MTAD rows");
  sort_by_x(series);
  table out{{"series", "tau", "tokens_per_iteration", "perplexity", "simulated_speedup"}, {}};
  double id = 0;
  for (const auto& [name, t] : series) {
    for (const auto& r : t.rows) out.add({id, r[0], r[1], r[2], r[3]});
    if (!o.quiet()) std::cerr << "specdec-sim mtad: series " << id << " = " << name << "\n";
    ++id;
  }
  write_csv(out, o.csv_path());
  const auto png = o.plot_path();
  if (!png) return 0;
  std::ostringstream g;
  g << datablocks(series) << "set encoding utf8\nset multiplot layout 1,2\nset grid\nset key outside right\n"
    << "set xlabel 'tau'\nset xrange [0:1]\n";
  for (const auto& [method, v] : references)
    g << "set label " << quoted(method + ": " + short_number(v[0]) + " tokens/iteration, ppl " + short_number(v[1]))
      << " at graph 0.02, graph " << (method == "strict_sd" ? 0.97 : 0.92) << " font ',9' noenhanced\n";
  g << panel(series, 2, "Tokens per iteration (block efficiency)", "tokens per target call") << "unset label\n"
    << panel(series, 3, "Perplexity of the output under the target (eq. 1)", "perplexity") << "unset multiplot\n";
  return render_png(*png, 1600, 600, g.str(), o.quiet());
}

int run_sv_batch(std::span<const std::string> args) {
  option_parser o("specdec-sim sv-batch",
                  "SV batch goodput (seed 001, Figure 3): goodput against batch size, one line per method, from the CSV of\n"
                  "`specdec_sv_eval --csv FILE`. Writes the grouped table as CSV to stdout and, with --plot, a PNG.");
  if (!parse_plot_options(o, args)) return 0;
  if (!o.given("from")) throw usage_error("--from FILE is required");
  const csv_file f = read_csv(o.text("from"));
  const std::size_t c_batch = f.column("batch"), c_method = f.column("method"), c_goodput = f.column("goodput"),
                    c_speed = f.column("speedup_vs_target");
  series_map series;
  for (const auto& row : f.rows) {
    if (row.size() < f.header.size()) continue;
    auto& t = series.try_emplace(row[c_method], table{{"batch", "goodput", "speedup_vs_target"}, {}}).first->second;
    t.add({f.number(row, c_batch), f.number(row, c_goodput), f.number(row, c_speed)});
  }
  if (series.empty()) throw usage_error(o.text("from") + " holds no rows");
  sort_by_x(series);
  table out{{"series", "batch", "goodput", "speedup_vs_target"}, {}};
  double id = 0;
  for (const auto& [name, t] : series) {
    for (const auto& r : t.rows) out.add({id, r[0], r[1], r[2]});
    if (!o.quiet()) std::cerr << "specdec-sim sv-batch: series " << id << " = " << name << "\n";
    ++id;
  }
  write_csv(out, o.csv_path());
  const auto png = o.plot_path();
  if (!png) return 0;
  std::ostringstream g;
  g << datablocks(series) << "set encoding utf8\nset multiplot layout 1,2\nset grid\nset key outside right\n"
    << "set xlabel 'batch size'\nset logscale x 2\n"
    << panel(series, 2, "Goodput (tokens per unit of simulated time)", "goodput")
    << panel(series, 3, "Speedup over target-only decoding", "speedup") << "unset multiplot\n";
  return render_png(*png, 1600, 600, g.str(), o.quiet());
}

int run_length_sweep(std::span<const std::string> args) {
  option_parser o("specdec-sim length-sweep",
                  "Draft-length rules against their parameter (docs/lengths.md), from the CSV of\n"
                  "`specdec_length_eval --csv FILE`: goodput over the best fixed gamma's, one panel per rule, one line\n"
                  "per (model pair, batch size). Writes the grouped table as CSV to stdout and, with --plot, a PNG.");
  if (!parse_plot_options(o, args)) return 0;
  if (!o.given("from")) throw usage_error("--from FILE is required");
  const csv_file f = read_csv(o.text("from"));
  const std::size_t c_pair = f.column("pair"), c_batch = f.column("batch"), c_family = f.column("family"),
                    c_parameter = f.column("parameter"), c_ratio = f.column("goodput_over_best_fixed");
  std::map<std::string, series_map> families;  // family -> "pair, B = b" -> (parameter, ratio)
  for (const auto& row : f.rows) {
    if (row.size() < f.header.size()) continue;
    auto& t = families[row[c_family]]
                  .try_emplace(row[c_pair] + ", B = " + row[c_batch], table{{"parameter", "goodput_over_best_fixed"}, {}})
                  .first->second;
    t.add({f.number(row, c_parameter), f.number(row, c_ratio)});
  }
  if (families.empty()) throw usage_error(o.text("from") + " holds no rows");
  table out{{"family", "series", "parameter", "goodput_over_best_fixed"}, {}};
  double fid = 0;
  for (auto& [family, series] : families) {
    sort_by_x(series);
    double sid = 0;
    for (const auto& [name, t] : series) {
      for (const auto& r : t.rows) out.add({fid, sid, r[0], r[1]});
      if (!o.quiet())
        std::cerr << "specdec-sim length-sweep: family " << fid << " = " << family << ", series " << sid << " = " << name << "\n";
      ++sid;
    }
    ++fid;
  }
  write_csv(out, o.csv_path());
  const auto png = o.plot_path();
  if (!png) return 0;
  std::ostringstream g;
  g << "set encoding utf8\nset multiplot layout 2," << (families.size() + 1) / 2 << "\nset grid\nset key bottom right font ',8'\n"
    << "set ylabel 'goodput / best fixed gamma'\nset yrange [0:1.1]\n";
  std::size_t panel_index = 0;
  for (const auto& [family, series] : families) {
    std::size_t i = 0;
    for (const auto& [name, t] : series) g << datablock(std::to_string(panel_index * 100 + i++).insert(0, 1, 'b'), t);
    g << "set title " << quoted(family) << " noenhanced\nset xlabel 'parameter'\nplot ";
    i = 0;
    for (const auto& [name, t] : series) {
      (void)t;
      g << (i ? ", \\\n     " : "") << "$b" << panel_index * 100 + i << " using 1:2 with linespoints lw 2 ps 0.7 lc " << color(i)
        << " title " << quoted(name);
      ++i;
    }
    g << "\n";
    ++panel_index;
  }
  g << "unset multiplot\n";
  return render_png(*png, 1800, 800, g.str(), o.quiet());
}

[[maybe_unused]] const bool registered_mtad = add_subcommand(
    {"mtad", "MTAD ablation (Figure 3 / Table 7) from specdec_mtad_eval's CSV: tokens/iteration and perplexity vs tau",
     &run_mtad});
[[maybe_unused]] const bool registered_length_sweep = add_subcommand(
    {"length-sweep", "draft-length rules against their parameter from specdec_length_eval's CSV: goodput / best fixed gamma",
     &run_length_sweep});
[[maybe_unused]] const bool registered_sv_batch = add_subcommand(
    {"sv-batch", "SV batch goodput (Figure 3) from specdec_sv_eval's CSV: goodput and speedup vs batch size", &run_sv_batch});

}  // namespace
