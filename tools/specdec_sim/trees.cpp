// specdec-sim tree and block: the theory of tree verification (theory/tree.hpp) and of block
// verification (theory/block.hpp), each with its Monte-Carlo check (simulate/tree.hpp,
// simulate/block.hpp).
//   tree:  expected accepted drafts of a chain, complete k-ary trees and the best tree of a node budget
//          against the per-node acceptance alpha (every child accepted with alpha given that its
//          parent was reached and its earlier siblings failed).
//          With --rules: the per-node acceptance of the multi-candidate rules (MSS, K-SEQ, RRS) against
//          the optimal acceptance of any lossless rule (theory/multi_draft_bound.hpp), and the gaps.
//   block: block verification (Sun et al., arXiv 2403.10444) against token-wise verification as a
//          function of the draft length gamma, on the paper's example and on random pairs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "monte_carlo.hpp"
#include "output.hpp"
#include "registry.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/simulate/block.hpp"
#include "specdec/simulate/tree.hpp"
#include "specdec/theory/block.hpp"
#include "specdec/theory/multi_draft_bound.hpp"
#include "specdec/theory/sd.hpp"
#include "specdec/theory/tree.hpp"

namespace {

namespace tree = specdec::theory::tree;
namespace block = specdec::theory::block;
namespace sim = specdec::simulate;
using namespace specdec_sim;

constexpr double nan_v = NAN;

// The name of the i-th datablock of a family: prefix then i ("s0", "s1", ...).
std::string block_name(char prefix, std::size_t i) { return std::to_string(i).insert(0, 1, prefix); }

// ---- specdec-sim tree ------------------------------------------------------------------------------

// Tree shapes of the CSV's `shape` column.
enum shape_code { chain_shape = 0, complete_shape = 1, best_shape = 2 };

// Columns of the tree CSV.
enum tree_column : std::size_t { t_alpha, t_shape, t_arity, t_depth, t_nodes, t_expected, t_closed, t_mc, t_mc_se, t_mc_draws };

// One tree of the comparison, with the node alphas of the slot model at a given alpha.
struct shaped_tree {
  shape_code shape;
  int arity;  // complete trees: k; the chain: 1; the best tree: its widest node
  specdec::tree_layout layout;
};

int widest_node(const specdec::tree_layout& t) {
  std::size_t w = 0;
  for (std::size_t n = 0; n < t.num_nodes(0); ++n) w = std::max(w, t.num_children(0, n));
  return static_cast<int>(w);
}

// Two panels: E[A] against alpha per shape (theory lines, Monte-Carlo points), and the depth and
// widest node of the best tree against alpha.
std::string tree_plot_body(const table& csv, std::uint64_t draws, std::size_t budget) {
  std::ostringstream g;
  std::vector<std::pair<std::string, table>> series;  // (title, rows alpha, expected, mc, 1.96 se)
  table best_shape_rows;
  for (const auto& row : csv.rows) {
    std::string title;
    if (row[t_shape] == double(chain_shape))
      title = "chain of " + short_number(row[t_nodes]);
    else if (row[t_shape] == double(complete_shape))
      title = short_number(row[t_arity]) + "-ary, depth " + short_number(row[t_depth]) + " (" + short_number(row[t_nodes]) +
              " nodes)";
    else
      title = "best tree of " + short_number(row[t_nodes]) + " nodes";
    auto it = std::find_if(series.begin(), series.end(), [&](const auto& s) { return s.first == title; });
    if (it == series.end()) it = series.insert(series.end(), {title, table{}});
    it->second.add({row[t_alpha], row[t_expected], row[t_mc], 1.96 * row[t_mc_se]});
    if (row[t_shape] == double(best_shape)) best_shape_rows.add({row[t_alpha], row[t_depth], row[t_arity]});
  }
  for (std::size_t i = 0; i < series.size(); ++i) g << datablock(block_name('s', i), series[i].second);
  g << datablock("best", best_shape_rows);
  g << "set encoding utf8\nset multiplot layout 1,2\nset grid\nset key top left Left reverse\n"
    << "set xlabel 'per-node acceptance α'\nset xrange [0:1]\n";
  g << "set title " << quoted("Expected accepted drafts, budget " + std::to_string(budget) + " nodes") << "\n"
    << "set ylabel 'E[accepted drafts]'\nset yrange [0:*]\nplot ";
  for (std::size_t i = 0; i < series.size(); ++i) {
    g << (i ? ", \\\n  " : "") << "$s" << i << " using 1:2 with linespoints lw 2 pt 6 ps 0.6 lc " << color(i) << " title "
      << quoted(series[i].first);
    if (draws > 0) g << ", \\\n  $s" << i << " using 1:3:4 with yerrorbars pt 7 ps 0.5 lc " << color(i) << " notitle";
  }
  if (draws > 0) g << ", \\\n  " << mc_key(draws);
  g << "\nset title 'Shape of the best tree'\nset ylabel 'nodes'\nset yrange [0:*]\nset key top center\nplot "
    << "$best using 1:2 with steps lw 2 lc " << color(0) << " title 'depth', \\\n"
    << "  $best using 1:3 with steps lw 2 lc " << color(1) << " title 'children of the widest node'\n"
    << "unset multiplot\n";
  return g.str();
}

struct row_pair {
  std::string name;
  std::vector<double> p, q;
};

// Random context-independent pairs: p ~ Dirichlet(0.5), q ~ Dirichlet(1) over v tokens (order-0
// random_markov_model), pair i from the seeds pair_seed * 1000 + 2 i and + 1.
std::vector<row_pair> random_pairs(int count, std::size_t v, std::uint64_t pair_seed) {
  std::vector<row_pair> pairs;
  for (int i = 1; i <= count; ++i) {
    const auto p = specdec::random_markov_model(v, 0, pair_seed * 1000 + 2 * static_cast<std::uint64_t>(i), 0.5);
    const auto q = specdec::random_markov_model(v, 0, pair_seed * 1000 + 2 * static_cast<std::uint64_t>(i) + 1, 1.0);
    pairs.push_back({"random pair " + std::to_string(i) + " (V = " + std::to_string(v) + ")",
                     {p.table().begin(), p.table().end()},
                     {q.table().begin(), q.table().end()}});
  }
  return pairs;
}

// specdec-sim tree --rules: one row per (pair, k) with each rule's acceptance, the two optima and the
// gaps (optimum - rule; MSS and K-SEQ draw i.i.d., RRS without replacement).
int run_tree_rules(const option_parser& o) {
  const std::vector<int> mk = o.integers("max-k"), np = o.integers("pairs"), nv = o.integers("vocab");
  if (mk.size() != 1 || mk[0] < 1 || mk[0] > 8) throw usage_error("--max-k takes one integer in 1..8");
  if (np.size() != 1 || np[0] < 0 || np[0] > 16) throw usage_error("--pairs takes one integer in 0..16");
  if (nv.size() != 1 || nv[0] < 2 || nv[0] > 8) throw usage_error("--vocab takes one integer in 2..8");
  if (o.plot_path()) throw usage_error("--plot draws the tree table; leave it out with --rules");
  std::vector<row_pair> pairs{{"reference pair (docs/trees.md)", {0.5, 0.3, 0.2}, {0.2, 0.3, 0.5}}};
  for (auto& r : random_pairs(np[0], static_cast<std::size_t>(nv[0]), o.count("pair-seed"))) pairs.push_back(std::move(r));
  table csv{{"pair", "vocab", "k", "mss", "k_seq", "rrs", "optimal_iid", "optimal_without_replacement", "gap_mss", "gap_k_seq",
             "gap_rrs"},
            {}};
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const std::span<const double> p(pairs[i].p), q(pairs[i].q);
    for (std::size_t k = 1; k <= static_cast<std::size_t>(mk[0]); ++k) {
      const double mss = tree::mss_acceptance(p, q, k), kseq = tree::kseq_acceptance(p, q, k),
                   rrs = tree::rrs_acceptance(p, q, k);
      const double iid = tree::optimal_iid_acceptance(p, q, k), without = tree::optimal_without_replacement_acceptance(p, q, k);
      csv.add({double(i), double(p.size()), double(k), mss, kseq, rrs, iid, without, iid - mss, iid - kseq, without - rrs});
    }
  }
  write_csv(csv, o.csv_path());
  return 0;
}

