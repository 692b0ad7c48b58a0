//! \file tests/backend/cuda_tree_cases.hpp
//! \brief Test support for the cuda tree and block verifiers (cuda_tree.cu on a GPU, cuda_tree_host.cu
//! without one): random tree batches of several shapes with spoiled requests, the seq oracle's outputs,
//! and a host replay of the kernels: the walks they run (`walk_tree`, `walk_block` and the chain walks
//! of backend/walks/) with host versions of their row operations built from seq's functions.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/backend/cuda/verify_block.cuh"
#include "specdec/backend/cuda/verify_tree.cuh"
#include "specdec/backend/walks/chain.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "support/batch_builder.hpp"

namespace cuda_tree_test {

using specdec::token_id;
using specdec::verify_status;
using specdec::random::philox_stream;
using specdec::random::request_stream;
namespace cd = specdec::backend::cuda::detail;

//! Shapes of the random trees.
enum class shape { random, chain, star, wide, root_only };
inline constexpr std::array<shape, 5> all_shapes{shape::random, shape::chain, shape::star, shape::wide, shape::root_only};

//! A batch of trees in host memory: per node a parent, a token, a draft row and a target row.
template <class T>
struct tree_case {
  std::size_t vocab = 0;
  std::vector<std::int32_t> num_nodes, parents;
  std::vector<token_id> tokens;
  std::vector<T> draft_rows, target_rows;
  std::vector<request_stream> streams;
  specdec::tree_layout layout;

  specdec::tree_batch<T> view() const { return {layout, vocab, tokens, draft_rows, target_rows}; }
  std::size_t width() const { return layout.max_depth() + 1; }
};

//! A tree verification's outputs in host memory (filled with garbage, so that unwritten entries show).
struct tree_result_rows {
  std::vector<token_id> tokens;
  std::vector<std::int32_t> path, accepted;
  std::vector<verify_status> status;
  tree_result_rows(std::size_t batch, std::size_t width)
      : tokens(batch * width, -99),
        path(batch * width, -99),
        accepted(batch, -99),
        status(batch, static_cast<verify_status>(0xFF)) {}
  specdec::tree_outputs view() { return {tokens, path, accepted, status}; }
  bool operator==(const tree_result_rows&) const = default;
};

//! A parent for node i of a tree of the given shape.
inline std::int32_t parent_for(philox_stream& s, shape sh, std::int32_t i) {
  switch (sh) {
    case shape::chain: return i - 1;
    case shape::star: return 0;
    case shape::wide: return (i - 1) / 3;  // ternary levels
    default:                               // leaning towards recent nodes, so that trees get deep
      return static_cast<std::int32_t>(static_cast<double>(i) * (1.0 - s.uniform() * s.uniform())) % i;
  }
}

//! A random probability row: usually Exp weights with zeros, sometimes one-hot (a residual or a
//! target-only remainder without mass, so that the fallbacks run).
template <class T>
std::vector<T> random_row(philox_stream& s, std::size_t V, double zeros) {
  if (s.uniform() < 0.08) {
    std::vector<T> row(V, T(0));
    row[static_cast<std::size_t>(s.uniform() * static_cast<double>(V)) % V] = T(1);
    return row;
  }
  return specdec_test::random_probability_row<T>(s, V, zeros);
}

//! Adds one request of `n` nodes: children's tokens drawn from the parent's q (sometimes copied from
//! a sibling: duplicates), target rows sometimes equal to q (a zero residual); with probability
//! `spoil_rate` one entry, row or token is spoiled.
template <class T>
void add_tree(tree_case<T>& c, philox_stream& s, shape sh, std::int32_t n, double spoil_rate, std::uint32_t id) {
  const std::size_t V = c.vocab, base = c.tokens.size();
  c.streams.push_back(request_stream{0x7C0DA, id, static_cast<std::uint32_t>(s.uniform() * 1000)});
  c.num_nodes.push_back(n);
  const double zeros = s.uniform() < 0.3 ? 0.6 : 0.05;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t parent = i == 0 ? -1 : parent_for(s, sh, i);
    c.parents.push_back(parent);
    auto q = random_row<T>(s, V, zeros);
    auto p = s.uniform() < 0.2 ? q : random_row<T>(s, V, zeros);
    if (i == 0) {
      c.tokens.push_back(static_cast<token_id>(V + 11));  // the root's token is never read
    } else if (i > 1 && s.uniform() < 0.1) {
      c.tokens.push_back(c.tokens[base + static_cast<std::size_t>(i - 1)]);  // a copy of the previous node's token
    } else {
      const std::size_t prow = (base + static_cast<std::size_t>(parent)) * V;
      const std::span<const T> pq(c.draft_rows.data() + prow, V);
      c.tokens.push_back(specdec::sample_categorical(pq, s.uniform()).token);
    }
    c.draft_rows.insert(c.draft_rows.end(), q.begin(), q.end());
    c.target_rows.insert(c.target_rows.end(), p.begin(), p.end());
  }
  if (s.uniform() < spoil_rate) {
    const std::size_t node = static_cast<std::size_t>(s.uniform() * static_cast<double>(n)) % static_cast<std::size_t>(n);
    const std::size_t row = (base + node) * V, at = static_cast<std::size_t>(s.uniform() * static_cast<double>(V)) % V;
    const auto fill = [&](std::vector<T>& rows, T value) {
      std::fill(rows.begin() + static_cast<std::ptrdiff_t>(row), rows.begin() + static_cast<std::ptrdiff_t>(row + V), value);
    };
    switch (static_cast<int>(s.uniform() * 8.0)) {
      case 0: c.target_rows[row + at] = std::numeric_limits<T>::quiet_NaN(); break;
      case 1: c.draft_rows[row + at] = std::numeric_limits<T>::quiet_NaN(); break;
      case 2: c.target_rows[row + at] = T(-0.25); break;
      case 3: c.target_rows[row + at] = std::numeric_limits<T>::infinity(); break;
      case 4: fill(c.draft_rows, T(0)); break;
      case 5: fill(c.target_rows, T(0)); break;
      case 6: c.target_rows[row + at] += T(0.5); break;  // not normalised
      default:
        if (node > 0) c.tokens[base + node] = s.uniform() < 0.5 ? static_cast<token_id>(V + 5) : token_id{-3};
        break;
    }
  }
}

