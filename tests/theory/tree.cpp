// Tree-verification theory (theory/tree.hpp): the expected accepted length of a token tree under
// per-node acceptance (against the chain and complete-tree closed forms, hand-computed trees, and a
// brute-force search over all small trees for best_tree), and the per-node acceptance of the
// multi-candidate lossless rules: the table of docs/trees.md, "Per-node acceptance of the multi-candidate lossless rules",
// MSS and RRS against a brute-force enumeration of every candidate tuple (whose emitted-token law
// must be p), K-SEQ's rho* (p_res >= 0 there; no valid smaller rho accepts more).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <span>
#include <vector>

#include "monte_carlo.hpp"
#include "random_row.hpp"
#include "specdec/errors.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/theory/sd.hpp"
#include "specdec/theory/tree.hpp"

namespace tree = specdec::theory::tree;
using cspan = std::span<const double>;
using specdec_test::random_row;
using specdec::tree_layout;

namespace {

// What a brute-force enumeration of a multi-candidate rule gives: P(accepted at slot j) and the law
// of the emitted token (an accepted candidate, or a sample of the final residual).
struct brute_force {
  std::vector<double> accepted_at;
  std::vector<double> emitted;
};

std::vector<double> normalised_excess(const std::vector<double>& r, const std::vector<double>& q) {
  std::vector<double> out(r.size());
  double mass = 0.0;
  for (std::size_t v = 0; v < r.size(); ++v) mass += out[v] = std::max(0.0, r[v] - q[v]);
  if (mass > 0.0)
    for (double& x : out) x /= mass;
  return out;
}

// Runs the rule on every tuple (c_1..c_k) of V^k, weighted by its probability: i.i.d. from q (MSS) or
// drawn without replacement (RRS: q_j = q with c_1..c_{j-1} removed and renormalised). The rule is
// written out as in the reference (section 1.1), independently of theory/tree.hpp: candidate j passes
// with min(1, r_j(c_j) / q_j(c_j)); on rejection r_{j+1} = norm(max(0, r_j - q_j)); if every candidate
// fails, the emitted token is drawn from r_{k+1}.
brute_force enumerate_rule(const std::vector<double>& p, const std::vector<double>& q, std::size_t k, bool without_replacement) {
  const std::size_t v = p.size();
  brute_force out{std::vector<double>(k, 0.0), std::vector<double>(v, 0.0)};
  std::vector<std::size_t> tuple(k, 0);
  for (bool more = true; more;) {
    // The tuple's probability and each candidate's draft row.
    double weight = 1.0;
    std::vector<std::vector<double>> drafts;
    std::vector<double> qj = q;
    for (std::size_t j = 0; j < k; ++j) {
      drafts.push_back(qj);
      weight *= qj[tuple[j]];
      if (without_replacement) {
        const double rest = 1.0 - qj[tuple[j]];
        qj[tuple[j]] = 0.0;
        for (double& x : qj) x = rest > 0.0 ? x / rest : 0.0;
      }
    }
    if (weight > 0.0) {
      double reach = weight;
      std::vector<double> r = p;
      for (std::size_t j = 0; j < k && reach > 0.0; ++j) {
        const std::size_t c = tuple[j];
        const double pass = std::min(1.0, r[c] / drafts[j][c]);
        out.accepted_at[j] += reach * pass;
        out.emitted[c] += reach * pass;
        reach *= 1.0 - pass;
        r = normalised_excess(r, drafts[j]);
      }
      for (std::size_t x = 0; x < v; ++x) out.emitted[x] += reach * r[x];
    }
    std::size_t i = 0;
    while (i < k && ++tuple[i] == v) tuple[i++] = 0;
    more = i < k;
  }
  return out;
}

// alpha_j = P(accepted at j) / P(slots 1..j-1 all failed), 0 for an unreached slot.
std::vector<double> conditional(const std::vector<double>& accepted_at) {
  std::vector<double> out(accepted_at.size(), 0.0);
  double reach = 1.0;
  for (std::size_t j = 0; j < out.size(); ++j) {
    if (reach > 1e-15) out[j] = accepted_at[j] / reach;
    reach -= accepted_at[j];
  }
  return out;
}

double max_abs_difference(cspan a, cspan b) {
  REQUIRE(a.size() == b.size());
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// All trees of n nodes as parent arrays (parent(i) < i): every ordered tree appears at least once.
void for_each_tree(std::size_t n, const std::function<void(const tree_layout&)>& f) {
  std::vector<std::int32_t> parents(n, specdec::no_node);
  const std::int32_t count[] = {static_cast<std::int32_t>(n)};
  std::function<void(std::size_t)> extend = [&](std::size_t i) {
    if (i == n) {
      f(tree_layout::from_parents(count, parents));
      return;
    }
    for (std::int32_t parent = 0; parent < static_cast<std::int32_t>(i); ++parent) {
      parents[i] = parent;
      extend(i + 1);
    }
  };
  extend(1);
}

}  // namespace

TEST_CASE("Multi-candidate acceptance reproduces the table of the reference (section 1.1)", "[theory][tree]") {
  const std::vector<double> p{0.5, 0.3, 0.2}, q{0.2, 0.3, 0.5};
  const double mss[] = {0.700, 0.760, 0.808}, rrs[] = {0.700, 0.820, 1.000}, kseq[] = {0.700, 0.7914, 0.8585};
  const double target_only[] = {0.20, 0.50};
  for (std::size_t k = 1; k <= 3; ++k) {
    CAPTURE(k);
    CHECK(tree::mss_acceptance(p, q, k) == Approx(mss[k - 1]).margin(1e-12));
    CHECK(tree::rrs_acceptance(p, q, k) == Approx(rrs[k - 1]).margin(1e-12));
    CHECK(tree::kseq_acceptance(p, q, k) == Approx(kseq[k - 1]).margin(5e-5));  // the table's 4 digits
    if (k <= 2) {
      const auto siblings = tree::top_k_tokens(q, k);  // {2}, {2, 1}
      CHECK(siblings[0] == 2);
      CHECK(tree::target_only_acceptance(p, siblings) == Approx(target_only[k - 1]).margin(1e-12));
    }
  }
  // k = 1: every rule that reads q accepts with sum min(p, q) = 1 - TV.
  CHECK(tree::kseq(p, q, 1).rho == 1.0);
  CHECK(tree::mss_slot_acceptance(p, q, 1)[0] == Approx(specdec::theory::sd::acceptance_rate(cspan(p), cspan(q))));
}

TEST_CASE("MSS and RRS slot acceptances equal the enumeration of every candidate tuple", "[theory][tree]") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const std::size_t v = 2 + seed % 4;  // 2..5
    const std::size_t k = 1 + seed % 3;  // 1..3
    const auto p = random_row(v, seed, 0.5, seed % 2 ? 0.25 : 0.0);
    const auto q_sparse = random_row(v, 1000 + seed, 1.0, seed % 3 ? 0.25 : 0.0);
    const auto q_full = random_row(v, 2000 + seed, 1.0, 0.0);
    CAPTURE(seed, v, k);

