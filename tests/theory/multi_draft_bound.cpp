// The optimal multi-draft acceptance (theory/multi_draft_bound.hpp): the closed form for k i.i.d.
// drafts against the exact maximum flow and against the minimum cut over every token set, computed
// here from an enumeration of every draft tuple; the draft-set laws against the same enumeration;
// every implemented multi-candidate rule of theory/tree.hpp below its bound; the reference pair of
// docs/trees.md; negative controls (wrong orders, a wrong formula) that must disagree with the
// maximum flow; bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "random_row.hpp"
#include "specdec/errors.hpp"
#include "specdec/theory/multi_draft_bound.hpp"
#include "specdec/theory/sd.hpp"
#include "specdec/theory/tree.hpp"

namespace tree = specdec::theory::tree;
using cspan = std::span<const double>;
using specdec_test::random_row;

namespace {

// The law of the drafted set, by enumerating every ordered tuple (c_1..c_k) of V^k with its
// probability: i.i.d. prod_j q(c_j), or successive sampling without replacement
// prod_j q(c_j) / (1 - sum_{i<j} q(c_i)) (a repeated token has probability 0; once supp q is drawn
// the process stops, so the draws after that are not part of the set).
std::vector<double> enumerated_set_law(const std::vector<double>& q, std::size_t k, bool without_replacement) {
  const std::size_t v = q.size();
  std::vector<double> law(std::size_t{1} << v, 0.0);
  std::vector<std::size_t> tuple(k, 0);
  for (bool more = true; more;) {
    double weight = 1.0;
    std::size_t set = 0;
    for (std::size_t j = 0; j < k && weight > 0.0; ++j) {
      const std::size_t c = tuple[j];
      if (!without_replacement) {
        weight *= q[c];
        set |= std::size_t{1} << c;
        continue;
      }
      double rest = 0.0;
      for (std::size_t x = 0; x < v; ++x)
        if ((set >> x & 1u) == 0) rest += q[x];
      if (!(rest > 0.0)) {  // support exhausted: only tuples whose remaining draws are all token 0 count once
        for (std::size_t i = j; i < k; ++i) weight *= tuple[i] == 0 ? 1.0 : 0.0;
        break;
      }
      weight *= (set >> c & 1u) != 0 ? 0.0 : q[c] / rest;
      set |= std::size_t{1} << c;
    }
    law[set] += weight;
    std::size_t i = 0;
    while (i < k && ++tuple[i] == v) tuple[i++] = 0;
    more = i < k;
  }
  return law;
}

// min over every token set H of P(Y not in H) + P(drafted set meets H): the minimum cut.
double minimum_cut(const std::vector<double>& p, const std::vector<double>& set_law) {
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t h = 0; h < set_law.size(); ++h) {
    double outside = 0.0, meets = 0.0;
    for (std::size_t x = 0; x < p.size(); ++x)
      if ((h >> x & 1u) == 0) outside += p[x];
    for (std::size_t set = 0; set < set_law.size(); ++set)
      if ((set & h) != 0) meets += set_law[set];
    best = std::min(best, outside + meets);
  }
  return best;
}

// min over the prefixes H of `order` of (1 - p(H)) + 1 - (1 - q(H))^k: the closed form's shape with
// any token order (the correct one sorts by q/p ascending).
double prefix_minimum(const std::vector<double>& p, const std::vector<double>& q, std::size_t k,
                      const std::vector<std::size_t>& order) {
  double best = 1.0, p_in = 0.0, q_in = 0.0;
  for (const std::size_t x : order) {
    p_in += p[x];
    q_in += q[x];
    best = std::min(best, (1.0 - p_in) + 1.0 - std::pow(std::max(0.0, 1.0 - q_in), static_cast<double>(k)));
  }
  return best;
}

std::vector<std::size_t> sorted_tokens(std::size_t v, const std::function<double(std::size_t)>& key) {
  std::vector<std::size_t> order(v);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return order;
}

