//! \file backend/seq/verify_tree.hpp
//! \brief The sequential tree verifier: the reference walk of every tree rule
//! (acceptance/multi_candidate.hpp), run with seq's row kernels or any backend's (simd passes its
//! `verify_kernels`, as for chains).
//!
//! Per request: the ids of all nodes are checked, then the walk starts at the root; at each node the
//! rule accepts a child (descend) or emits one token and stops; a leaf emits the bonus from its row.
//! Randomness of node n (local id): the sibling tests read the stream (n, accept) in sibling order,
//! the emitted token (n, resample), sample-and-match's target sample (n, target_sample). On a chain
//! (node id = depth) these are the chain verifier's addresses, so a chain tree yields its tokens.
//! Multi-step sampling's residual after j rejected siblings is max(0, p - s_j q) (acceptance/
//! multi_candidate.hpp, `scaled_draft_residual`): each rejection costs one pass over (p, q) for the
//! next mass, and nothing is written. Recursive rejection's residual (q changes with every draw) is
//! materialised in a thread-local row of doubles by a scalar loop shared by every backend. Every row
//! draw and every mass follows the determinism contract: seq and simd emit the same tokens.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/backend/seq/verify.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Where a tree verification writes. Request b's rows hold max_depth + 1 entries:
//! `tokens[b * (max_depth + 1) + j]` the accepted tokens then the correction or bonus token, and
//! `path[...]` the node ids of the accepted path, root first (path[0] = 0); -1 pads both.
struct tree_outputs {
  std::span<token_id> tokens;            //!< [B][max_depth + 1]
  std::span<std::int32_t> path;          //!< [B][max_depth + 1]
  std::span<std::int32_t> num_accepted;  //!< [B] drafted tokens accepted (the path's length - 1)
  std::span<verify_status> status;       //!< [B]
};

}  // namespace specdec

namespace specdec::backend::seq {
namespace detail {

//! One node's decision: the accepted child, or `no_node` and the emitted token.
struct node_decision {
  std::int32_t child = no_node;
  token_id emitted = no_token;
};

//! Thread-local rows and lists a walk reuses from call to call (no allocation once warm).
struct tree_scratch {
  std::vector<double> residual;      //!< r, materialised once a residual carries over siblings
  std::vector<unsigned char> drawn;  //!< recursive rejection: tokens already drawn at this node
  std::vector<token_id> rejected;    //!< tokens rejected at this node, in order
  std::vector<double> score, threshold;
  std::vector<unsigned char> reached;

  static tree_scratch& local() {
    thread_local tree_scratch s;
    return s;
  }
};

//! Rows of a tree batch of probabilities, read in place.
template <class T>
struct tree_probability_rows {
  const tree_batch<T>& batch;
  std::size_t b;
  row_ref<T> target(std::size_t node) { return {batch.target_row(b, node), true}; }
  std::span<const T> draft(std::size_t node) { return batch.draft_row(b, node); }
};

//! Target rows warped from logits on demand (only the rows the walk reads; the last one is kept, so
//! reading one node's row twice warps it once), draft rows as given (probabilities).
template <class T, class Kernels>
struct tree_warped_rows {
  const tree_batch<T>& batch;
  std::size_t b;
  warp_params params;
  std::vector<T>& scratch;
  logit_row_scratch<T>& sample_scratch;               // the target samples' (`sample_target`), apart from `scratch`'s cached row
  std::size_t warped = static_cast<std::size_t>(-1);  // the node whose row `scratch` holds
  bool usable = false;

  row_ref<T> target(std::size_t node) {
    if (node != warped) {
      scratch.resize(batch.vocab_size);
      usable = Kernels::warp_logits(batch.target_row(b, node), std::span<T>(scratch), params) == row_status::ok;
      warped = node;
    }
    return {std::span<const T>(scratch), usable};
  }
  std::span<const T> draft(std::size_t node) { return batch.draft_row(b, node); }
  //! A sample of the node's target row with the uniform u, drawn from the logits as the backend's
  //! `sample_logits` draws it (the sampling contract, verification from logits).
  sample_result sample_target(std::size_t node, double u) {
    return Kernels::sample_logits(batch.target_row(b, node), params, u, sample_scratch);
  }
};

//! The residual r carried over the siblings of a node: p itself until the first update, then the
//! unnormalised row `scratch.residual` of mass `mass` (recursive rejection; the other rules keep
//! only the mass here).
template <class T>
struct carried_residual {
  std::span<const T> p;
  std::vector<double>& row;
  double mass = 1.0;  // p is taken as normalised, as every chain rule takes it
  bool materialised = false;