//! A batch of `B` trees of shape `sh` with at most `max_nodes` nodes each.
template <class T>
tree_case<T> make_trees(philox_stream& s, std::size_t V, std::size_t B, shape sh, std::int32_t max_nodes, double spoil_rate) {
  tree_case<T> c;
  c.vocab = V;
  for (std::size_t b = 0; b < B; ++b) {
    const std::int32_t n = sh == shape::root_only ? 1 : 1 + static_cast<std::int32_t>(s.uniform() * max_nodes) % max_nodes;
    add_tree(c, s, sh, n, spoil_rate, static_cast<std::uint32_t>(b));
  }
  c.layout = specdec::tree_layout::from_parents(c.num_nodes, c.parents);
  return c;
}

//! Calls fn(rule, name) for every tree rule the cuda backend verifies.
template <class Fn>
void for_each_cuda_tree_rule(Fn&& fn) {
  fn(specdec::target_only, "target_only");
  fn(specdec::greedy, "greedy");
  fn(specdec::sample_and_match, "sample_and_match");
  fn(specdec::strict, "strict (multi-step)");
  fn(specdec::recursive_rejection, "recursive_rejection");
}

//! The seq oracle.
template <class Rule, class T>
tree_result_rows run_seq(const Rule& rule, const tree_case<T>& c, const specdec::verify_options& options = {}) {
  tree_result_rows o(c.layout.batch_size(), c.width());
  specdec::verify_tree(specdec::exec::seq, rule, c.view(), std::span<const request_stream>(c.streams), o.view(), options);
  return o;
}

// ---- host replay of the kernels' walks ------------------------------------------------------------

inline cd::located located_of(const specdec::sample_result& s) { return {s.token, s.status}; }

//! A residual row's pass 1 (the kernel's `block_tile_masses`): whether every weight was usable, and Z.
struct residual_pass {
  bool usable;
  double total;
};

//! Rules 1-3 of the contract on the host: whether every weight is usable, and Z (rule 4's order).
template <class Weight>
residual_pass contract_mass(std::size_t V, const Weight& weight) {
  bool usable = true;
  double total = 0.0;
  for (std::size_t t = 0; t < specdec::detail::tile_count(V); ++t) {
    std::array<double, specdec::sampling_lanes> lanes{};
    for (std::size_t v = t * specdec::sampling_tile; v < std::min(V, (t + 1) * specdec::sampling_tile); ++v) {
      const double w = weight(v);
      usable = usable && specdec::detail::usable_weight(w);
      lanes[v % specdec::sampling_lanes] += w;
    }
    total += specdec::detail::reduce_lanes(lanes);
  }
  return {usable, total};
}

//! The row operations both walks share, on request b's rows i (tree nodes or chain positions).
template <class Batch, class T>
struct host_row_ops {
  const Batch& batch;
  std::size_t b;
  specdec::verify_options options;

