// SPECDEC_TEST_LABELS: statistical
//
// Typical acceptance (Medusa, acceptance/typical.hpp), chain and tree, through the public API:
//  - deterministic cases: a one-hot target accepts only its argmax; a uniform target accepts every
//    draft; on a tree the deepest accepted node wins, ties by the larger sum of log p, then the lower
//    node id; the acceptance test is strict (p(x) == threshold rejects);
//  - `typical_sample` emits only tokens with p >= threshold, with the truncated law (chi-squared);
//  - log_offset = 1e-5 reproduces Medusa's (and vLLM V0's) threshold formula;
//  - the rule is LOSSY: the total variation of its emitted law from the target's is computed exactly
//    (chain) and by Monte Carlo (chain and tree) on a small Markov pair and printed. It is asserted to be
//    > 0 where it must be lossy and exactly 0 where it must be exact (a one-hot target). The Monte
//    Carlo chain law also matches the exact typical law (chi-squared), which checks the enumeration.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/host_policies.hpp"

namespace {

using specdec::token_id;
using specdec::typical_correction;
using specdec::typical_rule;
using specdec::verify_status;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::request_stream;
using specdec::random::stream_address;
using specdec_test::markov_pair;

using row = std::vector<double>;

row one_hot(std::size_t V, std::size_t at) {
  row r(V, 0.0);
  r[at] = 1.0;
  return r;
}

row concat(const std::vector<row>& rows) {
  row out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

specdec::tree_result tree(const typical_rule& rule, const std::vector<std::int32_t>& parents, const std::vector<token_id>& tokens,
                          const std::vector<row>& target_rows, std::size_t V, const request_stream& stream = {1, 2, 3}) {
  const row p = concat(target_rows);
  return specdec::verify_one_tree(specdec::exec::seq, rule, parents, tokens, std::span<const double>(),
                                  std::span<const double>(p), V, stream);
}

const typical_rule medusa_fast{};  // epsilon 0.09, delta 0.3, argmax
const typical_rule medusa_sampled{0.09, 0.3, 1e-5, typical_correction::typical_sample};

// Medusa's threshold (medusa/model/utils.py, fast path; vLLM V0's typical_acceptance_sampler):
// min(posterior_threshold, posterior_alpha * exp(-H)), H = -sum p log(p + 1e-5), computed here by hand.
double medusa_threshold(const row& p, double posterior_threshold, double posterior_alpha) {
  double entropy = 0.0;
  for (const double x : p) entropy -= x * std::log(x + 1e-5);
  return std::min(posterior_threshold, std::exp(-entropy) * posterior_alpha);
}

// ---- exact law of typical acceptance on a chain ------------------------------------------------------

// The correction typical acceptance emits from row p: argmax, or p restricted to p >= threshold.
row correction_law(const typical_rule& rule, std::span<const double> p) {
  row c(p.size(), 0.0);
  if (rule.correction == typical_correction::argmax) {
    c[static_cast<std::size_t>(specdec::argmax(p))] = 1.0;
    return c;
  }
  const double thr = rule.threshold(p);
  double z = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v)
    if (p[v] >= thr) z += p[v];
  for (std::size_t v = 0; v < p.size(); ++v)
    if (p[v] >= thr) c[v] = p[v] / z;
  return c;
}

// The exact law of the first H tokens of chain decoding with typical acceptance, gamma drafts per
// block from q: a dynamic programme over (prefix, position in block) as in sequence_enumeration.hpp.
// At a drafted position the draft x ~ q is kept iff p(x) > threshold, otherwise the correction is
// emitted and the block ends; after gamma kept drafts the "bonus" is the correction too.
std::vector<double> typical_sequence_distribution(const typical_rule& rule, const markov_pair& m, std::size_t prompt, int horizon,
                                                  std::size_t gamma) {
  const std::size_t V = m.vocab;
  std::vector<double> kept(V * V), corrected(V * V), bonus(V * V);
  for (std::size_t a = 0; a < V; ++a) {
    const auto p = m.p_row(a), q = m.q_row(a);
    const double thr = rule.threshold(p);
    const row c = correction_law(rule, p);
    double keep = 0.0;
    for (std::size_t v = 0; v < V; ++v) {
      kept[a * V + v] = p[v] > thr ? q[v] : 0.0;
      keep += kept[a * V + v];
    }
    for (std::size_t v = 0; v < V; ++v) {
      corrected[a * V + v] = (1.0 - keep) * c[v];
      bonus[a * V + v] = c[v];
    }
  }
  return specdec_test::block_emission_distribution(kept, corrected, bonus, V, prompt, horizon, gamma);
}

double total_variation(const std::vector<double>& a, const std::vector<double>& b) {
  return specdec::total_variation(std::span<const double>(a), std::span<const double>(b));
}

std::vector<double> frequencies(const std::vector<std::uint64_t>& counts) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}));
  std::vector<double> f(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) f[i] = static_cast<double>(counts[i]) / n;
  return f;
}

