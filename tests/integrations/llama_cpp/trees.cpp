// Tree-shaped appends on llama.cpp (llama_cpp::sequence_model on a context with tree_paths > 0, the
// mechanism in integrations/llama_cpp/tree_paths.hpp): every root-to-leaf path is a llama.cpp sequence id.
//
// Tree attention: for random trees (up to 64 nodes, depth up to 6, three sequences in one forward,
// with and without a chain of leading tokens), each node's row equals the row after its root-to-node
// path decoded as a plain sequence in a fresh context, within 1e-4 of the row's largest |logit| (the
// same positions computed in batches of other shapes differ by float rounding only), and the argmax
// is the same wherever the top two differ by more than that. Negative control (raw llama.cpp calls): a
// node given its sibling's path id first attends to the sibling's branch, and its row moves far from
// its path's.
// Commit: after commit_tree the next chain row is a fresh context's after the committed tokens, and a
// thousand rounds of random trees, commits, whole-tree rollbacks and releases leave llama.cpp's cache
// holding exactly each live sequence's committed positions, no path id holding anything.
// Decoding: greedy suffix-tree drafting, and EAGLE-2 dynamic and static draft trees from a draft model
// read through prefix_cached_model (KV-cached lanes), verified as trees, give llama.cpp's greedy tokens.
// Bad input: a clear error before anything is decoded, the other sequences untouched.
// SPECDEC_TEST_LABELS: llama_cpp
#include <algorithm>
#include <random>

#include "integrations/llama_cpp/models.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/model/prefix_cached_model.hpp"

namespace t = specdec_test::llama;
using Catch::Matchers::Contains;
using specdec::token_id;

namespace {

// Rows of one position computed in batches of other shapes differ by float rounding: up to about 3e-4
// of the row's largest |logit| here (f32 test models, forwards of up to 200 positions over a unified
// cache, against a fresh context decoding one sequence), where a wrong attention mask moves a row by
// far more (the negative control below).
constexpr double tolerance = 1e-3;

// A random tree of n nodes (parents in [-1, i), depth < max_depth) below `trunk` chain tokens.
std::vector<std::int32_t> random_parents(std::mt19937_64& rng, std::size_t trunk, std::size_t n, std::size_t max_depth) {
  std::vector<std::int32_t> parents(trunk + n);
  std::vector<std::size_t> depth(trunk + n, 0);
  for (std::size_t i = 0; i < trunk; ++i) parents[i] = static_cast<std::int32_t>(i) - 1;
  const std::int32_t top = static_cast<std::int32_t>(trunk) - 1;  // the roots' parent
  for (std::size_t i = trunk; i < trunk + n; ++i) {
    std::vector<std::int32_t> choices{top};
    for (std::size_t j = trunk; j < i; ++j)
      if (depth[j] + 1 < max_depth) choices.push_back(static_cast<std::int32_t>(j));
    const std::int32_t p = choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng)];
    parents[i] = p;
    depth[i] = p == top ? 0 : depth[static_cast<std::size_t>(p)] + 1;
  }
  return parents;
}

std::vector<token_id> random_tokens(std::mt19937_64& rng, std::size_t n, std::size_t V) {
  std::uniform_int_distribution<token_id> pick(0, static_cast<token_id>(V) - 1);
  std::vector<token_id> out(n);
  for (auto& x : out) x = pick(rng);
  return out;
}

// The tokens on the path to node i of an append (the append's tokens up to i, following parents).
std::vector<token_id> path_to(std::span<const token_id> tokens, std::span<const std::int32_t> parents, std::size_t i) {
  std::vector<token_id> path;
  for (auto j = static_cast<std::int32_t>(i); j >= 0; j = parents[static_cast<std::size_t>(j)])
    path.push_back(tokens[static_cast<std::size_t>(j)]);
  std::reverse(path.begin(), path.end());
  return path;
}

// The offsets (within the tree below the trunk) of the root-to-node path to tree node `node`.
std::vector<std::int32_t> kept_path(std::span<const std::int32_t> parents, std::size_t trunk, std::size_t node) {
  std::vector<std::int32_t> keep;
  for (auto j = static_cast<std::int32_t>(trunk + node); j >= static_cast<std::int32_t>(trunk);
       j = parents[static_cast<std::size_t>(j)])
    keep.push_back(j - static_cast<std::int32_t>(trunk));
  std::reverse(keep.begin(), keep.end());
  return keep;
}

