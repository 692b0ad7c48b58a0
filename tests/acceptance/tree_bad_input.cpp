// Bad input to tree verification never produces a bad token (docs/design.md, 'Statuses and errors'):
//  - malformed trees cannot be built: a parent that is not earlier, a cycle in sibling lists, lists
//    longer than the tree, a node with two parents, an unreachable node (specdec::error, clear message);
//  - shapes that do not match the trees (tokens, rows, streams, outputs) throw specdec::error;
//  - duplicated siblings: harmless for target_only, strict (multi-step), k_seq, greedy and
//    sample-and-match; recursive_rejection rejects the copy with draft_prob_zero;
//  - NaN, infinite and negative entries, out-of-range node tokens and rows without mass: the statuses
//    status.hpp documents (invalid_row, bad_draft_token, draft_prob_zero), never a token outside [0, V);
//  - a fuzz loop of a few thousand random trees with garbage rows, on seq and simd, checks the output
//    invariants and that both backends agree.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/tree_rules.hpp"
#include "support/host_policies.hpp"

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace {

using Catch::Matchers::Contains;
using specdec::no_node;
using specdec::token_id;
using specdec::tree_layout;
using specdec::verify_status;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::request_stream;
using specdec::random::stream_address;

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

using ids = std::vector<std::int32_t>;

tree_layout parents_layout(const ids& num_nodes, const ids& parents) { return tree_layout::from_parents(num_nodes, parents); }
tree_layout lists_layout(const ids& num_nodes, const ids& first_child, const ids& next_sibling) {
  return tree_layout::from_sibling_lists(num_nodes, first_child, next_sibling);
}
tree_layout paths_layout(const ids& num_nodes, const ids& num_paths, std::size_t width, const ids& paths) {
  return tree_layout::from_paths(num_nodes, num_paths, width, paths);
}

// One request's tree, owned: parents, tokens, draft and target rows [n][V].
struct one_tree {
  std::size_t V = 0;
  ids parents;
  std::vector<token_id> tokens;
  std::vector<double> q, p;
  request_stream stream{1, 0, 0};

  double& p_at(std::size_t node, std::size_t v) { return p[node * V + v]; }
  double& q_at(std::size_t node, std::size_t v) { return q[node * V + v]; }
  void fill_p(std::size_t node, double x) { std::fill_n(p.begin() + static_cast<std::ptrdiff_t>(node * V), V, x); }
  void fill_q(std::size_t node, double x) { std::fill_n(q.begin() + static_cast<std::ptrdiff_t>(node * V), V, x); }
};

// Root with children tokens `children` (one level), uniform rows.
one_tree fan_tree(std::size_t V, const std::vector<token_id>& children) {
  one_tree t;
  t.V = V;
  t.parents.push_back(-1);
  t.tokens.push_back(0);
  for (const token_id c : children) {
    t.parents.push_back(0);
    t.tokens.push_back(c);
  }
  const std::size_t n = t.parents.size();
  t.q.assign(n * V, 1.0 / static_cast<double>(V));
  t.p.assign(n * V, 1.0 / static_cast<double>(V));
  return t;
}

template <class Policy, class Rule>
specdec::tree_result run(const Policy& policy, const Rule& rule, const one_tree& t, const specdec::verify_options& options = {}) {
  return specdec::verify_one_tree(policy, rule, t.parents, t.tokens, std::span<const double>(t.q), std::span<const double>(t.p),
                                  t.V, t.stream, options);
}

using specdec_test::for_each_tree_rule;

template <class Rule>
constexpr bool reads_q = specdec::tree_reads_draft<std::remove_cvref_t<Rule>>;

// What every result must satisfy: tokens in [0, V), an accepted path of real parent/child links whose
// tokens are the emitted ones, one correction when valid, none when not.
void check_result(const one_tree& t, const specdec::tree_result& r) {
  for (const token_id x : r.tokens) REQUIRE(specdec::in_vocabulary(x, t.V));
  REQUIRE(r.num_accepted >= 0);
  if (has_flag(r.status, verify_status::bad_draft_token)) {
    REQUIRE(r.tokens.empty());
    REQUIRE(r.num_accepted == 0);
    return;
  }
  REQUIRE(r.path.size() == static_cast<std::size_t>(r.num_accepted) + 1);
  REQUIRE(r.path[0] == 0);
  for (std::size_t j = 1; j < r.path.size(); ++j) {
    REQUIRE(t.parents[static_cast<std::size_t>(r.path[j])] == r.path[j - 1]);
    REQUIRE(r.tokens[j - 1] == t.tokens[static_cast<std::size_t>(r.path[j])]);
  }
  REQUIRE(r.tokens.size() == static_cast<std::size_t>(r.num_accepted) + (specdec::is_valid(r.status) ? 1 : 0));
}

}  // namespace