int run_tree(std::span<const std::string> args) {
  option_parser o("specdec-sim tree",
                  "Tree verification under per-node acceptance (theory/tree.hpp): every drafted node is accepted with\n"
                  "probability alpha given that its parent was reached and its earlier siblings were rejected. For a\n"
                  "budget of n drafted nodes: a chain of n, the complete k-ary trees of at most n nodes, and the best\n"
                  "tree of n nodes (theory::tree::best_tree). E[accepted drafts] by the tree formula and the closed form\n"
                  "(chain: SV eq. (4); complete trees: sum_i s^i, s = 1 - (1 - alpha)^k), and by Monte Carlo\n"
                  "(simulate::tree::walk). One CSV row per (alpha, tree); shape 0 chain, 1 complete, 2 best.\n"
                  "With --rules, instead: the per-node acceptance of MSS, K-SEQ and RRS with k candidates against the\n"
                  "optimal acceptance of any lossless rule (theory/multi_draft_bound.hpp; i.i.d. drafts for MSS and\n"
                  "K-SEQ, drafts without replacement for RRS) and the gaps, on the reference pair p = (.5, .3, .2),\n"
                  "q = (.2, .3, .5) (pair 0) and random pairs. One CSV row per (pair, k); exact, no Monte Carlo.");
  o.value("alpha", "LIST", "0.05:0.95:0.05", "per-node acceptance probabilities in [0, 1]");
  o.value("budget", "N", "15", "drafted nodes per tree (the root not counted), 1..4096");
  o.value("arity", "LIST", "2,3,4", "arities of the complete trees (>= 2)");
  o.flag("rules", "the multi-candidate rules against the optimal acceptance instead of the trees");
  o.value("max-k", "K", "4", "--rules: candidates per node 1..K (K <= 8)");
  o.value("pairs", "N", "3", "--rules: random pairs besides the reference pair (0..16)");
  o.value("vocab", "V", "5", "--rules: vocabulary of the random pairs (2..8)");
  o.value("pair-seed", "S", "1", "--rules: seed of the random pairs");
  o.common(20000);
  if (!o.parse(args)) return 0;
  if (o.flag_set("rules")) return run_tree_rules(o);
  const std::vector<double> alphas = o.numbers("alpha");
  for (const double a : alphas)
    if (!(a >= 0 && a <= 1)) throw usage_error("--alpha values must be in [0, 1]");
  const std::vector<int> budget_arg = o.integers("budget"), arities = o.integers("arity");
  if (budget_arg.size() != 1 || budget_arg[0] < 1 || budget_arg[0] > 4096)
    throw usage_error("--budget takes one integer in 1..4096");
  for (const int k : arities)
    if (k < 2) throw usage_error("--arity values must be >= 2");
  if (policy_of(o) != specdec::exec::backend::seq) throw usage_error("specdec-sim tree runs on the seq policy only");
  const auto budget = static_cast<std::size_t>(budget_arg[0]);
  const std::uint64_t draws = o.draws();

  // The trees that do not depend on alpha: the chain and the complete trees within the budget.
  std::vector<shaped_tree> fixed_trees;
  const std::int32_t chain_drafts[] = {static_cast<std::int32_t>(budget)};
  fixed_trees.push_back({chain_shape, 1, specdec::tree_layout::chains(chain_drafts)});
  for (const int k : arities) {
    std::size_t depth = 0;
    while (tree::complete_tree_nodes(k, depth + 1) - 1 <= budget) ++depth;
    if (depth > 0) fixed_trees.push_back({complete_shape, k, tree::complete_tree(k, depth)});
  }

  table csv{{"alpha", "shape", "arity", "depth", "nodes", "expected_accepted", "closed_form", "mc_accepted", "mc_accepted_se",
             "mc_draws"},
            {}};
  progress bar("specdec-sim tree", alphas.size(), o.quiet());
  for (const double alpha : alphas) {
    const std::vector<double> slots(budget, alpha);  // any node may have up to `budget` children
    std::vector<shaped_tree> trees = fixed_trees;
    const auto best = tree::best_tree(slots, budget);
    trees.push_back({best_shape, widest_node(best), best});
    for (const auto& t : trees) {
      const auto node_alphas = tree::slot_model_alphas(t.layout, 0, slots);
      const std::size_t depth = t.layout.max_depth();
      double closed = nan_v;
      if (t.shape == chain_shape) closed = tree::chain_expected_accepted(slots);
      if (t.shape == complete_shape) closed = tree::complete_tree_expected_accepted(alpha, t.arity, depth);
      std::vector<double> row{alpha,
                              double(t.shape),
                              double(t.arity),
                              static_cast<double>(depth),
                              double(t.layout.num_nodes(0) - 1),
                              tree::expected_accepted(t.layout, 0, node_alphas),
                              closed,
                              nan_v,
                              nan_v,
                              double(draws)};
      if (draws > 0) {
        const auto r = sim::tree::walk(t.layout, 0, node_alphas,
                                       {o.seed(), point_stream({8.0, alpha, double(t.shape), double(t.arity)}), 0, draws});
        put_estimate(row, t_mc, r.mean_accepted());
      }
      csv.add(row);
    }
    bar.advance();
  }
  write_csv(csv, o.csv_path());
  if (const auto png = o.plot_path()) return render_png(*png, 1500, 580, tree_plot_body(csv, draws, budget), o.quiet());
  return 0;
}

