// SPECDEC_TEST_LABELS: statistical
//
// Tree drafters (draft/tree_shape.hpp, draft/tree.hpp): Medusa choice lists and full expansions,
// static trees under the three tree_sampling modes, EAGLE-2's dynamic tree against a direct
// re-implementation of its documented steps, rows and log q recomputed from scratch, candidate laws
// (chi-squared with negative controls), batching and packing into a tree_batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "specdec/acceptance/tree.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/draft/tree_shape.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/archetypes.hpp"
#include "specdec/models/markov.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::no_node;
using specdec::token_id;
using specdec::tree_sampling;
using choices = std::vector<std::vector<std::int32_t>>;

// The warped float row after `context`, evaluated from scratch.
template <class M>
std::vector<float> warped_row(const M& m, std::span<const token_id> context, const specdec::warp_params& w) {
  std::vector<float> logits(m.vocab_size()), q(m.vocab_size());
  m.next_logits(context, std::span<float>(logits));
  REQUIRE(specdec::warp_logits(std::span<const float>(logits), std::span<float>(q), w) == specdec::row_status::ok);
  return q;
}

// The tokens from the root to node n.
std::vector<token_id> path_to(const specdec::drafted_tree& t, std::size_t n) {
  std::vector<token_id> path;
  for (auto i = static_cast<std::int32_t>(n); i > 0; i = t.parents[static_cast<std::size_t>(i)])
    path.push_back(t.tokens[static_cast<std::size_t>(i)]);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<token_id> joined(std::span<const token_id> a, std::span<const token_id> b) {
  std::vector<token_id> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Checks what every drafted tree promises: sizes, parent(i) < i, root entries, log q of every path
// recomputed from scratch, and each row either zero (not evaluated) or the warped row after
// context + path; a node with children always has its row.
template <class M>
void check_tree(const M& m, std::span<const token_id> context, const specdec::warp_params& w, const specdec::drafted_tree& t) {
  const std::size_t n = t.num_nodes(), V = m.vocab_size();
  REQUIRE(n >= 1);
  REQUIRE(t.tokens.size() == n);
  REQUIRE(t.log_q.size() == n);
  REQUIRE(t.q_rows.size() == n * V);
  CHECK(t.parents[0] == no_node);
  CHECK(t.tokens[0] == specdec::no_token);
  CHECK(t.log_q[0] == 0.0);
  std::vector<bool> has_children(n, false);
  for (std::size_t i = 1; i < n; ++i) {
    REQUIRE(t.parents[i] >= 0);
    REQUIRE(static_cast<std::size_t>(t.parents[i]) < i);
    has_children[static_cast<std::size_t>(t.parents[i])] = true;
    REQUIRE(specdec::in_vocabulary(t.tokens[i], V));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto path = path_to(t, i);
    double log_q = 0.0;
    std::vector<token_id> prefix(context.begin(), context.end());
    for (const token_id x : path) {
      log_q += std::log(static_cast<double>(warped_row(m, prefix, w)[static_cast<std::size_t>(x)]));
      prefix.push_back(x);
    }
    CHECK(t.log_q[i] == Approx(log_q).margin(1e-12));
    const auto row = t.q_row(i);
    const bool zero = std::all_of(row.begin(), row.end(), [](float v) { return v == 0.0f; });
    if (has_children[i]) CHECK(!zero);
    if (!zero) {
      const auto expected = warped_row(m, joined(context, path), w);
      CHECK(std::equal(row.begin(), row.end(), expected.begin()));
    }
  }
}

// The children of node n, in sibling (id) order.
std::vector<std::size_t> children_of(std::span<const std::int32_t> parents, std::size_t n) {
  std::vector<std::size_t> c;
  for (std::size_t i = 1; i < parents.size(); ++i)
    if (parents[i] == static_cast<std::int32_t>(n)) c.push_back(i);
  return c;
}

// ---- an independent implementation of the documented candidate draws and of EAGLE-2 -----------

// The first `count` candidates under `how`, written from the file comment of draft/tree.hpp.
std::vector<token_id> reference_candidates(const std::vector<float>& q, std::size_t count, tree_sampling how,
                                           specdec::random::philox_stream rng) {
  std::vector<token_id> out;
  if (how == tree_sampling::iid) {
    for (std::size_t j = 0; j < count; ++j)
      out.push_back(specdec::sample_categorical(std::span<const float>(q), rng.uniform()).token);
    return out;
  }
  std::vector<std::pair<double, token_id>> keyed;  // (key, token) for tokens with q > 0
  for (std::size_t v = 0; v < q.size(); ++v) {
    if (!(q[v] > 0.0f)) continue;
    double key = std::log(static_cast<double>(q[v]));
    if (how == tree_sampling::without_replacement) key += rng.gumbel();
    keyed.emplace_back(key, static_cast<token_id>(v));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t j = 0; j < std::min(count, keyed.size()); ++j) out.push_back(keyed[j].second);
  return out;
}

struct reference_node {
  std::vector<token_id> path;
  std::size_t parent;
  double score;
  std::vector<float> row;  // empty unless evaluated
};

struct reference_tree {
  std::vector<reference_node> generated;  // [0] = root
  std::vector<std::size_t> kept;          // generated ids, creation order
  std::size_t evaluations = 0, steps = 0;
};

// The best `k` of the generated ids in [begin, end) by score, ties to the earlier node, best first.
std::vector<std::size_t> best_by_score(const std::vector<reference_node>& g, std::size_t begin, std::size_t end, std::size_t k) {
  std::vector<std::size_t> ids(end - begin);
  std::iota(ids.begin(), ids.end(), begin);
  std::stable_sort(ids.begin(), ids.end(), [&](std::size_t a, std::size_t b) { return g[a].score > g[b].score; });
  ids.resize(std::min(k, ids.size()));
  return ids;
}

template <class M>
reference_tree reference_dynamic_tree(const M& m, std::span<const token_id> context, const specdec::dynamic_tree_params& p,
                                      const specdec::random::request_stream& stream) {
  reference_tree r;
  r.generated.push_back({{}, 0, 0.0, {}});
  std::vector<std::size_t> frontier{0};
  for (std::size_t step = 0; step <= p.depth && !frontier.empty(); ++step) {
    ++r.steps;
    const std::size_t begin = r.generated.size();
    for (const std::size_t f : frontier) {
      const auto q = warped_row(m, joined(context, r.generated[f].path), p.warp);
      r.generated[f].row = q;
      ++r.evaluations;
      for (const token_id x : reference_candidates(q, p.top_k, p.sampling,
                                                   stream.open(static_cast<std::uint32_t>(f), specdec::random::purpose::draft))) {
        auto path = r.generated[f].path;
        path.push_back(x);
        r.generated.push_back(
            {path, f, r.generated[f].score + std::log(static_cast<double>(q[static_cast<std::size_t>(x)])), {}});
      }
    }
    if (step < p.depth) frontier = best_by_score(r.generated, begin, r.generated.size(), p.top_k);
  }
  r.kept = best_by_score(r.generated, 1, r.generated.size(), p.total_tokens);
  std::sort(r.kept.begin(), r.kept.end());
  return r;
}

// A BatchedModel that counts its calls.
struct counting_batched_model {
  const specdec::markov_model* m;
  mutable std::size_t batch_calls = 0, batch_rows = 0, single_calls = 0;
  std::size_t vocab_size() const { return m->vocab_size(); }
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    ++single_calls;
    m->next_logits(context, logits);
  }
  void next_logits_batch(std::span<const std::span<const token_id>> contexts, std::span<float> logits) const {
    ++batch_calls;
    batch_rows += contexts.size();
    for (std::size_t b = 0; b < contexts.size(); ++b) m->next_logits(contexts[b], logits.subspan(b * vocab_size(), vocab_size()));
  }
};
static_assert(specdec::BatchedModel<counting_batched_model>);

std::size_t pair_cell(token_id a, token_id b, std::size_t V) {
  return static_cast<std::size_t>(a) * V + static_cast<std::size_t>(b);
}

}  // namespace

