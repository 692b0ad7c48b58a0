// Fuzz harness: token trees (core/tree.hpp `tree_layout::from_parents`, `from_sibling_lists`,
// `from_paths`, from valid trees with arbitrary corruptions or from raw arrays) and their
// verification (acceptance/tree.hpp `verify_tree`, `verify_tree_from_logits`) for every tree rule on
// seq and simd.
//
// Invariants: no crash or sanitizer report; a malformed tree, bad shapes or bad parameters throw
// specdec::error, nothing else throws, and a well-formed input builds; a built layout is a forest of
// well-formed trees (and the tree it was built from); every output is an accepted path of real
// parent-child links whose tokens are emitted, then one correction token of positive probability
// when valid (tests/acceptance/tree_bad_input.cpp); simd gives seq's outputs; a request's output does
// not depend on its batch; from logits equals `verify_tree` on the rows the same policy warps, with
// every target sample (sample-and-match's at each node, the other rules' bonus at a leaf) redrawn by
// the policy's `sample_logits` (docs/reference/sampling-contract.md, verification from logits); a
// chain-shaped tree gives the chain verifier's outputs (acceptance/tree.hpp, multi_candidate.hpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/sampling/with_policy.hpp"
#if SPECDEC_ENABLE_SIMD
#include "specdec/backend/simd/warp.hpp"
#include "specdec/exec/simd.hpp"
#endif

#include "chain_case.hpp"
#include "fuzz_input.hpp"

