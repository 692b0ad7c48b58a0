// Suffix-tree drafting (draft/suffix_tree.hpp, draft/suffix_drafter.hpp): the tree's invariants after
// random appends and evictions against brute-force counts over the stored sequences, incremental
// against from-scratch indexing, scripted drafts (chains, ties, no match, gamma limits, min
// probability), best-first tree drafts against a brute-force ranking, the global cache and the
// stage's contract, bad options; on the step decoder, greedy and sample-and-match (target samples
// keyed by output position) with suffix drafts give target-only decoding's tokens.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/draft/suffix_tree.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/models/kv_cache.hpp"
#include "specdec/random/stream.hpp"
#include "support/wave_models.hpp"

namespace {

using specdec::no_suffix_node;
using specdec::suffix_node;
using specdec::suffix_tree;
using specdec::token_id;
using tokens = std::vector<token_id>;

// Occurrences of `s` inside the stored sequences (never across two).
std::size_t brute_count(const suffix_tree& t, const tokens& s) {
  std::size_t n = 0;
  for (std::size_t q = 0; q < t.num_sequences(); ++q) {
    const auto seq = t.sequence(q);
    for (std::size_t i = 0; i + s.size() <= seq.size(); ++i)
      n += std::equal(s.begin(), s.end(), seq.begin() + static_cast<std::ptrdiff_t>(i)) ? 1 : 0;
  }
  return n;
}

// Every path of the tree with its count, by depth-first search.
std::map<tokens, std::size_t> paths(const suffix_tree& t) {
  std::map<tokens, std::size_t> out;
  tokens path;
  std::function<void(suffix_node)> visit = [&](suffix_node v) {
    out[path] = t.count(v);
    for (const suffix_node c : t.children(v)) {
      path.push_back(t.token(c));
      visit(c);
      path.pop_back();
    }
  };
  visit(suffix_tree::root);
  return out;
}

// The tree's invariants (suffix_tree.hpp): counts = occurrences, a node for every occurring string of
// length <= max_depth and no other, children sorted by token id, parents and depths consistent, the
// node bound.
void check_invariants(const suffix_tree& t) {
  std::size_t tokens_stored = 0;
  std::set<tokens> substrings;
  for (std::size_t q = 0; q < t.num_sequences(); ++q) {
    const auto seq = t.sequence(q);
    tokens_stored += seq.size();
    for (std::size_t i = 0; i < seq.size(); ++i)
      for (std::size_t d = 1; d <= t.max_depth() && i + d <= seq.size(); ++d)
        substrings.insert(tokens(seq.begin() + static_cast<std::ptrdiff_t>(i), seq.begin() + static_cast<std::ptrdiff_t>(i + d)));
  }
  REQUIRE(t.num_tokens() == tokens_stored);
  REQUIRE(t.count(suffix_tree::root) == tokens_stored);
  REQUIRE(t.num_nodes() == 1 + substrings.size());
  REQUIRE(t.num_nodes() <= 1 + tokens_stored * t.max_depth());
  std::size_t visited = 0;
  tokens path;
  std::function<void(suffix_node)> visit = [&](suffix_node v) {
    ++visited;
    REQUIRE(t.depth(v) == path.size());
    if (v != suffix_tree::root) {
      REQUIRE(t.count(v) > 0);
      REQUIRE(substrings.count(path) == 1);
    }
    REQUIRE(t.count(v) == (v == suffix_tree::root ? tokens_stored : brute_count(t, path)));
    REQUIRE(t.find(path) == v);
    const auto c = t.children(v);
    for (std::size_t k = 0; k < c.size(); ++k) {
      REQUIRE(t.parent(c[k]) == v);
      if (k > 0) REQUIRE(t.token(c[k - 1]) < t.token(c[k]));  // siblings sorted by token id, distinct
      path.push_back(t.token(c[k]));
      visit(c[k]);
      path.pop_back();
    }
  };
  visit(suffix_tree::root);
  REQUIRE(visited == t.num_nodes());
}

const specdec::random::request_stream& any_stream() {
  static const specdec::random::request_stream s{};
  return s;
}

// What a stage drafts after `context`.
specdec::stage_draft run(specdec::draft_stage& stage, const tokens& context, std::size_t gamma) {
  specdec::stage_draft out;
  stage(std::span<const token_id>(context), gamma, any_stream(), out);
  return out;
}

specdec::suffix_draft speculate(const suffix_tree& t, const tokens& context, std::size_t limit,
                                const specdec::suffix_options& o) {
  specdec::suffix_draft out;
  specdec::suffix_workspace work;
  specdec::suffix_speculate(t, std::span<const token_id>(context), limit, o, out, work);
  return out;
}

suffix_tree indexed(const tokens& context, std::size_t max_depth = 24) {
  suffix_tree t(max_depth);
  specdec::index_context(t, std::span<const token_id>(context));
  return t;
}

}  // namespace