// q/p (infinite for p = 0), the key of the correct order.
double ratio(const std::vector<double>& p, const std::vector<double>& q, std::size_t x) {
  return p[x] > 0.0 ? q[x] / p[x] : std::numeric_limits<double>::infinity();
}

struct random_case {
  std::vector<double> p, q;
  std::size_t k;
};

// Small random pairs: V in 2..5, k in 1..3, some rows with zeros.
random_case make_case(std::uint64_t seed) {
  const std::size_t v = 2 + seed % 4, k = 1 + (seed / 4) % 3;
  return {random_row(v, seed, 0.5, seed % 3 == 0 ? 0.3 : 0.0), random_row(v, 9000 + seed, 1.0, seed % 5 == 0 ? 0.3 : 0.0), k};
}

double max_abs_difference(cspan a, cspan b) {
  REQUIRE(a.size() == b.size());
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("Optimal multi-draft acceptance at the reference pair of docs/trees.md", "[theory][tree][multi_draft]") {
  const std::vector<double> p{0.5, 0.3, 0.2}, q{0.2, 0.3, 0.5};
  // By hand: q/p = (0.4, 1, 2.5); H = {0} gives 0.5 + 1 - 0.8^k, below every other prefix.
  const double iid[] = {0.70, 0.86, 0.988};
  // Without replacement, k = 2: P(Y not in {0}) + P(0 drafted) = 0.5 + 0.2 + 0.3 * 0.2 / 0.7 + 0.5 * 0.2 / 0.5 = 69/70.
  const double without[] = {0.70, 69.0 / 70.0, 1.0};
  for (std::size_t k = 1; k <= 3; ++k) {
    CAPTURE(k);
    const double bound = tree::optimal_iid_acceptance(p, q, k);
    CHECK(bound == Approx(iid[k - 1]).margin(1e-12));
    CHECK(tree::optimal_iid_acceptance_max_flow(p, q, k) == Approx(iid[k - 1]).margin(1e-12));
    CHECK(tree::optimal_without_replacement_acceptance(p, q, k) == Approx(without[k - 1]).margin(1e-12));
    CHECK(tree::mss_acceptance(p, q, k) <= bound);
    CHECK(tree::kseq_acceptance(p, q, k) <= bound);
  }
  // The gaps of docs/trees.md at k = 2: MSS 0.76 and K-SEQ 0.7914 against 0.86; RRS 0.82 against 0.9857.
  CHECK(tree::optimal_iid_acceptance(p, q, 2) - tree::mss_acceptance(p, q, 2) == Approx(0.10).margin(1e-12));
  CHECK(tree::optimal_iid_acceptance(p, q, 2) - tree::kseq_acceptance(p, q, 2) == Approx(0.0686).margin(5e-5));
  CHECK(tree::optimal_without_replacement_acceptance(p, q, 2) - tree::rrs_acceptance(p, q, 2) ==
        Approx(69.0 / 70.0 - 0.82).margin(1e-12));
}

TEST_CASE("The draft-set laws equal the enumeration of every draft tuple", "[theory][tree][multi_draft]") {
  for (std::uint64_t seed = 1; seed <= 120; ++seed) {
    const random_case c = make_case(seed);
    CAPTURE(seed, c.p.size(), c.k);
    CHECK(max_abs_difference(tree::iid_draft_set_law(c.q, c.k), enumerated_set_law(c.q, c.k, false)) < 1e-14);
    CHECK(max_abs_difference(tree::without_replacement_draft_set_law(c.q, c.k), enumerated_set_law(c.q, c.k, true)) < 1e-14);
  }
  // Without replacement, k beyond the support: the set is supp q.
  const std::vector<double> q{0.5, 0.0, 0.5};
  const auto law = tree::without_replacement_draft_set_law(q, 3);
  CHECK(law[0b101] == Approx(1.0).margin(1e-15));
  CHECK(std::accumulate(law.begin(), law.end(), 0.0) == Approx(1.0).margin(1e-15));
}

TEST_CASE("Closed form = maximum flow = minimum cut over every token set (V <= 5, k <= 3)", "[theory][tree][multi_draft]") {
  double largest_gap = 0.0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const random_case c = make_case(seed);
    CAPTURE(seed, c.p, c.q, c.k);
    const double closed = tree::optimal_iid_acceptance(c.p, c.q, c.k);
    const double flow = tree::optimal_iid_acceptance_max_flow(c.p, c.q, c.k);
    const double cut = minimum_cut(c.p, enumerated_set_law(c.q, c.k, false));
    CHECK(std::abs(closed - flow) < 1e-9);
    CHECK(std::abs(flow - cut) < 1e-9);
    // Max-flow/min-cut without replacement too, where no closed form is claimed.
    const double without = tree::optimal_without_replacement_acceptance(c.p, c.q, c.k);
    CHECK(std::abs(without - minimum_cut(c.p, enumerated_set_law(c.q, c.k, true))) < 1e-9);
    // The test's own prefix minimum in q/p order is the library's closed form.
    CHECK(std::abs(prefix_minimum(c.p, c.q, c.k, sorted_tokens(c.p.size(), [&](std::size_t x) { return ratio(c.p, c.q, x); })) -
                   closed) < 1e-12);
    largest_gap = std::max(largest_gap, std::abs(closed - flow));
  }
  WARN("largest |closed form - max flow| over 400 cases: " << largest_gap);
}