namespace {

using namespace specdec_fuzz;
using specdec::no_node;
using specdec::tree_layout;
using ids = std::vector<std::int32_t>;

enum class build_mode { parents, sibling_lists, paths };

// One request's tree as the arrays a constructor takes, and the tree they describe when intact.
struct tree_arrays {
  std::int32_t num_nodes = 1;
  ids parents;                    // the intended tree (valid when !corrupt)
  ids built_parents;              // what from_parents gets (== parents unless corrupt)
  ids first_child, next_sibling;  // from_sibling_lists
  std::int32_t num_paths = 0;     // from_paths: rows of `width`
  ids paths;
  bool corrupt = false;
};

// An arbitrary id for a corrupted entry.
std::int32_t odd_id(byte_reader& in, std::int32_t n) {
  const std::array<std::int32_t, 8> odd{
      no_node,      n, n + 1, -2, 0, std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min(),
      1'000'000'000};
  const std::uint8_t b = in.byte();
  return b < 0x80 ? in.in_range<std::int32_t>(-1, n) : odd[b % odd.size()];
}

tree_arrays read_tree(byte_reader& in, build_mode mode, std::size_t width_extra) {
  tree_arrays t;
  const std::uint8_t size_byte = in.byte();
  t.num_nodes = size_byte >= 0xFC ? static_cast<std::int32_t>(size_byte) - 0xFD : 1 + size_byte % 16;  // -1, 0 or 1..16
  const std::int32_t n = std::max(t.num_nodes, 1);
  t.parents.assign(static_cast<std::size_t>(n), no_node);
  for (std::int32_t i = 1; i < n; ++i) t.parents[static_cast<std::size_t>(i)] = in.in_range<std::int32_t>(0, i - 1);
  t.built_parents = t.parents;
  if (t.num_nodes < 1) t.corrupt = true;
  // Corruptions: a few entries of the arrays the constructor reads set to arbitrary ids.
  const int pokes = in.byte() >= 0xE0 ? 1 + in.byte() % 3 : 0;
  if (mode == build_mode::parents) {
    for (int k = 0; k < pokes; ++k) t.built_parents[in.in_range<std::size_t>(0, static_cast<std::size_t>(n - 1))] = odd_id(in, n);
  } else if (mode == build_mode::sibling_lists) {
    t.first_child.assign(static_cast<std::size_t>(n), no_node);
    t.next_sibling.assign(static_cast<std::size_t>(n), no_node);
    const bool reversed = in.flag();  // siblings in descending id order instead of ascending
    for (std::int32_t i = reversed ? 1 : n - 1; reversed ? i < n : i >= 1; i += reversed ? 1 : -1) {
      auto& head = t.first_child[static_cast<std::size_t>(t.parents[static_cast<std::size_t>(i)])];
      t.next_sibling[static_cast<std::size_t>(i)] = head;
      head = i;
    }
    for (int k = 0; k < pokes; ++k) {
      auto& arr = in.flag() ? t.first_child : t.next_sibling;
      arr[in.in_range<std::size_t>(0, static_cast<std::size_t>(n - 1))] = odd_id(in, n);
    }
  } else {
    std::vector<bool> has_child(static_cast<std::size_t>(n), false);
    std::size_t depth = 0;
    for (std::int32_t i = 1; i < n; ++i) has_child[static_cast<std::size_t>(t.parents[static_cast<std::size_t>(i)])] = true;
    std::vector<ids> rows;
    for (std::int32_t leaf = 0; leaf < n; ++leaf) {
      if (has_child[static_cast<std::size_t>(leaf)] || (leaf == 0 && n > 1)) continue;
      ids path;
      for (std::int32_t v = leaf; v != no_node; v = t.parents[static_cast<std::size_t>(v)]) path.insert(path.begin(), v);
      depth = std::max(depth, path.size());
      rows.push_back(path);
      if (in.byte() >= 0xF0) rows.push_back(ids{no_node});  // an unused row
      if (in.byte() >= 0xF0) rows.push_back(path);          // a duplicated path
    }
    const std::size_t width = depth + width_extra;
    t.num_paths = static_cast<std::int32_t>(rows.size());
    for (auto& r : rows) {
      r.resize(width, no_node);
      t.paths.insert(t.paths.end(), r.begin(), r.end());
    }
    for (int k = 0; k < pokes && !t.paths.empty(); ++k) t.paths[in.in_range<std::size_t>(0, t.paths.size() - 1)] = odd_id(in, n);
  }
  t.corrupt = t.corrupt || pokes > 0;
  return t;
}

// Builds the layout of `trees` with the constructor of `mode`; false if it threw specdec::error.
bool build(build_mode mode, const std::vector<tree_arrays>& trees, std::size_t width, tree_layout& out) {
  ids num_nodes, parents, first_child, next_sibling, num_paths, paths;
  for (const auto& t : trees) {
    num_nodes.push_back(t.num_nodes);
    parents.insert(parents.end(), t.built_parents.begin(), t.built_parents.end());
    first_child.insert(first_child.end(), t.first_child.begin(), t.first_child.end());
    next_sibling.insert(next_sibling.end(), t.next_sibling.begin(), t.next_sibling.end());
    num_paths.push_back(t.num_paths);
    paths.insert(paths.end(), t.paths.begin(), t.paths.end());
  }
  try {
    if (mode == build_mode::parents)
      out = tree_layout::from_parents(num_nodes, parents);
    else if (mode == build_mode::sibling_lists)
      out = tree_layout::from_sibling_lists(num_nodes, first_child, next_sibling);
    else
      out = tree_layout::from_paths(num_nodes, num_paths, width, paths);
  } catch (const specdec::error&) {
    return false;
  }
  return true;
}

// A layout is a forest of well-formed trees: parents earlier, depths consistent, child lists that
// partition the nodes and agree with the parents.
void check_layout(const tree_layout& l, const std::vector<tree_arrays>& trees) {
  FUZZ_CHECK(l.batch_size() == trees.size());
  std::size_t rows = 0, deepest = 0;
  for (std::size_t b = 0; b < l.batch_size(); ++b) {
    const std::size_t n = l.num_nodes(b);
    FUZZ_CHECK(static_cast<std::int32_t>(n) == trees[b].num_nodes && l.node_row(b, 0) == rows);
    rows += n;
    FUZZ_CHECK(l.parent(b, 0) == no_node && l.depth(b, 0) == 0 && l.next_sibling(b, 0) == no_node);
    std::vector<int> reached(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0) {
        const std::int32_t parent = l.parent(b, i);
        FUZZ_CHECK(parent >= 0 && static_cast<std::size_t>(parent) < i);
        FUZZ_CHECK(l.depth(b, i) == l.depth(b, static_cast<std::size_t>(parent)) + 1);
        deepest = std::max(deepest, static_cast<std::size_t>(l.depth(b, i)));
      }
      std::size_t steps = 0;
      for (std::int32_t c = l.first_child(b, i); c != no_node; c = l.next_sibling(b, static_cast<std::size_t>(c))) {
        FUZZ_CHECK(++steps < n && c > 0 && static_cast<std::size_t>(c) < n);
        FUZZ_CHECK(l.parent(b, static_cast<std::size_t>(c)) == static_cast<std::int32_t>(i));
        ++reached[static_cast<std::size_t>(c)];
      }
      FUZZ_CHECK(l.num_children(b, i) == steps);
    }
    for (std::size_t i = 1; i < n; ++i) FUZZ_CHECK(reached[i] == 1);
  }
  FUZZ_CHECK(l.num_rows() == rows && l.max_depth() == deepest);
}

// The rules, decoded; fn(rule) is called with the concrete type.
template <class Fn>
void with_tree_rule(byte_reader& in, Fn&& fn) {
  switch (in.byte() % 7) {
    case 0: fn(specdec::strict); break;
    case 1: fn(specdec::recursive_rejection); break;
    case 2: fn(specdec::k_seq); break;
    case 3: fn(specdec::target_only); break;
    case 4: fn(specdec::greedy); break;
    case 5: fn(specdec::sample_and_match); break;
    default: {
      fn(read_typical_rule(in));
      break;
    }
  }
}

// A tree batch that owns its buffers.
template <class T>
struct tree_case {
  std::size_t V = 1;
  build_mode mode = build_mode::parents;
  std::size_t width = 0;  // from_paths
  std::vector<tree_arrays> trees;
  tree_layout layout;
  std::vector<token_id> tokens;
  std::vector<T> q, p;  // q may be empty
  std::vector<specdec::random::request_stream> streams;
  std::vector<specdec::warp_params> params;