// ---- specdec-sim block -----------------------------------------------------------------------------

// Columns of the block CSV.
enum block_column : std::size_t {
  b_pair,
  b_vocab,
  b_gamma,
  b_alpha,
  b_token,
  b_block,
  b_gain,
  b_mc_token,
  b_mc_token_se,
  b_mc_block,
  b_mc_block_se,
  b_mc_gain,
  b_mc_gain_se,
  b_mc_draws
};

// Two panels: E[accepted] against gamma (block solid, token-wise dashed, one colour per pair), and
// the gain E[tau] - E[A] with its Monte-Carlo estimate.
std::string block_plot_body(const table& csv, const std::vector<row_pair>& pairs, std::uint64_t draws) {
  std::ostringstream g;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    table t;
    for (const auto& row : csv.rows)
      if (row[b_pair] == static_cast<double>(i))
        t.add({row[b_gamma], row[b_token], row[b_block], row[b_gain], row[b_mc_token], 1.96 * row[b_mc_token_se], row[b_mc_block],
               1.96 * row[b_mc_block_se], row[b_mc_gain], 1.96 * row[b_mc_gain_se]});
    g << datablock(block_name('p', i), t);
  }
  g << "set encoding utf8\nset multiplot layout 1,2\nset grid\nset key top left Left reverse\n"
    << "set xlabel 'draft length γ'\nset xtics 1\n";
  g << "set title 'Expected accepted drafts: block (solid) vs token-wise (dashed)'\nset ylabel 'E[accepted drafts]'\n"
       "set yrange [0:*]\nplot ";
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const std::string b = block_name('p', i).insert(0, 1, '$');
    g << (i ? ", \\\n  " : "") << b << " using 1:3 with linespoints lw 2 pt 6 lc " << color(i) << " title "
      << quoted(pairs[i].name) << ", \\\n  " << b << " using 1:2 with linespoints lw 2 dt 2 pt 4 lc " << color(i) << " notitle";
    if (draws > 0)
      g << ", \\\n  " << b << " using 1:7:8 with yerrorbars pt 7 ps 0.5 lc " << color(i) << " notitle, \\\n  " << b
        << " using 1:5:6 with yerrorbars pt 7 ps 0.5 lc " << color(i) << " notitle";
  }
  if (draws > 0) g << ", \\\n  " << mc_key(draws);
  g << "\nset title 'Gain of block verification, E[τ] - E[A]'\nset ylabel 'accepted drafts'\nset yrange [*:*]\nplot ";
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const std::string b = block_name('p', i).insert(0, 1, '$');
    g << (i ? ", \\\n  " : "") << b << " using 1:4 with linespoints lw 2 pt 6 lc " << color(i) << " title "
      << quoted(pairs[i].name);
    if (draws > 0) g << ", \\\n  " << b << " using 1:9:10 with yerrorbars pt 7 ps 0.5 lc " << color(i) << " notitle";
  }
  if (draws > 0) g << ", \\\n  " << mc_key(draws);
  g << "\nunset multiplot\n";
  return g.str();
}