TEST_CASE("Every implemented multi-candidate rule is at or below its bound; k = 1 gives sum min(p, q)",
          "[theory][tree][multi_draft]") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    const random_case c = make_case(seed);
    CAPTURE(seed, c.p, c.q, c.k);
    const double iid = tree::optimal_iid_acceptance(c.p, c.q, c.k);
    const double without = tree::optimal_without_replacement_acceptance(c.p, c.q, c.k);
    CHECK(tree::mss_acceptance(c.p, c.q, c.k) <= iid + 1e-12);
    CHECK(tree::kseq_acceptance(c.p, c.q, c.k) <= iid + 1e-12);
    CHECK(tree::rrs_acceptance(c.p, c.q, c.k) <= without + 1e-9);
    // Target-only over the top-k of q: a deterministic drafted set S, whose optimum is p(S) -- the rule's acceptance.
    const auto siblings = tree::top_k_tokens(c.q, std::min(c.k, c.p.size()));
    std::vector<double> point(std::size_t{1} << c.p.size(), 0.0);
    std::size_t set = 0;
    for (const auto s : siblings) set |= std::size_t{1} << static_cast<std::size_t>(s);
    point[set] = 1.0;
    CHECK(std::abs(tree::optimal_acceptance_max_flow(c.p, point) - tree::target_only_acceptance(c.p, siblings)) < 1e-12);
    // More drafts never lower the optimum.
    CHECK(tree::optimal_iid_acceptance(c.p, c.q, c.k + 1) >= iid - 1e-12);
    // One draft: every bound is the single-draft acceptance 1 - TV(p, q).
    const double single = specdec::theory::sd::acceptance_rate(cspan(c.p), cspan(c.q));
    CHECK(tree::optimal_iid_acceptance(c.p, c.q, 1) == Approx(single).margin(1e-12));
    CHECK(tree::optimal_iid_acceptance_max_flow(c.p, c.q, 1) == Approx(single).margin(1e-12));
    CHECK(tree::optimal_without_replacement_acceptance(c.p, c.q, 1) == Approx(single).margin(1e-12));
  }
  const std::vector<double> same{0.1, 0.6, 0.3};
  CHECK(tree::optimal_iid_acceptance(same, same, 2) == Approx(1.0).margin(1e-15));
}