std::size_t argmax(std::span<const float> row) {
  return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Whether the top two entries of `row` differ by more than tolerance * max |row|.
bool clear_argmax(std::span<const float> row) {
  std::vector<float> sorted(row.begin(), row.end());
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
  double scale = 0.0;
  for (const float x : row) scale = std::max(scale, std::abs(double(x)));
  return double(sorted[0]) - double(sorted[1]) > tolerance * scale;
}

// Row checks against fresh contexts, counted.
struct row_checker {
  const t::lc::model& m;
  std::size_t rows = 0, argmaxes = 0;
  void operator()(std::span<const float> row, const std::vector<token_id>& context) {
    const auto reference = t::fresh_logits(m, context);
    CHECK(t::relative_difference(row, reference) < tolerance);
    if (clear_argmax(reference)) {
      CHECK(argmax(row) == argmax(reference));
      ++argmaxes;
    }
    ++rows;
  }
};

// Runs every request of `decoder` (handles 1, 2, ... in the order of `reference`) to its end, checks
// each one's tokens against `reference`, and returns their counters merged.
template <class Decoder>
specdec::decode_stats run_and_compare(Decoder& decoder, const std::vector<std::vector<token_id>>& reference) {
  std::vector<std::vector<token_id>> out(reference.size());
  specdec::decode_stats total;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step())
      if (e.finished != specdec::finish_reason::none) {
        const auto tokens = decoder.tokens(e.request);
        out[e.request - 1].assign(tokens.begin(), tokens.end());
        total.merge(decoder.stats(e.request));
      }
  for (std::size_t i = 0; i < reference.size(); ++i) {
    INFO("prompt " << i);
    CHECK(out[i] == reference[i]);
  }
  return total;
}

}  // namespace

TEST_CASE("llama.cpp tree attention: every node's row is its root-to-node path's as a plain sequence", "[llama_cpp]") {
  const auto& m = t::model("target");
  const std::size_t V = m.vocab_size();
  t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = 3, .threads = 1, .tree_paths = 200});
  t::lc::sequence_model seq(ctx);
  REQUIRE(specdec::takes_tree_appends(seq));
  std::mt19937_64 rng(20261129);
  row_checker check{m};
  // state[s]: the tokens sequence s holds; pending[s]: the chain appended before the next tree.
  std::vector<std::vector<token_id>> state(3), pending(3);
  for (std::size_t s = 0; s < 3; ++s) pending[s] = t::lc::tokenize(m, t::prompts()[s]);

  for (int round = 0; round < 3; ++round) {
    // Three trees in one forward: round 0 has the prompt as the trunk, later rounds one pending token.
    std::vector<std::vector<token_id>> tokens(3);
    std::vector<std::vector<std::int32_t>> parents(3);
    std::vector<std::size_t> nodes(3);
    std::vector<specdec::sequence_append> appends;
    std::size_t rows = 0;
    for (std::size_t s = 0; s < 3; ++s) {
      nodes[s] = s == 0 ? 64 : std::uniform_int_distribution<std::size_t>(1, 40)(rng);
      tokens[s] = pending[s];
      const auto tree = random_tokens(rng, nodes[s], V);
      tokens[s].insert(tokens[s].end(), tree.begin(), tree.end());
      parents[s] = random_parents(rng, pending[s].size(), nodes[s], 6);
      appends.push_back({.sequence = s, .tokens = tokens[s], .rows = nodes[s] + 1, .parents = parents[s]});
      rows += nodes[s] + 1;
    }
    std::vector<float> logits(rows * V);
    seq.forward(appends, logits);
    std::size_t row = 0;
    for (std::size_t s = 0; s < 3; ++s) {
      INFO("round " << round << ", sequence " << s);
      const std::size_t trunk = pending[s].size();
      for (std::size_t i = trunk - 1; i < tokens[s].size(); ++i, ++row) {  // the trunk's last token, then every node
        std::vector<token_id> context = state[s];
        const auto path = path_to(tokens[s], parents[s], i);
        context.insert(context.end(), path.begin(), path.end());
        check(std::span<const float>(logits).subspan(row * V, V), context);
      }
      // Keep the path to a random node (the trunk stays).
      const std::size_t node = std::uniform_int_distribution<std::size_t>(0, nodes[s] - 1)(rng);
      seq.commit_tree(s, nodes[s], kept_path(parents[s], trunk, node));
      const auto kept = path_to(tokens[s], parents[s], trunk + node);
      state[s].insert(state[s].end(), kept.begin(), kept.end());
      CHECK(seq.length(s) == state[s].size());
      pending[s] = random_tokens(rng, 1, V);
    }
    CHECK(seq.free_tree_paths() == 200);
  }
  // After the last commit, a chain append continues each sequence as a fresh context would.
  for (std::size_t s = 0; s < 3; ++s) {
    std::vector<float> row(V);
    const specdec::sequence_append a{.sequence = s, .tokens = pending[s], .rows = 1};
    seq.forward(std::span(&a, 1), row);
    state[s].insert(state[s].end(), pending[s].begin(), pending[s].end());
    check(row, state[s]);
  }
  CHECK(check.rows > 100);
  CHECK(check.argmaxes > 0);
}