// ---- malformed trees ---------------------------------------------------------------------------------

TEST_CASE("tree_layout: malformed parent arrays throw specdec::error", "[tree][bad_input][layout]") {
  CHECK_NOTHROW(parents_layout({3}, {-1, 0, 1}));
  CHECK_THROWS_WITH(parents_layout({3}, {-1, 2, 0}), Contains("parent is not an earlier node"));  // a later parent
  CHECK_THROWS_WITH(parents_layout({3}, {-1, 1, 0}), Contains("parent is not an earlier node"));  // its own parent
  CHECK_THROWS_WITH(parents_layout({3}, {-1, 0, -5}), Contains("parent is not an earlier node"));
  CHECK_THROWS_WITH(parents_layout({3}, {-1, 0, -1}), Contains("parent is not an earlier node"));  // a second root
  CHECK_THROWS_WITH(parents_layout({3}, {0, 0, 1}), Contains("a root (node 0) has a parent"));
  CHECK_THROWS_WITH(parents_layout({2, 3}, {-1, 0, -1, 0}), Contains("one parent per node"));
  CHECK_THROWS_WITH(parents_layout({2, 0}, {-1, 0}), Contains("needs its root"));
  CHECK_THROWS_WITH(parents_layout({-1}, {}), Contains("needs its root"));
  // Local ids: request 1's parents refer to its own nodes.
  CHECK_THROWS_WITH(parents_layout({2, 2}, {-1, 0, -1, 2}), Contains("parent is not an earlier node"));
  CHECK_THROWS_AS(tree_layout::chains(std::vector<std::int32_t>{2, -1}), specdec::error);
}

