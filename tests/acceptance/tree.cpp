// SPECDEC_TEST_LABELS: statistical
//
// Tree verification (specdec::verify_tree) and block verification (specdec::verify with `block`)
// through the public API:
//  (a) a chain tree (tree_layout::chains) gives verify_chain's tokens, count and status for strict,
//      greedy, sample_and_match and typical_rule, and strict's for recursive_rejection, k_seq and
//      (with one-hot q) target_only, on random rows and seeds, spoiled requests included;
//  (b) sequence-level chi-squared tests (as tests/acceptance/distribution.cpp): a small order-1 Markov
//      pair is decoded for H tokens by repeatedly drafting a tree (candidates drawn as each rule
//      needs: i.i.d. from q for strict / k_seq, without replacement for recursive_rejection, the top-k
//      of q for target_only), verifying it and appending what it emits; the law of the first H tokens
//      is compared with the target's enumerated law (Boost.Math chi-squared, fail at p < 1e-6). Each
//      rule has a negative control that must fail the same test. Greedy trees give greedy decoding;
//  (c) exec::seq and exec::simd give the same tokens, paths, counts and statuses for every tree rule
//      on random trees (V up to 5000, several sampling tiles), block verification agrees on chains, and
//      block verification with one draft is strict, token for token;
//  (d) the converters from_sibling_lists and from_paths build from_parents' layouts (SGLang's lists,
//      Medusa's retrieve_indices, TensorRT-LLM's -1-terminated paths), keeping the sibling order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/tree_rules.hpp"
#include "support/batch_builder.hpp"
#include "support/chi_squared.hpp"
#include "support/random_requests.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/sample_scale.hpp"

namespace {

using specdec::token_id;
using specdec::tree_layout;
using specdec::verify_status;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::request_stream;
using specdec::random::stream_address;
using specdec_test::markov_pair;

// ---- owned tree batches ----------------------------------------------------------------------------

// One request's tree: a parent per node (parents[0] = -1), a token per node, a target row and a draft
// row per node.
template <class T>
struct tree_request {
  std::vector<std::int32_t> parents;
  std::vector<token_id> tokens;
  std::vector<std::vector<T>> draft_rows, target_rows;
  request_stream stream;
};

template <class T>
struct owned_tree_batch {
  std::size_t vocab = 0;
  std::vector<std::int32_t> num_nodes, parents;
  std::vector<token_id> tokens;
  std::vector<T> draft_rows, target_rows;
  std::vector<request_stream> streams;
  tree_layout layout;

  specdec::tree_batch<T> view() const {
    return specdec::tree_batch<T>{layout, vocab, std::span<const token_id>(tokens), std::span<const T>(draft_rows),
                                  std::span<const T>(target_rows)};
  }
};

template <class T>
owned_tree_batch<T> build_tree_batch(const std::vector<tree_request<T>>& reqs, std::size_t V) {
  owned_tree_batch<T> b;
  b.vocab = V;
  for (const auto& r : reqs) {
    b.num_nodes.push_back(static_cast<std::int32_t>(r.parents.size()));
    b.parents.insert(b.parents.end(), r.parents.begin(), r.parents.end());
    b.tokens.insert(b.tokens.end(), r.tokens.begin(), r.tokens.end());
    for (const auto& row : r.draft_rows) b.draft_rows.insert(b.draft_rows.end(), row.begin(), row.end());
    for (const auto& row : r.target_rows) b.target_rows.insert(b.target_rows.end(), row.begin(), row.end());
    b.streams.push_back(r.stream);
  }
  b.layout = tree_layout::from_parents(b.num_nodes, b.parents);
  return b;
}

struct owned_tree_outputs {
  std::size_t width = 1;
  std::vector<token_id> tokens;
  std::vector<std::int32_t> path, num_accepted;
  std::vector<verify_status> status;

  explicit owned_tree_outputs(const tree_layout& l)
      : width(l.max_depth() + 1),
        tokens(l.batch_size() * width, -99),
        path(l.batch_size() * width, -99),
        num_accepted(l.batch_size(), -99),
        status(l.batch_size(), static_cast<verify_status>(0xFF)) {}
  specdec::tree_outputs view() { return specdec::tree_outputs{tokens, path, num_accepted, status}; }
  std::vector<token_id> emitted(std::size_t b) const {
    std::vector<token_id> out;
    for (std::size_t j = 0; j < width; ++j)
      if (tokens[b * width + j] != specdec::no_token) out.push_back(tokens[b * width + j]);
    return out;
  }
  std::vector<std::int32_t> path_of(std::size_t b) const {
    std::vector<std::int32_t> out;
    for (std::size_t j = 0; j < width; ++j)
      if (path[b * width + j] != specdec::no_node) out.push_back(path[b * width + j]);
    return out;
  }
};

template <class Policy, class Rule, class T>
owned_tree_outputs run_tree(const Policy& policy, const Rule& rule, const owned_tree_batch<T>& b) {
  owned_tree_outputs o(b.layout);
  specdec::verify_tree(policy, rule, b.view(), std::span<const request_stream>(b.streams), o.view());
  return o;
}

void require_same(const owned_tree_outputs& a, const owned_tree_outputs& b) {
  REQUIRE(a.tokens == b.tokens);
  REQUIRE(a.path == b.path);
  REQUIRE(a.num_accepted == b.num_accepted);
  REQUIRE(a.status == b.status);
}

using specdec_test::for_each_tree_rule;

// A chain request (n drafts) as a chain tree: root token `root_token`, the leaf's draft row NaN
// (it must never be read).
template <class T>
tree_request<T> chain_tree(const specdec_test::request_data<T>& r, std::size_t V, token_id root_token) {
  tree_request<T> t;
  const std::size_t n = r.drafts.size();
  for (std::size_t i = 0; i <= n; ++i) t.parents.push_back(static_cast<std::int32_t>(i) - 1);
  t.tokens.push_back(root_token);
  t.tokens.insert(t.tokens.end(), r.drafts.begin(), r.drafts.end());
  t.draft_rows = r.draft_rows;
  t.draft_rows.push_back(std::vector<T>(V, std::numeric_limits<T>::quiet_NaN()));
  t.target_rows = r.target_rows;
  t.stream = r.stream;
  return t;
}

// ---- (b) the statistical set-up ------------------------------------------------------------------

constexpr std::size_t vocab = 4;
constexpr std::size_t prompt = 0;
constexpr int horizon = 3;
constexpr std::uint64_t table_seed = 20250715;
const std::uint64_t num_samples = specdec_test::scaled_sample_count(200'000);
const std::uint64_t num_negative_samples = specdec_test::scaled_sample_count(100'000);

const markov_pair& pair() {
  static const markov_pair m = specdec_test::make_markov_pair(vocab, table_seed, 0.8);
  return m;
}

const std::vector<double>& target_law() {
  static const std::vector<double> t = specdec_test::target_sequence_distribution(pair(), prompt, horizon);
  return t;
}

// The drafted tree of the statistical tests: 3 children at the root, 2 under each (10 nodes, depth 2).
const std::vector<std::int32_t> sim_parents{-1, 0, 0, 0, 1, 1, 2, 2, 3, 3};

enum class drafting { iid, without_replacement, top_k };

struct sim_config {
  std::uint64_t seed = 1;
  std::uint64_t n = num_samples;
  std::vector<std::int32_t> parents = sim_parents;
  const std::vector<double>* declared_q = nullptr;  // the q rows given to the verifier (default: the true q)
  bool stale_target_rows = false;                   // negative control: every node gets the root's target row
};

struct sim_result {
  std::vector<std::uint64_t> counts;
  std::uint64_t invalid = 0, verifications = 0, accepted = 0;
  double seconds = 0.0;
};

std::uint64_t index_of(const std::vector<token_id>& s) {
  std::uint64_t i = 0;
  for (int k = 0; k < horizon; ++k) i = i * vocab + static_cast<std::uint64_t>(s[static_cast<std::size_t>(k)]);
  return i;
}

// The children's tokens of a node whose context token is `ctx`, drawn as `how` says.
void draw_children(drafting how, std::span<const double> q, std::size_t k, philox_stream& s, std::vector<token_id>& out) {
  out.clear();
  switch (how) {
    case drafting::iid:
      for (std::size_t j = 0; j < k; ++j) out.push_back(specdec::sample_categorical(q, s.uniform()).token);
      break;
    case drafting::without_replacement:
      for (std::size_t j = 0; j < k; ++j) {
        const auto weight = [&](std::size_t v) {
          return std::find(out.begin(), out.end(), static_cast<token_id>(v)) != out.end() ? 0.0 : q[v];
        };
        const auto x = specdec::sample_by_weights(q.size(), weight, s.uniform());
        if (x.status != specdec::row_status::ok) break;
        out.push_back(x.token);
      }
      break;
    case drafting::top_k: {
      std::vector<token_id> order(q.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](token_id a, token_id b) { return q[static_cast<std::size_t>(a)] > q[static_cast<std::size_t>(b)]; });
      out.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(k, q.size())));
      break;
    }
  }
}

