// SPECDEC_TEST_LABELS: statistical
// Monte-Carlo simulator of tree verification under per-node acceptance (simulate/tree.hpp) against
// theory/tree.hpp: E[A] within 5 standard errors, the law of the accepted length and of the node where
// the path ends cell by cell; a negative control (a formula that ignores the sibling order) must fail
// the same check; chunked runs merge to the same histograms. Fixed, printed seeds.
#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "simulate/check.hpp"
#include "specdec/errors.hpp"
#include "specdec/simulate/tree.hpp"
#include "specdec/theory/tree.hpp"

namespace sim = specdec::simulate;
namespace tree = specdec::theory::tree;
using specdec::tree_layout;
using specdec_sim_test::law_matches;
using specdec_sim_test::same_tally;
using specdec_sim_test::within;

namespace {

struct tree_case {
  std::string name;
  tree_layout layout;
  std::vector<double> alphas;
};

std::vector<tree_case> cases() {
  std::vector<tree_case> out;
  const std::int32_t drafts[] = {6};
  out.push_back({"chain of 6", tree_layout::chains(drafts), {0.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4}});
  const auto binary = tree::complete_tree(2, 4);
  out.push_back({"complete binary, depth 4", binary, tree::slot_model_alphas(binary, 0, std::vector<double>{0.6, 0.5})});
  const std::vector<double> slots{0.5, 0.4, 0.3};
  const auto best = tree::best_tree(slots, 20);
  out.push_back({"best tree of 20 nodes", best, tree::slot_model_alphas(best, 0, slots)});
  // An irregular tree with certain and impossible acceptances.
  const std::int32_t count[] = {9}, parents[] = {specdec::no_node, 0, 0, 0, 1, 1, 2, 4, 4};
  out.push_back({"irregular", tree_layout::from_parents(count, parents), {0.0, 0.3, 1.0, 0.5, 0.0, 0.7, 0.2, 0.5, 1.0}});
  return out;
}

}  // namespace

TEST_CASE("Tree walk: E[A], the accepted-length law and the end-node law match theory/tree.hpp", "[simulate][tree]") {
  constexpr std::uint64_t seed = 20240215, draws = 200000;
  std::cout << "tree walk Monte-Carlo: seed " << seed << ", " << draws << " draws per tree\n";
  std::uint32_t stream = 0;
  for (const auto& c : cases()) {
    CAPTURE(c.name);
    std::cout << c.name << "\n";
    const auto r = sim::tree::walk(c.layout, 0, c.alphas, {seed, stream++, 0, draws});
    CHECK(r.accepted.count() == draws);
    CHECK(within("E[A]", r.mean_accepted(), tree::expected_accepted(c.layout, 0, c.alphas)));
    const auto law = tree::accepted_length_law(c.layout, 0, c.alphas);
    CHECK(law_matches("P(A = d)", r.accepted, law.size(), [&](std::size_t d) { return law[d]; }));
    std::vector<double> last(c.layout.num_nodes(0));
    tree::end_probabilities(c.layout, 0, c.alphas, last);
    CHECK(law_matches("P(path ends at n)", r.last_node, last.size(), [&](std::size_t n) { return last[n]; }));
    CHECK(r.coins >= draws);
  }
}

TEST_CASE("Tree walk negative control: reach probabilities without the earlier siblings' failures are rejected",
          "[simulate][tree]") {
  // The wrong formula P(reach n) = P(reach parent) alpha_n counts a node as if it were every
  // sibling's first try; the simulation must tell it apart.
  const auto t = tree::complete_tree(3, 3);
  const auto alphas = tree::slot_model_alphas(t, 0, std::vector<double>{0.4, 0.4, 0.4});
  std::vector<double> wrong(t.num_nodes(0), 0.0);
  wrong[0] = 1.0;
  double wrong_mean = 0.0;
  for (std::size_t n = 1; n < wrong.size(); ++n) {
    wrong[n] = wrong[static_cast<std::size_t>(t.parent(0, n))] * alphas[n];
    wrong_mean += wrong[n];
  }
  const auto r = sim::tree::walk(t, 0, alphas, {77, 0, 0, 200000});
  std::cout << "negative control (expected to be rejected):\n";
  CHECK_FALSE(within("E[A] against the wrong formula", r.mean_accepted(), wrong_mean));
  CHECK(within("E[A] against theory", r.mean_accepted(), tree::expected_accepted(t, 0, alphas)));
}

TEST_CASE("Tree walk: deterministic, and chunked runs merge to the same histograms", "[simulate][tree]") {
  const auto t = tree::complete_tree(2, 3);
  const auto alphas = tree::slot_model_alphas(t, 0, std::vector<double>{0.7, 0.5});
  const auto whole = sim::tree::walk(t, 0, alphas, {5, 3, 0, 10000});
  auto first = sim::tree::walk(t, 0, alphas, {5, 3, 0, 4000});
  const auto second = sim::tree::walk(t, 0, alphas, {5, 3, 4000, 6000});
  first.accepted.merge(second.accepted);
  first.last_node.merge(second.last_node);
  CHECK(same_tally(whole.accepted, first.accepted));
  CHECK(same_tally(whole.last_node, first.last_node));
  CHECK(whole.coins == first.coins + second.coins);
  CHECK_THROWS_AS(sim::tree::walk(t, 0, std::vector<double>{0.5}, {5, 3, 0, 10}), specdec::error);
}