TEST_CASE("tree_layout: malformed sibling lists throw specdec::error", "[tree][bad_input][layout]") {
  CHECK_NOTHROW(lists_layout({3}, {1, -1, -1}, {-1, 2, -1}));
  SECTION("a cycle: 1 -> 2 -> 1") {
    CHECK_THROWS_WITH(lists_layout({3}, {1, -1, -1}, {-1, 2, 1}), Contains("sibling lists longer than the tree"));
  }
  SECTION("a self-loop: 1 -> 1") { CHECK_THROWS_AS(lists_layout({3}, {1, -1, -1}, {-1, 1, -1}), specdec::error); }
  SECTION("a child list that runs back to its parent") {
    CHECK_THROWS_AS(lists_layout({3}, {1, 2, -1}, {-1, -1, 1}), specdec::error);
  }
  SECTION("lists holding more nodes than the tree") {
    CHECK_THROWS_WITH(lists_layout({4}, {1, 3, -1, -1}, {-1, 2, 3, -1}), Contains("longer than the tree"));
  }
  SECTION("a node with two parents") {
    // 0 -> {1, 2}, 1 -> {3}, 2 -> {3}; node 4 unreached, so the lists are not too long.
    CHECK_THROWS_WITH(lists_layout({5}, {1, 3, 3, -1, -1}, {-1, 2, -1, -1, -1}), Contains("two parents"));
    // 0 -> {1, 3, 4}, 1 -> {2}, 2 -> {3}: the lists hold one node too many.
    CHECK_THROWS_AS(lists_layout({5}, {1, 2, 3, -1, -1}, {-1, 3, -1, 4, -1}), specdec::error);
  }
  SECTION("an unreachable node") {
    CHECK_THROWS_WITH(lists_layout({4}, {1, -1, -1, -1}, {-1, 2, -1, -1}), Contains("not reached from the root"));
  }
  SECTION("a child that is not later than its parent") {
    CHECK_THROWS_WITH(lists_layout({3}, {2, -1, 1}, {-1, -1, -1}), Contains("not later than its parent"));
  }
  SECTION("ids outside the tree, and a root with a sibling") {
    CHECK_THROWS_WITH(lists_layout({3}, {7, -1, -1}, {-1, -1, -1}), Contains("outside its tree"));
    CHECK_THROWS_WITH(lists_layout({3}, {1, -1, -1}, {-1, -4, -1}), Contains("outside its tree"));
    CHECK_THROWS_WITH(lists_layout({2}, {1, -1}, {1, -1}), Contains("root has a sibling"));
  }
  SECTION("sizes") {
    CHECK_THROWS_WITH(lists_layout({3}, {1, -1}, {-1, -1, -1}), Contains("one entry per node"));
    CHECK_THROWS_WITH(lists_layout({3, 0}, {1, -1, -1}, {-1, 2, -1}), Contains("needs its root"));
  }
}

TEST_CASE("tree_layout: malformed path lists throw specdec::error", "[tree][bad_input][layout]") {
  CHECK_NOTHROW(paths_layout({4}, {2}, 3, {0, 1, 3, /**/ 0, 2, -1}));
  CHECK_THROWS_WITH(paths_layout({4}, {2}, 3, {0, 1, 3, /**/ 0, 2, 3}), Contains("two parents"));
  CHECK_THROWS_WITH(paths_layout({4}, {2}, 3, {0, 1, -1, /**/ 0, 2, -1}), Contains("on no path"));
  CHECK_THROWS_WITH(paths_layout({4}, {2}, 3, {1, 2, 3, /**/ 0, 2, -1}), Contains("does not start at the root"));
  CHECK_THROWS_WITH(paths_layout({4}, {2}, 3, {0, 2, 1, /**/ 0, 3, -1}), Contains("not later than its parent"));
  CHECK_THROWS_WITH(paths_layout({4}, {2}, 3, {0, 1, 9, /**/ 0, 2, 3}), Contains("outside its tree"));
  CHECK_THROWS_WITH(paths_layout({4}, {2}, 3, {0, 1, 3, /**/ 0, 2}), Contains("sum(num_paths) rows"));
  CHECK_THROWS_WITH(paths_layout({4}, {-1}, 3, {}), Contains("negative path count"));
  CHECK_THROWS_WITH(paths_layout({4, 2}, {2}, 3, {0, 1, 3, /**/ 0, 2, -1}), Contains("one path count per request"));
}

// ---- shapes ------------------------------------------------------------------------------------------