// ---- shapes -------------------------------------------------------------------------------------

TEST_CASE("tree_shape: a choice list in any order gets Medusa's (length, lexicographic) numbering", "[draft][tree]") {
  const auto shape = specdec::tree_shape::from_choices(choices{{1}, {0, 1}, {0}, {0, 0}, {2}, {1, 0}, {0, 0, 0}});
  // Sorted: {0} {1} {2} {0,0} {0,1} {1,0} {0,0,0} -> nodes 1..7.
  REQUIRE(shape.num_nodes() == 8);
  CHECK(std::vector<std::int32_t>(shape.parents().begin(), shape.parents().end()) ==
        std::vector<std::int32_t>{no_node, 0, 0, 0, 1, 1, 2, 4});
  const std::vector<std::int32_t> ranks{0, 0, 1, 2, 0, 1, 0, 0}, depths{0, 1, 1, 1, 2, 2, 2, 3};
  const std::vector<std::size_t> candidates{3, 2, 1, 0, 1, 0, 0, 0};
  for (std::size_t n = 0; n < 8; ++n) {
    CHECK(shape.rank(n) == ranks[n]);
    CHECK(shape.depth(n) == depths[n]);
    CHECK(shape.candidates(n) == candidates[n]);
  }
  CHECK(shape.max_depth() == 3);
  CHECK(shape.max_candidates() == 3);
  CHECK(shape.level_begin(0) == 0);
  CHECK(shape.level_begin(1) == 1);
  CHECK(shape.level_begin(2) == 4);
  CHECK(shape.level_begin(3) == 7);
  CHECK(shape.level_begin(4) == 8);
  CHECK(shape.has_rank_prefixes());
  // Siblings come in ascending rank order, and the parents make a valid tree_layout.
  for (std::size_t n = 0; n < 8; ++n) {
    const auto c = children_of(shape.parents(), n);
    for (std::size_t j = 1; j < c.size(); ++j) CHECK(shape.rank(c[j - 1]) < shape.rank(c[j]));
  }
  const auto nodes = static_cast<std::int32_t>(shape.num_nodes());
  const auto layout = specdec::tree_layout::from_parents(std::span<const std::int32_t>(&nodes, 1), shape.parents());
  CHECK(layout.max_depth() == 3);
  CHECK(layout.num_children(0, 0) == 3);

  const specdec::tree_shape root_only;
  CHECK(root_only.num_nodes() == 1);
  CHECK(root_only.max_depth() == 0);
  CHECK(specdec::tree_shape::from_choices({}).num_nodes() == 1);
}