  std::span<const T> p(std::int32_t i) const { return batch.target_row(b, static_cast<std::size_t>(i)); }
  std::span<const T> q(std::int32_t i) const { return batch.draft_row(b, static_cast<std::size_t>(i)); }
  bool normalised(std::span<const T> row) const {
    double sum = 0.0;
    for (const T x : row) sum += static_cast<double>(x);
    return !options.check_normalisation || std::abs(sum - 1.0) <= options.normalisation_tolerance;
  }
  bool target_normalised(std::int32_t i) const { return normalised(p(i)); }
  bool draft_normalised(std::int32_t i) const { return normalised(q(i)); }
  double target_at(std::int32_t i, token_id x) const { return static_cast<double>(p(i)[static_cast<std::size_t>(x)]); }
  double draft_at(std::int32_t i, token_id x) const { return static_cast<double>(q(i)[static_cast<std::size_t>(x)]); }
  cd::located sample_row(std::int32_t i, double u) const { return located_of(specdec::sample_categorical(p(i), u)); }
  static constexpr verify_status flag_unless(bool ok, verify_status flag) { return ok ? verify_status::ok : flag; }
  cd::residual_draw sample_target(std::int32_t i, double u) const {
    return {flag_unless(target_normalised(i), verify_status::not_normalised), sample_row(i, u)};
  }
};

//! The row operations of `walk_tree` (verify_tree.cuh) done on the host with seq's functions.
template <class T>
struct host_tree_ops : host_row_ops<specdec::tree_batch<T>, T> {
  using host_row_ops<specdec::tree_batch<T>, T>::p;
  using host_row_ops<specdec::tree_batch<T>, T>::q;
  using host_row_ops<specdec::tree_batch<T>, T>::batch;
  using host_row_ops<specdec::tree_batch<T>, T>::b;
  using host_row_ops<specdec::tree_batch<T>, T>::flag_unless;
  std::vector<double> residual;

  verify_status check_target(std::int32_t node) const {
    return flag_unless(this->target_normalised(node), verify_status::not_normalised);
  }
  verify_status check_draft(std::int32_t node) const {
    return flag_unless(this->draft_normalised(node), verify_status::not_normalised);
  }
  std::vector<token_id> children;

  cd::greedy_row greedy(std::int32_t node) const {
    const bool usable = specdec::backend::seq::seq_kernels::greedy_usable(p(node));
    return {usable, usable ? static_cast<token_id>(specdec::argmax(p(node))) : specdec::no_token};
  }
  bool draft_has_mass(std::int32_t node) const { return specdec::backend::seq::seq_kernels::has_mass(q(node)); }
  void stage_children(std::int32_t node) {
    children.clear();
    for (std::int32_t c = batch.layout.first_child(b, static_cast<std::size_t>(node)); c != specdec::no_node;
         c = batch.layout.next_sibling(b, static_cast<std::size_t>(c)))
      children.push_back(batch.token(b, static_cast<std::size_t>(c)));
  }
  bool child_token_in(token_id x, std::int32_t j) const {
    return std::find(children.begin(), children.begin() + j, x) != children.begin() + j;
  }
  cd::residual_draw or_p(const specdec::sample_result& s, std::int32_t node, double u) const {
    if (s.status == specdec::row_status::no_mass)
      return {verify_status::ok, located_of(specdec::sample_categorical(p(node), u)), true};
    return {verify_status::ok, located_of(s), false};
  }
  cd::residual_draw strict_residual(std::int32_t node, double u) const {
    const auto r = specdec::sample_residual(
        p(node), q(node), [](double pv, double qv) { return specdec::strict.accepted_mass(pv, qv); }, u);
    return {verify_status::ok, located_of(r.sample), r.used_fallback};
  }
  specdec::residual_result scaled(std::int32_t node, double scale, double u) const {
    const specdec::scaled_draft_residual rule{scale};
    return specdec::sample_residual(
        p(node), q(node), [&](double pv, double qv) { return rule.accepted_mass(pv, qv); }, u);
  }
  double scaled_residual_mass(std::int32_t node, double scale) const {
    const auto r = scaled(node, scale, 0.0);
    return r.used_fallback ? 0.0 : r.sample.mass;
  }
  cd::residual_draw scaled_residual(std::int32_t node, double scale, double u) const {
    const auto r = scaled(node, scale, u);
    return {verify_status::ok, located_of(r.sample), r.used_fallback};
  }
  cd::residual_draw sample_without_children(std::int32_t node, std::int32_t k, double u) const {
    std::vector<token_id> masked(children.begin(), children.begin() + k);
    std::sort(masked.begin(), masked.end());
    masked.erase(std::unique(masked.begin(), masked.end()), masked.end());
    return or_p(specdec::sample_masked(p(node), std::span<const token_id>(masked), u), node, u);
  }
  double subtract(std::int32_t node, double scale, std::int32_t drawn, bool materialised) {
    const std::size_t V = batch.vocab_size;
    residual.resize(V);
    std::array<double, specdec::sampling_lanes> lanes{};
    for (std::size_t v = 0; v < V; ++v) {
      const bool hit = child_token_in(static_cast<token_id>(v), drawn);
      const double qv = hit ? 0.0 : static_cast<double>(q(node)[v]);
      const double rv = materialised ? residual[v] : static_cast<double>(p(node)[v]);
      const double next = rv - scale * qv;
      residual[v] = specdec::detail::usable_weight(rv) & specdec::detail::usable_weight(qv)
                        ? (next > 0.0 ? next : 0.0)
                        : std::numeric_limits<double>::quiet_NaN();
      lanes[v % specdec::sampling_lanes] += residual[v];
    }
    return specdec::detail::reduce_lanes(lanes);
  }
  double residual_at(token_id x) const { return residual[static_cast<std::size_t>(x)]; }
  cd::residual_draw sample_residual_row(std::int32_t node, double u) const {
    return or_p(specdec::sample_categorical(std::span<const double>(residual), u), node, u);
  }
};