constexpr std::size_t prompt = 0;

// Chain decoding with typical acceptance: drafts from q, verify_chain, append; counts of the first H tokens.
std::vector<std::uint64_t> simulate_chain(const typical_rule& rule, const markov_pair& m, int horizon, std::size_t gamma,
                                          std::uint64_t seed, std::uint64_t n) {
  const std::size_t V = m.vocab, G = gamma;
  std::vector<std::uint64_t> counts(specdec_test::num_sequences(V, horizon), 0);
  std::vector<token_id> drafts(G), sequence;
  row q_rows(G * V), p_rows((G + 1) * V);
  for (std::uint64_t i = 0; i < n; ++i) {
    sequence.clear();
    std::size_t last = prompt;
    std::uint32_t step = 0;
    while (sequence.size() < static_cast<std::size_t>(horizon)) {
      const request_stream stream{seed, static_cast<std::uint32_t>(i), step++};
      std::size_t prev = last;
      for (std::size_t j = 0; j < G; ++j) {
        std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                    p_rows.begin() + static_cast<std::ptrdiff_t>(j * V));
        std::copy_n(m.draft.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                    q_rows.begin() + static_cast<std::ptrdiff_t>(j * V));
        drafts[j] =
            specdec::sample_categorical(m.q_row(prev), stream.open(static_cast<std::uint32_t>(j), purpose::draft).uniform())
                .token;
        prev = static_cast<std::size_t>(drafts[j]);
      }
      std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                  p_rows.begin() + static_cast<std::ptrdiff_t>(G * V));
      const auto out = specdec::verify_chain(specdec::exec::seq, rule, drafts, q_rows, p_rows, V, stream);
      REQUIRE(specdec::is_valid(out.status));
      sequence.insert(sequence.end(), out.tokens.begin(), out.tokens.end());
      last = static_cast<std::size_t>(sequence.back());
    }
    ++counts[specdec_test::sequence_cell(sequence, V, horizon)];
  }
  return counts;
}

// Tree decoding with typical acceptance: 3 children at the root, 2 under each, i.i.d. from q.
std::vector<std::uint64_t> simulate_tree(const typical_rule& rule, const markov_pair& m, int horizon, std::uint64_t seed,
                                         std::uint64_t n) {
  const std::vector<std::int32_t> parents{-1, 0, 0, 0, 1, 1, 2, 2, 3, 3};
  const std::size_t V = m.vocab, N = parents.size();
  std::vector<std::uint64_t> counts(specdec_test::num_sequences(V, horizon), 0);
  std::vector<token_id> tokens(N), sequence;
  row p_rows(N * V);
  for (std::uint64_t i = 0; i < n; ++i) {
    sequence.clear();
    std::size_t last = prompt;
    std::uint32_t step = 0;
    while (sequence.size() < static_cast<std::size_t>(horizon)) {
      const request_stream stream{seed, static_cast<std::uint32_t>(i), step++};
      tokens[0] = static_cast<token_id>(last);
      for (std::size_t node = 1; node < N; ++node) {
        const auto parent = static_cast<std::size_t>(parents[node]);
        tokens[node] = specdec::sample_categorical(m.q_row(static_cast<std::size_t>(tokens[parent])),
                                                   stream.open(static_cast<std::uint32_t>(node), purpose::draft).uniform())
                           .token;
      }
      for (std::size_t node = 0; node < N; ++node)
        std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(tokens[node]) * V), V,
                    p_rows.begin() + static_cast<std::ptrdiff_t>(node * V));
      const auto out = specdec::verify_one_tree(specdec::exec::seq, rule, parents, tokens, std::span<const double>(),
                                                std::span<const double>(p_rows), V, stream);
      REQUIRE(specdec::is_valid(out.status));
      sequence.insert(sequence.end(), out.tokens.begin(), out.tokens.end());
      last = static_cast<std::size_t>(sequence.back());
    }
    ++counts[specdec_test::sequence_cell(sequence, V, horizon)];
  }
  return counts;
}

}  // namespace