    const brute_force mss = enumerate_rule(p, q_sparse, k, false);
    CHECK(max_abs_difference(mss.emitted, p) < 1e-12);  // the written-out rule is lossless
    CHECK(max_abs_difference(tree::mss_slot_acceptance(p, q_sparse, k), conditional(mss.accepted_at)) < 1e-12);

    // RRS: candidates without replacement from a q of full support (k <= V distinct candidates exist).
    const std::size_t k_rrs = std::min(k, v);
    const brute_force rrs = enumerate_rule(p, q_full, k_rrs, true);
    CHECK(max_abs_difference(rrs.emitted, p) < 1e-12);
    CHECK(max_abs_difference(tree::rrs_slot_acceptance(p, q_full, k_rrs), conditional(rrs.accepted_at)) < 1e-12);
  }
}

TEST_CASE("RRS is never below MSS; every rule's acceptance grows with k", "[theory][tree]") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    const auto p = random_row(3, seed, 0.5, 0.2), q = random_row(3, 5000 + seed, 1.0, 0.2);
    CAPTURE(seed);
    double previous_mss = 0.0, previous_kseq = 0.0, previous_rrs = 0.0;
    for (std::size_t k = 1; k <= 3; ++k) {
      const double mss = tree::mss_acceptance(p, q, k), rrs = tree::rrs_acceptance(p, q, k);
      const double kseq = tree::kseq_acceptance(p, q, k);
      CHECK(rrs >= mss - 1e-12);
      CHECK(mss >= previous_mss - 1e-12);
      CHECK(rrs >= previous_rrs - 1e-12);
      CHECK(kseq >= previous_kseq - 1e-12);
      previous_mss = mss;
      previous_rrs = rrs;
      previous_kseq = kseq;
    }
  }
}