//! The outputs of the kernel's walk, replayed on the host.
template <specdec::tree_method Method, class T>
tree_result_rows replay_tree(const tree_case<T>& c, const specdec::verify_options& options = {}) {
  const std::size_t width = c.width();
  tree_result_rows o(c.layout.batch_size(), width);
  const auto arrays = specdec::backend::cuda::tree_layout_arrays::of(c.layout);
  const auto view = arrays.view();
  const specdec::tree_batch<T> batch = c.view();
  for (std::size_t b = 0; b < c.layout.batch_size(); ++b) {
    host_tree_ops<T> ops{{batch, b, options}, {}, {}};
    const cd::request_tree tree{view, b, c.tokens.data()};
    const cd::tree_walk_result r = cd::walk_tree<Method>(ops, tree, c.vocab, c.streams[b]);
    cd::write_tree_row(tree, r, o.tokens.data() + b * width, o.path.data() + b * width, width);
    o.accepted[b] = r.depth;
    o.status[b] = r.status;
  }
  return o;
}

//! The row operations of `walk_block` (backend/walks/block.hpp) as the kernel's `block_request_ops`
//! does them (the mass in pass 1, then the token located), on the host with seq's functions.
template <class T>
struct host_block_ops : host_row_ops<specdec::chain_batch<T>, T> {
  using base = host_row_ops<specdec::chain_batch<T>, T>;
  using base::batch;
  using base::p;
  using base::q;
  using base::flag_unless;

  specdec::backend::walks::row_scalar target_at(std::int32_t i, token_id x) const {
    return {flag_unless(this->target_normalised(i), verify_status::not_normalised), base::target_at(i, x)};
  }
  specdec::backend::walks::row_scalar draft_at(std::int32_t i, token_id x) const {
    return {flag_unless(this->draft_normalised(i), verify_status::not_normalised), base::draft_at(i, x)};
  }
  verify_status draft_has_mass(std::int32_t i) const {
    return flag_unless(specdec::backend::seq::seq_kernels::has_mass(q(i)), verify_status::invalid_row);
  }
  specdec::backend::walks::residual_mass residual_mass(std::int32_t i, double inverse, double) const {
    if (!this->target_normalised(i) || !this->draft_normalised(i)) return {verify_status::not_normalised};
    const specdec::block_residual rule{inverse};
    const residual_pass m = contract_mass(batch.vocab_size, [&](std::size_t v) {
      return specdec::detail::residual_weight(static_cast<double>(p(i)[v]), static_cast<double>(q(i)[v]),
                                              [&](double pv, double qv) { return rule.accepted_mass(pv, qv); });
    });
    return {verify_status::ok, m.total, specdec::backend::walks::residual_falls_back(m.usable, m.total)};
  }
  specdec::backend::walks::row_draw<cd::located> draw_residual(std::int32_t i, double inverse, double u) const {
    const specdec::block_residual rule{inverse};
    const auto r = specdec::sample_residual(
        p(i), q(i), [&](double pv, double qv) { return rule.accepted_mass(pv, qv); }, u);
    return {verify_status::ok, located_of(r.sample), r.used_fallback};
  }
  void barrier() const {}
};