TEST_CASE("verify_tree: rows, tokens, streams and outputs that do not match the trees throw specdec::error",
          "[tree][bad_input]") {
  const std::size_t V = 5;
  const ids num_nodes{3, 2};
  const ids parents{-1, 0, 0, -1, 0};
  const tree_layout layout = tree_layout::from_parents(num_nodes, parents);
  const std::vector<token_id> tokens{0, 1, 2, 0, 3};
  const std::vector<double> rows(5 * V, 1.0 / V);
  const std::vector<request_stream> streams{{1, 0, 0}, {1, 1, 0}};
  std::vector<token_id> out_tokens(2 * 2);
  ids path(2 * 2), accepted(2);
  std::vector<verify_status> status(2);
  const specdec::tree_outputs out{out_tokens, path, accepted, status};
  const specdec::tree_batch<double> good{layout, V, tokens, rows, rows};
  const auto verify = [&](const auto& rule, const specdec::tree_batch<double>& b, std::span<const request_stream> s,
                          const specdec::tree_outputs& o) { specdec::verify_tree(specdec::exec::seq, rule, b, s, o); };
  for_each_tree_rule([&](const auto& rule, const char* name) {
    CAPTURE(name);
    REQUIRE_NOTHROW(verify(rule, good, streams, out));
    auto b = good;
    b.target_rows = std::span<const double>(rows).first(4 * V);
    CHECK_THROWS_WITH(verify(rule, b, streams, out), Contains("target rows"));
    b = good;
    b.vocab_size = V + 1;
    CHECK_THROWS_AS(verify(rule, b, streams, out), specdec::error);
    b.vocab_size = 0;
    CHECK_THROWS_WITH(verify(rule, b, streams, out), Contains("vocab_size"));
    b = good;
    b.tokens = std::span<const token_id>(tokens).first(4);
    CHECK_THROWS_WITH(verify(rule, b, streams, out), Contains("tokens: one per node"));
    b = good;
    b.draft_rows = std::span<const double>(rows).first(3 * V);  // given, so it must fit even if not read
    CHECK_THROWS_WITH(verify(rule, b, streams, out), Contains("draft rows"));
    b = good;
    b.draft_rows = {};
    if (reads_q<decltype(rule)>)
      CHECK_THROWS_WITH(verify(rule, b, streams, out), Contains("draft rows"));
    else
      CHECK_NOTHROW(verify(rule, b, streams, out));
    CHECK_THROWS_WITH(verify(rule, good, std::span<const request_stream>(streams).first(1), out), Contains("request_stream"));
    auto o = out;
    o.tokens = o.tokens.first(3);
    CHECK_THROWS_WITH(verify(rule, good, streams, o), Contains("B * (max_depth + 1)"));
    o = out;
    o.path = o.path.first(2);
    CHECK_THROWS_AS(verify(rule, good, streams, o), specdec::error);
    o = out;
    o.status = o.status.first(1);
    CHECK_THROWS_WITH(verify(rule, good, streams, o), Contains("one entry per request"));
  });
  // A rule parameter that makes no sense.
  CHECK_THROWS_AS(verify(specdec::typical_rule{-1.0, 0.3}, good, streams, out), specdec::error);
  CHECK_THROWS_AS(verify(specdec::typical_rule{0.09, k_nan}, good, streams, out), specdec::error);
}

TEST_CASE("verify_tree: a vocab_size whose products with the row count wrap around throws specdec::error", "[tree][bad_input]") {
  // Found by the fuzz harness tests/fuzz/verify_tree.cpp: the shape check compared the row buffers
  // with num_rows * V, which wraps around to 0 for V = 2^63 and two nodes, so empty buffers passed and
  // the walk read far outside them.
  const ids num_nodes{2};
  const tree_layout layout = tree_layout::from_parents(num_nodes, ids{-1, 0});
  const std::vector<token_id> tokens{0, 0};
  std::vector<token_id> out_tokens(2);
  ids path(2), accepted(1);
  std::vector<verify_status> status(1);
  const std::vector<request_stream> streams{{1, 0, 0}};
  for (const std::size_t V : {std::size_t{1} << 63, std::size_t{1} << 62, std::numeric_limits<std::size_t>::max()}) {
    CAPTURE(V);
    const specdec::tree_batch<double> huge{layout, V, tokens, {}, {}};
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      CHECK_THROWS_AS(specdec::verify_tree(specdec::exec::seq, rule, huge, streams,
                                           specdec::tree_outputs{out_tokens, path, accepted, status}),
                      specdec::error);
    });
  }
}

// ---- duplicated siblings -------------------------------------------------------------------------------