TEST_CASE("K-SEQ: rho* is the smallest rho in [1, k] whose residual is non-negative", "[theory][tree]") {
  // p_res(x) (1 - beta)^k = p(x) - min(q(x), p(x) / rho) (1 - (1 - beta)^k) / beta.
  const auto residual_min = [](const std::vector<double>& p, const std::vector<double>& q, std::size_t k, double rho) {
    const double beta = tree::kseq_beta(p, q, rho), accept = 1.0 - std::pow(1.0 - beta, static_cast<double>(k));
    double m = 1.0;
    for (std::size_t x = 0; x < p.size(); ++x) m = std::min(m, p[x] - std::min(q[x], p[x] / rho) * accept / beta);
    return m;
  };
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    const std::size_t v = 2 + seed % 5, k = 1 + seed % 4;
    const auto p = random_row(v, seed, 0.5, 0.2), q = random_row(v, 7000 + seed, 1.0, 0.2);
    CAPTURE(seed, v, k);
    const auto s = tree::kseq(p, q, k);
    CHECK(s.rho >= 1.0);
    CHECK(s.rho <= static_cast<double>(k));
    CHECK(s.beta == Approx(tree::kseq_beta(p, q, s.rho)));
    CHECK(s.acceptance == Approx(1.0 - std::pow(1.0 - s.beta, static_cast<double>(k))).margin(1e-14));
    CHECK(residual_min(p, q, k, s.rho) >= -1e-12);
    // A smaller rho is invalid (p_res < 0) or no better: rho* maximises the acceptance over valid rho.
    for (int i = 0; i < 50; ++i) {
      const double rho = 1.0 + (s.rho - 1.0) * i / 50.0;
      const double beta = tree::kseq_beta(p, q, rho);
      if (residual_min(p, q, k, rho) >= -1e-12) CHECK(beta <= s.beta + 1e-12);
    }
    CHECK(std::abs(tree::any_accepted(std::vector<double>(k, s.beta)) - s.acceptance) < 1e-14);
  }
}

TEST_CASE("Target-only slots: alpha_j = p(c_j) / (1 - sum_{i<j} p(c_i)), total = sum of p over siblings", "[theory][tree]") {
  const std::vector<double> p{0.1, 0.4, 0.3, 0.2, 0.0};
  const std::vector<specdec::token_id> siblings{1, 2, 4, 0};
  const auto a = tree::target_only_slot_acceptance(p, siblings);
  CHECK(a[0] == Approx(0.4));
  CHECK(a[1] == Approx(0.3 / 0.6));
  CHECK(a[2] == 0.0);
  CHECK(a[3] == Approx(0.1 / 0.3));
  CHECK(tree::target_only_acceptance(p, siblings) == Approx(0.8));
  const std::vector<specdec::token_id> duplicate{1, 1}, outside{5};
  CHECK_THROWS_AS(tree::target_only_slot_acceptance(p, duplicate), specdec::error);
  CHECK_THROWS_AS(tree::target_only_slot_acceptance(p, outside), specdec::error);
}