  specdec::tree_batch<T> batch() const { return {layout, V, tokens, q, p}; }
  specdec::tree_batch<T> batch(std::span<const T> target_rows) const { return {layout, V, tokens, q, target_rows}; }
  std::size_t out_width() const { return layout.max_depth() + 1; }
  //! Request b alone, built the same way.
  tree_case single(std::size_t b) const {
    tree_case c;
    c.V = V;
    c.mode = mode;
    c.width = width;
    c.trees = {trees[b]};
    FUZZ_CHECK(build(mode, c.trees, width, c.layout));
    const std::size_t from = layout.node_row(b, 0), n = layout.num_nodes(b);
    c.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(from), tokens.begin() + static_cast<std::ptrdiff_t>(from + n));
    if (!q.empty())
      c.q.assign(q.begin() + static_cast<std::ptrdiff_t>(from * V), q.begin() + static_cast<std::ptrdiff_t>((from + n) * V));
    c.p.assign(p.begin() + static_cast<std::ptrdiff_t>(from * V), p.begin() + static_cast<std::ptrdiff_t>((from + n) * V));
    c.streams = {streams[b]};
    if (!params.empty()) c.params = {params[b]};
    return c;
  }
};

struct tree_out {
  std::size_t stride = 1;
  std::vector<token_id> tokens;
  ids path, accepted;
  std::vector<verify_status> status;
  tree_out(std::size_t batch_size, std::size_t width)
      : stride(width),
        tokens(batch_size * width, -99),
        path(batch_size * width, -99),
        accepted(batch_size, -99),
        status(batch_size, static_cast<verify_status>(0xE0)) {}
  specdec::tree_outputs view() { return {tokens, path, accepted, status}; }
  bool operator==(const tree_out&) const = default;
};

// The documented shape requirements of `verify_tree` (acceptance/tree.hpp, "\throws"), written with
// divisions so that no product wraps around: the call throws specdec::error exactly when one fails.
template <class T>
bool tree_shapes_ok(const specdec::tree_batch<T>& b, bool reads_q, std::size_t streams, const specdec::tree_outputs& o) {
  const std::size_t B = b.layout.batch_size(), V = b.vocab_size, rows = b.layout.num_rows(), width = b.layout.max_depth() + 1;
  const auto holds = [&](std::size_t size, std::size_t n) { return V > 0 && size % V == 0 && size / V == n; };
  return V > 0 && b.tokens.size() == rows && holds(b.target_rows.size(), rows) &&
         (!(reads_q || !b.draft_rows.empty()) || holds(b.draft_rows.size(), rows)) && streams == B &&
         o.tokens.size() == B * width && o.path.size() == B * width && o.num_accepted.size() == B && o.status.size() == B;
}