TEST_CASE("tree_shape: malformed choice lists are rejected", "[draft][tree]") {
  using specdec::tree_shape;
  CHECK_THROWS_AS(tree_shape::from_choices(choices{{0}, {}}), specdec::error);         // empty choice
  CHECK_THROWS_AS(tree_shape::from_choices(choices{{0}, {1}, {0}}), specdec::error);   // duplicate
  CHECK_THROWS_AS(tree_shape::from_choices(choices{{0}, {1, 0}}), specdec::error);     // prefix {1} missing
  CHECK_THROWS_AS(tree_shape::from_choices(choices{{0}, {0, 0, 0}}), specdec::error);  // prefix {0,0} missing
  CHECK_THROWS_AS(tree_shape::from_choices(choices{{0}, {0, -1}}), specdec::error);    // negative rank
  CHECK_NOTHROW(tree_shape::from_choices(choices{{0, 0}, {0}}));                       // order is free
  // Gaps in the ranks are allowed (Medusa allows them) but are not rank prefixes.
  CHECK_FALSE(tree_shape::from_choices(choices{{1}}).has_rank_prefixes());
  CHECK_FALSE(tree_shape::from_choices(choices{{0}, {2}}).has_rank_prefixes());
  CHECK(tree_shape::from_choices(choices{{1}}).candidates(0) == 2);
}

TEST_CASE("tree_shape: full top-k expansions", "[draft][tree]") {
  using specdec::tree_shape;
  const auto shape = tree_shape::full({3, 2, 2});
  CHECK(shape.num_nodes() == 1 + 3 + 6 + 12);
  CHECK(shape.max_depth() == 3);
  CHECK(shape.level_begin(2) - shape.level_begin(1) == 3);
  CHECK(shape.level_begin(3) - shape.level_begin(2) == 6);
  CHECK(shape.level_begin(4) - shape.level_begin(3) == 12);
  CHECK(shape.has_rank_prefixes());
  // The same shape as the choice list of every rank path.
  choices all;
  for (std::int32_t a = 0; a < 3; ++a) {
    all.push_back({a});
    for (std::int32_t b = 0; b < 2; ++b) {
      all.push_back({a, b});
      for (std::int32_t c = 0; c < 2; ++c) all.push_back({a, b, c});
    }
  }
  const auto from_list = tree_shape::from_choices(all);
  REQUIRE(from_list.num_nodes() == shape.num_nodes());
  for (std::size_t n = 0; n < shape.num_nodes(); ++n) {
    CHECK(from_list.parent(n) == shape.parent(n));
    CHECK(from_list.rank(n) == shape.rank(n));
  }
  CHECK(tree_shape::full({}).num_nodes() == 1);
  CHECK(tree_shape::full({4, 0, 3}).num_nodes() == 5);
  CHECK(tree_shape::full({1, 1, 1, 1}).max_depth() == 4);  // a chain
  CHECK_THROWS_AS(tree_shape::full({1024, 1024, 1024}), specdec::error);

  const auto d = specdec::default_tree_shape();
  CHECK(d.num_nodes() == 15);
  CHECK(d.max_depth() == 3);
  CHECK(d.has_rank_prefixes());
  CHECK(d.candidates(0) == 4);
}

// ---- static trees -------------------------------------------------------------------------------

TEST_CASE("static tree, top_k: child of rank r is the r-th largest warped q", "[draft][tree]") {
  const auto m = specdec::random_markov_model(6, 2, 11, 0.6);
  const std::vector<token_id> context{2, 5, 1};
  const specdec::warp_params warp{.temperature = 0.8};
  const auto shape = specdec::default_tree_shape();
  specdec::static_tree_drafter drafter(m, shape, warp, tree_sampling::top_k);
  specdec::drafted_tree t;
  drafter.draft(context, {1, 2, 3}, t);
  REQUIRE(t.num_nodes() == shape.num_nodes());  // every row of this model is positive: nothing is left out
  CHECK(t.vocab_size() == 6);
  check_tree(m, context, warp, t);
  CHECK(t.model_calls == 7);  // root, {0}, {1}, {2}, {0,0}, {0,1}, {1,0}
  CHECK(t.batched_calls == 3);
  for (std::size_t n = 1; n < t.num_nodes(); ++n) {
    CHECK(t.parents[n] == shape.parent(n));
    const auto parent = static_cast<std::size_t>(t.parents[n]);
    const auto q = warped_row(m, joined(context, path_to(t, parent)), warp);
    std::vector<token_id> order(q.size());
    std::iota(order.begin(), order.end(), 0);
    const auto q_of = [&](token_id x) { return q[static_cast<std::size_t>(x)]; };
    std::stable_sort(order.begin(), order.end(), [&](token_id a, token_id b) { return q_of(a) > q_of(b); });
    CHECK(t.tokens[n] == order[static_cast<std::size_t>(shape.rank(n))]);
  }
  // Drafting again into the same tree gives the same tree.
  specdec::drafted_tree again = t;
  drafter.draft(context, {1, 2, 3}, again);
  CHECK(again.tokens == t.tokens);
  CHECK(again.q_rows == t.q_rows);
}

TEST_CASE("static tree: ranks without a candidate are left out with their subtrees", "[draft][tree]") {
  const auto m = specdec::random_markov_model(7, 1, 5, 1.0);
  const std::vector<token_id> context{3};
  const specdec::warp_params warp{.temperature = 1.0, .top_k = 2};  // two positive entries per row
  const auto shape = specdec::tree_shape::full({3, 3});
  for (const auto how : {tree_sampling::top_k, tree_sampling::without_replacement}) {
    const auto t = specdec::draft_static_tree(m, context, shape, warp, how, {4, 0, 0});
    CHECK(t.num_nodes() == 1 + 2 + 4);
    check_tree(m, context, warp, t);
    for (std::size_t n = 0; n < t.num_nodes(); ++n) {
      const auto c = children_of(t.parents, n);
      CHECK(c.size() == (n < 3 ? 2u : 0u));
      if (c.size() == 2) CHECK(t.tokens[c[0]] != t.tokens[c[1]]);
    }
  }
  // i.i.d. draws always exist: the whole shape is drafted.
  const auto iid = specdec::draft_static_tree(m, context, shape, warp, tree_sampling::iid, {4, 0, 0});
  CHECK(iid.num_nodes() == shape.num_nodes());
  check_tree(m, context, warp, iid);
}