TEST_CASE("Slots beyond the draft's support, and degenerate pairs", "[theory][tree]") {
  const std::vector<double> p{0.2, 0.2, 0.6}, q{0.5, 0.5, 0.0};
  const auto rrs = tree::rrs_slot_acceptance(p, q, 3);
  CHECK(rrs[2] == 0.0);                                 // only two distinct candidates exist
  CHECK(tree::rrs_acceptance(p, q, 3) == Approx(0.4));  // both tried: p(0) + p(1)
  // p = q: the first candidate always passes, later slots are never reached.
  const auto same = tree::mss_slot_acceptance(q, q, 3);
  CHECK(same[0] == Approx(1.0));
  CHECK(same[1] == 0.0);
  CHECK(tree::kseq(q, q, 3).acceptance == Approx(1.0));
  CHECK_THROWS_AS(tree::mss_acceptance(p, q, 0), specdec::error);
  const std::vector<double> bad{0.5, 0.6, -0.1};
  CHECK_THROWS_AS(tree::kseq(bad, q, 2), specdec::error);
  CHECK_THROWS_AS(tree::rrs_acceptance(p, std::vector<double>{0.5, 0.5}, 2), specdec::error);
  CHECK_THROWS_AS(tree::rrs_acceptance(p, q, 3, 5), specdec::error);  // 3 * 2 * 1 = 6 tuples > 5
}

TEST_CASE("Tree expectation: a hand-computed tree, laws that sum to 1", "[theory][tree]") {
  // Root 0 with children 1 and 2 (tried in that order), node 3 below node 1.
  const std::int32_t count[] = {4}, parents[] = {specdec::no_node, 0, 0, 1};
  const auto t = tree_layout::from_parents(count, parents);
  const std::vector<double> alphas{0.0, 0.6, 0.5, 0.25};
  std::vector<double> reach(4), last(4);
  tree::path_probabilities(t, 0, alphas, reach);
  CHECK(reach[0] == 1.0);
  CHECK(reach[1] == Approx(0.6));
  CHECK(reach[2] == Approx(0.4 * 0.5));
  CHECK(reach[3] == Approx(0.6 * 0.25));
  CHECK(tree::expected_accepted(t, 0, alphas) == Approx(0.6 + 0.2 + 0.15));
  tree::end_probabilities(t, 0, alphas, last);
  CHECK(last[0] == Approx(0.4 * 0.5));
  CHECK(last[1] == Approx(0.6 * 0.75));
  CHECK(last[0] + last[1] + last[2] + last[3] == Approx(1.0));
  const auto law = tree::accepted_length_law(t, 0, alphas);
  REQUIRE(law.size() == 3);
  CHECK(law[0] == Approx(0.2));
  CHECK(law[1] == Approx(0.45 + 0.2));
  CHECK(law[2] == Approx(0.15));
  // The root's alpha is ignored; a node's alpha outside [0, 1] or a wrong length is an error.
  CHECK(tree::expected_accepted(t, 0, std::vector<double>{7.0, 0.6, 0.5, 0.25}) == Approx(0.95));
  CHECK_THROWS_AS(tree::expected_accepted(t, 0, std::vector<double>{0.0, 1.5, 0.5, 0.25}), specdec::error);
  CHECK_THROWS_AS(tree::expected_accepted(t, 0, std::vector<double>{0.0, 0.5}), specdec::error);
  CHECK_THROWS_AS(tree::expected_accepted(t, 1, alphas), specdec::error);
}