// ---- deterministic cases -------------------------------------------------------------------------------

TEST_CASE("typical: a one-hot target accepts only its argmax (chain and tree)", "[typical]") {
  const std::size_t V = 6;
  const std::vector<row> p{one_hot(V, 2), one_hot(V, 4), one_hot(V, 1), one_hot(V, 5)};
  const row q(3 * V, 1.0 / V);
  for (const auto& rule : {medusa_fast, medusa_sampled, typical_rule{0.5, 1.0, 0.0, typical_correction::argmax}}) {
    // Chain: drafts 2, 4 match, 3 does not: the correction is the argmax 1.
    const auto c =
        specdec::verify_chain(specdec::exec::seq, rule, std::vector<token_id>{2, 4, 3}, q, concat(p), V, request_stream{7, 0, 0});
    CHECK(c.tokens == std::vector<token_id>{2, 4, 1});
    CHECK(c.num_accepted == 2);
    CHECK(c.status == verify_status::ok);
    // All match: the "bonus" is the last row's argmax.
    const auto all =
        specdec::verify_chain(specdec::exec::seq, rule, std::vector<token_id>{2, 4, 1}, q, concat(p), V, request_stream{7, 0, 1});
    CHECK(all.tokens == std::vector<token_id>{2, 4, 1, 5});
    // Tree: root children {0, 2, 3}; only node 2 (token 2) passes, then its children {4, 0} -> node 4.
    const std::vector<std::int32_t> parents{-1, 0, 0, 0, 2, 2};
    const std::vector<token_id> tokens{0, 0, 2, 3, 4, 0};
    const std::vector<row> rows{one_hot(V, 2), one_hot(V, 3), one_hot(V, 4), one_hot(V, 0), one_hot(V, 1), one_hot(V, 5)};
    const auto t = tree(rule, parents, tokens, rows, V);
    CHECK(t.path == std::vector<std::int32_t>{0, 2, 4});
    CHECK(t.tokens == std::vector<token_id>{2, 4, 1});
    CHECK(t.status == verify_status::ok);
  }
}

TEST_CASE("typical: a uniform target accepts every draft (chain and tree)", "[typical]") {
  for (const std::size_t V : {std::size_t{4}, std::size_t{50}, std::size_t{30000}}) {
    CAPTURE(V);
    const row u(V, 1.0 / static_cast<double>(V));
    // threshold = min(epsilon, delta / V) < 1 / V
    CHECK(medusa_fast.threshold(std::span<const double>(u)) < 1.0 / static_cast<double>(V));
    philox_stream s(stream_address{0x7F, static_cast<std::uint32_t>(V), 0, 0, purpose::user});
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<token_id> drafts;
      for (int i = 0; i < 5; ++i) drafts.push_back(static_cast<token_id>(s.uniform() * static_cast<double>(V)));
      std::vector<row> p(6, u);
      const row q(5 * V, 1.0 / static_cast<double>(V));
      for (const auto& rule : {medusa_fast, medusa_sampled}) {
        const auto c = specdec::verify_chain(specdec::exec::seq, rule, drafts, q, concat(p), V,
                                             request_stream{8, static_cast<std::uint32_t>(rep), 0});
        CHECK(c.num_accepted == 5);
        REQUIRE(c.tokens.size() == 6);
        CHECK(std::equal(drafts.begin(), drafts.end(), c.tokens.begin()));
        if (rule.correction == typical_correction::argmax) CHECK(c.tokens[5] == 0);  // argmax of a tie: the lowest id
      }
    }
    // Tree: two branches of depth 2 and one of depth 1; every node passes, the deepest wins, and of
    // the two deepest (equal sums of log p) the lower id.
    const std::vector<std::int32_t> parents{-1, 0, 0, 0, 2, 1};
    const std::vector<token_id> tokens{0, 1, 2, 3, 0, 3};
    const auto t = tree(medusa_fast, parents, tokens, std::vector<row>(6, u), V);
    CHECK(t.path == std::vector<std::int32_t>{0, 2, 4});
    CHECK(t.tokens == std::vector<token_id>{2, 0, 0});
  }
}