// Sometimes (about 1 input in 16) breaks one shape of a call: a wrong V (among them powers of two
// whose products with the row count wrap around to 0, with empty rows), a token or row missing, a
// stream missing, outputs of the wrong size. Returns whether it did.
template <class T>
bool apply_tree_fault(byte_reader& in, specdec::tree_batch<T>& b, std::span<const specdec::random::request_stream>& streams,
                      specdec::tree_outputs& o) {
  const std::uint8_t kind = in.byte();
  if (kind < 0xF0) return false;
  constexpr std::size_t top = std::size_t{1} << 63;
  const auto shorter = [](auto span) { return span.first(span.size() - (span.empty() ? 0 : 1)); };
  switch (kind % 6) {
    case 0: {
      const std::array<std::size_t, 6> sizes{b.vocab_size + 1, 0, top, top >> 1, std::numeric_limits<std::size_t>::max(),
                                             top >> 2};
      b.vocab_size = in.pick(sizes);
      if (b.vocab_size >= (std::size_t{1} << 32)) b.target_rows = b.draft_rows = {};
      break;
    }
    case 1: b.tokens = shorter(b.tokens); break;
    case 2: b.target_rows = shorter(b.target_rows); break;
    case 3: b.draft_rows = in.flag() ? std::span<const T>() : shorter(b.draft_rows); break;
    case 4: streams = shorter(streams); break;
    default: o.path = shorter(o.path); break;
  }
  return true;
}

// Runs the verification the case asks for (from probabilities, or from logits with its parameters).
template <class Policy, class Rule, class T>
bool run_tree(const Policy& policy, const Rule& rule, const tree_case<T>& c, bool from_logits,
              const specdec::verify_options& options, tree_out& out) {
  try {
    if (from_logits)
      specdec::verify_tree_from_logits(policy, rule, c.batch(), c.params, c.streams, out.view(), options);
    else
      specdec::verify_tree(policy, rule, c.batch(), c.streams, out.view(), options);
  } catch (const specdec::error&) {
    return false;
  }
  return true;
}

