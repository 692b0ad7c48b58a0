//! \file backend/seq/verify_tree.hpp
//! \brief The sequential tree verifier: every tree rule (acceptance/multi_candidate.hpp) run with seq's
//! row kernels or any backend's (simd passes its `verify_kernels`, as for chains).
//!
//! Per request: the walk of backend/walks/tree.hpp (the one the cuda kernel runs), through
//! `tree_walk_ops` over the rows and the kernels `K`; typical acceptance, which finds every passing
//! path, has its own walk here (`verify_typical_tree`). Multi-step sampling's residual after j
//! rejected siblings is max(0, p - s_j q) (acceptance/multi_candidate.hpp, `scaled_draft_residual`):
//! each rejection costs one pass over (p, q) for the next mass, and nothing is written. Recursive
//! rejection's residual (q changes with every draw) is materialised in a thread-local row of doubles
//! by a scalar loop shared by every host backend. Every row draw and every mass follows the
//! determinism contract: seq and simd emit the same tokens.
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
#include "specdec/backend/walks/steps.hpp"
#include "specdec/backend/walks/tree.hpp"
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

//! One request's tree of a batch as the walk reads it (backend/walks/tree.hpp, `Tree`).
template <class T>
struct batch_request_tree {
  const tree_batch<T>& batch;
  std::size_t b;

  static std::size_t index(std::int32_t node) { return static_cast<std::size_t>(node); }
  std::int32_t num_nodes() const { return static_cast<std::int32_t>(batch.layout.num_nodes(b)); }
  std::int32_t first_child(std::int32_t node) const { return batch.layout.first_child(b, index(node)); }
  std::int32_t next_sibling(std::int32_t node) const { return batch.layout.next_sibling(b, index(node)); }
  std::int32_t parent(std::int32_t node) const { return batch.layout.parent(b, index(node)); }
  token_id token(std::int32_t node) const { return batch.token(b, index(node)); }
};

//! The rows of one request's tree as the walk reads them (backend/walks/tree.hpp, `Ops`): seq's row
//! checks and the row kernels `K`, on the rows of the node last checked. Recursive rejection's residual
//! is materialised in `tree_scratch::residual` by `carried_residual`, a scalar loop every backend shares.
template <class K, class T, class Rows>
class tree_walk_ops : public target_row_ops<K, T, Rows> {
  using base = target_row_ops<K, T, Rows>;
  using base::op_;
  using base::p_;
  using base::rows_;

 public:
  tree_walk_ops(Rows& rows, const verify_options& options, std::size_t vocab_size, tree_scratch& scratch)
      : base(rows, options, vocab_size), s_(scratch) {}

  verify_status check_draft(std::int32_t node) {
    q_ = rows_.draft(index(node));
    op_.checks().row(q_);
    return op_.take();
  }
  double target_at(std::int32_t, token_id x) const { return static_cast<double>(p_[index(x)]); }
  double draft_at(std::int32_t, token_id x) const { return static_cast<double>(q_[index(x)]); }
  bool draft_has_mass(std::int32_t) const { return K::has_mass(q_); }
  void stage_children(std::int32_t node) {
    s_.rejected.clear();  // the children's tokens, in sibling order
    for (std::int32_t c = rows_.batch.layout.first_child(rows_.b, index(node)); c != no_node;
         c = rows_.batch.layout.next_sibling(rows_.b, index(c)))
      s_.rejected.push_back(rows_.batch.token(rows_.b, index(c)));
    drawn_ = -1;
  }
  bool child_token_in(token_id x, std::int32_t j) const {
    const auto first = s_.rejected.begin();
    return std::find(first, first + j, x) != first + j;
  }
  double k_seq_rho(std::int32_t, std::int32_t k) const { return specdec::k_seq_rho(p_, q_, index(k)); }
  walks::row_draw<sample_result> strict_residual(std::int32_t, double u) const {
    return draw(K::sample_residual(p_, q_, strict, u));
  }
  double scaled_residual_mass(std::int32_t, double scale) const {
    const residual_result next = K::sample_residual(p_, q_, scaled_draft_residual{scale}, 0.0);
    return next.used_fallback ? 0.0 : next.sample.mass;
  }
  walks::row_draw<sample_result> scaled_residual(std::int32_t, double scale, double u) const {
    return draw(K::sample_residual(p_, q_, scaled_draft_residual{scale}, u));
  }
  //! p without the first k children's tokens, read in place.
  walks::row_draw<sample_result> sample_without_children(std::int32_t, std::int32_t k, double u) {
    s_.rejected.resize(index(k));
    std::sort(s_.rejected.begin(), s_.rejected.end());
    s_.rejected.erase(std::unique(s_.rejected.begin(), s_.rejected.end()), s_.rejected.end());
    return or_p(K::sample_masked(p_, std::span<const token_id>(s_.rejected), u), u);
  }
  double subtract(std::int32_t, double scale, std::int32_t j, bool materialised) {
    if (drawn_ < 0) {
      s_.drawn.assign(p_.size(), 0);
      drawn_ = 0;
    }
    for (; drawn_ < j; ++drawn_) s_.drawn[index(s_.rejected[index(drawn_)])] = 1;
    carried_residual<T> r{p_, s_.residual, 1.0, materialised};
    r.subtract(q_, scale, s_.drawn);
    return r.mass;
  }
  double residual_at(token_id x) const { return s_.residual[index(x)]; }
  walks::row_draw<sample_result> sample_residual_row(std::int32_t, double u) const {
    return or_p(K::sample_categorical(std::span<const double>(s_.residual), u), u);
  }

 private:
  template <class I>
  static std::size_t index(I i) {
    return static_cast<std::size_t>(i);
  }
  static walks::row_draw<sample_result> draw(const residual_result& r) { return {verify_status::ok, r.sample, r.used_fallback}; }
  //! A sample of a residual, else (no mass) of p with the fallback flag.
  walks::row_draw<sample_result> or_p(const sample_result& s, double u) const {
    if (s.status == row_status::no_mass) return {verify_status::ok, K::sample_categorical(p_, u), true};
    return {verify_status::ok, s, false};
  }

  tree_scratch& s_;
  std::span<const T> q_;     // the draft row of the node last checked (p_: its target row)
  std::int32_t drawn_ = -1;  // recursive rejection: how many children `s_.drawn` marks (-1: not reset)
};

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
    checks.emit(typical_emission<K>(rule, rows.target(best).values, threshold,
                                    walks::first_uniform(stream, static_cast<std::int64_t>(best), random::purpose::resample)),
                tokens[depth]);
  return static_cast<std::int32_t>(depth);
}

//! The walk of one request's tree. Returns the accepted count; writes tokens and path.
template <class K, TreeRule Rule, class T, class Rows>
std::int32_t verify_tree_one(const Rule& rule, const tree_batch<T>& batch, Rows& rows, std::size_t b,
                             const random::request_stream& stream, std::span<token_id> tokens, std::span<std::int32_t> path,
                             verify_status& status, const verify_options& options) {
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
    tree_walk_ops<K, T, Rows> ops(rows, options, V, s);
    const batch_request_tree<T> request{batch, b};
    const walks::tree_walk_result r = walks::walk_tree<method>(ops, request, V, stream);
    walks::write_tree_row(request, r, tokens.data(), path.data(), tokens.size());
    status |= r.status;
    return r.depth;
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