TEST_CASE("typical on trees: the deepest accepted node wins, ties by the sum of log p, then the lower node id",
          "[typical][tree]") {
  // V = 4. Tree: 0 -> {1 (tok 1), 2 (tok 2)}, 1 -> {3 (tok 0)}, 2 -> {4 (tok 0), 5 (tok 3)}, 5 -> {6 (tok 1)}.
  const std::size_t V = 4;
  const std::vector<std::int32_t> parents{-1, 0, 0, 1, 2, 2, 5};
  const std::vector<token_id> tokens{0, 1, 2, 0, 0, 3, 1};
  // Low-entropy rows, threshold = epsilon = 0.09 unless set otherwise.
  const auto rows = [&](double p01, double p02, double p10, double p20, double p23, double p51) {
    std::vector<row> r(7, row{0.7, 0.1, 0.1, 0.1});
    r[0] = {0.0, p01, p02, 1.0 - p01 - p02};
    r[1] = {p10, 0.0, 0.0, 1.0 - p10};
    r[2] = {p20, 0.0, 0.0, p23};
    r[2][1] = 1.0 - p20 - p23;
    r[5] = {0.0, p51, 0.0, 1.0 - p51};
    return r;
  };
  SECTION("the deepest node passes: it wins whatever the scores") {
    const auto t = tree(medusa_fast, parents, tokens, rows(0.5, 0.2, 0.6, 0.5, 0.2, 0.3), V);
    CHECK(t.path == std::vector<std::int32_t>{0, 2, 5, 6});
    CHECK(t.tokens == std::vector<token_id>{2, 3, 1, 0});  // row 6's argmax is token 0
  }
  SECTION("depth 2: the larger sum of log p wins") {
    // Node 6 fails (p = 0.05 < 0.09). Scores: node 3 = log .5 + log .6 = log .30, node 4 = log .4 + log .5
    // = log .20, node 5 = log .4 + log .3 = log .12 -> node 3.
    const auto t = tree(medusa_fast, parents, tokens, rows(0.5, 0.4, 0.6, 0.5, 0.3, 0.05), V);
    CHECK(t.path == std::vector<std::int32_t>{0, 1, 3});
    // Raise node 4: log .4 + log .55 = log .22 < log .30 still; raise node 2's branch instead.
    const auto u = tree(medusa_fast, parents, tokens, rows(0.2, 0.7, 0.6, 0.25, 0.6, 0.05), V);
    // node 3 = log .2 + log .6 = log .12; node 4 = log .7 + log .25 = log .175; node 5 = log .7 + log .6 = log .42.
    CHECK(u.path == std::vector<std::int32_t>{0, 2, 5});
  }
  SECTION("a tie in depth and in the sum of log p: the lower node id") {
    // Node 4 and node 5 both log .4 + log .3: ids 4 < 5. (Node 3: log .2 + log .3, smaller; node 6 fails.)
    const auto t = tree(medusa_fast, parents, tokens, rows(0.2, 0.4, 0.3, 0.3, 0.3, 0.05), V);
    CHECK(t.path == std::vector<std::int32_t>{0, 2, 4});
  }
  SECTION("nothing passes: the root's correction") {
    const auto t = tree(medusa_fast, parents, tokens, rows(0.05, 0.05, 0.6, 0.5, 0.2, 0.3), V);
    CHECK(t.path == std::vector<std::int32_t>{0});
    CHECK(t.num_accepted == 0);
    CHECK(t.tokens == std::vector<token_id>{3});
  }
}