TEST_CASE("duplicated siblings: harmless for target_only, strict, k_seq, greedy and sample-and-match",
          "[tree][bad_input][duplicates]") {
  // Root children: tokens {1, 1, 2} (nodes 1 and 2 are copies). Root target p = (0, 0.2, 0.5, 0.3),
  // q uniform: token 1 is rejected now and then, so the copy is reached.
  one_tree t = fan_tree(4, {1, 1, 2});
  const double root_p[] = {0.0, 0.2, 0.5, 0.3};
  std::copy(std::begin(root_p), std::end(root_p), t.p.begin());
  std::size_t node2 = 0, counted = 0;
  for (std::uint32_t i = 0; i < 400; ++i) {
    t.stream = request_stream{0xD0, i, 0};
    const auto check_copy = [&](const auto& rule, bool copy_may_be_taken) {
      const auto r = run(specdec::exec::seq, rule, t);
      check_result(t, r);
      CHECK(r.status == verify_status::ok);
      if (!copy_may_be_taken) CHECK((r.path.size() < 2 || r.path[1] != 2));  // the copy is never accepted
      if (r.path.size() > 1 && r.path[1] == 2) ++node2;
      ++counted;
    };
    check_copy(specdec::target_only, false);
    check_copy(specdec::greedy, false);
    check_copy(specdec::sample_and_match, false);
    // K-SEQ tests each candidate with its own coin against p / (rho q): a copy may be accepted after the
    // first was rejected (that is what makes its i.i.d. candidates exact); multi-step sampling's
    // residual has r(1) = 0 once 1 was rejected. Neither flags anything.
    check_copy(specdec::strict, true);
    check_copy(specdec::k_seq, true);
  }
  CHECK(counted == 2000);
  CHECK(node2 > 0);  // k_seq does accept the copy sometimes
}

TEST_CASE("duplicated siblings: recursive_rejection rejects the copy with draft_prob_zero", "[tree][bad_input][duplicates]") {
  // Root target (0.05, 0.05, 0.9): token 1 (the duplicated one) is mostly rejected, and the copy is
  // then reached; a copy cannot be a draw without replacement, so it is rejected and flagged.
  one_tree t = fan_tree(3, {1, 1});
  t.p[0] = 0.05;
  t.p[1] = 0.05;
  t.p[2] = 0.9;
  std::size_t flagged = 0;
  for (std::uint32_t i = 0; i < 300; ++i) {
    t.stream = request_stream{0xD1, i, 0};
    const auto r = run(specdec::exec::seq, specdec::recursive_rejection, t);
    check_result(t, r);
    CHECK(specdec::is_valid(r.status));
    if (r.num_accepted == 0) {  // the first copy was rejected, so the second was tested
      CHECK(has_flag(r.status, verify_status::draft_prob_zero));
      ++flagged;
    } else {
      CHECK(r.path[1] == 1);
    }
    CHECK((r.path.size() < 2 || r.path[1] != 2));
  }
  CHECK(flagged > 200);
}

// ---- bad rows and tokens -------------------------------------------------------------------------------

TEST_CASE("out-of-range node tokens: bad_draft_token, nothing emitted, for every rule", "[tree][bad_input]") {
  for (const token_id bad : {token_id{-1}, token_id{-7}, token_id{4}, token_id{1000}}) {
    // The bad id sits in a branch that the walk may never visit: every node's id is checked first.
    one_tree t = fan_tree(4, {1, 2, 3});
    t.parents.push_back(3);
    t.tokens.push_back(bad);
    t.p.insert(t.p.end(), 4, 0.25);
    t.q.insert(t.q.end(), 4, 0.25);
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(name, bad);
      specdec_test::for_each_host_policy([&](const auto& policy) {
        const auto r = run(policy, rule, t);
        CHECK(has_flag(r.status, verify_status::bad_draft_token));
        CHECK(r.tokens.empty());
        CHECK(r.num_accepted == 0);
        check_result(t, r);
      });
    });
  }
  // The root's token is ignored, whatever it is.
  one_tree t = fan_tree(4, {1, 2});
  for (const token_id root : {token_id{-1}, token_id{99}}) {
    t.tokens[0] = root;
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(name, root);
      const auto r = run(specdec::exec::seq, rule, t);
      CHECK(r.status == verify_status::ok);
      check_result(t, r);
    });
  }
}