TEST_CASE("negative control: a node given its sibling's path id first attends to the sibling's branch", "[llama_cpp]") {
  const auto& m = t::model("target");
  const std::size_t V = m.vocab_size();
  const std::vector<token_id> prompt = t::lc::tokenize(m, "Once upon a time");
  const token_id root = 1000, a = 2000, b = 3000;
  std::vector<token_id> reference_context = prompt;
  reference_context.insert(reference_context.end(), {root, b});
  const auto reference = t::fresh_logits(m, reference_context);

  // Node b's row with its ids given as listed (path 1 is r -> a, path 2 is r -> b).
  const auto row_of_b = [&](std::vector<llama_seq_id> b_ids) {
    t::lc::context ctx(m, {.context_per_sequence = 64, .sequences = 1, .threads = 1, .tree_paths = 2});
    llama_batch batch = llama_batch_init(64, 0, 3);
    const auto put = [&](token_id token, llama_pos pos, std::vector<llama_seq_id> ids, bool output) {
      const auto i = static_cast<std::size_t>(batch.n_tokens++);
      batch.token[i] = token;
      batch.pos[i] = pos;
      batch.n_seq_id[i] = static_cast<std::int32_t>(ids.size());
      for (std::size_t k = 0; k < ids.size(); ++k) batch.seq_id[i][k] = ids[k];
      batch.logits[i] = output ? 1 : 0;
    };
    for (std::size_t i = 0; i < prompt.size(); ++i) put(prompt[i], static_cast<llama_pos>(i), {0}, false);
    REQUIRE(llama_decode(ctx.get(), batch) == 0);
    llama_memory_seq_cp(ctx.memory(), 0, 1, -1, -1);
    llama_memory_seq_cp(ctx.memory(), 0, 2, -1, -1);
    batch.n_tokens = 0;
    const auto L = static_cast<llama_pos>(prompt.size());
    put(root, L, {1, 2}, false);
    put(a, L + 1, {1}, false);
    put(b, L + 1, std::move(b_ids), true);
    REQUIRE(llama_decode(ctx.get(), batch) == 0);
    std::vector<float> row(llama_get_logits_ith(ctx.get(), 2), llama_get_logits_ith(ctx.get(), 2) + V);
    llama_batch_free(batch);
    return row;
  };
  const double own = t::relative_difference(row_of_b({2}), reference);
  const double sibling = t::relative_difference(row_of_b({1}), reference);
  CAPTURE(own, sibling);
  CHECK(own < tolerance);           // its own path: its path's row
  CHECK(sibling > 10 * tolerance);  // the sibling's path: it attends to a as well
}