int run_block(std::span<const std::string> args) {
  option_parser o("specdec-sim block",
                  "Block verification (Sun et al., arXiv 2403.10444) against token-wise verification (Leviathan et al.)\n"
                  "on one draft block of gamma tokens, for context-independent pairs: the paper's example (V = 2,\n"
                  "p = (1/3, 2/3), q = (2/3, 1/3)) and random pairs (p ~ Dirichlet(0.5), q ~ Dirichlet(1) over --vocab\n"
                  "tokens). Exact E[accepted drafts] by enumerating the V^gamma blocks (theory::block), the closed form\n"
                  "sum alpha^i for token-wise, and Monte Carlo of both on the same blocks (simulate::block). One CSV\n"
                  "row per (pair, gamma); pair 0 is the paper's example.");
  o.value("max-gamma", "N", "8", "draft lengths 1..N");
  o.value("pairs", "N", "3", "random pairs besides the paper's example");
  o.value("vocab", "V", "4", "vocabulary of the random pairs (V^max-gamma <= 2^24)");
  o.value("pair-seed", "S", "1", "seed of the random pairs");
  o.common(20000);
  if (!o.parse(args)) return 0;
  const std::vector<int> mg = o.integers("max-gamma"), np = o.integers("pairs"), nv = o.integers("vocab");
  if (mg.size() != 1 || mg[0] < 1 || mg[0] > 24) throw usage_error("--max-gamma takes one integer in 1..24");
  if (np.size() != 1 || np[0] < 0 || np[0] > 16) throw usage_error("--pairs takes one integer in 0..16");
  if (nv.size() != 1 || nv[0] < 2) throw usage_error("--vocab takes one integer >= 2");
  if (std::pow(double(nv[0]), double(mg[0])) > double(1 << 24)) throw usage_error("--vocab ^ --max-gamma must be <= 2^24");
  if (policy_of(o) != specdec::exec::backend::seq) throw usage_error("specdec-sim block runs on the seq policy only");
  const std::uint64_t draws = o.draws(), pair_seed = o.count("pair-seed");

  std::vector<row_pair> pairs{{"paper's example (V = 2)", {1.0 / 3.0, 2.0 / 3.0}, {2.0 / 3.0, 1.0 / 3.0}}};
  for (auto& r : random_pairs(np[0], static_cast<std::size_t>(nv[0]), pair_seed)) pairs.push_back(std::move(r));

  table csv{{"pair", "vocab", "gamma", "alpha", "token_wise", "block", "gain", "mc_token_wise", "mc_token_wise_se", "mc_block",
             "mc_block_se", "mc_gain", "mc_gain_se", "mc_draws"},
            {}};
  progress bar("specdec-sim block", pairs.size() * static_cast<std::size_t>(mg[0]), o.quiet());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const std::span<const double> p(pairs[i].p), q(pairs[i].q);
    const double alpha = specdec::theory::sd::acceptance_rate(p, q);
    for (std::size_t gamma = 1; gamma <= static_cast<std::size_t>(mg[0]); ++gamma) {
      const double token = block::token_wise_expected_accepted(p, q, gamma), exact = block::block_expected_accepted(p, q, gamma);
      std::vector<double> row{
          double(i), double(p.size()), double(gamma), alpha, token, exact, exact - token, nan_v, nan_v, nan_v, nan_v, nan_v,
          nan_v,     double(draws)};
      if (draws > 0) {
        const auto r = sim::block::verification(
            p, q, gamma, {o.seed(), point_stream({9.0, double(pair_seed), double(i), double(gamma)}), 0, draws});
        put_estimate(row, b_mc_token, r.token_wise_accepted());
        put_estimate(row, b_mc_block, r.block_accepted());
        put_estimate(row, b_mc_gain, r.block_gain());
      }
      csv.add(row);
      bar.advance();
    }
  }
  write_csv(csv, o.csv_path());
  if (const auto png = o.plot_path()) return render_png(*png, 1500, 580, block_plot_body(csv, pairs, draws), o.quiet());
  return 0;
}

[[maybe_unused]] const bool tree_registered = add_subcommand(
    {"tree",
     "tree verification: E[accepted] of chains, k-ary and best trees of a node budget vs alpha; Monte-Carlo; --rules: "
     "multi-candidate rules vs the optimal acceptance",
     &run_tree});
[[maybe_unused]] const bool block_registered = add_subcommand(
    {"block", "block vs token-wise verification: exact E[accepted] against gamma (paper's example, random pairs); Monte-Carlo",
     &run_block});

}  // namespace