TEST_CASE("static tree, iid and without_replacement: candidates come from the node's own stream", "[draft][tree]") {
  const auto m = specdec::random_markov_model(9, 2, 23, 0.8);
  const std::vector<token_id> context{0, 4};
  const specdec::warp_params warp{.temperature = 0.9, .top_p = 0.95};
  const auto shape = specdec::default_tree_shape();
  const specdec::random::request_stream stream{77, 5, 9};
  for (const auto how : {tree_sampling::iid, tree_sampling::without_replacement}) {
    const auto t = specdec::draft_static_tree(m, context, shape, warp, how, stream);
    check_tree(m, context, warp, t);
    REQUIRE(t.num_nodes() <= shape.num_nodes());
    if (t.num_nodes() < shape.num_nodes()) continue;  // ids equal shape ids only when nothing is left out
    for (std::size_t n = 1; n < t.num_nodes(); ++n) {
      const auto parent = static_cast<std::size_t>(shape.parent(n));
      const auto q = warped_row(m, joined(context, path_to(t, parent)), warp);
      const auto drawn = reference_candidates(q, shape.candidates(parent), how,
                                              stream.open(static_cast<std::uint32_t>(parent), specdec::random::purpose::draft));
      CHECK(t.tokens[n] == drawn[static_cast<std::size_t>(shape.rank(n))]);
    }
    // The same stream gives the same tree; another request id another one (with overwhelming probability).
    CHECK(specdec::draft_static_tree(m, context, shape, warp, how, stream).tokens == t.tokens);
    CHECK(specdec::draft_static_tree(m, context, shape, warp, how, {77, 6, 9}).tokens != t.tokens);
  }
}