TEST_CASE("rows without mass: invalid_row, no correction token", "[tree][bad_input]") {
  SECTION("the root's target row is all zero") {
    one_tree t = fan_tree(5, {1, 2, 3});
    t.fill_p(0, 0.0);
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      const auto r = run(specdec::exec::seq, rule, t);
      CHECK(has_flag(r.status, verify_status::invalid_row));
      CHECK(r.tokens.empty());
      check_result(t, r);
    });
  }
  SECTION("a leaf's target row (the bonus) is all zero: the accepted path stays, no bonus") {
    // Root target one-hot on token 2 = node 2's token: every rule accepts node 2, a leaf.
    one_tree t = fan_tree(5, {1, 2, 3});
    t.fill_p(0, 0.0);
    t.p_at(0, 2) = 1.0;
    t.fill_p(2, 0.0);
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      const auto r = run(specdec::exec::seq, rule, t);
      CHECK(has_flag(r.status, verify_status::invalid_row));
      CHECK(r.tokens.size() <= 1);
      if (!std::is_same_v<std::remove_cvref_t<decltype(rule)>, specdec::typical_rule>)
        CHECK(r.tokens == std::vector<token_id>{2});
      check_result(t, r);
    });
  }
  SECTION("the root's draft row is all zero: unusable for the rules that read q") {
    one_tree t = fan_tree(5, {1, 2, 3});
    t.fill_q(0, 0.0);
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      const auto r = run(specdec::exec::seq, rule, t);
      if (reads_q<decltype(rule)>) {
        CHECK(has_flag(r.status, verify_status::invalid_row));
        CHECK(r.tokens.empty());
      } else {
        CHECK(specdec::is_valid(r.status));
      }
      check_result(t, r);
    });
  }
}

TEST_CASE("q(c) = 0 for a drawn candidate: draft_prob_zero, rejected, a valid correction", "[tree][bad_input]") {
  one_tree t = fan_tree(4, {1, 2});
  t.q_at(0, 1) = 0.0;
  t.q_at(0, 2) = 0.0;
  t.q_at(0, 0) = 0.5;
  t.q_at(0, 3) = 0.5;
  for (const auto& r : {run(specdec::exec::seq, specdec::strict, t), run(specdec::exec::seq, specdec::recursive_rejection, t),
                        run(specdec::exec::seq, specdec::k_seq, t)}) {
    CHECK(r.status == verify_status::draft_prob_zero);
    CHECK(r.num_accepted == 0);
    REQUIRE(r.tokens.size() == 1);
    check_result(t, r);
  }
}

TEST_CASE("NaN, infinite and negative entries in a row that is read: invalid_row, for every rule", "[tree][bad_input]") {
  // Root children {1, 2} with p(1) = p(2) = 0, so every coin rule rejects both, reads the whole rows
  // for its residual, and must find the bad entry at token 4 (neither a candidate nor the argmax).
  // Greedy, sample-and-match and typical acceptance read the whole target row anyway. With one child
  // ({1}) the same data goes through the chain's strict residual.
  for (const std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    for (const double bad : {k_nan, k_inf, -k_inf, -0.25}) {
      for (const bool in_q : {false, true}) {
        one_tree t = fan_tree(5, k == 1   ? std::vector<token_id>{1}
                                 : k == 2 ? std::vector<token_id>{1, 2}
                                          : std::vector<token_id>{1, 2, 3});
        const double root_p[] = {0.5, 0.0, 0.0, 0.0, 0.5};
        std::copy(std::begin(root_p), std::end(root_p), t.p.begin());
        if (in_q)
          t.q_at(0, 4) = bad;
        else
          t.p_at(0, 4) = bad;
        for_each_tree_rule([&](const auto& rule, const char* name) {
          if (in_q && !reads_q<decltype(rule)>) return;
          CAPTURE(name, k, bad, in_q);
          for (std::uint32_t i = 0; i < 8; ++i) {
            t.stream = request_stream{0xBAD, i, static_cast<std::uint32_t>(k)};
            const auto r = run(specdec::exec::seq, rule, t);
            CAPTURE(i, r.tokens, static_cast<int>(r.status));
            CHECK(has_flag(r.status, verify_status::invalid_row));
            CHECK(r.tokens.empty());
            check_result(t, r);
          }
        });
      }
    }
  }
}