TEST_CASE("suffix_tree: counts on a scripted sequence", "[draft][suffix]") {
  const suffix_tree t = indexed({1, 2, 3, 4, 2, 3});
  CHECK(t.count(t.find(tokens{2, 3})) == 2);
  CHECK(t.count(t.find(tokens{2, 3, 4})) == 1);
  CHECK(t.count(t.find(tokens{3})) == 2);
  CHECK(t.find(tokens{3, 2}) == no_suffix_node);
  const auto m = t.match(tokens{9, 4, 2, 3});
  CHECK(m.length == 3);
  CHECK(m.node == t.find(tokens{4, 2, 3}));
  CHECK(t.match(tokens{9}).length == 0);
  CHECK(t.match(tokens{}).node == suffix_tree::root);
  check_invariants(t);

  suffix_tree shallow(2);  // suffixes cut at 2 tokens
  shallow.insert(tokens{1, 2, 3, 4, 2, 3});
  CHECK(shallow.num_nodes() == 1 + 4 + 4);  // {1,2,3,4} and {12,23,34,42}
  CHECK(shallow.match(tokens{4, 2, 3}).length == 2);
  check_invariants(shallow);
}

TEST_CASE("suffix_tree: invariants after random appends and evictions", "[draft][suffix]") {
  std::mt19937 rng(20241106);
  for (const std::size_t depth : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{6}}) {
    for (const int vocab : {2, 4}) {
      suffix_tree t(depth);
      std::size_t peak = 1;
      for (int op = 0; op < 400; ++op) {
        const auto r = rng() % 100;
        if (r < 8) {
          t.begin_sequence();
        } else if (r < 14 && t.num_sequences() > 0) {
          t.evict_oldest();
        } else {
          t.extend(static_cast<token_id>(rng() % static_cast<unsigned>(vocab)));
        }
        peak = std::max(peak, t.num_nodes());
        if (op % 10 == 0) check_invariants(t);
      }
      check_invariants(t);
      const std::size_t bytes = t.memory_bytes();
      CHECK(bytes >= t.num_nodes() * suffix_tree::node_bytes() - t.num_nodes() * sizeof(suffix_node));
      while (t.num_sequences() > 0) {
        t.evict_oldest();
        check_invariants(t);
      }
      CHECK(t.num_nodes() == 1);  // every node but the root freed
      CHECK(t.num_tokens() == 0);
      CHECK(peak > 1);
      // Freed nodes are reused: the pool does not grow again for the same contents.
      t.insert(tokens{0, 1, 0, 1, 1});
      check_invariants(t);
      CHECK(t.memory_bytes() <= bytes + 4096);
    }
  }
}

TEST_CASE("suffix_tree: incremental indexing equals indexing from scratch", "[draft][suffix]") {
  std::mt19937 rng(7);
  std::vector<tokens> seqs(6);
  for (auto& s : seqs) {
    s.resize(5 + rng() % 30);
    for (auto& x : s) x = static_cast<token_id>(rng() % 5);
  }
  for (const std::size_t depth : {std::size_t{1}, std::size_t{4}, std::size_t{24}}) {
    suffix_tree incremental(depth);
    for (const auto& s : seqs) {
      incremental.begin_sequence();
      for (const token_id x : s) incremental.extend(x);
    }
    suffix_tree scratch(depth);
    for (const auto& s : seqs) scratch.insert(s);
    CHECK(paths(incremental) == paths(scratch));
    CHECK(incremental.num_nodes() == scratch.num_nodes());
    // Evicting the first k sequences leaves the tree of the others.
    for (std::size_t k = 1; k < seqs.size(); ++k) {
      incremental.evict_oldest();
      suffix_tree rest(depth);
      for (std::size_t q = k; q < seqs.size(); ++q) rest.insert(seqs[q]);
      CHECK(paths(incremental) == paths(rest));
    }
  }
  // index_context: a growing context is indexed incrementally, anything else from scratch.
  suffix_tree t(8);
  tokens context;
  for (int i = 0; i < 60; ++i) {
    context.push_back(static_cast<token_id>(rng() % 4));
    specdec::index_context(t, std::span<const token_id>(context));
    if (i % 7 == 0) CHECK(paths(t) == paths(indexed(context, 8)));
  }
  const tokens other{3, 3, 1, 0, 2};
  specdec::index_context(t, std::span<const token_id>(other));
  CHECK(paths(t) == paths(indexed(other, 8)));
  check_invariants(t);
}