TEST_CASE("typical: the acceptance test is strict, p(x) > threshold", "[typical]") {
  // p = (0.91, 0.09): H = 0.30, delta e^-H = 0.22 > epsilon, so threshold = epsilon = 0.09 = p(1).
  const row p{0.91, 0.09};
  REQUIRE(medusa_fast.threshold(std::span<const double>(p)) == 0.09);
  const row q(2, 0.5), rows{0.91, 0.09, 0.5, 0.5};
  const auto c =
      specdec::verify_chain(specdec::exec::seq, medusa_fast, std::vector<token_id>{1}, q, rows, 2, request_stream{1, 1, 1});
  CHECK(c.num_accepted == 0);
  CHECK(c.tokens == std::vector<token_id>{0});
  const typical_rule lower{0.089, 0.3};
  CHECK(specdec::verify_chain(specdec::exec::seq, lower, std::vector<token_id>{1}, q, rows, 2, request_stream{1, 1, 1})
            .num_accepted == 1);
}

TEST_CASE("typical: parameters outside their domain throw specdec::error (chain and tree)", "[typical][bad_input]") {
  // Found by the fuzz harness tests/fuzz/verify.cpp: chain verification used the parameters
  // unchecked, so a negative epsilon gave a negative threshold and accepted drafts with p(x) = 0.
  const std::size_t V = 2;
  const row q(V, 0.5), rows{1.0, 0.0, 0.5, 0.5};  // the draft x = 1 has p(x) = 0
  const std::vector<std::int32_t> parents{-1, 0};
  const std::vector<token_id> tokens{0, 1};
  const std::vector<row> tree_rows{row{1.0, 0.0}, row{0.5, 0.5}};
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const typical_rule& bad : {typical_rule{-0.1, 0.3}, typical_rule{0.09, -1.0}, typical_rule{nan, 0.3},
                                  typical_rule{0.09, inf}, typical_rule{0.09, 0.3, -1e-5}, typical_rule{0.09, 0.3, nan}}) {
    CAPTURE(bad.epsilon, bad.delta, bad.log_offset);
    CHECK_THROWS_AS(bad.validate(), specdec::error);
    specdec_test::for_each_host_policy([&](const auto& policy) {
      CHECK_THROWS_AS(specdec::verify_chain(policy, bad, std::vector<token_id>{1}, q, rows, V, request_stream{1, 0, 0}),
                      specdec::error);
    });
    CHECK_THROWS_AS(tree(bad, parents, tokens, tree_rows, V), specdec::error);
  }
  // At the edge of the domain: epsilon = delta = 0 gives threshold 0, and p(x) = 0 is still rejected.
  const auto edge = specdec::verify_chain(specdec::exec::seq, typical_rule{0.0, 0.0}, std::vector<token_id>{1}, q, rows, V,
                                          request_stream{1, 0, 0});
  CHECK(edge.num_accepted == 0);
  CHECK(edge.tokens == std::vector<token_id>{0});
}

TEST_CASE("typical: log_offset = 1e-5 reproduces Medusa's threshold formula", "[typical]") {
  philox_stream s(stream_address{0x3ED, 0, 0, 0, purpose::user});
  double worst = 0.0, offset_matters = 0.0;
  for (int t = 0; t < 500; ++t) {
    const std::size_t V = 2 + static_cast<std::size_t>(s.uniform() * 200.0);
    row p(V);
    double z = 0.0;
    for (auto& x : p) {
      x = s.uniform() < 0.3 ? 0.0 : std::pow(s.exponential(), 1.0 + 4.0 * s.uniform());
      z += x;
    }
    if (z == 0.0) {
      p[0] = 1.0;
      z = 1.0;
    }
    for (auto& x : p) x /= z;
    for (const auto& [eps, alpha] : {std::pair{0.09, 0.3}, std::pair{0.3, 0.09}, std::pair{0.03, 0.9}}) {
      const typical_rule medusa{eps, alpha, 1e-5};
      const double mine = medusa_threshold(p, eps, alpha), lib = medusa.threshold(std::span<const double>(p));
      worst = std::max(worst, std::abs(mine - lib) / mine);
      const typical_rule exact{eps, alpha, 0.0};
      offset_matters = std::max(offset_matters, std::abs(exact.threshold(std::span<const double>(p)) - lib));
    }
  }
  std::cout << "[typical] Medusa's threshold: max relative difference " << worst
            << " (log_offset 1e-5); with the exact entropy the threshold moves by up to " << offset_matters << "\n";
  CHECK(worst < 1e-13);
  CHECK(offset_matters > 1e-6);
  // Defaults are Medusa's medusa_model.py ones.
  CHECK(typical_rule{}.epsilon == 0.09);
  CHECK(typical_rule{}.delta == 0.3);
}