// The invariants of every request's output; `p_rows` are the target rows as probabilities (the
// warped rows from logits).
template <class Rule, class T>
void check_tree_outputs(const tree_case<T>& c, const tree_out& o, std::span<const T> p_rows, bool check_normalisation) {
  constexpr specdec::tree_method method = specdec::tree_method_of<Rule>::value;
  const auto& l = c.layout;
  const std::size_t V = c.V;
  for (std::size_t b = 0; b < l.batch_size(); ++b) {
    const auto tokens = std::span<const token_id>(o.tokens).subspan(b * o.stride, o.stride);
    const auto path = std::span<const std::int32_t>(o.path).subspan(b * o.stride, o.stride);
    const verify_status s = o.status[b];
    const std::int32_t k = o.accepted[b];
    const std::size_t n = l.num_nodes(b);
    for (const token_id t : tokens) FUZZ_CHECK(t == specdec::no_token || specdec::in_vocabulary(t, V));
    bool bad_ids = false;
    for (std::size_t i = 1; i < n; ++i) bad_ids = bad_ids || !specdec::in_vocabulary(c.tokens[l.node_row(b, i)], V);
    if (bad_ids) {
      FUZZ_CHECK(s == verify_status::bad_draft_token && k == 0);
      for (std::size_t j = 0; j < o.stride; ++j) FUZZ_CHECK(tokens[j] == specdec::no_token && path[j] == no_node);
      continue;
    }
    FUZZ_CHECK((static_cast<std::uint8_t>(s) & 0xE8u) == 0);  // no bad_draft_token, no undefined bit
    FUZZ_CHECK(k >= 0 && static_cast<std::size_t>(k) < o.stride);
    const auto accepted = static_cast<std::size_t>(k);
    const bool valid = specdec::is_valid(s);
    FUZZ_CHECK(path[0] == 0);
    for (std::size_t j = 1; j <= accepted; ++j) {
      FUZZ_CHECK(path[j] > 0 && static_cast<std::size_t>(path[j]) < n);
      FUZZ_CHECK(l.parent(b, static_cast<std::size_t>(path[j])) == path[j - 1]);
      FUZZ_CHECK(tokens[j - 1] == c.tokens[l.node_row(b, static_cast<std::size_t>(path[j]))]);
    }
    for (std::size_t j = accepted + 1; j < o.stride; ++j) FUZZ_CHECK(path[j] == no_node);
    if (valid) FUZZ_CHECK(specdec::in_vocabulary(tokens[accepted], V));
    for (std::size_t j = accepted + (valid ? 1 : 0); j < o.stride; ++j) FUZZ_CHECK(tokens[j] == specdec::no_token);
    if (has_flag(s, verify_status::not_normalised)) FUZZ_CHECK(check_normalisation);
    if (has_flag(s, verify_status::draft_prob_zero)) FUZZ_CHECK(specdec::tree_reads_draft<Rule>);
    if (has_flag(s, verify_status::residual_fallback))
      FUZZ_CHECK(specdec::tree_reads_draft<Rule> || method == specdec::tree_method::target_only);
    // Every emitted token has p > 0 in the row of the node it was chosen at.
    const auto p = [&](std::size_t j) { return p_rows.subspan(l.node_row(b, static_cast<std::size_t>(path[j])) * V, V); };
    for (std::size_t j = 0; j < accepted + (valid ? 1 : 0); ++j)
      FUZZ_CHECK(static_cast<double>(p(j)[static_cast<std::size_t>(tokens[j])]) > 0.0);
    if constexpr (method == specdec::tree_method::greedy || method == specdec::tree_method::sample_and_match) {
      if (valid) {  // the correction is the target's choice, which no child of the last node holds
        const auto last = static_cast<std::size_t>(path[accepted]);
        for (std::int32_t ch = l.first_child(b, last); ch != no_node; ch = l.next_sibling(b, static_cast<std::size_t>(ch)))
          FUZZ_CHECK(c.tokens[l.node_row(b, static_cast<std::size_t>(ch))] != tokens[accepted]);
        if constexpr (method == specdec::tree_method::greedy)
          for (std::size_t j = 0; j <= accepted; ++j) FUZZ_CHECK(tokens[j] == static_cast<token_id>(first_argmax(p(j))));
      }
    }
  }
}

// Warps every target row of the case as `Policy` does; false if any is unusable.
template <class Policy, class T>
bool warp_targets(const Policy&, const tree_case<T>& c, std::vector<T>& rows, std::vector<specdec::row_status>& statuses) {
  rows.assign(c.p.size(), T(0));
  bool all = true;
  for (std::size_t b = 0; b < c.layout.batch_size(); ++b)
    for (std::size_t i = 0; i < c.layout.num_nodes(b); ++i) {
      const std::size_t at = c.layout.node_row(b, i) * c.V;
      const auto from = std::span<const T>(c.p).subspan(at, c.V);
      const auto to = std::span<T>(rows).subspan(at, c.V);
      specdec::row_status s{};
#if SPECDEC_ENABLE_SIMD
      if constexpr (specdec::exec::backend_of<Policy> == specdec::exec::backend::simd)
        s = specdec::backend::simd::warp_logits<specdec::exec::simd_arch_t<Policy>>(from, to, c.params[b]);
      else
#endif
        s = specdec::warp_logits(from, to, c.params[b]);
      FUZZ_CHECK(s != specdec::row_status::ok || is_distribution(std::span<const T>(to)));
      statuses.push_back(s);
      all = all && s == specdec::row_status::ok;
    }
  return all;
}

// Whether the walk draws node i's token from the target alone when it stops there or passes it:
// sample-and-match at every node, the rules with a bonus at a leaf (greedy and typical read rows).
template <class Rule>
bool is_target_sample(const specdec::tree_layout& l, std::size_t b, std::size_t node) {
  constexpr specdec::tree_method method = specdec::tree_method_of<Rule>::value;
  if constexpr (method == specdec::tree_method::greedy || method == specdec::tree_method::typical) return false;
  return method == specdec::tree_method::sample_and_match || l.first_child(b, node) == no_node;
}