TEST_CASE("suffix drafting: scripted chains", "[draft][suffix]") {
  specdec::suffix_options o;
  SECTION("[1,2,3,4,2,3]: the earlier [2,3] was followed by [4,2,3]") {
    const tokens c{1, 2, 3, 4, 2, 3};
    const suffix_tree t = indexed(c);
    o.factor = 2.0;
    auto d = speculate(t, c, 4, o);
    CHECK(d.tokens == tokens{4, 2, 3});
    CHECK(d.match_length == 2);
    CHECK(d.probabilities == std::vector<double>{0.5, 0.5, 0.5});  // [2,3] also ends the context: count 2
    CHECK(d.score == 1.5);
    CHECK(d.parents == std::vector<std::int32_t>{0, 1, 2});
    CHECK(speculate(t, c, 10, o).tokens == tokens{4, 2, 3});  // gamma longer than what follows
    CHECK(speculate(t, c, 2, o).tokens == tokens{4, 2});      // gamma caps
    CHECK(speculate(t, c, 0, o).tokens.empty());              // gamma 0
    o.max_spec = 1;
    CHECK(speculate(t, c, 10, o).tokens == tokens{4});  // max_spec caps
    o = {};
    CHECK(speculate(t, c, 10, o).tokens == tokens{4, 2});  // factor 1: budget(2) = 2
    o.min_match = 3;
    CHECK(speculate(t, c, 10, o).tokens.empty());  // longer matches are only the context itself
  }
  SECTION("no match drafts nothing") {
    const tokens c{1, 2, 3, 4};
    CHECK(speculate(indexed(c), c, 8, o).tokens.empty());
    CHECK(speculate(indexed({}), tokens{}, 8, o).tokens.empty());
    CHECK(speculate(indexed(c), tokens{7, 8}, 8, o).tokens.empty());
  }
  SECTION("ties go to the lower token id, not the more recent") {
    o.factor = 3.0;
    CHECK(speculate(indexed({5, 1, 5, 2, 5}), tokens{5, 1, 5, 2, 5}, 8, o).tokens == tokens{1, 5, 2});
    CHECK(speculate(indexed({5, 2, 5, 1, 5}), tokens{5, 2, 5, 1, 5}, 8, o).tokens == tokens{1, 5});
  }
  SECTION("the most frequent child wins") {
    o.factor = 1.0;
    const tokens c{6, 3, 6, 4, 6, 4, 6};  // [6] is followed by 4 twice, 3 once
    const auto d = speculate(indexed(c), c, 8, o);
    CHECK(d.tokens.front() == 4);
  }
  SECTION("min_probability cuts rare continuations") {
    tokens c;
    for (token_id k = 1; k <= 10; ++k) c.insert(c.end(), {20, k});
    c.push_back(20);  // [20]: count 11, each child 1/11 < 0.1
    CHECK(speculate(indexed(c), c, 8, o).tokens.empty());
    o.min_probability = 0.05;
    CHECK(speculate(indexed(c), c, 8, o).tokens == tokens{1});
    o.min_probability = 1.0;  // only certain continuations
    const tokens sure{8, 9, 5, 8, 9};
    CHECK(speculate(indexed(sure), sure, 8, o).tokens.empty());  // [8,9] also ends the context: 1/2
  }
}