TEST_CASE("typical_sample: the correction has p >= threshold and the truncated law", "[typical][statistical]") {
  // A row with a long tail: the correction after a rejected draft must come from {v : p(v) >= threshold}.
  const std::size_t V = 12;
  row p(V);
  for (std::size_t v = 0; v < V; ++v) p[v] = std::pow(0.6, static_cast<double>(v));
  const double z = std::accumulate(p.begin(), p.end(), 0.0);
  for (auto& x : p) x /= z;
  const typical_rule rule{0.09, 0.6, 0.0, typical_correction::typical_sample};
  const double thr = rule.threshold(std::span<const double>(p));
  std::size_t allowed = 0;
  for (const double x : p) allowed += x >= thr ? 1 : 0;
  std::cout << "[typical] typical_sample: threshold " << thr << ", " << allowed << " of " << V << " tokens allowed\n";
  REQUIRE(allowed >= 2);
  REQUIRE(allowed < V);
  // The draft V - 1 (p below the threshold) is always rejected. Chain and tree.
  const row q(V, 1.0 / V), rows = concat({p, p});
  const std::vector<std::int32_t> parents{-1, 0};
  const std::vector<token_id> tokens{0, static_cast<token_id>(V - 1)};
  std::vector<std::uint64_t> counts(V, 0), tree_counts(V, 0);
  const std::uint64_t n = 100'000;
  for (std::uint32_t i = 0; i < n; ++i) {
    const request_stream stream{0x7C, i, 0};
    const auto c =
        specdec::verify_chain(specdec::exec::seq, rule, std::vector<token_id>{static_cast<token_id>(V - 1)}, q, rows, V, stream);
    REQUIRE(c.num_accepted == 0);
    REQUIRE(c.tokens.size() == 1);
    REQUIRE(p[static_cast<std::size_t>(c.tokens[0])] >= thr);
    ++counts[static_cast<std::size_t>(c.tokens[0])];
    const auto t = specdec::verify_one_tree(specdec::exec::seq, rule, parents, tokens, std::span<const double>(),
                                            std::span<const double>(rows), V, stream);
    REQUIRE(t.tokens == c.tokens);  // same stream, same node: the tree's correction is the chain's
    ++tree_counts[static_cast<std::size_t>(t.tokens[0])];
  }
  const row expected = correction_law(rule, std::span<const double>(p));
  const auto g = specdec_test::chi_squared_gof(counts, expected);
  std::cout << "[typical] typical_sample correction vs p truncated at the threshold: " << g << "\n";
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
  // Negative control: it is not p itself.
  const auto bad = specdec_test::chi_squared_gof(counts, p);
  CHECK(bad.p_value < specdec_test::gof_alpha);
}

// ---- how lossy it is ---------------------------------------------------------------------------------