TEST_CASE("static tree, iid: sibling draws are i.i.d. from the warped q (chi-squared)", "[draft][tree][statistical]") {
  const std::vector<double> p{0.35, 0.25, 0.2, 0.12, 0.08};
  const auto m = specdec::markov_model::categorical(p);
  const std::size_t V = p.size();
  const specdec::warp_params warp{.temperature = 0.7};
  const auto q = warped_row(m, {}, warp);
  const auto shape = specdec::tree_shape::from_choices(choices{{0}, {1}});
  specdec::static_tree_drafter drafter(m, shape, warp, tree_sampling::iid);
  specdec::drafted_tree t;
  const std::uint64_t seed = 20240615, N = 100000;
  std::vector<std::uint64_t> counts(V * V, 0);
  for (std::uint64_t i = 0; i < N; ++i) {
    drafter.draft({}, {seed, static_cast<std::uint32_t>(i), 0}, t);
    REQUIRE(t.num_nodes() == 3);
    ++counts[pair_cell(t.tokens[1], t.tokens[2], V)];
  }
  std::vector<double> product(V * V), wrong(V * V);
  for (std::size_t a = 0; a < V; ++a)
    for (std::size_t b = 0; b < V; ++b) {
      product[a * V + b] = static_cast<double>(q[a]) * q[b];
      wrong[a * V + b] = p[a] * p[b];  // the unwarped draft: the row the draws did not come from
    }
  const auto fit = specdec_test::chi_squared_gof(counts, product);
  const auto control = specdec_test::chi_squared_gof(counts, wrong);
  std::cout << "tree iid pairs (seed " << seed << "): " << fit << "\n  negative control (unwarped q): " << control << "\n";
  CHECK(fit.p_value > specdec_test::gof_alpha);
  CHECK(control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("static tree, without_replacement: distinct siblings in successive-sampling order (chi-squared)",
          "[draft][tree][statistical]") {
  const std::vector<double> p{0.35, 0.25, 0.2, 0.12, 0.08};
  const auto m = specdec::markov_model::categorical(p);
  const std::size_t V = p.size();
  const specdec::warp_params warp{.temperature = 0.7};
  const auto q = warped_row(m, {}, warp);
  const auto shape = specdec::tree_shape::from_choices(choices{{0}, {1}, {2}});
  specdec::static_tree_drafter drafter(m, shape, warp, tree_sampling::without_replacement);
  specdec::drafted_tree t;
  const std::uint64_t seed = 31337, N = 100000;
  std::vector<std::uint64_t> first(V, 0), pairs(V * V, 0);
  std::uint64_t repeated = 0;
  for (std::uint64_t i = 0; i < N; ++i) {
    drafter.draft({}, {seed, static_cast<std::uint32_t>(i), 0}, t);
    REQUIRE(t.num_nodes() == 4);
    if (t.tokens[1] == t.tokens[2] || t.tokens[1] == t.tokens[3] || t.tokens[2] == t.tokens[3]) ++repeated;
    ++first[static_cast<std::size_t>(t.tokens[1])];
    ++pairs[pair_cell(t.tokens[1], t.tokens[2], V)];
  }
  CHECK(repeated == 0);
  // First draw ~ q; (first, second) ~ q(a) q(b) / (1 - q(a)) for a != b (successive sampling).
  std::vector<double> q_first(q.begin(), q.end()), p_first(p), successive(V * V, 0.0), iid_distinct(V * V, 0.0);
  double sum_sq = 0.0;
  for (const float x : q) sum_sq += static_cast<double>(x) * x;
  for (std::size_t a = 0; a < V; ++a)
    for (std::size_t b = 0; b < V; ++b)
      if (a != b) {
        successive[a * V + b] = static_cast<double>(q[a]) * q[b] / (1.0 - q[a]);
        iid_distinct[a * V + b] = static_cast<double>(q[a]) * q[b] / (1.0 - sum_sq);  // i.i.d. pairs given distinct
      }
  const auto fit_first = specdec_test::chi_squared_gof(first, q_first);
  const auto fit_pairs = specdec_test::chi_squared_gof(pairs, successive);
  const auto control_first = specdec_test::chi_squared_gof(first, p_first);
  const auto control_pairs = specdec_test::chi_squared_gof(pairs, iid_distinct);
  std::cout << "tree without replacement (seed " << seed << "): first draw " << fit_first << "\n  pairs " << fit_pairs
            << "\n  negative controls: first vs unwarped q " << control_first << "\n  pairs vs i.i.d.-given-distinct "
            << control_pairs << "\n";
  CHECK(fit_first.p_value > specdec_test::gof_alpha);
  CHECK(fit_pairs.p_value > specdec_test::gof_alpha);
  CHECK(control_first.p_value < specdec_test::gof_alpha);
  CHECK(control_pairs.p_value < specdec_test::gof_alpha);
}

// ---- EAGLE-2 dynamic trees ---------------------------------------------------------------------

TEST_CASE("dynamic tree (EAGLE-2): the kept nodes are the best total_tokens generated ones", "[draft][tree]") {
  struct setup {
    std::size_t V, order;
    std::uint64_t seed;
    double zero_fraction;
    specdec::dynamic_tree_params params;
  };
  const specdec::warp_params plain{};
  const specdec::warp_params cooled{.temperature = 0.7, .top_k = 5};
  const std::vector<setup> setups{
      {8, 2, 1, 0.0, {.depth = 3, .top_k = 3, .total_tokens = 20, .sampling = tree_sampling::top_k, .warp = plain}},
      {8, 2, 2, 0.0, {.depth = 3, .top_k = 3, .total_tokens = 100, .sampling = tree_sampling::top_k, .warp = plain}},
      {6, 1, 3, 0.4, {.depth = 4, .top_k = 4, .total_tokens = 25, .sampling = tree_sampling::top_k, .warp = plain}},
      {10, 2, 4, 0.0, {.depth = 2, .top_k = 4, .total_tokens = 15, .sampling = tree_sampling::top_k, .warp = cooled}},
      {7, 2, 5, 0.0, {.depth = 3, .top_k = 3, .total_tokens = 18, .sampling = tree_sampling::iid, .warp = plain}},
      {7, 2, 6, 0.2, {.depth = 3, .top_k = 3, .total_tokens = 18, .sampling = tree_sampling::without_replacement, .warp = plain}},
      {5, 1, 7, 0.0, {.depth = 0, .top_k = 3, .total_tokens = 2, .sampling = tree_sampling::top_k, .warp = plain}},
  };
  for (std::size_t s = 0; s < setups.size(); ++s) {
    const setup& c = setups[s];
    INFO("setup " << s);
    const auto m = specdec::random_markov_model(c.V, c.order, c.seed, 0.7, c.zero_fraction);
    const std::vector<token_id> context{1, 0, 2};
    const specdec::random::request_stream stream{c.seed, 3, 1};
    specdec::dynamic_tree_drafter drafter(m, c.params);
    specdec::drafted_tree t;
    drafter.draft(context, stream, t);
    check_tree(m, context, c.params.warp, t);

    const auto ref = reference_dynamic_tree(m, context, c.params, stream);
    const std::size_t generated = ref.generated.size() - 1;
    REQUIRE(t.num_nodes() == std::min(c.params.total_tokens, generated) + 1);
    CHECK(t.model_calls == ref.evaluations);
    CHECK(t.batched_calls == ref.steps);
    if (c.zero_fraction == 0.0 || c.params.sampling == tree_sampling::iid)  // every row offers top_k candidates
      CHECK(generated == specdec::dynamic_tree_generated_nodes(c.params));
    // Node i is the reference's i-th kept node (creation order): same path, parent, score and row.
    std::vector<std::int32_t> ref_id(ref.generated.size(), no_node);
    ref_id[0] = 0;
    for (std::size_t i = 0; i < ref.kept.size(); ++i) ref_id[ref.kept[i]] = static_cast<std::int32_t>(i + 1);
    for (std::size_t i = 1; i < t.num_nodes(); ++i) {
      const reference_node& r = ref.generated[ref.kept[i - 1]];
      CHECK(path_to(t, i) == r.path);
      CHECK(t.parents[i] == ref_id[r.parent]);
      CHECK(t.log_q[i] == r.score);
    }
    for (std::size_t i = 0; i < t.num_nodes(); ++i) {
      const reference_node& r = ref.generated[i == 0 ? 0 : ref.kept[i - 1]];
      const auto row = t.q_row(i);
      if (r.row.empty())
        CHECK(std::all_of(row.begin(), row.end(), [](float v) { return v == 0.0f; }));
      else
        CHECK(std::equal(row.begin(), row.end(), r.row.begin()));
    }
    // The kept set is the top total_tokens by score: nothing left out scores above anything kept.
    double worst_kept = 0.0;
    for (std::size_t i = 1; i < t.num_nodes(); ++i) worst_kept = std::min(worst_kept, t.log_q[i]);
    std::vector<bool> kept(ref.generated.size(), false);
    for (const std::size_t k : ref.kept) kept[k] = true;
    for (std::size_t g = 1; g < ref.generated.size(); ++g)
      if (!kept[g]) CHECK(ref.generated[g].score <= worst_kept);
    // Siblings: top_k gives descending scores and distinct tokens; without replacement distinct tokens.
    for (std::size_t n = 0; n < t.num_nodes(); ++n) {
      const auto ch = children_of(t.parents, n);
      for (std::size_t j = 1; j < ch.size(); ++j) {
        if (c.params.sampling == tree_sampling::top_k) CHECK(t.log_q[ch[j - 1]] >= t.log_q[ch[j]]);
        if (c.params.sampling != tree_sampling::iid)
          for (std::size_t k = 0; k < j; ++k) CHECK(t.tokens[ch[k]] != t.tokens[ch[j]]);
      }
    }
    // Depths: at most depth + 1 levels.
    const auto nodes = static_cast<std::int32_t>(t.num_nodes());
    const auto layout = specdec::tree_layout::from_parents(std::span<const std::int32_t>(&nodes, 1), t.parents);
    CHECK(layout.max_depth() <= c.params.depth + 1);
  }
}

TEST_CASE("dynamic tree: EAGLE's defaults", "[draft][tree]") {
  const specdec::dynamic_tree_params defaults;
  CHECK(defaults.depth == 7);
  CHECK(defaults.top_k == 10);
  CHECK(defaults.total_tokens == 60);
  CHECK(defaults.sampling == tree_sampling::top_k);
  CHECK(specdec::dynamic_tree_generated_nodes(defaults) == 710);
  const auto m = specdec::random_markov_model(32, 1, 42, 0.3);
  const std::vector<token_id> context{7};
  const auto t = specdec::draft_dynamic_tree(m, context, defaults, {1, 2, 3});
  CHECK(t.num_nodes() == 61);
  CHECK(t.model_calls == 1 + 7 * 10);
  CHECK(t.batched_calls == 8);
  check_tree(m, context, defaults.warp, t);
  const auto nodes = static_cast<std::int32_t>(t.num_nodes());
  CHECK(specdec::tree_layout::from_parents(std::span<const std::int32_t>(&nodes, 1), t.parents).max_depth() <= 8);
}

TEST_CASE("tree drafters use the model's batched call, one per depth or frontier", "[draft][tree]") {
  const auto m = specdec::random_markov_model(8, 2, 9, 0.7);
  const counting_batched_model counted{&m};
  const std::vector<token_id> context{4, 4};
  const specdec::dynamic_tree_params params{.depth = 4, .top_k = 3, .total_tokens = 20};
  const auto plain = specdec::draft_dynamic_tree(m, context, params, {5, 1, 0});
  const auto batched = specdec::draft_dynamic_tree(counted, context, params, {5, 1, 0});
  CHECK(batched.tokens == plain.tokens);
  CHECK(batched.parents == plain.parents);
  CHECK(batched.q_rows == plain.q_rows);
  CHECK(counted.single_calls == 0);
  CHECK(counted.batch_calls == 5);
  CHECK(counted.batch_rows == batched.model_calls);
  CHECK(batched.model_calls == 1 + 4 * 3);

  counted.batch_calls = counted.batch_rows = 0;
  const auto st =
      specdec::draft_static_tree(counted, context, specdec::default_tree_shape(), {}, tree_sampling::top_k, {5, 1, 0});
  CHECK(counted.single_calls == 0);
  CHECK(counted.batch_calls == 3);
  CHECK(counted.batch_rows == 7);
  CHECK(st.model_calls == 7);
}

TEST_CASE("tree drafters run on the model archetypes; ties go to the lower id and the earlier node", "[draft][tree]") {
  const specdec::model_archetype uniform8(8);
  const auto st = specdec::draft_static_tree(uniform8, {}, specdec::default_tree_shape(), {}, tree_sampling::top_k, {});
  REQUIRE(st.num_nodes() == 15);
  CHECK(std::vector<token_id>(st.tokens.begin(), st.tokens.begin() + 5) == std::vector<token_id>{specdec::no_token, 0, 1, 2, 3});
  // Uniform q over 4 tokens: every score of a depth ties. Generated: 1, 2 (root's), 3-6 (step 1),
  // 7-10 (step 2, from 3 and 4); the best five are 1, 2 (log 1/4) and 3, 4, 5 (earliest of log 1/16).
  const specdec::batched_model_archetype uniform4(4);
  const auto dt = specdec::draft_dynamic_tree(uniform4, {}, {.depth = 2, .top_k = 2, .total_tokens = 5}, {});
  CHECK(dt.parents == std::vector<std::int32_t>{no_node, 0, 0, 1, 1, 2});
  CHECK(dt.tokens == std::vector<token_id>{specdec::no_token, 0, 1, 0, 1, 0});
  CHECK(dt.model_calls == 5);
  CHECK(dt.batched_calls == 3);
  CHECK(dt.log_q[5] == Approx(2.0 * std::log(0.25)));
}

TEST_CASE("tree drafters: a depth limit cuts the tree; the drafter stage writes nodes 1.. and every row", "[draft][tree]") {
  const auto m = specdec::random_markov_model(8, 2, 21, 0.7);
  const std::vector<token_id> context{1, 6};
  const specdec::random::request_stream stream{3, 4, 5};
  specdec::static_tree_drafter st(m, specdec::default_tree_shape());
  specdec::dynamic_tree_drafter dt(m, specdec::dynamic_tree_params{.depth = 4, .top_k = 3, .total_tokens = 30});
  specdec::drafted_tree t, full;
  st.draft(context, stream, full);
  st.draft(context, 2, stream, t);
  CHECK(t.num_nodes() == 11);  // the default shape's depths 0-2
  CHECK(t.model_calls == 4);   // root, {0}, {1}, {2}
  CHECK(std::equal(t.tokens.begin(), t.tokens.end(), full.tokens.begin()));
  check_tree(m, context, {}, t);
  st.draft(context, 0, stream, t);
  CHECK(t.num_nodes() == 1);
  // A dynamic tree cut at depth 2 is the tree of depth = 1.
  dt.draft(context, 2, stream, t);
  const auto shallow = specdec::draft_dynamic_tree(m, context, {.depth = 1, .top_k = 3, .total_tokens = 30}, stream);
  CHECK(t.tokens == shallow.tokens);
  CHECK(t.parents == shallow.parents);
  CHECK(t.model_calls == 4);
  dt.draft(context, 0, stream, t);
  CHECK(t.num_nodes() == 1);
  CHECK(t.model_calls == 0);

  static_assert(specdec::TreeDrafter<specdec::static_tree_drafter<specdec::markov_model>>);
  static_assert(specdec::TreeDrafter<specdec::dynamic_tree_drafter<specdec::markov_model>>);
  const auto stage = specdec::tree_drafter_stage(dt);
  specdec::stage_draft out;
  stage(context, 3, stream, out);
  dt.draft(context, 3, stream, t);
  CHECK(out.tokens == std::vector<token_id>(t.tokens.begin() + 1, t.tokens.end()));
  CHECK(out.parents == std::vector<std::int32_t>(t.parents.begin() + 1, t.parents.end()));
  CHECK(out.q_rows == t.q_rows);
  CHECK(out.model_calls == t.model_calls);
  CHECK(out.charged_steps == 3);
  out.clear();
  stage(context, 0, stream, out);
  CHECK(out.tokens.empty());
  CHECK(out.model_calls == 0);
}

// ---- drafted trees through verify_tree: the validity table of draft/tree.hpp ---------------------

namespace {
// The first emitted token of N requests, each drafting a tree with `drafter` and verifying it with
// `rule` against the fixed target row p (batches of 50 through pack_trees and verify_tree).
template <class Drafter, class Rule>
std::vector<std::uint64_t> first_token_counts(Drafter& drafter, const Rule& rule, const std::vector<float>& p, std::uint64_t seed,
                                              std::uint32_t N) {
  const std::size_t V = p.size(), B = 50;
  std::vector<std::uint64_t> counts(V, 0);
  std::vector<specdec::drafted_tree> trees(B);
  std::vector<specdec::random::request_stream> streams(B);
  specdec::packed_trees packed;
  specdec::tree_batch<float> batch;
  std::vector<float> target;
  std::vector<token_id> tokens;
  std::vector<std::int32_t> path, accepted(B);
  std::vector<specdec::verify_status> status(B);
  for (std::uint32_t first = 0; first < N; first += B) {
    for (std::size_t b = 0; b < B; ++b) {
      streams[b] = {seed, first + static_cast<std::uint32_t>(b), 0};
      drafter.draft({}, streams[b], trees[b]);
    }
    specdec::pack_trees(trees, packed);
    target.clear();
    for (std::size_t r = 0; r < packed.parents.size(); ++r) target.insert(target.end(), p.begin(), p.end());
    packed.assign_to(batch, target);
    const std::size_t width = batch.layout.max_depth() + 1;
    tokens.resize(B * width);
    path.resize(B * width);
    specdec::verify_tree(specdec::exec::seq, rule, batch, streams, specdec::tree_outputs{tokens, path, accepted, status});
    for (std::size_t b = 0; b < B; ++b) {
      REQUIRE(status[b] == specdec::verify_status::ok);
      ++counts[static_cast<std::size_t>(tokens[b * width])];
    }
  }
  return counts;
}
}  // namespace

TEST_CASE("drafted trees verified by the rule their sampling suits emit the target's first-token law (chi-squared)",
          "[draft][tree][statistical]") {
  const std::vector<double> q{0.4, 0.1, 0.3, 0.2}, p{0.1, 0.4, 0.2, 0.3};
  const std::vector<float> p_row(p.begin(), p.end());
  const auto draft = specdec::markov_model::categorical(q);
  const auto three = specdec::tree_shape::full({3, 2});
  const std::uint64_t seed = 4242;
  const std::uint32_t N = 40000;
  const auto fits = [&](const std::vector<std::uint64_t>& counts, const char* what) {
    const auto r = specdec_test::chi_squared_gof(counts, p);
    std::cout << what << " (seed " << seed << "): " << r << "\n";
    return r.p_value > specdec_test::gof_alpha;
  };
  specdec::static_tree_drafter iid(draft, three, {}, tree_sampling::iid);
  specdec::static_tree_drafter distinct(draft, three, {}, tree_sampling::without_replacement);
  specdec::static_tree_drafter top(draft, three, {}, tree_sampling::top_k);
  specdec::dynamic_tree_drafter eagle(
      draft, {.depth = 2, .top_k = 3, .total_tokens = 8, .sampling = tree_sampling::without_replacement});
  specdec::dynamic_tree_drafter eagle_iid(draft, {.depth = 0, .top_k = 2, .total_tokens = 1, .sampling = tree_sampling::iid});
  CHECK(fits(first_token_counts(iid, specdec::strict, p_row, seed, N), "static iid + strict (MSS)"));
  CHECK(fits(first_token_counts(iid, specdec::k_seq, p_row, seed, N), "static iid + k_seq"));
  CHECK(fits(first_token_counts(iid, specdec::target_only, p_row, seed, N), "static iid + target_only"));
  CHECK(fits(first_token_counts(distinct, specdec::recursive_rejection, p_row, seed, N),
             "static without_replacement + recursive_rejection"));
  CHECK(fits(first_token_counts(top, specdec::target_only, p_row, seed, N), "static top_k + target_only"));
  CHECK(fits(first_token_counts(eagle, specdec::target_only, p_row, seed, N), "dynamic without_replacement + target_only"));
  // Negative controls: the pairings the table marks "not lossless".
  CHECK_FALSE(fits(first_token_counts(top, specdec::strict, p_row, seed, N), "negative control: static top_k + strict"));
  CHECK_FALSE(fits(first_token_counts(eagle_iid, specdec::strict, p_row, seed, N),
                   "negative control: dynamic iid (best of 2 kept) + strict"));
}

// ---- packing and bad input ---------------------------------------------------------------------

TEST_CASE("pack_trees lays drafted trees out for tree_layout and tree_batch, reusing its buffers", "[draft][tree]") {
  const auto m = specdec::random_markov_model(6, 1, 13, 0.8);
  const std::vector<token_id> context{2};
  std::vector<specdec::drafted_tree> trees{
      specdec::draft_static_tree(m, context, specdec::default_tree_shape(), {}, tree_sampling::top_k, {1, 0, 0}),
      specdec::draft_dynamic_tree(m, context, {.depth = 2, .top_k = 2, .total_tokens = 5}, {1, 1, 0}),
      specdec::draft_static_tree(m, context, specdec::tree_shape{}, {}, tree_sampling::iid, {1, 2, 0}),
  };
  CHECK(trees[2].num_nodes() == 1);
  CHECK(trees[2].model_calls == 0);
  specdec::packed_trees packed;
  specdec::pack_trees(trees, packed);
  CHECK(packed.vocab_size == 6);
  CHECK(packed.num_nodes == std::vector<std::int32_t>{15, 6, 1});
  REQUIRE(packed.parents.size() == 22);
  REQUIRE(packed.q_rows.size() == 22 * 6);
  std::vector<float> target(22 * 6, 1.0f / 6);
  specdec::tree_batch<float> batch;
  packed.assign_to(batch, target);
  REQUIRE(batch.layout.batch_size() == 3);
  std::size_t row = 0;
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t n = 0; n < trees[b].num_nodes(); ++n, ++row) {
      CHECK(batch.layout.node_row(b, n) == row);
      CHECK(batch.layout.parent(b, n) == trees[b].parents[n]);
      CHECK(batch.token(b, n) == trees[b].tokens[n]);
      const auto q = batch.draft_row(b, n), expected = trees[b].q_row(n);
      CHECK(std::equal(q.begin(), q.end(), expected.begin(), expected.end()));
    }
  // Packing again allocates nothing.
  const auto* parents_data = packed.parents.data();
  const auto* rows_data = packed.q_rows.data();
  specdec::pack_trees(trees, packed);
  CHECK(packed.parents.data() == parents_data);
  CHECK(packed.q_rows.data() == rows_data);

  specdec::drafted_tree other_vocab;
  other_vocab.parents = {no_node};
  other_vocab.tokens = {specdec::no_token};
  other_vocab.q_rows.assign(5, 0.0f);
  other_vocab.log_q = {0.0};
  CHECK_THROWS_AS(packed.append(other_vocab), specdec::error);
  CHECK_THROWS_AS(packed.append(specdec::drafted_tree{}), specdec::error);
}

TEST_CASE("tree drafters reject bad parameters and rows without mass", "[draft][tree]") {
  const auto m = specdec::random_markov_model(4, 1, 1, 1.0);
  using params = specdec::dynamic_tree_params;
  CHECK_THROWS_AS(specdec::dynamic_tree_drafter(m, params{.top_k = 0}), specdec::error);
  CHECK_THROWS_AS(specdec::dynamic_tree_drafter(m, params{.total_tokens = 0}), specdec::error);
  CHECK_THROWS_AS(specdec::dynamic_tree_drafter(m, params{.depth = 1u << 20, .top_k = 100}), specdec::error);
  CHECK_THROWS_AS(specdec::dynamic_tree_drafter(m, params{.warp = {.temperature = -1.0}}), specdec::error);
  CHECK_THROWS_AS(specdec::dynamic_tree_drafter(m, params{.sampling = static_cast<tree_sampling>(9)}), specdec::error);
  CHECK_THROWS_AS(specdec::static_tree_drafter(m, specdec::tree_shape::full({5})), specdec::error);  // rank 4 >= V
  CHECK_THROWS_AS(specdec::static_tree_drafter(m, specdec::default_tree_shape(), {}, static_cast<tree_sampling>(3)),
                  specdec::error);

  const auto no_mass = specdec::make_model(4, [](std::span<const token_id>, std::span<float> logits) {
    std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  });
  CHECK_THROWS_AS(specdec::draft_dynamic_tree(no_mass, {}, params{}, {}), specdec::numerical_error);
  CHECK_THROWS_AS(specdec::draft_static_tree(no_mass, {}, specdec::default_tree_shape(), {}, tree_sampling::top_k, {}),
                  specdec::numerical_error);
}