// `verify_tree`'s outputs on the warped rows (`direct`) with every target sample redrawn from the
// logits by `Policy`: what tree verification from logits returns when every row is usable.
template <class Rule, class Policy, class T>
void redraw_target_samples(const Policy& policy, const tree_case<T>& c, tree_out& direct) {
  using specdec::random::purpose;
  constexpr specdec::tree_method method = specdec::tree_method_of<Rule>::value;
  const auto& l = c.layout;
  for (std::size_t b = 0; b < l.batch_size(); ++b) {
    if (!specdec::is_valid(direct.status[b])) continue;
    const auto draw = [&](std::size_t node, purpose what) {
      const auto logits = std::span<const T>(c.p).subspan(l.node_row(b, node) * c.V, c.V);
      const specdec::sample_result y = specdec::sample_logits(
          policy, logits, c.params[b], c.streams[b].open(static_cast<std::uint32_t>(node), what).uniform());
      FUZZ_CHECK(y.status == specdec::row_status::ok);  // (every row warps to a usable row here)
      return y.token;
    };
    const auto tokens = std::span<token_id>(direct.tokens).subspan(b * direct.stride, direct.stride);
    const auto path = std::span<std::int32_t>(direct.path).subspan(b * direct.stride, direct.stride);
    if constexpr (method == specdec::tree_method::sample_and_match) {
      std::fill(tokens.begin(), tokens.end(), specdec::no_token);
      std::fill(path.begin(), path.end(), no_node);
      path[0] = 0;
      std::size_t node = 0, depth = 0;
      for (;;) {
        const token_id y = draw(node, purpose::target_sample);
        tokens[depth] = y;
        std::int32_t next = no_node;
        for (std::int32_t ch = l.first_child(b, node); ch != no_node; ch = l.next_sibling(b, static_cast<std::size_t>(ch)))
          if (c.tokens[l.node_row(b, static_cast<std::size_t>(ch))] == y) {
            next = ch;
            break;
          }
        if (next == no_node) break;
        node = static_cast<std::size_t>(next);
        path[++depth] = next;
      }
      direct.accepted[b] = static_cast<std::int32_t>(depth);
    } else {
      const auto depth = static_cast<std::size_t>(direct.accepted[b]);
      const auto last = static_cast<std::size_t>(path[depth]);
      if (is_target_sample<Rule>(l, b, last)) tokens[depth] = draw(last, purpose::resample);
    }
  }
}

// One policy's run and the checks that need only it; returns the outputs and the warp statuses.
template <class Policy, class Rule, class T>
std::pair<tree_out, std::vector<specdec::row_status>> check_policy(const Policy& policy, const Rule& rule, const tree_case<T>& c,
                                                                   bool from_logits, const specdec::verify_options& options) {
  tree_out out(c.layout.batch_size(), c.out_width());
  FUZZ_CHECK(run_tree(policy, rule, c, from_logits, options, out));
  std::vector<specdec::row_status> statuses;
  if (!from_logits) {
    check_tree_outputs<Rule>(c, out, std::span<const T>(c.p), options.check_normalisation);
    return {out, statuses};
  }
  std::vector<T> warped;
  const bool all_usable = warp_targets(policy, c, warped, statuses);
  // Samples from logits are draws from the kept weights, whose support is the warped row's.
  const std::vector<T>& emitted_from = warped;
  check_tree_outputs<Rule>(c, out, std::span<const T>(emitted_from), options.check_normalisation);
  if (all_usable) {  // "same tokens as verify_tree on the warped rows", target samples redrawn
    tree_out direct(c.layout.batch_size(), c.out_width());
    specdec::verify_tree(policy, rule, c.batch(warped), c.streams, direct.view(), options);
    redraw_target_samples<Rule>(policy, c, direct);
    FUZZ_CHECK(direct == out);
  }
  return {out, statuses};
}