// Speculative decoding of cfg.n sequences of `horizon` tokens with tree drafts verified by `rule`.
template <class Rule>
sim_result simulate_tree(const Rule& rule, drafting how, const sim_config& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const markov_pair& m = pair();
  const std::vector<double>& declared_q = cfg.declared_q ? *cfg.declared_q : m.draft;
  const std::size_t V = m.vocab, N = cfg.parents.size();
  const auto nodes = static_cast<std::int32_t>(N);
  specdec::tree_batch<double> batch;
  batch.layout = tree_layout::from_parents(std::span<const std::int32_t>(&nodes, 1), cfg.parents);
  batch.vocab_size = V;
  std::vector<token_id> tokens(N);
  std::vector<double> p_rows(N * V), q_rows(N * V);
  batch.tokens = tokens;
  batch.target_rows = p_rows;
  batch.draft_rows = q_rows;
  const std::size_t width = batch.layout.max_depth() + 1;
  std::vector<token_id> out_tokens(width);
  std::vector<std::int32_t> out_path(width), num_accepted(1);
  std::vector<verify_status> status(1);
  const specdec::tree_outputs out{out_tokens, out_path, num_accepted, status};
  std::vector<std::vector<std::int32_t>> children(N);
  for (std::size_t i = 1; i < N; ++i) children[static_cast<std::size_t>(cfg.parents[i])].push_back(static_cast<std::int32_t>(i));

  sim_result r;
  r.counts.assign(specdec_test::num_sequences(V, horizon), 0);
  std::vector<token_id> sequence, drawn;
  for (std::uint64_t i = 0; i < cfg.n; ++i) {
    sequence.clear();
    std::size_t last = prompt;
    std::uint32_t step = 0;
    bool ok = true;
    while (sequence.size() < static_cast<std::size_t>(horizon)) {
      const request_stream stream{cfg.seed, static_cast<std::uint32_t>(i), step++};
      tokens[0] = static_cast<token_id>(last);
      for (std::size_t node = 0; node < N; ++node) {  // parents come first: a node's token is known here
        const auto ctx = static_cast<std::size_t>(tokens[node]);
        const std::size_t row_ctx = cfg.stale_target_rows ? last : ctx;
        std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(row_ctx * V), V,
                    p_rows.begin() + static_cast<std::ptrdiff_t>(node * V));
        std::copy_n(declared_q.begin() + static_cast<std::ptrdiff_t>(ctx * V), V,
                    q_rows.begin() + static_cast<std::ptrdiff_t>(node * V));
        if (children[node].empty()) continue;
        philox_stream s = stream.open(static_cast<std::uint32_t>(node), purpose::draft);
        draw_children(how, m.q_row(ctx), children[node].size(), s, drawn);
        if (drawn.size() != children[node].size()) FAIL("the drafter could not fill the tree");
        for (std::size_t j = 0; j < drawn.size(); ++j) tokens[static_cast<std::size_t>(children[node][j])] = drawn[j];
      }
      specdec::verify_tree(specdec::exec::seq, rule, batch, std::span<const request_stream>(&stream, 1), out);
      ++r.verifications;
      r.accepted += static_cast<std::uint64_t>(num_accepted[0]);
      if (!specdec::is_valid(status[0])) {
        ok = false;
        break;
      }
      for (std::size_t j = 0; j <= static_cast<std::size_t>(num_accepted[0]); ++j) {
        if (!specdec::in_vocabulary(out_tokens[j], V)) ok = false;
        sequence.push_back(out_tokens[j]);
      }
      if (!ok) break;
      last = static_cast<std::size_t>(sequence.back());
    }
    if (!ok) {
      ++r.invalid;
      continue;
    }
    ++r.counts[index_of(sequence)];
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Negative control of sample-and-match: one target sample PER PATH. Every root-to-leaf path of the
// tree is verified on its own as a chain (its own stream), and the longest accepted path wins.
sim_result simulate_per_path(const sim_config& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const markov_pair& m = pair();
  const std::size_t V = m.vocab, N = cfg.parents.size();
  std::vector<std::vector<std::int32_t>> children(N);
  for (std::size_t i = 1; i < N; ++i) children[static_cast<std::size_t>(cfg.parents[i])].push_back(static_cast<std::int32_t>(i));
  sim_result r;
  r.counts.assign(specdec_test::num_sequences(V, horizon), 0);
  std::vector<token_id> tokens(N), sequence, drawn;
  for (std::uint64_t i = 0; i < cfg.n; ++i) {
    sequence.clear();
    std::size_t last = prompt;
    std::uint32_t step = 0;
    while (sequence.size() < static_cast<std::size_t>(horizon)) {
      const request_stream stream{cfg.seed, static_cast<std::uint32_t>(i), step};
      tokens[0] = static_cast<token_id>(last);
      for (std::size_t node = 0; node < N; ++node) {
        if (children[node].empty()) continue;
        philox_stream s = stream.open(static_cast<std::uint32_t>(node), purpose::draft);
        draw_children(drafting::iid, m.q_row(static_cast<std::size_t>(tokens[node])), children[node].size(), s, drawn);
        for (std::size_t j = 0; j < drawn.size(); ++j) tokens[static_cast<std::size_t>(children[node][j])] = drawn[j];
      }
      specdec::chain_result best;
      best.num_accepted = -1;
      std::uint32_t path_id = 0;
      for (std::size_t leaf = 1; leaf < N; ++leaf) {
        if (!children[leaf].empty()) continue;
        std::vector<std::size_t> path;
        for (std::size_t v = leaf; v != 0; v = static_cast<std::size_t>(cfg.parents[v])) path.push_back(v);
        std::reverse(path.begin(), path.end());
        std::vector<token_id> drafts;
        std::vector<double> p_rows, q_rows;
        std::size_t ctx = last;
        for (const std::size_t v : path) {
          const auto p = m.p_row(ctx), q = m.q_row(ctx);
          p_rows.insert(p_rows.end(), p.begin(), p.end());
          q_rows.insert(q_rows.end(), q.begin(), q.end());
          drafts.push_back(tokens[v]);
          ctx = static_cast<std::size_t>(tokens[v]);
        }
        const auto p = m.p_row(ctx);
        p_rows.insert(p_rows.end(), p.begin(), p.end());
        const request_stream own{cfg.seed, static_cast<std::uint32_t>(i * 16 + path_id++), step};  // a sample per path
        const auto c = specdec::verify_chain(specdec::exec::seq, specdec::sample_and_match, drafts, q_rows, p_rows, V, own);
        if (c.num_accepted > best.num_accepted) best = c;
      }
      ++step;
      ++r.verifications;
      r.accepted += static_cast<std::uint64_t>(best.num_accepted);
      sequence.insert(sequence.end(), best.tokens.begin(), best.tokens.end());
      last = static_cast<std::size_t>(sequence.back());
    }
    ++r.counts[index_of(sequence)];
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Chains of gamma drafts from q verified by `rule` through specdec::verify_chain (block verification).
template <class Rule>
sim_result simulate_chain(const Rule& rule, int gamma, const sim_config& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const markov_pair& m = pair();
  const std::vector<double>& declared_q = cfg.declared_q ? *cfg.declared_q : m.draft;
  const std::size_t V = m.vocab, G = static_cast<std::size_t>(gamma);
  sim_result r;
  r.counts.assign(specdec_test::num_sequences(V, horizon), 0);
  std::vector<token_id> drafts(G), sequence;
  std::vector<double> q_rows(G * V), p_rows((G + 1) * V);
  for (std::uint64_t i = 0; i < cfg.n; ++i) {
    sequence.clear();
    std::size_t last = prompt;
    std::uint32_t step = 0;
    bool ok = true;
    while (ok && sequence.size() < static_cast<std::size_t>(horizon)) {
      const request_stream stream{cfg.seed, static_cast<std::uint32_t>(i), step++};
      std::size_t prev = last;
      for (std::size_t j = 0; j < G; ++j) {
        std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                    p_rows.begin() + static_cast<std::ptrdiff_t>(j * V));
        std::copy_n(declared_q.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                    q_rows.begin() + static_cast<std::ptrdiff_t>(j * V));
        drafts[j] =
            specdec::sample_categorical(m.q_row(prev), stream.open(static_cast<std::uint32_t>(j), purpose::draft).uniform())
                .token;
        prev = static_cast<std::size_t>(drafts[j]);
      }
      std::copy_n(m.target.begin() + static_cast<std::ptrdiff_t>(prev * V), V,
                  p_rows.begin() + static_cast<std::ptrdiff_t>(G * V));
      const auto out = specdec::verify_chain(specdec::exec::seq, rule, drafts, q_rows, p_rows, V, stream);
      ++r.verifications;
      r.accepted += static_cast<std::uint64_t>(out.num_accepted);
      ok = specdec::is_valid(out.status) && out.tokens.size() == static_cast<std::size_t>(out.num_accepted) + 1;
      for (const token_id t : out.tokens) sequence.push_back(t);
      if (ok) last = static_cast<std::size_t>(sequence.back());
    }
    if (!ok) {
      ++r.invalid;
      continue;
    }
    ++r.counts[index_of(sequence)];
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

specdec_test::gof_result report(const std::string& name, const sim_config& cfg, const sim_result& r) {
  const auto g = specdec_test::chi_squared_gof(r.counts, target_law());
  std::cout << "[tree] " << name << ": seed = 0x" << std::hex << cfg.seed << std::dec << ", table seed = " << table_seed
            << ", V = " << vocab << ", H = " << horizon << ", " << g << ", accepted/verify = "
            << static_cast<double>(r.accepted) / static_cast<double>(std::max<std::uint64_t>(1, r.verifications)) << ", "
            << r.seconds << " s\n";
  return g;
}

void expect_target_law(const std::string& name, const sim_config& cfg, const sim_result& r) {
  const auto g = report(name, cfg, r);
  CAPTURE(name, cfg.seed, g.statistic, g.dof, g.p_value);
  REQUIRE(r.invalid == 0);
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
}

void expect_not_target_law(const std::string& name, const sim_config& cfg, const sim_result& r) {
  const auto g = report("NEGATIVE " + name, cfg, r);
  CAPTURE(name, cfg.seed, g.statistic, g.dof, g.p_value);
  REQUIRE(r.invalid == 0);
  CHECK(g.p_value < specdec_test::gof_alpha);
}

sim_config negative(std::uint64_t seed) {
  sim_config c;
  c.seed = seed;
  c.n = num_negative_samples;
  return c;
}

// ---- (c) random trees ----------------------------------------------------------------------------

// A random tree request: n nodes (parents drawn among earlier nodes, leaning towards recent ones so
// that trees get deep), children's tokens drawn from the parent's q, target rows sometimes equal to
// q; with probability `spoil_rate` one row entry or token is spoiled.
template <class T>
tree_request<T> random_tree(philox_stream& s, std::size_t V, std::size_t max_nodes, double spoil_rate, std::uint32_t id) {
  tree_request<T> r;
  r.stream = request_stream{0x7EE5, id, static_cast<std::uint32_t>(s.uniform() * 1000)};
  const std::size_t n = 1 + static_cast<std::size_t>(s.uniform() * static_cast<double>(max_nodes));
  const double zeros = s.uniform() < 0.3 ? 0.6 : 0.05;
  for (std::size_t i = 0; i < n; ++i) {
    r.parents.push_back(i == 0 ? -1
                               : static_cast<std::int32_t>(static_cast<double>(i) * (1.0 - s.uniform() * s.uniform())) %
                                     static_cast<std::int32_t>(i));
    auto q = specdec_test::random_probability_row<T>(s, V, zeros);
    auto p = s.uniform() < 0.2 ? q : specdec_test::random_probability_row<T>(s, V, zeros);
    r.draft_rows.push_back(std::move(q));
    r.target_rows.push_back(std::move(p));
    if (i == 0) {
      r.tokens.push_back(static_cast<token_id>(s.uniform() * static_cast<double>(V)));
    } else {
      const auto& pq = r.draft_rows[static_cast<std::size_t>(r.parents[i])];
      r.tokens.push_back(specdec::sample_categorical(std::span<const T>(pq), s.uniform()).token);
    }
  }
  if (s.uniform() < spoil_rate) {
    const std::size_t node = static_cast<std::size_t>(s.uniform() * static_cast<double>(n)) % n;
    const std::size_t at = static_cast<std::size_t>(s.uniform() * static_cast<double>(V)) % V;
    switch (static_cast<int>(s.uniform() * 6.0)) {
      case 0: r.target_rows[node][at] = std::numeric_limits<T>::quiet_NaN(); break;
      case 1: r.draft_rows[node][at] = std::numeric_limits<T>::quiet_NaN(); break;
      case 2: r.target_rows[node][at] = T(-0.25); break;
      case 3: std::fill(r.draft_rows[node].begin(), r.draft_rows[node].end(), T(0)); break;
      case 4: std::fill(r.target_rows[node].begin(), r.target_rows[node].end(), T(0)); break;
      default:
        if (node > 0) r.tokens[node] = static_cast<token_id>(V + 5);
        break;
    }
  }
  return r;
}

}  // namespace

// ---- (a) chains ------------------------------------------------------------------------------------

TEST_CASE("tree: a chain tree gives verify_chain's tokens, count and status", "[tree][chain]") {
  philox_stream s(stream_address{0xC4A1, 0, 0, 0, purpose::user});
  std::size_t compared = 0;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V :
         {std::size_t{2}, std::size_t{3}, std::size_t{5}, std::size_t{17}, std::size_t{64}, std::size_t{300}}) {
      for (std::uint32_t rep = 0; rep < 6; ++rep) {
        const auto reqs = specdec_test::make_requests<T>(s, 24, 6, V, 0.15, rep);
        for (const auto& r : reqs) {
          const auto root_token = static_cast<token_id>(rep % 2 == 0 ? 0 : -7);  // the root's token is ignored
          const auto tree = build_tree_batch<T>({chain_tree(r, V, root_token)}, V);
          std::vector<T> q_rows, p_rows, one_hot_q;
          for (const auto& row : r.draft_rows) q_rows.insert(q_rows.end(), row.begin(), row.end());
          for (const auto& row : r.target_rows) p_rows.insert(p_rows.end(), row.begin(), row.end());
          for (const token_id x : r.drafts) {
            std::vector<T> row(V, T(0));
            if (specdec::in_vocabulary(x, V)) row[static_cast<std::size_t>(x)] = T(1);
            one_hot_q.insert(one_hot_q.end(), row.begin(), row.end());
          }
          const auto compare = [&](const auto& tree_rule, const auto& chain_rule, const char* name,
                                   const std::vector<T>& chain_q) {
            const auto c = specdec::verify_chain(specdec::exec::seq, chain_rule, r.drafts, chain_q, p_rows, V, r.stream);
            const auto o = run_tree(specdec::exec::seq, tree_rule, tree);
            CAPTURE(name, V, rep, r.drafts.size(), c.tokens, c.num_accepted, static_cast<int>(c.status));
            CHECK(o.status[0] == c.status);
            // Typical acceptance on an invalid request: see the dedicated case below (a known difference).
            if (std::is_same_v<std::remove_cvref_t<decltype(tree_rule)>, specdec::typical_rule> && !specdec::is_valid(c.status))
              return;
            CHECK(o.emitted(0) == c.tokens);
            CHECK(o.num_accepted[0] == c.num_accepted);
            if (!has_flag(c.status, verify_status::bad_draft_token)) {
              std::vector<std::int32_t> expected_path(static_cast<std::size_t>(c.num_accepted) + 1);
              std::iota(expected_path.begin(), expected_path.end(), 0);
              CHECK(o.path_of(0) == expected_path);
            }
            ++compared;
          };
          compare(specdec::strict, specdec::strict, "strict", q_rows);
          compare(specdec::greedy, specdec::greedy, "greedy", q_rows);
          compare(specdec::sample_and_match, specdec::sample_and_match, "sample_and_match", q_rows);
          compare(specdec::typical_rule{}, specdec::typical_rule{}, "typical", q_rows);
          const specdec::typical_rule sampled{0.2, 0.5, 1e-5, specdec::typical_correction::typical_sample};
          compare(sampled, sampled, "typical (typical_sample)", q_rows);
          // One child per node: recursive rejection and K-SEQ are strict; target-only is strict with q = delta_x.
          compare(specdec::recursive_rejection, specdec::strict, "recursive_rejection vs strict", q_rows);
          compare(specdec::k_seq, specdec::strict, "k_seq vs strict", q_rows);
          compare(specdec::target_only, specdec::strict, "target_only vs strict with one-hot q", one_hot_q);
        }
      }
    }
  };
  run(double{});
  run(float{});
  INFO(compared << " chain/tree comparisons");
  CHECK(compared > 10000);
}

TEST_CASE("tree: typical acceptance on a chain tree with an unusable row keeps verify_chain's accepted prefix",
          "[tree][chain][typical]") {
  // Two drafts that typical acceptance accepts (p(x) = 0.9 > threshold), then a bonus row holding a
  // NaN. verify_chain: tokens {1, 2}, 2 accepted, invalid_row (status.hpp: "an invalid request emits
  // only the drafts accepted before the unusable row"); acceptance/tree.hpp promises the chain's tokens
  // for typical_rule on a chain tree.
  const std::size_t V = 3;
  const std::vector<token_id> drafts{1, 2};
  const std::vector<double> q(2 * V, 1.0 / 3.0);
  std::vector<double> p{0.05, 0.9, 0.05, /**/ 0.05, 0.05, 0.9, /**/ 0.5, std::numeric_limits<double>::quiet_NaN(), 0.5};
  const request_stream stream{1, 2, 3};
  for (const auto& rule :
       {specdec::typical_rule{}, specdec::typical_rule{0.09, 0.3, 0.0, specdec::typical_correction::typical_sample}}) {
    const auto c = specdec::verify_chain(specdec::exec::seq, rule, drafts, q, p, V, stream);
    REQUIRE(c.tokens == std::vector<token_id>{1, 2});
    REQUIRE(c.num_accepted == 2);
    REQUIRE(c.status == verify_status::invalid_row);
    const std::vector<std::int32_t> parents{-1, 0, 1};
    const std::vector<token_id> tokens{0, 1, 2};
    std::vector<double> q_tree(3 * V, 1.0 / 3.0);
    const auto t = specdec::verify_one_tree(specdec::exec::seq, rule, parents, tokens, std::span<const double>(q_tree),
                                            std::span<const double>(p), V, stream);
    CHECK(t.status == c.status);
    CHECK(t.tokens == c.tokens);
    CHECK(t.num_accepted == c.num_accepted);
    CHECK(t.path == std::vector<std::int32_t>{0, 1, 2});
  }
}

TEST_CASE("tree: verify_one_tree reports the accepted path, root first", "[tree][format]") {
  // V = 4; root -> {1: token 2, 2: token 3}, 1 -> {3: token 1}. One-hot targets: the root's target is
  // token 3, node 2's is token 0 (a leaf: the bonus). Every lossless rule takes node 2, then the bonus.
  const std::size_t V = 4;
  const std::vector<std::int32_t> parents{-1, 0, 0, 1};
  const std::vector<token_id> tokens{0, 2, 3, 1};
  std::vector<double> p(4 * V, 0.0), q(4 * V, 0.25);
  p[0 * V + 3] = 1.0;
  p[1 * V + 1] = 1.0;
  p[2 * V + 0] = 1.0;
  p[3 * V + 2] = 1.0;
  const request_stream stream{5, 6, 7};
  for_each_tree_rule([&](const auto& rule, const char* name) {
    CAPTURE(name);
    const auto r = specdec::verify_one_tree(specdec::exec::seq, rule, parents, tokens, std::span<const double>(q),
                                            std::span<const double>(p), V, stream);
    CHECK(r.path == std::vector<std::int32_t>{0, 2});
    CHECK(r.tokens == std::vector<token_id>{3, 0});
    CHECK(r.num_accepted == 1);
    CHECK(r.status == verify_status::ok);
  });
}

// ---- (b) laws ----------------------------------------------------------------------------------------

TEST_CASE("tree: the Markov pair of the statistical tests", "[tree][setup]") {
  const double tv = pair().mean_total_variation();
  std::cout << "[tree] V = " << vocab << ", table seed = " << table_seed << ", mean TV(p, q) = " << tv << ", tree parents {";
  for (const auto x : sim_parents) std::cout << ' ' << x;
  std::cout << " }\n";
  CHECK(tv > 0.2);
}

TEST_CASE("tree law (statistical): strict / SpecInfer multi-step sampling on i.i.d. candidates", "[tree][statistical]") {
  sim_config cfg;
  cfg.seed = 0x7EE0'0001;
  expect_target_law("strict (MSS), i.i.d. candidates", cfg, simulate_tree(specdec::strict, drafting::iid, cfg));
}

TEST_CASE("tree law (statistical): recursive rejection on candidates without replacement", "[tree][statistical]") {
  sim_config cfg;
  cfg.seed = 0x7EE0'0002;
  expect_target_law("recursive_rejection, without replacement", cfg,
                    simulate_tree(specdec::recursive_rejection, drafting::without_replacement, cfg));
}

TEST_CASE("tree law (statistical): K-SEQ on i.i.d. candidates", "[tree][statistical]") {
  sim_config cfg;
  cfg.seed = 0x7EE0'0003;
  expect_target_law("k_seq, i.i.d. candidates", cfg, simulate_tree(specdec::k_seq, drafting::iid, cfg));
}

TEST_CASE("tree law (statistical): target-only on the top-k of q", "[tree][statistical]") {
  sim_config cfg;
  cfg.seed = 0x7EE0'0004;
  expect_target_law("target_only, top-k of q", cfg, simulate_tree(specdec::target_only, drafting::top_k, cfg));
}

TEST_CASE("tree law (statistical): sample-and-match on i.i.d. candidates", "[tree][statistical]") {
  sim_config cfg;
  cfg.seed = 0x7EE0'0005;
  expect_target_law("sample_and_match, i.i.d. candidates", cfg, simulate_tree(specdec::sample_and_match, drafting::iid, cfg));
}

TEST_CASE("tree law (statistical): block verification of chains (gamma 2 and 3)", "[tree][statistical][block]") {
  for (const int gamma : {2, 3}) {
    sim_config cfg;
    cfg.seed = 0x7EE0'0010u + static_cast<std::uint64_t>(gamma);
    const auto block = simulate_chain(specdec::block, gamma, cfg);
    expect_target_law("block, gamma = " + std::to_string(gamma), cfg, block);
    // Block verification accepts at least as much as token-wise verification (same seed, same drafts).
    const auto strict = simulate_chain(specdec::strict, gamma, cfg);
    const double block_rate = static_cast<double>(block.accepted) / static_cast<double>(block.verifications);
    const double strict_rate = static_cast<double>(strict.accepted) / static_cast<double>(strict.verifications);
    std::cout << "[tree] gamma = " << gamma << ": accepted per verification, block " << block_rate << ", strict " << strict_rate
              << "\n";
    CHECK(block_rate > strict_rate);
  }
}

TEST_CASE("tree law (statistical), negative controls: each must fail the same test", "[tree][statistical][negative]") {
  SECTION("strict (MSS) on top-k candidates: a p/q ratio with candidates not drawn from q") {
    const auto cfg = negative(0x7EE0'0101);
    expect_not_target_law("strict on top-k candidates", cfg, simulate_tree(specdec::strict, drafting::top_k, cfg));
  }
  SECTION("strict (MSS) given the wrong q rows (q' = p)") {
    auto cfg = negative(0x7EE0'0102);
    cfg.declared_q = &pair().target;
    expect_not_target_law("strict given q' = p", cfg, simulate_tree(specdec::strict, drafting::iid, cfg));
  }
  SECTION("recursive rejection on i.i.d. candidates (duplicated siblings)") {
    const auto cfg = negative(0x7EE0'0103);
    expect_not_target_law("recursive_rejection on i.i.d. candidates", cfg,
                          simulate_tree(specdec::recursive_rejection, drafting::iid, cfg));
  }
  SECTION("K-SEQ given the wrong q rows (q' = p)") {
    auto cfg = negative(0x7EE0'0104);
    cfg.declared_q = &pair().target;
    expect_not_target_law("k_seq given q' = p", cfg, simulate_tree(specdec::k_seq, drafting::iid, cfg));
  }
  SECTION("target-only given stale target rows (the root's row at every node)") {
    auto cfg = negative(0x7EE0'0105);
    cfg.stale_target_rows = true;
    expect_not_target_law("target_only with stale target rows", cfg, simulate_tree(specdec::target_only, drafting::top_k, cfg));
  }
  SECTION("sample-and-match with one target sample per path instead of per node") {
    const auto cfg = negative(0x7EE0'0106);
    expect_not_target_law("sample_and_match, a target sample per path", cfg, simulate_per_path(cfg));
  }
  SECTION("block verification given the wrong q rows (q' = p)") {
    auto cfg = negative(0x7EE0'0107);
    cfg.declared_q = &pair().target;
    expect_not_target_law("block given q' = p", cfg, simulate_chain(specdec::block, 3, cfg));
  }
}

TEST_CASE("tree: greedy on trees is greedy decoding of the target", "[tree][greedy]") {
  const markov_pair& m = pair();
  const std::size_t V = m.vocab, N = sim_parents.size();
  const int H = 12;
  std::vector<token_id> expected;
  std::size_t last = prompt;
  for (int t = 0; t < H; ++t) {
    last = static_cast<std::size_t>(specdec::argmax(m.p_row(last)));
    expected.push_back(static_cast<token_id>(last));
  }
  const auto run = [&](const auto& rule, std::uint64_t seed) {
    std::uint64_t unexpected = 0, accepted = 0;
    std::vector<std::vector<std::int32_t>> children(N);
    for (std::size_t i = 1; i < N; ++i)
      children[static_cast<std::size_t>(sim_parents[i])].push_back(static_cast<std::int32_t>(i));
    std::vector<token_id> drawn;
    for (std::uint32_t i = 0; i < 500; ++i) {
      std::vector<token_id> sequence;
      std::size_t ctx0 = prompt;
      std::uint32_t step = 0;
      while (sequence.size() < static_cast<std::size_t>(H)) {
        const request_stream stream{seed, i, step++};
        tree_request<double> r;
        r.parents = sim_parents;
        r.stream = stream;
        r.tokens.assign(N, static_cast<token_id>(ctx0));
        r.draft_rows.resize(N);
        r.target_rows.resize(N);
        for (std::size_t node = 0; node < N; ++node) {
          const auto ctx = static_cast<std::size_t>(r.tokens[node]);
          r.target_rows[node].assign(m.p_row(ctx).begin(), m.p_row(ctx).end());
          r.draft_rows[node].assign(m.q_row(ctx).begin(), m.q_row(ctx).end());
          if (children[node].empty()) continue;
          philox_stream s = stream.open(static_cast<std::uint32_t>(node), purpose::draft);
          draw_children(drafting::iid, m.q_row(ctx), children[node].size(), s, drawn);
          for (std::size_t j = 0; j < drawn.size(); ++j) r.tokens[static_cast<std::size_t>(children[node][j])] = drawn[j];
        }
        const auto b = build_tree_batch<double>({r}, V);
        const auto o = run_tree(specdec::exec::seq, rule, b);
        REQUIRE(specdec::is_valid(o.status[0]));
        accepted += static_cast<std::uint64_t>(o.num_accepted[0]);
        for (const token_id t : o.emitted(0)) sequence.push_back(t);
        ctx0 = static_cast<std::size_t>(sequence.back());
      }
      if (!std::equal(expected.begin(), expected.end(), sequence.begin())) ++unexpected;
    }
    return std::make_pair(unexpected, accepted);
  };
  const auto [greedy_unexpected, greedy_accepted] = run(specdec::greedy, 0x7EE0'0200);
  CHECK(greedy_unexpected == 0);
  CHECK(greedy_accepted > 0);
  // Negative control: a sampling rule leaves the argmax chain.
  CHECK(run(specdec::sample_and_match, 0x7EE0'0201).first > 250);
}

// ---- (c) seq and simd ------------------------------------------------------------------------------

#if SPECDEC_ENABLE_SIMD
TEST_CASE("tree: exec::simd gives seq's tokens, paths, counts and statuses for every tree rule", "[tree][simd]") {
  philox_stream s(stream_address{0x51D7, 0, 0, 0, purpose::user});
  std::size_t compared = 0;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : {std::size_t{3}, std::size_t{33}, std::size_t{2049}, std::size_t{5000}}) {
      const std::size_t reps = V > 1000 ? 6 : 25;
      for (std::size_t rep = 0; rep < reps; ++rep) {
        std::vector<tree_request<T>> reqs;
        for (std::uint32_t b = 0; b < 6; ++b) reqs.push_back(random_tree<T>(s, V, V > 1000 ? 8 : 14, 0.2, b));
        const auto batch = build_tree_batch(reqs, V);
        for_each_tree_rule([&](const auto& rule, const char* name) {
          CAPTURE(name, V, rep);
          const auto a = run_tree(specdec::exec::seq, rule, batch);
          const auto b = run_tree(specdec::exec::simd, rule, batch);
          require_same(a, b);
          ++compared;
        });
      }
    }
  };
  run(double{});
  run(float{});
  CHECK(compared > 0);
}

TEST_CASE("block: exec::simd gives seq's tokens on chains", "[tree][simd][block]") {
  philox_stream s(stream_address{0x51D7, 1, 0, 0, purpose::user});
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    for (const std::size_t V : {std::size_t{3}, std::size_t{33}, std::size_t{2049}, std::size_t{5000}}) {
      for (std::uint32_t rep = 0; rep < (V > 1000 ? 6u : 25u); ++rep) {
        const auto reqs = specdec_test::make_requests<T>(s, 12, 5, V, 0.2, rep);
        const auto b = specdec_test::build_batch(reqs, V, true);
        specdec_test::owned_outputs a(b), c(b);
        specdec::verify(specdec::exec::seq, specdec::block, b.view(), b.stream_span(), a.view());
        specdec::verify(specdec::exec::simd, specdec::block, b.view(), b.stream_span(), c.view());
        CAPTURE(V, rep);
        REQUIRE(a.tokens == c.tokens);
        REQUIRE(a.num_accepted == c.num_accepted);
        REQUIRE(a.status == c.status);
      }
    }
  };
  run(double{});
  run(float{});
}
#endif

TEST_CASE("block: one draft (gamma = 1) gives strict's tokens, token for token", "[tree][block]") {
  philox_stream s(stream_address{0xB10C, 1, 0, 0, purpose::user});
  std::size_t compared = 0;
  for (const std::size_t V : {std::size_t{2}, std::size_t{5}, std::size_t{64}, std::size_t{3000}}) {
    for (std::uint32_t rep = 0; rep < 20; ++rep) {
      const auto reqs = specdec_test::make_requests<double>(s, 16, 1, V, 0.0, rep);  // n_b in {0, 1}
      const auto b = specdec_test::build_batch(reqs, V, true);
      specdec_test::owned_outputs x(b), y(b);
      specdec::verify(specdec::exec::seq, specdec::block, b.view(), b.stream_span(), x.view());
      specdec::verify(specdec::exec::seq, specdec::strict, b.view(), b.stream_span(), y.view());
      CAPTURE(V, rep);
      CHECK(x.tokens == y.tokens);
      CHECK(x.num_accepted == y.num_accepted);
      CHECK(x.status == y.status);
      ++compared;
    }
  }
  CHECK(compared == 80);
}

TEST_CASE("block: one draft gives strict's tokens and statuses on spoiled requests too", "[tree][block][bad_input]") {
  // Spoiled requests: a NaN target entry, q(x) = 0 or an out-of-range id (a draft row without mass:
  // the next case).
  philox_stream s(stream_address{0xB10C, 2, 0, 0, purpose::user});
  for (std::uint32_t rep = 0; rep < 40; ++rep) {
    auto reqs = specdec_test::make_requests<double>(s, 16, 1, 7, 1.0, rep);
    for (auto& r : reqs)
      for (auto& q : r.draft_rows)
        if (std::all_of(q.begin(), q.end(), [](double v) { return v == 0.0; })) q[0] = 1.0;
    const auto b = specdec_test::build_batch(reqs, 7, true);
    specdec_test::owned_outputs x(b), y(b);
    specdec::verify(specdec::exec::seq, specdec::block, b.view(), b.stream_span(), x.view());
    specdec::verify(specdec::exec::seq, specdec::strict, b.view(), b.stream_span(), y.view());
    for (std::size_t r = 0; r < b.batch_size(); ++r) {
      CAPTURE(rep, r, b.num_drafts[r], x.row(r), y.row(r), static_cast<int>(x.status[r]), static_cast<int>(y.status[r]));
      CHECK(x.row(r) == y.row(r));
      CHECK(x.status[r] == y.status[r]);
    }
  }
}

TEST_CASE("block: a draft row without mass is unusable (invalid_row), as for strict", "[tree][block][bad_input]") {
  // status.hpp: invalid_row = "a row read held NaN, inf, negative entries or no mass"; strict flags a
  // draft row without mass as invalid_row and emits nothing (backend/seq/verify.hpp), and block.hpp
  // says that with one draft block verification emits strict's tokens.
  const std::size_t V = 4;
  const std::vector<double> q(V, 0.0);
  const std::vector<double> p{0.1, 0.2, 0.3, 0.4, /**/ 0.25, 0.25, 0.25, 0.25};
  for (std::uint32_t i = 0; i < 20; ++i) {
    const request_stream stream{4, i, 0};
    const auto s = specdec::verify_chain(specdec::exec::seq, specdec::strict, std::vector<token_id>{2}, q, p, V, stream);
    const auto b = specdec::verify_chain(specdec::exec::seq, specdec::block, std::vector<token_id>{2}, q, p, V, stream);
    REQUIRE(has_flag(s.status, verify_status::invalid_row));
    REQUIRE(s.tokens.empty());
    CHECK(b.status == s.status);
    CHECK(b.tokens == s.tokens);
  }
  // Longer blocks: the draft row without mass at the second position.
  std::vector<double> q3(3 * V, 0.25), p3(4 * V, 0.25);
  std::fill(q3.begin() + V, q3.begin() + 2 * V, 0.0);
  const auto b = specdec::verify_chain(specdec::exec::seq, specdec::block, std::vector<token_id>{1, 2, 3}, q3, p3, V,
                                       request_stream{4, 99, 0});
  CHECK(has_flag(b.status, verify_status::invalid_row));
}

TEST_CASE("block: zero drafts emit the bonus like strict", "[tree][block]") {
  const std::vector<double> p{0.2, 0.3, 0.5};
  for (std::uint32_t i = 0; i < 50; ++i) {
    const request_stream stream{3, i, 0};
    const auto a =
        specdec::verify_chain(specdec::exec::seq, specdec::block, std::vector<token_id>{}, std::vector<double>{}, p, 3, stream);
    const auto b =
        specdec::verify_chain(specdec::exec::seq, specdec::strict, std::vector<token_id>{}, std::vector<double>{}, p, 3, stream);
    CHECK(a.tokens == b.tokens);
    CHECK(a.tokens.size() == 1);
    CHECK(a.status == verify_status::ok);
  }
}

// ---- (d) converters --------------------------------------------------------------------------------

namespace {
void require_same_layout(const tree_layout& a, const tree_layout& b) {
  REQUIRE(a.batch_size() == b.batch_size());
  REQUIRE(a.num_rows() == b.num_rows());
  REQUIRE(a.max_depth() == b.max_depth());
  for (std::size_t r = 0; r < a.batch_size(); ++r) {
    REQUIRE(a.num_nodes(r) == b.num_nodes(r));
    for (std::size_t n = 0; n < a.num_nodes(r); ++n) {
      CAPTURE(r, n);
      REQUIRE(a.node_row(r, n) == b.node_row(r, n));
      REQUIRE(a.parent(r, n) == b.parent(r, n));
      REQUIRE(a.first_child(r, n) == b.first_child(r, n));
      REQUIRE(a.next_sibling(r, n) == b.next_sibling(r, n));
      REQUIRE(a.depth(r, n) == b.depth(r, n));
    }
  }
}

std::vector<std::int32_t> children_of(const tree_layout& l, std::size_t b, std::size_t n) {
  std::vector<std::int32_t> c;
  for (std::int32_t x = l.first_child(b, n); x != specdec::no_node; x = l.next_sibling(b, static_cast<std::size_t>(x)))
    c.push_back(x);
  return c;
}
}  // namespace

TEST_CASE("tree converters: SGLang sibling lists, Medusa retrieve_indices and TensorRT-LLM paths give from_parents' layout",
          "[tree][layout]") {
  // Two requests. Request 0 (8 nodes):   0 -> {1, 2, 3},  1 -> {4, 5},  2 -> {6},  4 -> {7}
  // Request 1 (4 nodes, a chain):        0 -> 1 -> 2 -> 3
  const std::vector<std::int32_t> num_nodes{8, 4};
  const std::vector<std::int32_t> parents{-1, 0, 0, 0, 1, 1, 2, 4, /**/ -1, 0, 1, 2};
  const auto from_parents = tree_layout::from_parents(num_nodes, parents);
  CHECK(from_parents.max_depth() == 3);
  CHECK(children_of(from_parents, 0, 0) == std::vector<std::int32_t>{1, 2, 3});
  CHECK(children_of(from_parents, 0, 1) == std::vector<std::int32_t>{4, 5});
  CHECK(from_parents.num_children(0, 0) == 3);
  CHECK(from_parents.depth(0, 7) == 3);
  CHECK(from_parents.node_row(1, 2) == 10);

  SECTION("SGLang: retrive_next_token (first child) and retrive_next_sibling, as build_tree_efficient makes them") {
    // The first child is the smallest index; each list runs in ascending id order.
    const std::vector<std::int32_t> first_child{1, 4, 6, -1, 7, -1, -1, -1, /**/ 1, 2, 3, -1};
    const std::vector<std::int32_t> next_sibling{-1, 2, 3, -1, 5, -1, -1, -1, /**/ -1, -1, -1, -1};
    require_same_layout(tree_layout::from_sibling_lists(num_nodes, first_child, next_sibling), from_parents);
  }
  SECTION("Medusa / EAGLE retrieve_indices: one row per leaf, root in column 0, -1 padding") {
    const std::size_t width = 4;
    const std::vector<std::int32_t> num_paths{4, 1};
    const std::vector<std::int32_t> retrieve{0, 1, 4, 7, /**/ 0, 1, 5, -1, /**/ 0, 2, 6, -1, /**/ 0, 3, -1, -1, /**/ 0, 1, 2, 3};
    require_same_layout(tree_layout::from_paths(num_nodes, num_paths, width, retrieve), from_parents);
  }
  SECTION("TensorRT-LLM paths: [maxDecodingTokens][maxNumHeads + 1], -1 terminated, unused rows all -1, any row order") {
    const std::size_t width = 5;
    const std::vector<std::int32_t> num_paths{6, 3};
    const std::vector<std::int32_t> paths{0,      3, -1, -1, -1, /**/ 0,  1,  4,  7,  -1, /**/ -1, -1, -1, -1, -1,
                                          /**/ 0, 2, 6,  -1, -1, /**/ 0,  1,  5,  -1, -1, /**/ 0,  1,  -1, -1, -1,
                                          /**/ 0, 1, 2,  3,  -1, /**/ -1, -1, -1, -1, -1, /**/ 0,  1,  2,  -1, -1};
    require_same_layout(tree_layout::from_paths(num_nodes, num_paths, width, paths), from_parents);
  }
  SECTION("tree_layout::chains is from_parents of a chain") {
    const std::vector<std::int32_t> drafts{3, 0, 2};
    const std::vector<std::int32_t> nodes{4, 1, 3}, chain_parents{-1, 0, 1, 2, -1, -1, 0, 1};
    require_same_layout(tree_layout::chains(drafts), tree_layout::from_parents(nodes, chain_parents));
  }
}

TEST_CASE("tree converters: sibling lists keep the caller's sibling order, and verification follows it", "[tree][layout]") {
  // 0 -> {3, 1, 2} in that order (not ascending), 1 -> {4}: root's first child 3, then
  // next_sibling[3] = 1, next_sibling[1] = 2.
  const std::vector<std::int32_t> num_nodes{5};
  const std::vector<std::int32_t> fc{3, 4, -1, -1, -1}, ns{-1, 2, -1, 1, -1};
  const auto l = tree_layout::from_sibling_lists(num_nodes, fc, ns);
  CHECK(children_of(l, 0, 0) == std::vector<std::int32_t>{3, 1, 2});
  CHECK(children_of(l, 0, 1) == std::vector<std::int32_t>{4});
  CHECK(l.parent(0, 3) == 0);
  CHECK(l.parent(0, 4) == 1);
  CHECK(l.depth(0, 4) == 2);
  CHECK(l.max_depth() == 2);
  // Greedy and target-only visit siblings in list order: two siblings with the target's token (a
  // duplicate), the first in list order (node 3) is taken.
  const std::size_t V = 3;
  const std::vector<token_id> tokens{0, 1, 2, 1, 0};
  std::vector<double> p(5 * V, 1.0 / 3.0);
  p[0] = 0.0;
  p[1] = 1.0;
  p[2] = 0.0;  // the root's target: token 1
  const std::vector<request_stream> streams{{9, 1, 1}};
  specdec::tree_batch<double> batch{l, V, tokens, {}, p};
  for (int rule = 0; rule < 3; ++rule) {
    std::vector<token_id> out_tokens(3);
    std::vector<std::int32_t> path(3), accepted(1);
    std::vector<verify_status> status(1);
    const specdec::tree_outputs out{out_tokens, path, accepted, status};
    if (rule == 0) specdec::verify_tree(specdec::exec::seq, specdec::greedy, batch, streams, out);
    if (rule == 1) specdec::verify_tree(specdec::exec::seq, specdec::target_only, batch, streams, out);
    if (rule == 2) specdec::verify_tree(specdec::exec::seq, specdec::sample_and_match, batch, streams, out);
    CAPTURE(rule);
    CHECK(path[1] == 3);
    CHECK(out_tokens[0] == 1);
    CHECK(status[0] == verify_status::ok);
  }
}