TEST_CASE("Negative controls: wrong orders and a wrong formula disagree with the maximum flow", "[theory][tree][multi_draft]") {
  // Each control must differ from the maximum flow by more than 1e-6 on some random case, while the
  // correct order (same helper) agrees with it on every case.
  bool q_order_differs = false, reversed_differs = false, independent_tries_exceeds = false;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const random_case c = make_case(seed);
    const std::size_t v = c.p.size();
    const double flow = tree::optimal_iid_acceptance_max_flow(c.p, c.q, c.k);
    CAPTURE(seed);
    REQUIRE(std::abs(prefix_minimum(c.p, c.q, c.k, sorted_tokens(v, [&](std::size_t x) { return ratio(c.p, c.q, x); })) - flow) <
            1e-9);
    // Sorted by q alone, ignoring p.
    q_order_differs |=
        std::abs(prefix_minimum(c.p, c.q, c.k, sorted_tokens(v, [&](std::size_t x) { return c.q[x]; })) - flow) > 1e-6;
    // Sorted by q/p descending (the wrong direction).
    reversed_differs |=
        std::abs(prefix_minimum(c.p, c.q, c.k, sorted_tokens(v, [&](std::size_t x) { return -ratio(c.p, c.q, x); })) - flow) >
        1e-6;
    // k independent tries at the single-draft acceptance, 1 - (1 - sum min(p, q))^k: not a valid bound.
    const double single = specdec::theory::sd::acceptance_rate(cspan(c.p), cspan(c.q));
    independent_tries_exceeds |= 1.0 - std::pow(1.0 - single, static_cast<double>(c.k)) > flow + 1e-6;
  }
  CHECK(q_order_differs);
  CHECK(reversed_differs);
  CHECK(independent_tries_exceeds);
}

TEST_CASE("Optimal multi-draft acceptance: bad input", "[theory][tree][multi_draft]") {
  const std::vector<double> p{0.5, 0.3, 0.2}, q{0.2, 0.3, 0.5}, short_q{0.5, 0.5}, not_row{0.5, 0.6, -0.1},
      no_mass{0.5, 0.3, 0.1}, nan_row{0.5, std::nan(""), 0.5};
  using specdec::error;
  for (const auto& f :
       {tree::optimal_iid_acceptance, tree::optimal_iid_acceptance_max_flow, tree::optimal_without_replacement_acceptance}) {
    CHECK_THROWS_AS(f(p, q, 0), error);        // k = 0
    CHECK_THROWS_AS(f(p, short_q, 2), error);  // sizes differ
    CHECK_THROWS_AS(f(not_row, q, 2), error);
    CHECK_THROWS_AS(f(p, no_mass, 2), error);  // sums to 0.9
    CHECK_THROWS_AS(f(nan_row, q, 2), error);
    CHECK_THROWS_AS(f(std::vector<double>{}, std::vector<double>{}, 1), error);
  }
  // The max-flow versions refuse V > 12 and k > 64; the closed form has no such limit.
  const std::vector<double> uniform13(13, 1.0 / 13.0);
  CHECK(tree::optimal_iid_acceptance(uniform13, uniform13, 100) == Approx(1.0).margin(1e-15));
  CHECK_THROWS_AS(tree::optimal_iid_acceptance_max_flow(uniform13, uniform13, 2), error);
  CHECK_THROWS_AS(tree::optimal_without_replacement_acceptance(uniform13, uniform13, 2), error);
  CHECK_THROWS_AS(tree::iid_draft_set_law(q, tree::max_flow_drafts + 1), error);
  CHECK_THROWS_AS(tree::without_replacement_draft_set_law(q, 0), error);
  // A set law of the wrong size or that is not a law.
  CHECK_THROWS_AS(tree::optimal_acceptance_max_flow(p, std::vector<double>(7, 1.0 / 7.0)), error);
  CHECK_THROWS_AS(tree::optimal_acceptance_max_flow(p, std::vector<double>(8, 0.1)), error);
  std::vector<double> negative(8, 0.0);
  negative[1] = 1.5;
  negative[2] = -0.5;
  CHECK_THROWS_AS(tree::optimal_acceptance_max_flow(p, negative), error);
}