TEST_CASE("typical acceptance is lossy: its total variation from the target, measured", "[typical][statistical][lossy]") {
  // A small Markov pair (V = 5): a random target table mixed with the uniform row (a share `flat`:
  // the flatter, the higher the entropy, the lower the threshold delta e^-H and the more drafts pass)
  // and a draft that differs from it.
  const std::size_t V = 5;
  const int H = 3;
  for (const double flat : {0.6, 0.25}) {
    markov_pair m = specdec_test::make_markov_pair(V, 20250716, 0.8);
    for (auto& x : m.target) x = (1.0 - flat) * x + flat / static_cast<double>(V);
    const std::vector<double> target = specdec_test::target_sequence_distribution(m, prompt, H);
    std::cout << "[typical] lossy case: V = " << V << ", table seed 20250716, target = " << 1.0 - flat << " table + " << flat
              << " uniform, mean TV(p, q) = " << m.mean_total_variation() << "\n";
    for (const auto& [rule, name] :
         {std::pair{medusa_fast, "argmax correction (Medusa fast)"}, std::pair{medusa_sampled, "typical_sample correction"}}) {
      for (const std::size_t gamma : {1u, 3u}) {
        const auto exact = typical_sequence_distribution(rule, m, prompt, H, gamma);
        CHECK(std::abs(std::accumulate(exact.begin(), exact.end(), 0.0) - 1.0) < 1e-12);
        const double tv = total_variation(exact, target);
        const std::uint64_t seed = 0x7C00 + static_cast<std::uint64_t>(gamma) +
                                   (rule.correction == typical_correction::argmax ? 0 : 16) + (flat > 0.5 ? 0 : 32);
        const auto counts = simulate_chain(rule, m, H, gamma, seed, 100'000);
        const double tv_mc = total_variation(frequencies(counts), target);
        const auto vs_exact = specdec_test::chi_squared_gof(counts, exact);
        const auto vs_target = specdec_test::chi_squared_gof(counts, target);
        WARN("typical acceptance (" << name << "), target " << 1.0 - flat << " table + " << flat << " uniform, chain gamma = "
                                    << gamma << ", H = " << H << ": TV(emitted law, target law) = " << tv << " exact, " << tv_mc
                                    << " Monte Carlo (N = 100000, seed 0x" << std::hex << seed << std::dec
                                    << "); chi-squared vs the exact typical law p = " << vs_exact.p_value
                                    << ", vs the target p = " << vs_target.p_value);
        CHECK(tv > 0.01);                                    // lossy: clearly not the target's law
        CHECK(vs_exact.p_value > specdec_test::gof_alpha);   // the enumeration is the law the library produces
        CHECK(vs_target.p_value < specdec_test::gof_alpha);  // and the target is not
      }
      // Trees (3 x 2 candidates, i.i.d. from q): Monte Carlo only.
      const auto counts = simulate_tree(
          rule, m, H, 0x7C40 + (rule.correction == typical_correction::argmax ? 0u : 1u) + (flat > 0.5 ? 0u : 2u), 60'000);
      const double tv_mc = total_variation(frequencies(counts), target);
      const auto vs_target = specdec_test::chi_squared_gof(counts, target);
      WARN("typical acceptance (" << name << "), target " << 1.0 - flat << " table + " << flat
                                  << " uniform, tree 3 x 2, H = " << H << ": TV(emitted law, target law) = " << tv_mc
                                  << " Monte Carlo (N = 60000); chi-squared vs the target p = " << vs_target.p_value);
      CHECK(tv_mc > 0.01);
      CHECK(vs_target.p_value < specdec_test::gof_alpha);
    }
  }
}

TEST_CASE("typical acceptance is exact on a one-hot target: total variation 0", "[typical][statistical][lossy]") {
  // Target: a deterministic successor per token; draft: random rows. The emitted law must be the
  // target's point mass, exactly (enumeration) and in every Monte Carlo sample.
  const std::size_t V = 5;
  const int H = 4;
  markov_pair m = specdec_test::make_markov_pair(V, 20250717, 0.8);
  for (std::size_t a = 0; a < V; ++a)
    for (std::size_t b = 0; b < V; ++b) m.target[a * V + b] = b == (3 * a + 1) % V ? 1.0 : 0.0;
  const std::vector<double> target = specdec_test::target_sequence_distribution(m, prompt, H);
  for (const auto& rule : {medusa_fast, medusa_sampled}) {
    for (const std::size_t gamma : {1u, 3u}) {
      const double tv = total_variation(typical_sequence_distribution(rule, m, prompt, H, gamma), target);
      const auto counts = simulate_chain(rule, m, H, gamma, 0x7C80 + static_cast<std::uint64_t>(gamma), 20'000);
      const double tv_mc = total_variation(frequencies(counts), target);
      const auto tree_counts = simulate_tree(rule, m, H, 0x7C90 + static_cast<std::uint64_t>(gamma), 20'000);
      const double tv_tree = total_variation(frequencies(tree_counts), target);
      INFO("one-hot target, gamma = " << gamma << ": TV exact " << tv << ", Monte Carlo chain " << tv_mc << ", tree " << tv_tree);
      std::cout << "[typical] one-hot target, gamma = " << gamma << ": TV exact " << tv << ", Monte Carlo chain " << tv_mc
                << ", tree " << tv_tree << "\n";
      CHECK(tv <= 1e-15);  // rounding of the enumeration only
      CHECK(tv_mc == 0.0);
      CHECK(tv_tree == 0.0);
    }
  }
}