//! Block verification through the kernel's walk, replayed on the host.
template <class T>
specdec_test::owned_outputs replay_block(const specdec_test::owned_batch<T>& owned, const specdec::verify_options& options = {}) {
  specdec_test::owned_outputs o(owned);
  const specdec::chain_batch<T> batch = owned.view();
  std::vector<double> weights;
  for (std::size_t b = 0; b < batch.layout.batch_size(); ++b) {
    const auto n = static_cast<std::int32_t>(batch.layout.num_drafts(b));
    weights.assign(static_cast<std::size_t>(n) + 1, -1.0);
    host_block_ops<T> ops{{batch, b, options}};
    const token_id* drafts = batch.draft_tokens.data() + batch.layout.draft_row(b, 0);
    const cd::block_walk_result r = cd::walk_block(ops, drafts, n, batch.vocab_size, owned.streams[b], weights.data(), true);
    for (std::size_t j = 0; j < o.stride; ++j) o.tokens[b * o.stride + j] = cd::block_output_token(drafts, r, j);
    o.num_accepted[b] = r.accepted;
    o.status[b] = r.status;
  }
  return o;
}

//! The row operations of the chain walks (backend/walks/chain.hpp) as the chain kernels' `plan_ops` and
//! `target_walk_ops` do them (verify.cuh) on rows given as probabilities: every row is usable, its sum
//! checked when asked; the row jobs' argmax (`locate_targets`: greedy_usable, else not_finite) and
//! samples come from the whole row.
template <class T>
struct host_chain_ops : host_block_ops<T> {
  using base = host_block_ops<T>;
  using base::p;
  using base::flag_unless;

  verify_status check_target(std::int32_t i) const {
    return flag_unless(this->target_normalised(i), verify_status::not_normalised);
  }
  verify_status check_bonus(std::int32_t n) const { return check_target(n); }
  specdec::backend::walks::greedy_row greedy(std::int32_t i) const {
    const bool usable = specdec::backend::seq::seq_kernels::greedy_usable(p(i));
    return {usable, usable ? static_cast<token_id>(specdec::argmax(p(i))) : specdec::no_token};
  }
};

//! Chain verification through the cuda kernels' walks, replayed on the host: `plan_rejection` then
//! `locate_rejection`'s draw (the bonus from p; q without mass unusable; the residual, else p), or
//! `walk_targets`.
template <class Rule, class T>
specdec_test::owned_outputs replay_chain(const Rule& rule, const specdec_test::owned_batch<T>& owned,
                                         const specdec::verify_options& options = {}) {
  namespace walks = specdec::backend::walks;
  specdec_test::owned_outputs o(owned);
  const specdec::chain_batch<T> batch = owned.view();
  const std::size_t V = batch.vocab_size;
  for (std::size_t b = 0; b < batch.layout.batch_size(); ++b) {
    const auto n = static_cast<std::int32_t>(batch.layout.num_drafts(b));
    const token_id* drafts = batch.draft_tokens.data() + batch.layout.draft_row(b, 0);
    host_chain_ops<T> ops{{{batch, b, options}}};
    walks::chain_walk_result w;
    if constexpr (Rule::family == specdec::rule_family::rejection) {
      w = walks::walk_rejection(rule, ops, drafts, n, V, owned.streams[b]);
      if (w.kind != walks::chain_stop::none) {
        const double u = walks::first_uniform(owned.streams[b], w.stop, specdec::random::purpose::resample);
        specdec::sample_result y;
        if (w.kind == walks::chain_stop::bonus) {
          y = specdec::sample_categorical(ops.p(w.stop), u);
        } else if (w.kind == walks::chain_stop::residual_q_zero && !specdec::backend::seq::seq_kernels::has_mass(ops.q(w.stop))) {
          y = {specdec::no_token, specdec::row_status::not_finite, 0.0};
        } else {
          const auto r = specdec::sample_residual(
              ops.p(w.stop), ops.q(w.stop), [&](double pv, double qv) { return rule.accepted_mass(pv, qv); }, u);
          if (r.used_fallback) w.status |= verify_status::residual_fallback;
          y = r.sample;
        }
        walks::emit_sample(y, V, w.emitted, w.status);
      }
    } else {
      w = walks::walk_target_choice<Rule::family>(ops, drafts, n, V, owned.streams[b]);
    }
    for (std::size_t j = 0; j < o.stride; ++j)
      o.tokens[b * o.stride + j] = walks::chain_output_token(drafts, w.stop, w.emitted, j);
    o.num_accepted[b] = w.stop;
    o.status[b] = w.status;
  }
  return o;
}

}  // namespace cuda_tree_test