// A chain-shaped tree gives the chain verifier's outputs: strict, greedy, sample-and-match and typical
// as themselves, recursive rejection and K-SEQ as strict (one child per node).
template <class Rule, class T>
void compare_with_chain(const Rule& rule, const tree_case<T>& c, const tree_out& o, const specdec::verify_options& options) {
  constexpr specdec::tree_method method = specdec::tree_method_of<Rule>::value;
  if constexpr (method == specdec::tree_method::target_only) {
    return;
  } else {
    const auto chain_rule = [&] {
      if constexpr (method == specdec::tree_method::recursive_rejection || method == specdec::tree_method::k_seq)
        return specdec::strict;
      else
        return rule;
    }();
    for (std::size_t b = 0; b < c.layout.batch_size(); ++b) {
      const std::size_t n = c.layout.num_nodes(b), from = c.layout.node_row(b, 0);
      bool chain = true;
      for (std::size_t i = 1; i < n; ++i) chain = chain && c.layout.parent(b, i) == static_cast<std::int32_t>(i - 1);
      if (!chain) continue;
      const auto drafts = std::span<const token_id>(c.tokens).subspan(from + 1, n - 1);
      const auto q = c.q.empty() ? std::span<const T>() : std::span<const T>(c.q).subspan(from * c.V, (n - 1) * c.V);
      const auto p = std::span<const T>(c.p).subspan(from * c.V, n * c.V);
      const auto r = specdec::verify_chain(specdec::exec::seq, chain_rule, drafts, q, p, c.V, c.streams[b], options);
      std::vector<token_id> emitted;
      for (std::size_t j = 0; j < o.stride; ++j)
        if (o.tokens[b * o.stride + j] != specdec::no_token) emitted.push_back(o.tokens[b * o.stride + j]);
      FUZZ_CHECK(r.tokens == emitted && r.num_accepted == o.accepted[b] && r.status == o.status[b]);
    }
  }
}