TEST_CASE("a thousand rounds of random trees leave llama.cpp's cache with exactly the committed positions", "[llama_cpp]") {
  const auto& m = t::model("target");
  const std::size_t V = m.vocab_size();
  constexpr std::uint32_t sequences = 2, paths = 24;
  t::lc::context ctx(m, {.context_per_sequence = 128, .sequences = sequences, .threads = 1, .tree_paths = paths});
  t::lc::sequence_model seq(ctx);
  std::mt19937_64 rng(7);
  std::vector<std::vector<token_id>> committed(sequences);
  std::size_t commits = 0, dropped = 0, releases = 0;
  for (int round = 0; round < 1000; ++round) {
    std::vector<std::vector<token_id>> tokens(sequences);
    std::vector<std::vector<std::int32_t>> parents(sequences);
    std::vector<std::size_t> nodes(sequences);
    std::vector<specdec::sequence_append> appends;
    for (std::size_t s = 0; s < sequences; ++s) {
      nodes[s] = std::uniform_int_distribution<std::size_t>(1, 10)(rng);
      const std::size_t trunk = committed[s].empty() ? 3 : 1;
      tokens[s] = random_tokens(rng, trunk + nodes[s], V);
      parents[s] = random_parents(rng, trunk, nodes[s], 4);
      appends.push_back({.sequence = s, .tokens = tokens[s], .rows = 1, .parents = parents[s]});
    }
    std::vector<float> logits(sequences * V);
    seq.forward(appends, logits);
    for (std::size_t s = 0; s < sequences; ++s) {
      const std::size_t trunk = tokens[s].size() - nodes[s];
      const int what = std::uniform_int_distribution<int>(0, 9)(rng);
      if (what == 0) {  // drop the whole tree, trunk included
        seq.rollback(s, tokens[s].size());
        ++dropped;
      } else {
        const std::size_t node = std::uniform_int_distribution<std::size_t>(0, nodes[s] - 1)(rng);
        const auto keep = what == 1 ? std::vector<std::int32_t>{} : kept_path(parents[s], trunk, node);
        seq.commit_tree(s, nodes[s], keep);
        const auto path = keep.empty()
                              ? std::vector<token_id>(tokens[s].begin(), tokens[s].begin() + static_cast<std::ptrdiff_t>(trunk))
                              : path_to(tokens[s], parents[s], trunk + node);
        committed[s].insert(committed[s].end(), path.begin(), path.end());
        ++commits;
      }
      if (committed[s].size() > 100) {
        seq.release(s);
        committed[s].clear();
        ++releases;
      }
    }
    // llama.cpp's cache: every live sequence holds positions [0, length), no other id holds any.
    std::vector<std::size_t> held;
    for (llama_seq_id id = 0; id < static_cast<llama_seq_id>(sequences + paths); ++id) {
      const llama_pos lo = llama_memory_seq_pos_min(ctx.memory(), id), hi = llama_memory_seq_pos_max(ctx.memory(), id);
      if (hi < 0) continue;
      REQUIRE(lo == 0);
      held.push_back(static_cast<std::size_t>(hi) + 1);
    }
    std::vector<std::size_t> expected;
    for (std::size_t s = 0; s < sequences; ++s) {
      REQUIRE(seq.length(s) == committed[s].size());
      if (!committed[s].empty()) expected.push_back(committed[s].size());
    }
    std::sort(held.begin(), held.end());
    std::sort(expected.begin(), expected.end());
    REQUIRE(held == expected);
    REQUIRE(seq.free_tree_paths() == paths);
  }
  CHECK(commits > 1000);
  CHECK(dropped > 50);
  CHECK(releases > 0);
  // The state after all that is still exact.
  row_checker check{m};
  for (std::size_t s = 0; s < sequences; ++s) {
    const std::vector<token_id> next{42};
    std::vector<float> row(V);
    const specdec::sequence_append a{.sequence = s, .tokens = next, .rows = 1};
    seq.forward(std::span(&a, 1), row);
    committed[s].push_back(42);
    check(row, committed[s]);
  }
}