TEST_CASE("unnormalised rows with check_normalisation: not_normalised", "[tree][bad_input]") {
  specdec::verify_options check;
  check.check_normalisation = true;
  one_tree t = fan_tree(4, {1, 2});
  for (auto& x : t.p) x *= 1.5;
  for_each_tree_rule([&](const auto& rule, const char* name) {
    CAPTURE(name);
    const auto r = run(specdec::exec::seq, rule, t, check);
    CHECK(has_flag(r.status, verify_status::not_normalised));
    CHECK(r.tokens.empty());
    check_result(t, r);
    CHECK(specdec::is_valid(run(specdec::exec::seq, rule, t).status));  // unchecked: accepted as weights
    // Typical acceptance flagged invalid_row too (the row holds no NaN, inf, negative entry and has
    // mass), unlike the chain walk on the same chain tree; found by tests/fuzz/verify_tree.cpp.
    CHECK(r.status == verify_status::not_normalised);
  });
}

// ---- fuzz ----------------------------------------------------------------------------------------------

namespace {
// A random tree with garbage: rows of random kinds (normal, unnormalised, all zero, NaN, +-inf,
// negative entries, one-hot, huge/tiny), tokens sometimes out of range, duplicated siblings.
one_tree garbage_tree(philox_stream& s, std::size_t V, std::size_t max_nodes) {
  one_tree t;
  t.V = V;
  const std::size_t n = 1 + static_cast<std::size_t>(s.uniform() * static_cast<double>(max_nodes));
  const auto random_row = [&]() {
    std::vector<double> row(V);
    const int kind = static_cast<int>(s.uniform() * 10.0);
    double z = 0.0;
    for (auto& x : row) {
      x = s.uniform() < 0.3 ? 0.0 : s.exponential();
      z += x;
    }
    for (auto& x : row) x = z > 0.0 ? x / z : 0.0;
    const std::size_t at = static_cast<std::size_t>(s.uniform() * static_cast<double>(V)) % V;
    switch (kind) {
      case 0: std::fill(row.begin(), row.end(), 0.0); break;
      case 1: row[at] = k_nan; break;
      case 2: row[at] = k_inf; break;
      case 3: row[at] = -s.uniform(); break;
      case 4: row[at] = -k_inf; break;
      case 5:
        for (auto& x : row) x *= 1e300;
        break;
      case 6:
        for (auto& x : row) x *= 1e-310;
        break;
      case 7:
        std::fill(row.begin(), row.end(), 0.0);
        row[at] = 1.0;
        break;
      default: break;  // a normal row
    }
    return row;
  };
  for (std::size_t i = 0; i < n; ++i) {
    t.parents.push_back(i == 0 ? -1
                               : static_cast<std::int32_t>(s.uniform() * static_cast<double>(i)) % static_cast<std::int32_t>(i));
    const double u = s.uniform();
    token_id tok = static_cast<token_id>(s.uniform() * static_cast<double>(V)) % static_cast<token_id>(V);
    if (u < 0.03)
      tok = static_cast<token_id>(V);
    else if (u < 0.05)
      tok = -2;
    else if (u < 0.3 && i > 1)
      tok = t.tokens[i - 1];  // a likely duplicated sibling
    t.tokens.push_back(tok);
    const auto q = random_row(), p = random_row();
    t.q.insert(t.q.end(), q.begin(), q.end());
    t.p.insert(t.p.end(), p.begin(), p.end());
  }
  t.stream = request_stream{static_cast<std::uint64_t>(s.next_u32()), s.next_u32(), s.next_u32()};
  return t;
}
}  // namespace