  double at(std::size_t v) const { return materialised ? row[v] : static_cast<double>(p[v]); }
  //! r <- max(0, r - scale q'), q' = q except 0 where `drawn` is set; an unusable entry
  //! becomes NaN, so that the final draw reports the row. Then the new mass.
  //! The mass is summed in 32 interleaved lanes (the order of sampling/categorical.hpp's contract, so
  //! the loop vectorises); every backend runs this same code.
  void subtract(std::span<const T> q, double scale, const std::vector<unsigned char>& drawn) {
    const std::size_t V = p.size();
    row.resize(V);
    std::array<double, sampling_lanes> lanes{};
    const auto update = [&](std::size_t v) {
      const double rv = at(v), qv = drawn[v] ? 0.0 : static_cast<double>(q[v]);
      const double next = rv - scale * qv;
      // An unusable entry (NaN, infinite, negative) makes the weight NaN, so that the final draw
      // reports the row, as `detail::residual_weight` does for a single sibling.
      const bool r_usable = specdec::detail::usable_weight(rv), q_usable = specdec::detail::usable_weight(qv);
      return (r_usable & q_usable) ? (next > 0.0 ? next : 0.0) : std::numeric_limits<double>::quiet_NaN();
    };
    std::size_t v = 0;
    for (; v + sampling_lanes <= V; v += sampling_lanes)
      for (std::size_t j = 0; j < sampling_lanes; ++j) lanes[j] += row[v + j] = update(v + j);
    for (std::size_t j = 0; v + j < V; ++j) lanes[j] += row[v + j] = update(v + j);
    materialised = true;
    mass = specdec::detail::reduce_lanes(lanes);
  }
};

//! The child of `node` whose token is `token` (the target's choice), or, when none is, that choice emitted.
template <class T>
node_decision child_with_token(const tree_batch<T>& batch, std::size_t b, std::size_t node, token_id token) {
  for (std::int32_t c = batch.layout.first_child(b, node); c != no_node;
       c = batch.layout.next_sibling(b, static_cast<std::size_t>(c)))
    if (batch.token(b, static_cast<std::size_t>(c)) == token) return {c, no_token};
  return {no_node, token};
}

//! The coin-based rules at a node with children (acceptance/multi_candidate.hpp's table).
template <class K, TreeRule Rule, class T, class Rows>
node_decision decide_by_coins(const tree_batch<T>& batch, Rows& rows, std::size_t b, std::size_t node, std::span<const T> p,
                              const random::request_stream& stream, request_checks<K, T>& checks, tree_scratch& s) {
  using random::purpose;
  constexpr tree_method method = tree_method_of<Rule>::value;
  const tree_layout& tree = batch.layout;
  const auto pos = static_cast<std::uint32_t>(node);
  std::span<const T> q;
  if constexpr (tree_reads_draft<Rule>) {
    q = rows.draft(node);
    if (!checks.row(q)) return {};
  }
  const std::size_t k = tree.num_children(b, node);
  const double rho = method == tree_method::k_seq ? k_seq_rho(p, q, k) : 1.0;
  carried_residual<T> r{p, s.residual};  // recursive rejection's r; the others use its mass only
  double scale = 0.0;                    // multi-step sampling: r = max(0, p - scale q) (scaled_draft_residual)
  double remaining_draft = 1.0;          // recursive rejection: the draft mass not yet drawn, Q_j
  s.rejected.clear();
  if constexpr (method == tree_method::recursive_rejection) s.drawn.assign(p.size(), 0);
  random::philox_stream coins = stream.open(pos, purpose::accept);

  for (std::int32_t c = tree.first_child(b, node); c != no_node; c = tree.next_sibling(b, static_cast<std::size_t>(c))) {
    const auto x = static_cast<std::size_t>(batch.token(b, static_cast<std::size_t>(c)));
    const double u = coins.uniform();
    const double px = static_cast<double>(p[x]);
    if (!usable_scalar(px)) {
      checks.status |= verify_status::invalid_row;
      return {};
    }
    if constexpr (method == tree_method::target_only) {
      // q_j = delta_c: r(c) is p(c) until c is rejected, then 0; r's mass drops by what it held.
      const bool seen = std::find(s.rejected.begin(), s.rejected.end(), static_cast<token_id>(x)) != s.rejected.end();
      const double rx = seen ? 0.0 : px;
      if (u * r.mass < rx) return {c, no_token};
      if (!seen) {
        s.rejected.push_back(static_cast<token_id>(x));
        r.mass -= rx;
      }
      continue;
    } else {
      const double qx = static_cast<double>(q[x]);
      if (!usable_scalar(qx)) {
        checks.status |= verify_status::invalid_row;
        return {};
      }
      const bool was_drawn = method == tree_method::recursive_rejection && s.drawn[x] != 0;
      const double q_now = was_drawn || !(remaining_draft > 0.0) ? 0.0 : qx;  // q_j(c) Q_j
      if (q_now == 0.0) {
        checks.status |= verify_status::draft_prob_zero;
        if (!K::has_mass(q)) {  // as for chains: a q without mass is unusable, not a residual of p
          checks.status |= verify_status::invalid_row;
          return {};
        }
      } else {
        double rx = r.at(x);  // r(c), the weight the residual sampler gives c
        if constexpr (method == tree_method::multi_step)
          rx = scale == 0.0 ? px : px - scaled_draft_residual{scale}.accepted_mass(px, qx);
        if (method == tree_method::k_seq ? u * rho * qx < px : u * r.mass * q_now < rx * remaining_draft) return {c, no_token};
      }
      if constexpr (method == tree_method::k_seq) continue;  // K-SEQ's residual is taken once, below
      if (k == 1) break;                                     // a single child: strict's residual, read in one pass below
      if constexpr (method == tree_method::multi_step) {
        // s_{j+1} = s_j + M_j; M_{j+1} is the residual sampler's mass (0 when it has none).
        scale += r.mass;
        const residual_result next = K::sample_residual(p, q, scaled_draft_residual{scale}, 0.0);
        r.mass = next.used_fallback ? 0.0 : next.sample.mass;
      } else {
        if (remaining_draft > 0.0) r.subtract(q, r.mass / remaining_draft, s.drawn);
        if (!was_drawn) remaining_draft -= qx;
        s.drawn[x] = 1;
      }
    }
  }

  // Every child was rejected: one token from the last residual.
  const double u = stream.open(pos, purpose::resample).uniform();
  node_decision d;
  residual_result res;
  if constexpr (method == tree_method::k_seq) {
    res = K::sample_residual(p, q, scaled_draft_residual{rho}, u);
  } else if (method == tree_method::multi_step && scale > 0.0) {
    res = K::sample_residual(p, q, scaled_draft_residual{scale}, u);
  } else if (method != tree_method::target_only && !r.materialised) {
    res = K::sample_residual(p, q, strict, u);
  } else {
    if constexpr (method == tree_method::target_only) {  // p without the rejected siblings, read in place
      std::sort(s.rejected.begin(), s.rejected.end());
      res.sample = K::sample_masked(p, std::span<const token_id>(s.rejected), u);
    } else {
      res.sample = K::sample_categorical(std::span<const double>(s.residual), u);
    }
    if (res.sample.status == row_status::no_mass) {
      res.sample = K::sample_categorical(p, u);
      res.used_fallback = true;
    }
  }
  if (res.used_fallback) checks.status |= verify_status::residual_fallback;
  checks.emit(res.sample, d.emitted);
  return d;
}

//! Typical acceptance on a tree (acceptance/typical.hpp): every node whose path passes is found in
//! node order (parents first); the deepest wins, then the larger sum of log p, then the lower id.
//! A reached node whose row is unusable flags `invalid_row` and is not expanded; the deepest path is
//! still emitted, without a correction token (on a chain: the drafts accepted before the bad row,
//! as the chain walk emits).
template <class K, class T, class Rows>
std::int32_t verify_typical_tree(const typical_rule& rule, const tree_batch<T>& batch, Rows& rows, std::size_t b,
                                 const random::request_stream& stream, std::span<token_id> tokens, std::span<std::int32_t> path,
                                 request_checks<K, T>& checks, tree_scratch& s) {
  const tree_layout& tree = batch.layout;
  const std::size_t n = tree.num_nodes(b);
  constexpr double unusable = std::numeric_limits<double>::infinity();  // no p(x) passes it
  s.reached.assign(n, 0);
  s.score.assign(n, 0.0);
  s.threshold.assign(n, std::nan(""));
  const auto threshold_of = [&](std::size_t node) {
    if (std::isnan(s.threshold[node])) {
      const row_ref<T> p = rows.target(node);
      const bool checked = checks.row(p);  // flags an unusable or (when checked) unnormalised row itself
      const double t = checked ? rule.threshold(p.values) : std::nan("");
      // invalid_row only for a row the threshold cannot use, not for one the normalisation check
      // refused (the chain walk's flags; found by tests/fuzz/verify_tree.cpp)
      if (checked && std::isnan(t)) checks.status |= verify_status::invalid_row;
      s.threshold[node] = std::isnan(t) ? unusable : t;
    }
    return s.threshold[node];
  };
  s.reached[0] = 1;
  std::size_t best = 0;
  for (std::size_t i = 1; i < n; ++i) {
    const auto parent = static_cast<std::size_t>(tree.parent(b, i));
    if (!s.reached[parent]) continue;
    const double threshold = threshold_of(parent);
    if (threshold == unusable) continue;
    const double px = static_cast<double>(rows.target(parent).values[static_cast<std::size_t>(batch.token(b, i))]);
    if (!(px > threshold)) continue;
    s.reached[i] = 1;
    s.score[i] = s.score[parent] + std::log(px);
    if (tree.depth(b, i) > tree.depth(b, best) || (tree.depth(b, i) == tree.depth(b, best) && s.score[i] > s.score[best]))
      best = i;
  }
  const auto depth = static_cast<std::size_t>(tree.depth(b, best));
  for (std::size_t node = best, j = depth; j > 0; node = static_cast<std::size_t>(tree.parent(b, node)), --j) {
    path[j] = static_cast<std::int32_t>(node);
    tokens[j - 1] = batch.token(b, node);
  }
  const double threshold = threshold_of(best);
  if (is_valid(checks.status))
    checks.emit(typical_emission<K>(rule, rows.target(best).values, threshold, stream, static_cast<std::uint32_t>(best)),
                tokens[depth]);
  return static_cast<std::int32_t>(depth);
}

//! The walk of one request's tree. Returns the accepted count; writes tokens and path.
template <class K, TreeRule Rule, class T, class Rows>
std::int32_t verify_tree_one(const Rule& rule, const tree_batch<T>& batch, Rows& rows, std::size_t b,
                             const random::request_stream& stream, std::span<token_id> tokens, std::span<std::int32_t> path,
                             verify_status& status, const verify_options& options) {
  using random::purpose;
  constexpr tree_method method = tree_method_of<Rule>::value;
  const tree_layout& tree = batch.layout;
  const std::size_t n = tree.num_nodes(b), V = batch.vocab_size;
  std::fill(tokens.begin(), tokens.end(), no_token);
  std::fill(path.begin(), path.end(), no_node);
  request_checks<K, T> checks{status, options, V};
  if (!checks.ids(batch.tokens.subspan(tree.node_row(b, 1), n - 1))) return 0;
  path[0] = 0;
  tree_scratch& s = tree_scratch::local();
  if constexpr (method == tree_method::typical) {
    return verify_typical_tree<K>(rule, batch, rows, b, stream, tokens, path, checks, s);
  } else {
    std::size_t node = 0, depth = 0;
    for (;;) {
      const bool leaf = tree.first_child(b, node) == no_node;
      node_decision d;
      if constexpr (method == tree_method::greedy) {  // the argmax: the matching child, or emitted
        const row_ref<T> target = rows.target(node);
        if (!checks.row(target)) return static_cast<std::int32_t>(depth);
        if (!K::greedy_usable(target.values)) {
          status |= verify_status::invalid_row;
          return static_cast<std::int32_t>(depth);
        }
        const auto best = static_cast<token_id>(K::argmax(target.values));
        d = leaf ? node_decision{no_node, best} : child_with_token(batch, b, node, best);
      } else {
        constexpr bool samples_target = method == tree_method::sample_and_match;
        if (samples_target || leaf) {
          // A target sample: sample-and-match's at every node (the matching child, or emitted); the
          // other rules' bonus at a leaf, drawn as the chain rule draws it.
          const auto what = samples_target ? purpose::target_sample : purpose::resample;
          const std::optional<sample_result> y =
              target_sample(rows, checks, node, stream.open(static_cast<std::uint32_t>(node), what).uniform());
          if (!y) return static_cast<std::int32_t>(depth);
          checks.emit(*y, d.emitted);
          if (!leaf && d.emitted != no_token) d = child_with_token(batch, b, node, d.emitted);
        } else if constexpr (!samples_target) {
          const row_ref<T> target = rows.target(node);
          if (!checks.row(target)) return static_cast<std::int32_t>(depth);
          d = decide_by_coins<K, Rule>(batch, rows, b, node, target.values, stream, checks, s);
        }
      }
      if (!is_valid(status)) return static_cast<std::int32_t>(depth);
      if (d.child == no_node) {
        tokens[depth] = d.emitted;
        return static_cast<std::int32_t>(depth);
      }
      node = static_cast<std::size_t>(d.child);
      tokens[depth] = batch.token(b, node);
      path[++depth] = d.child;
    }
  }
}

}  // namespace detail
}  // namespace specdec::backend::seq