TEST_CASE("suffix drafting: best-first trees", "[draft][suffix]") {
  specdec::suffix_options o;
  o.tree = true;
  const tokens c{4, 1, 4, 2, 4, 1, 4};
  const suffix_tree t = indexed(c);
  specdec::suffix_draft d;
  specdec::suffix_workspace work;
  // From [4] (count 4): children 1 (count 2, p 1/2) and 2 (count 1, p 1/4); [4,1] -> 4 (p 1/2).
  specdec::suffix_draft_from(t, t.find(tokens{4}), 3, o, d, work);
  CHECK(d.tokens == tokens{1, 4, 2});
  CHECK(d.parents == std::vector<std::int32_t>{0, 1, 0});
  CHECK(d.probabilities == std::vector<double>{0.5, 0.5, 0.25});
  o.tree = false;  // the chain from the same node
  specdec::suffix_draft_from(t, t.find(tokens{4}), 3, o, d, work);
  CHECK(d.tokens == tokens{1, 4, 2});
  CHECK(d.parents == std::vector<std::int32_t>{0, 1, 2});

  // Random histories: the tree is valid, within budget and depth, and holds the budget most probable
  // nodes under the match (a brute-force ranking of all paths with probability >= min_probability).
  std::mt19937 rng(42);
  o.tree = true;
  for (int trial = 0; trial < 200; ++trial) {
    tokens ctx(10 + rng() % 80);
    for (auto& x : ctx) x = static_cast<token_id>(rng() % 3);
    o.factor = 0.5 + static_cast<double>(rng() % 6);
    o.min_probability = (rng() % 2) ? 0.1 : 0.02;
    const std::size_t gamma = rng() % 12;
    const suffix_tree tree = indexed(ctx, 8);
    const auto draft = speculate(tree, ctx, gamma, o);
    const std::size_t n = draft.tokens.size();
    REQUIRE(n <= gamma);
    REQUIRE(draft.parents.size() == n);
    if (n == 0) continue;
    const std::size_t m = draft.match_length;
    REQUIRE(m >= 1);
    REQUIRE(n <= std::min<std::size_t>(gamma, static_cast<std::size_t>(o.factor * static_cast<double>(m) + 1e-9)));
    const suffix_node u = tree.find(std::span<const token_id>(ctx).last(m));
    REQUIRE(u != no_suffix_node);
    std::vector<tokens> path(n + 1);
    std::vector<std::set<token_id>> child_tokens(n + 1);
    double score = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const auto p = static_cast<std::size_t>(draft.parents[k]);
      REQUIRE(p <= k);                                          // parent before child
      REQUIRE(child_tokens[p].insert(draft.tokens[k]).second);  // siblings distinct
      path[k + 1] = path[p];
      path[k + 1].push_back(draft.tokens[k]);
      REQUIRE(path[k + 1].size() <= gamma);                                      // depth <= gamma
      if (k > 0) REQUIRE(draft.probabilities[k] <= draft.probabilities[k - 1]);  // best-first order
      // Its path probability, recomputed along the tree.
      suffix_node v = u;
      double prob = 1.0;
      for (const token_id x : path[k + 1]) {
        const suffix_node w = tree.child(v, x);
        REQUIRE(w != no_suffix_node);
        prob *= static_cast<double>(tree.count(w)) / static_cast<double>(tree.count(v));
        v = w;
      }
      REQUIRE(draft.probabilities[k] == prob);
      REQUIRE(prob >= o.min_probability);
      score += prob;
    }
    REQUIRE(draft.score == Approx(score));
    // Brute force: every path below u with probability >= min_probability, most probable first.
    std::vector<double> all;
    std::function<void(suffix_node, double)> collect = [&](suffix_node v, double p) {
      for (const suffix_node w : tree.children(v)) {
        const double q = p * (static_cast<double>(tree.count(w)) / static_cast<double>(tree.count(v)));
        if (q < o.min_probability) continue;
        all.push_back(q);
        collect(w, q);
      }
    };
    collect(u, 1.0);
    std::sort(all.begin(), all.end(), std::greater<>());
    all.resize(std::min(all.size(), n));
    REQUIRE(all == draft.probabilities);
  }
}