TEST_CASE("fuzz: garbage trees never throw, never emit a token outside [0, V), and seq == simd", "[tree][bad_input][fuzz]") {
  philox_stream s(stream_address{0xF022, 0, 0, 0, purpose::user});
  std::size_t trees = 0, invalid = 0, valid = 0;
  for (int it = 0; it < 3000; ++it) {
    const std::size_t V = it % 10 == 9 ? 2100 : 1 + static_cast<std::size_t>(s.uniform() * 40.0);
    const one_tree t = garbage_tree(s, V, it % 10 == 9 ? 6 : 16);
    specdec::verify_options options;
    options.check_normalisation = it % 3 == 0;
    for_each_tree_rule([&](const auto& rule, const char* name) {
      CAPTURE(it, name, V, t.parents, t.tokens);
      specdec::tree_result a;
      REQUIRE_NOTHROW(a = run(specdec::exec::seq, rule, t, options));
      check_result(t, a);
      (specdec::is_valid(a.status) ? valid : invalid) += 1;
#if SPECDEC_ENABLE_SIMD
      specdec::tree_result b;
      REQUIRE_NOTHROW(b = run(specdec::exec::simd, rule, t, options));
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.path == b.path);
      REQUIRE(a.num_accepted == b.num_accepted);
      REQUIRE(a.status == b.status);
#endif
    });
    ++trees;
  }
  INFO(trees << " trees, " << valid << " valid and " << invalid << " invalid results");
  CHECK(valid > 1000);
  CHECK(invalid > 1000);
}

#if defined(__unix__)
namespace {
// Runs fn in a child process (a crash there is reported here, not fatal to this program). Returns
// "threw: <message>", "returned" or "killed by signal N".
template <class Fn>
std::string outcome_in_child(Fn&& fn) {
  int pipe_fd[2];
  REQUIRE(pipe(pipe_fd) == 0);
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // no Catch2 report from the child
    std::signal(SIGBUS, SIG_DFL);
    std::signal(SIGABRT, SIG_DFL);
    close(pipe_fd[0]);
    std::string what = "returned";
    try {
      fn();
    } catch (const std::exception& e) {
      what = std::string("threw: ") + e.what();
    }
    const auto written = write(pipe_fd[1], what.data(), what.size());
    (void)written;
    _exit(0);
  }
  close(pipe_fd[1]);
  std::string message;
  char buffer[512];
  for (ssize_t got; (got = read(pipe_fd[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<std::size_t>(got));
  close(pipe_fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return message;
}
}  // namespace

TEST_CASE("tree_layout: a next_sibling id outside the tree is refused before it is followed", "[tree][bad_input][layout]") {
  // Node 1's next sibling is far outside the tree. from_sibling_lists must throw "outside its tree";
  // it must not index its arrays with that id while it walks the root's list (node 1's own entries
  // are only validated when its loop reaches node 1, after the root's list has followed them). Run in
  // a child process: on that bug the child reads and writes 4 GB away from the arrays.
  for (const std::int32_t far : {1'000'000'000, -1'000'000'000}) {
    const std::string outcome = outcome_in_child([far] { (void)lists_layout({3}, {1, -1, -1}, {-1, far, -1}); });
    CAPTURE(far, outcome);
    CHECK_THAT(outcome, Contains("threw: ") && Contains("outside its tree"));
  }
}
#endif