TEST_CASE("bad tree input to llama_cpp::sequence_model is refused before anything is decoded", "[llama_cpp]") {
  const auto& m = t::model("target");
  const std::size_t V = m.vocab_size();
  const std::vector<token_id> tokens{10, 11, 12, 13, 14};
  const std::vector<std::int32_t> fan{-1, 0, 0, 0, 0};  // four leaves
  std::vector<float> logits(5 * V);

  // No tree paths: a chain-only context refuses trees, and the decoder refuses tree verification.
  t::lc::context plain(m, {.context_per_sequence = 64, .threads = 1});
  t::lc::sequence_model chain_only(plain);
  CHECK_FALSE(specdec::takes_tree_appends(chain_only));
  const specdec::sequence_append tree{.sequence = 1, .tokens = tokens, .rows = 5, .parents = fan};
  CHECK_THROWS_WITH(chain_only.forward(std::span(&tree, 1), logits), Contains("tree_paths > 0"));
  CHECK(chain_only.length(1) == 0);
  specdec::no_sequence_model none(V);
  specdec::batch_decoder decoder(specdec::exec::seq, chain_only, none, specdec::strict);
  specdec::request_options r;
  r.prompt = tokens;
  r.acceptance = specdec::tree_acceptance{specdec::target_only};
  r.drafter = specdec::suffix_stage({.tree = true});
  CHECK_THROWS_WITH(decoder.add(r), Contains("tree-shaped appends"));

  t::lc::context ctx(m, {.context_per_sequence = 32, .sequences = 2, .threads = 1, .tree_paths = 3});
  t::lc::sequence_model seq(ctx);
  const std::vector<token_id> prompt{1, 2, 3, 4};
  std::vector<float> row(V);
  const specdec::sequence_append other{.sequence = 2, .tokens = prompt, .rows = 1};
  seq.forward(std::span(&other, 1), row);
  const auto untouched = [&] {  // sequence 2 still continues from its prompt
    REQUIRE(seq.length(2) == prompt.size());
    REQUIRE(llama_memory_seq_pos_max(ctx.memory(), 3) == -1);
  };

  // More leaves than path ids (4 > 3), together with a chain on the other sequence: nothing runs.
  const specdec::sequence_append both[] = {{.sequence = 2, .tokens = std::span(tokens).first(1), .rows = 1}, tree};
  std::vector<float> six(6 * V);
  CHECK_THROWS_AS(seq.forward(both, six), specdec::engine_error);
  CHECK_THROWS_WITH(seq.forward(both, six), Contains("4 root-to-leaf paths") && Contains("3 free path ids"));
  CHECK(seq.length(1) == 0);
  untouched();
  // A parent that is not an earlier node.
  const std::vector<std::int32_t> forward_parent{-1, 2, 0, 1, 3};
  const specdec::sequence_append bad{.sequence = 1, .tokens = tokens, .rows = 1, .parents = forward_parent};
  CHECK_THROWS_WITH(seq.forward(std::span(&bad, 1), row), Contains("not an earlier token"));
  // A tree longer than the sequence's context.
  const std::vector<token_id> long_trunk(40, 7);
  std::vector<std::int32_t> long_parents(40);
  for (std::size_t i = 0; i < 40; ++i) long_parents[i] = static_cast<std::int32_t>(i) - 1;
  const specdec::sequence_append too_long{.sequence = 1, .tokens = long_trunk, .rows = 1, .parents = long_parents};
  CHECK_THROWS_WITH(seq.forward(std::span(&too_long, 1), row), Contains("per sequence"));
  // A tree and another append of the same sequence in one forward.
  const std::vector<std::int32_t> two_leaves{-1, 0, 0, 1, 2};
  const specdec::sequence_append ok{.sequence = 1, .tokens = tokens, .rows = 1, .parents = two_leaves};
  const specdec::sequence_append twice[] = {ok, {.sequence = 1, .tokens = std::span(tokens).first(1), .rows = 1}};
  std::vector<float> two_rows(2 * V);
  CHECK_THROWS_WITH(seq.forward(twice, two_rows), Contains("only append"));
  CHECK(seq.length(1) == 0);
  untouched();

  // An uncommitted tree: no further append, no commit of a set that is not a path, no partial rollback.
  seq.forward(std::span(&ok, 1), row);
  CHECK(seq.length(1) == 5);
  CHECK_THROWS_WITH(seq.forward(std::span(&ok, 1), row), Contains("only after commit_tree"));
  const std::vector<std::int32_t> not_a_path{0, 1};  // offsets within the 4 nodes below the root: siblings
  CHECK_THROWS_WITH(seq.commit_tree(1, 4, not_a_path), Contains("not a root-to-node path"));
  CHECK_THROWS_WITH(seq.commit_tree(1, 6, std::vector<std::int32_t>{0}), Contains("not a root-to-node path"));
  CHECK_THROWS_WITH(seq.rollback(1, 2), Contains("dropped whole"));
  CHECK_THROWS_WITH(seq.commit_tree(2, 1, std::vector<std::int32_t>{}), Contains("no uncommitted tree"));
  // Still committable afterwards: keep node 1 (offset 0) and its child, node 3 (offset 2).
  seq.commit_tree(1, 4, std::vector<std::int32_t>{0, 2});
  CHECK(seq.length(1) == 3);
  const std::vector<token_id> next{99};
  const specdec::sequence_append after{.sequence = 1, .tokens = next, .rows = 1};
  seq.forward(std::span(&after, 1), row);
  CHECK(t::relative_difference(row, t::fresh_logits(m, {10, 11, 13, 99})) < tolerance);
  untouched();
}