TEST_CASE("suffix drafting: the stage", "[draft][suffix]") {
  specdec::suffix_options o;
  o.factor = 2.0;
  auto stage = specdec::suffix_stage(o);
  const auto out = run(stage, {1, 2, 3, 4, 2, 3}, 4);
  CHECK(out.tokens == tokens{4, 2, 3});
  CHECK(out.q_rows.empty());
  CHECK(out.log_q.empty());
  CHECK(out.parents.empty());  // a chain
  CHECK(out.model_calls == 0);
  CHECK(out.charged_steps == 0);
  CHECK(run(stage, {1, 2, 3, 4, 2, 3}, 0).tokens.empty());

  o.tree = true;
  auto tree_stage = specdec::suffix_stage(o);
  const auto tree_out = run(tree_stage, {4, 1, 4, 2, 4, 1, 4}, 3);
  CHECK(tree_out.parents.size() == tree_out.tokens.size());
  CHECK(!tree_out.tokens.empty());
  CHECK(tree_out.q_rows.empty());

  // A stage fed a growing context drafts what a fresh stage drafts; a context that does not extend
  // the last one (another request) is indexed again.
  std::mt19937 rng(3);
  for (const bool tree : {false, true}) {
    o.tree = tree;
    o.factor = 1.5;
    auto growing = specdec::suffix_stage(o);
    tokens context;
    for (int i = 0; i < 120; ++i) {
      context.push_back(static_cast<token_id>(rng() % 4));
      if (rng() % 3 == 0) context.push_back(static_cast<token_id>(rng() % 4));  // rounds emit 1+ tokens
      auto fresh = specdec::suffix_stage(o);
      const auto a = run(growing, context, 6), b = run(fresh, context, 6);
      REQUIRE(a.tokens == b.tokens);
      REQUIRE(a.parents == b.parents);
    }
    tokens rewound(context.begin(), context.begin() + 40);
    rewound.back() = 9;
    auto fresh = specdec::suffix_stage(o);
    CHECK(run(growing, rewound, 6).tokens == run(fresh, rewound, 6).tokens);
    auto copy = growing;  // copies are independent
    CHECK(run(copy, context, 6).tokens == run(fresh, context, 6).tokens);
  }
}