namespace specdec::backend::seq {
namespace detail {
template <TreeRule Rule, class T>
void check_tree_shapes(const tree_batch<T>& batch, std::span<const random::request_stream> streams, const tree_outputs& out) {
  const std::size_t B = batch.layout.batch_size(), V = batch.vocab_size, rows = batch.layout.num_rows();
  const std::size_t width = batch.layout.max_depth() + 1;
  SPECDEC_EXPECTS(V > 0, "vocab_size must be > 0");
  SPECDEC_EXPECTS(batch.tokens.size() == rows, "tokens: one per node is required");
  SPECDEC_EXPECTS(specdec::detail::holds_rows(batch.target_rows.size(), rows, V),
                  "target rows: size is not num_rows * vocab_size (one row per node)");
  if (tree_reads_draft<Rule> || !batch.draft_rows.empty())
    SPECDEC_EXPECTS(specdec::detail::holds_rows(batch.draft_rows.size(), rows, V),
                    "draft rows: size is not num_rows * vocab_size (one row per node)");
  SPECDEC_EXPECTS(streams.size() == B, "one request_stream per request is required");
  SPECDEC_EXPECTS(out.tokens.size() == B * width && out.path.size() == B * width,
                  "output tokens and path must be B * (max_depth + 1)");
  SPECDEC_EXPECTS(out.num_accepted.size() == B && out.status.size() == B, "num_accepted and status need one entry per request");
}

//! Runs the walk for every request with the rows `make_rows(b)` provides.
template <class K, TreeRule Rule, class T, class MakeRows>
void verify_each_tree(const Rule& rule, const tree_batch<T>& batch, std::span<const random::request_stream> streams,
                      const tree_outputs& out, const verify_options& options, MakeRows&& make_rows) {
  check_tree_shapes<Rule>(batch, streams, out);
  if constexpr (tree_method_of<Rule>::value == tree_method::typical) rule.validate();
  const std::size_t width = batch.layout.max_depth() + 1;
  for (std::size_t b = 0; b < batch.layout.batch_size(); ++b) {
    auto rows = make_rows(b);
    out.status[b] = verify_status::ok;
    out.num_accepted[b] = verify_tree_one<K>(rule, batch, rows, b, streams[b], out.tokens.subspan(b * width, width),
                                             out.path.subspan(b * width, width), out.status[b], options);
  }
}

//! Tree verification from probabilities with the row kernels `K`.
template <class K, TreeRule Rule, class T>
void verify_tree_with(const Rule& rule, const tree_batch<T>& batch, std::span<const random::request_stream> streams,
                      const tree_outputs& out, const verify_options& options) {
  verify_each_tree<K>(rule, batch, streams, out, options, [&](std::size_t b) { return tree_probability_rows<T>{batch, b}; });
}

//! Tree verification from target logits (warped on demand with each request's parameters) and draft
//! probabilities, with the row kernels `K`.
template <class K, TreeRule Rule, class T>
void verify_tree_from_logits_with(const Rule& rule, const tree_batch<T>& batch, std::span<const warp_params> target_params,
                                  std::span<const random::request_stream> streams, const tree_outputs& out,
                                  const verify_options& options) {
  SPECDEC_EXPECTS(target_params.size() == batch.layout.batch_size(), "one warp_params per request is required");
  for (const auto& w : target_params) validate(w);
  thread_local std::vector<T> scratch;  // kept from call to call: no allocation once V long
  thread_local logit_row_scratch<T> sample_scratch;
  verify_each_tree<K>(rule, batch, streams, out, options, [&](std::size_t b) {
    return tree_warped_rows<T, K>{batch, b, target_params[b], scratch, sample_scratch};
  });
}
}  // namespace detail

//! Sequential tree verification.
template <TreeRule Rule, class T>
void verify_tree(const Rule& rule, const tree_batch<T>& batch, std::span<const random::request_stream> streams,
                 const tree_outputs& out, const verify_options& options) {
  detail::verify_tree_with<seq_kernels>(rule, batch, streams, out, options);
}

//! Sequential tree verification from target logits.
template <TreeRule Rule, class T>
void verify_tree_from_logits(const Rule& rule, const tree_batch<T>& batch, std::span<const warp_params> target_params,
                             std::span<const random::request_stream> streams, const tree_outputs& out,
                             const verify_options& options) {
  detail::verify_tree_from_logits_with<seq_kernels>(rule, batch, target_params, streams, out, options);
}

}  // namespace specdec::backend::seq