TEST_CASE("greedy suffix-tree drafting verified as trees on llama.cpp gives llama.cpp's greedy tokens", "[llama_cpp]") {
  const auto& m = t::model("target");
  constexpr std::size_t n = 64;
  std::vector<std::vector<token_id>> prompts, reference;
  for (const auto& p : t::prompts()) {
    // A repeated prompt gives the suffix tree something to match.
    prompts.push_back(t::lc::tokenize(m, p + " " + p + " " + p));
    reference.push_back(t::llama_greedy(m, prompts.back(), n));
  }
  for (const auto& rule : {specdec::tree_acceptance{specdec::greedy}, specdec::tree_acceptance{specdec::target_only}}) {
    const auto count = static_cast<std::uint32_t>(prompts.size());
    t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = count, .threads = 1, .tree_paths = 64});
    t::lc::sequence_model target(ctx);
    specdec::no_sequence_model none(m.vocab_size());
    specdec::batch_decoder decoder(specdec::exec::seq, target, none, specdec::strict);
    for (const auto& p : prompts) {
      specdec::request_options r;
      r.prompt = p;
      r.gamma = 6;
      r.max_new_tokens = n;
      r.target_params.temperature = 0.0;
      r.acceptance = rule;
      r.drafter = specdec::suffix_stage({.max_depth = 16, .max_spec = 6, .factor = 3.0, .tree = true});
      decoder.add(std::move(r));
    }
    const specdec::decode_stats total = run_and_compare(decoder, reference);
    CHECK(total.drafted > 0);  // trees were drafted and verified
    CHECK(target.free_tree_paths() == 64);
  }
}

TEST_CASE("greedy draft-model trees on llama.cpp (dynamic and static, KV-cached draft lanes) give llama.cpp's greedy tokens",
          "[llama_cpp]") {
  const auto& m = t::model("target");
  const auto& d = t::model("draft-noise-0.2");
  constexpr std::size_t n = 48;
  std::vector<std::vector<token_id>> prompts, reference;
  for (const auto& p : t::prompts()) {
    prompts.push_back(t::lc::tokenize(m, p));
    reference.push_back(t::llama_greedy(m, prompts.back(), n));
  }
  using view = specdec::prefix_cached_model<t::lc::sequence_model>;
  for (const bool dynamic : {true, false}) {
    INFO((dynamic ? "dynamic" : "static") << " tree");
    const auto count = static_cast<std::uint32_t>(prompts.size());
    t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = count, .threads = 1, .tree_paths = 3 * 9});
    t::lc::context draft_ctx(d, {.context_per_sequence = 256, .sequences = 3 * count, .threads = 1});
    t::lc::sequence_model target(ctx), draft(draft_ctx);
    specdec::no_sequence_model none(m.vocab_size());
    specdec::batch_decoder decoder(specdec::exec::seq, target, none, specdec::strict);
    std::vector<std::unique_ptr<view>> views;
    std::vector<std::unique_ptr<specdec::dynamic_tree_drafter<view>>> dynamics;
    std::vector<std::unique_ptr<specdec::static_tree_drafter<view>>> statics;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      views.push_back(std::make_unique<view>(draft, 3, 3 * i));
      specdec::request_options r;
      r.prompt = prompts[i];
      r.gamma = 3;
      r.max_new_tokens = n;
      r.target_params.temperature = 0.0;
      r.acceptance = specdec::tree_acceptance{specdec::greedy};
      if (dynamic) {
        dynamics.push_back(std::make_unique<specdec::dynamic_tree_drafter<view>>(
            *views.back(), specdec::dynamic_tree_params{.depth = 2, .top_k = 3, .total_tokens = 9}));
        r.drafter = specdec::tree_drafter_stage(*dynamics.back());
      } else {
        statics.push_back(
            std::make_unique<specdec::static_tree_drafter<view>>(*views.back(), specdec::tree_shape::full({3, 2, 1})));
        r.drafter = specdec::tree_drafter_stage(*statics.back());
      }
      decoder.add(std::move(r));
    }
    const specdec::decode_stats total = run_and_compare(decoder, reference);
    CHECK(total.accepted > 0);
    std::size_t reused = 0;
    for (const auto& v : views) reused += v->stats().reused_positions;
    CHECK(reused > 0);  // the draft's lanes read earlier positions from their KV cache
  }
}