TEST_CASE("suffix drafting: the global cache", "[draft][suffix]") {
  specdec::suffix_options o;
  auto cache = std::make_shared<specdec::suffix_cache>(100);
  cache->insert(tokens{10, 11, 12, 13, 14});
  auto alone = specdec::suffix_stage(o);
  auto shared = specdec::suffix_stage(o, cache);
  CHECK(run(alone, {1, 2, 10, 11}, 8).tokens.empty());
  CHECK(run(shared, {1, 2, 10, 11}, 8).tokens == tokens{12, 13});  // match [10,11], budget 2
  o.factor = 10.0;
  auto far = specdec::suffix_stage(o, cache);
  CHECK(run(far, {1, 2, 10, 11}, 8).tokens == tokens{12, 13, 14});

  SECTION("the higher score wins, ties to the request's own tree") {
    o.factor = 1.0;
    const tokens c{5, 6, 7, 5, 6};  // own: [5,6] -> [7,5], probabilities 1/2, 1/2
    auto tie = std::make_shared<specdec::suffix_cache>(100);
    tie->insert(tokens{5, 6, 8, 5, 6});  // global: [5,6] -> [8,5], 1/2, 1/2
    auto a = specdec::suffix_stage(o, tie);
    CHECK(run(a, c, 8).tokens == tokens{7, 5});
    auto better = std::make_shared<specdec::suffix_cache>(100);
    better->insert(tokens{5, 6, 8, 5, 6, 8});  // global: [5,6] -> [8,5], 1, 1
    auto b = specdec::suffix_stage(o, better);
    CHECK(run(b, c, 8).tokens == tokens{8, 5});
  }
  SECTION("oldest outputs are evicted first, within max_tokens") {
    o.factor = 1.0;
    auto small = std::make_shared<specdec::suffix_cache>(8);
    small->insert(tokens{10, 11, 12, 13, 14});
    small->insert(tokens{20, 21, 22, 23});  // 9 tokens > 8: the first output goes
    CHECK(small->num_sequences() == 1);
    CHECK(small->num_tokens() == 4);
    auto s = specdec::suffix_stage(o, small);
    CHECK(run(s, {10, 11}, 8).tokens.empty());
    CHECK(run(s, {20, 21}, 8).tokens == tokens{22, 23});
    small->insert(tokens{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // longer than the cache: its last 8 tokens
    CHECK(small->num_tokens() == 8);
    CHECK(small->inspect([](const suffix_tree& t) { return tokens(t.sequence(0).begin(), t.sequence(0).end()); }) ==
          tokens{3, 4, 5, 6, 7, 8, 9, 10});
    CHECK(small->num_nodes() <= 1 + 8 * 24);
    small->inspect([](const suffix_tree& t) { check_invariants(t); });
    CHECK(small->memory_bytes() > 0);
  }
}

TEST_CASE("suffix drafting: bad options name the parameter", "[draft][suffix]") {
  using Catch::Matchers::Contains;
  const auto bad = [](auto change) {
    specdec::suffix_options o;
    change(o);
    return o;
  };
  CHECK_THROWS_WITH(specdec::suffix_stage(bad([](auto& o) { o.max_depth = 0; })), Contains("max_depth"));
  CHECK_THROWS_WITH(specdec::suffix_stage(bad([](auto& o) { o.max_spec = 0; })), Contains("max_spec"));
  for (const double p : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()})
    CHECK_THROWS_WITH(specdec::suffix_stage(bad([p](auto& o) { o.min_probability = p; })), Contains("min_probability"));
  for (const double f : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
    CHECK_THROWS_WITH(specdec::suffix_stage(bad([f](auto& o) { o.factor = f; })), Contains("factor"));
  CHECK_THROWS_WITH(specdec::suffix_stage(bad([](auto& o) { o.min_match = 0; })), Contains("min_match"));
  CHECK_THROWS_WITH(specdec::suffix_stage(bad([](auto& o) { o.min_match = 25; })), Contains("min_match"));
  CHECK_NOTHROW(specdec::suffix_stage(bad([](auto& o) { o.min_probability = 1.0; })));
  CHECK_THROWS_WITH(specdec::suffix_cache(0), Contains("max_tokens"));
  CHECK_THROWS_WITH(suffix_tree(0), Contains("max_depth"));
  suffix_tree t(4);
  CHECK_THROWS_WITH(t.extend(-1), Contains("token"));
  CHECK_THROWS_WITH(t.evict_oldest(), Contains("evict"));
}

TEST_CASE("suffix drafting on the step decoder gives target-only decoding's tokens", "[draft][suffix][decode]") {
  constexpr std::size_t V = 6, new_tokens = 48;
  const auto target = specdec::make_model(V, specdec_test::wave_logits(0.0));
  for (const bool greedy : {true, false}) {
    CAPTURE(greedy);
    auto cache = std::make_shared<specdec::suffix_cache>(64);
    std::size_t drafted = 0, from_cache = 0;
    for (std::uint32_t id = 0; id < 6; ++id) {
      specdec::request_options o;
      o.prompt = {static_cast<token_id>(id % V), 1, 2, 1, 2};
      o.seed = 91;
      o.request_id = id;
      o.gamma = 1 + id % 5;
      o.max_new_tokens = new_tokens;
      o.target_params.temperature = greedy ? 0.0 : 0.8;
      o.sample_keys = specdec::target_sample_keys::output_position;
      specdec::decode_options d;
      d.max_new_tokens = new_tokens;
      d.target_params = o.target_params;
      d.seed = o.seed;
      d.request_id = id;
      const auto expected = specdec::decode_target_only(target, std::span<const token_id>(o.prompt), d).tokens;
      // Requests after the first also draft from the earlier ones' outputs (the shared cache).
      specdec::suffix_options so;
      so.factor = 2.0;
      so.tree = false;
      auto count_cache = [&, inner = specdec::suffix_stage(so, cache), alone = specdec::suffix_stage(so)](
                             std::span<const token_id> context, std::size_t gamma, const specdec::random::request_stream& stream,
                             specdec::stage_draft& out) mutable {
        inner(context, gamma, stream, out);
        specdec::stage_draft own;
        alone(context, gamma, stream, own);
        from_cache += own.tokens != out.tokens ? 1 : 0;
      };
      o.drafter = count_cache;
      specdec::kv_cached_model<decltype(target)> t(target);
      specdec::no_sequence_model none(V);
      std::vector<token_id> got;
      const auto run_decoder = [&](auto rule) {
        specdec::batch_decoder decoder(specdec::exec::seq, t, none, rule);
        const auto h = decoder.add(o);
        while (decoder.active() > 0)
          for (const auto& e : decoder.step()) drafted += e.drafted;
        got.assign(decoder.tokens(h).begin(), decoder.tokens(h).end());
      };
      if (greedy)
        run_decoder(specdec::greedy);
      else
        run_decoder(specdec::sample_and_match);
      CHECK(got == expected);
      cache->insert(std::span<const token_id>(got));
    }
    CHECK(drafted > 0);
    CHECK(from_cache > 0);  // the cache changed some drafts
    CHECK(cache->num_tokens() <= 64);
  }
}