TEST_CASE("Chains and complete k-ary trees agree with their closed forms (theory/sd.hpp, theory/sv.hpp)", "[theory][tree]") {
  auto s = specdec_test::mc_stream(4242, 0);
  for (int trial = 0; trial < 20; ++trial) {
    const std::int32_t gamma = trial % 9;
    std::vector<double> chain_alphas(static_cast<std::size_t>(gamma));
    for (double& a : chain_alphas) a = trial % 4 == 0 ? 1.0 : s.uniform();
    const std::int32_t drafts[] = {gamma};
    const auto chain = tree_layout::chains(drafts);
    std::vector<double> node_alphas{0.0};
    node_alphas.insert(node_alphas.end(), chain_alphas.begin(), chain_alphas.end());
    CAPTURE(trial, gamma);
    CHECK(tree::expected_accepted(chain, 0, node_alphas) == Approx(tree::chain_expected_accepted(chain_alphas)).margin(1e-14));
    CHECK(tree::chain_expected_accepted(chain_alphas) ==
          Approx(specdec::theory::sd::expected_tokens(cspan(chain_alphas)) - 1.0).margin(1e-14));
  }
  for (int arity = 1; arity <= 4; ++arity) {
    for (std::size_t depth = 0; depth <= 4; ++depth) {
      const auto t = tree::complete_tree(arity, depth);
      REQUIRE(t.num_nodes(0) == tree::complete_tree_nodes(arity, depth));
      REQUIRE(t.max_depth() == depth);
      for (const double alpha : {0.0, 0.3, 0.7, 1.0}) {
        CAPTURE(arity, depth, alpha);
        const std::vector<double> slots(static_cast<std::size_t>(arity), alpha);
        const auto alphas = tree::slot_model_alphas(t, 0, slots);
        const double walked = tree::expected_accepted(t, 0, alphas);
        CHECK(walked == Approx(tree::complete_tree_expected_accepted(alpha, arity, depth)).margin(1e-13));
        CHECK(walked == Approx(tree::complete_tree_expected_accepted(slots, depth)).margin(1e-13));
      }
      // Different slot acceptances: the level acceptance is 1 - prod (1 - alpha_j).
      std::vector<double> slots(static_cast<std::size_t>(arity));
      for (double& a : slots) a = s.uniform();
      CHECK(tree::expected_accepted(t, 0, tree::slot_model_alphas(t, 0, slots)) ==
            Approx(tree::complete_tree_expected_accepted(slots, depth)).margin(1e-13));
    }
  }
  // The law of a complete tree: its mean is expected_accepted.
  const auto t = tree::complete_tree(3, 3);
  const auto alphas = tree::slot_model_alphas(t, 0, std::vector<double>{0.5, 0.4, 0.3});
  const auto law = tree::accepted_length_law(t, 0, alphas);
  double total = 0.0, mean = 0.0;
  for (std::size_t d = 0; d < law.size(); ++d) {
    total += law[d];
    mean += static_cast<double>(d) * law[d];
  }
  CHECK(total == Approx(1.0).margin(1e-14));
  CHECK(mean == Approx(tree::expected_accepted(t, 0, alphas)).margin(1e-14));
  CHECK_THROWS_AS(tree::slot_model_alphas(t, 0, std::vector<double>{0.5, 0.4}), specdec::error);  // 3 children
}

TEST_CASE("best_tree is the best tree of its budget (brute force over all trees of up to 7 nodes)", "[theory][tree]") {
  const std::vector<std::vector<double>> slot_settings{{0.3, 0.3, 0.3, 0.3, 0.3, 0.3}, {0.6, 0.6, 0.6}, {0.9, 0.9},
                                                       {0.5, 0.4, 0.35, 0.3},          {0.8},           {0.2, 0.2}};
  for (const auto& slots : slot_settings) {
    for (std::size_t budget = 0; budget <= 6; ++budget) {
      double best = -1.0;
      for_each_tree(budget + 1, [&](const tree_layout& t) {
        for (std::size_t n = 0; n < t.num_nodes(0); ++n)
          if (t.num_children(0, n) > slots.size()) return;  // more children than slots
        best = std::max(best, tree::expected_accepted(t, 0, tree::slot_model_alphas(t, 0, slots)));
      });
      const auto greedy = tree::best_tree(slots, budget);
      CAPTURE(slots, budget);
      REQUIRE(greedy.num_nodes(0) == budget + 1);
      CHECK(tree::expected_accepted(greedy, 0, tree::slot_model_alphas(greedy, 0, slots)) == Approx(best).margin(1e-14));
    }
  }
  // With max_depth = 1 the best tree is a star of min(budget, k) nodes; with one slot, a chain.
  const std::vector<double> slots{0.5, 0.5, 0.5};
  CHECK(tree::best_tree(slots, 10, 1).num_nodes(0) == 4);
  const auto chain = tree::best_tree(std::vector<double>{0.7}, 5);
  CHECK(chain.max_depth() == 5);
  CHECK(tree::expected_accepted(chain, 0, tree::slot_model_alphas(chain, 0, std::vector<double>{0.7})) ==
        Approx(tree::chain_expected_accepted(std::vector<double>(5, 0.7))));
}