template <class T>
void fuzz_tree(byte_reader& in) {
  tree_case<T> c;
  const std::uint8_t head = in.byte();
  c.mode = static_cast<build_mode>(head % 3);
  const bool from_logits = (head & 4u) != 0, large_vocab = (head >> 4) == 0xF;
  c.V = vocab_size(in, large_vocab);
  const std::size_t B = in.in_range<std::size_t>(0, large_vocab ? 2 : 6);
  const std::size_t width_extra = in.in_range<std::size_t>(0, 2);
  bool corrupt = false;
  for (std::size_t b = 0; b < B; ++b) {
    c.trees.push_back(read_tree(in, c.mode, width_extra));
    corrupt = corrupt || c.trees.back().corrupt;
  }
  // from_paths takes one width for the batch: pad every request's rows to the widest.
  if (c.mode == build_mode::paths) {
    for (const auto& t : c.trees)
      if (t.num_paths > 0) c.width = std::max(c.width, t.paths.size() / static_cast<std::size_t>(t.num_paths));
    for (auto& t : c.trees) {
      if (t.num_paths == 0) continue;
      const std::size_t w = t.paths.size() / static_cast<std::size_t>(t.num_paths);
      ids wide;
      for (std::size_t r = 0; r < static_cast<std::size_t>(t.num_paths); ++r) {
        wide.insert(wide.end(), t.paths.begin() + static_cast<std::ptrdiff_t>(r * w),
                    t.paths.begin() + static_cast<std::ptrdiff_t>((r + 1) * w));
        wide.insert(wide.end(), c.width - w, no_node);
      }
      t.paths = wide;
    }
  }
  const bool built = build(c.mode, c.trees, c.width, c.layout);
  if (!corrupt) FUZZ_CHECK(built);
  if (!built) return;
  check_layout(c.layout, c.trees);
  if (!corrupt)
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < c.layout.num_nodes(b); ++i) FUZZ_CHECK(c.layout.parent(b, i) == c.trees[b].parents[i]);
  // The same trees from parent arrays give the same layout (siblings in id order unless the lists said otherwise).
  if (c.mode != build_mode::parents) {
    std::vector<tree_arrays> plain = c.trees;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < c.layout.num_nodes(b); ++i) plain[b].built_parents[i] = c.layout.parent(b, i);
    tree_layout again;
    FUZZ_CHECK(build(build_mode::parents, plain, 0, again));
    FUZZ_CHECK(again.max_depth() == c.layout.max_depth());
  }

  // Rows: a draft row and a target row per node (logits for the target when from_logits).
  const std::size_t rows = c.layout.num_rows(), V = c.V;
  for (std::size_t r = 0; r < rows; ++r) c.tokens.push_back(token(in, V));
  const bool with_q = !in.flag();
  std::vector<T> q_row(V), p_row(V);
  for (std::size_t r = 0; r < rows; ++r) {
    fill_row<T>(in, q_row, row_style::probabilities);
    fill_row<T>(in, p_row, from_logits ? row_style::logits : row_style::probabilities, std::span<const T>(q_row));
    if (with_q) c.q.insert(c.q.end(), q_row.begin(), q_row.end());
    c.p.insert(c.p.end(), p_row.begin(), p_row.end());
  }
  const std::uint32_t seed = in.bits<std::uint32_t>();
  for (std::size_t b = 0; b < B; ++b) c.streams.push_back({seed, static_cast<std::uint32_t>(b), in.byte()});
  if (from_logits)
    for (std::size_t b = 0; b < B; ++b) c.params.push_back(warp_params(in, V));
  specdec::verify_options options;
  options.check_normalisation = in.flag();

  with_tree_rule(in, [&](const auto& rule) {
    using Rule = std::remove_cvref_t<decltype(rule)>;
    const bool args_ok = valid_rule(rule) && (with_q || rows == 0 || !specdec::tree_reads_draft<Rule>)&&std::all_of(
                                                 c.params.begin(), c.params.end(), valid_params);
    {  // a deliberately broken call throws exactly when a documented shape requirement fails
      tree_out out(B, c.out_width());
      specdec::tree_batch<T> batch = c.batch();
      std::span<const specdec::random::request_stream> streams(c.streams);
      specdec::tree_outputs view = out.view();
      if (apply_tree_fault(in, batch, streams, view)) {
        bool threw = false;
        try {
          specdec::verify_tree(specdec::exec::seq, rule, batch, streams, view, options);
        } catch (const specdec::error&) {
          threw = true;
        }
        FUZZ_CHECK(threw == !(tree_shapes_ok(batch, specdec::tree_reads_draft<Rule>, streams.size(), view) && valid_rule(rule)));
        return;
      }
    }
    tree_out seq(B, c.out_width());
    const bool ran = run_tree(specdec::exec::seq, rule, c, from_logits, options, seq);
    FUZZ_CHECK(ran == args_ok);  // shapes are right: only q missing or bad parameters may throw
    if (!ran) return;
    const auto [checked, seq_statuses] = check_policy(specdec::exec::seq, rule, c, from_logits, options);
    FUZZ_CHECK(checked == seq);

    for (std::size_t b = 0; b < B; ++b) {  // each request alone gives its row of the batch
      const tree_case<T> one = c.single(b);
      tree_out alone(1, one.out_width());
      FUZZ_CHECK(run_tree(specdec::exec::seq, rule, one, from_logits, options, alone));
      FUZZ_CHECK(alone.accepted[0] == seq.accepted[b] && alone.status[0] == seq.status[b]);
      for (std::size_t j = 0; j < seq.stride; ++j) {
        FUZZ_CHECK(seq.tokens[b * seq.stride + j] == (j < alone.stride ? alone.tokens[j] : specdec::no_token));
        FUZZ_CHECK(seq.path[b * seq.stride + j] == (j < alone.stride ? alone.path[j] : no_node));
      }
    }
    if (!from_logits) compare_with_chain(rule, c, seq, options);

#if SPECDEC_ENABLE_SIMD
    const auto [simd, simd_statuses] = check_policy(specdec::exec::simd, rule, c, from_logits, options);
    FUZZ_CHECK(simd_statuses == seq_statuses);
    // Warping and sampling from logits are seq's bit for bit; a normalisation check may differ for a
    // sum within rounding of the tolerance.
    const bool comparable =
        !(options.check_normalisation &&
          ((!from_logits && any_normalisation_ambiguous(std::span<const T>(c.p), V, options.normalisation_tolerance)) ||
           any_normalisation_ambiguous(std::span<const T>(c.q), V, options.normalisation_tolerance)));
    if (comparable) FUZZ_CHECK(simd == seq);
#endif
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  if (in.flag())
    fuzz_tree<float>(in);
  else
    fuzz_tree<double>(in);
  return 0;
}
