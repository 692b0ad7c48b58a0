//! \file backend/cuda/verify_tree.cuh
//! \brief Tree verification on the GPU (`specdec::verify_tree(exec::cuda, ...)` lands here): the walk
//! of backend/seq/verify_tree.hpp, one thread block per request, with the tokens, paths, counts and
//! statuses of seq for the same streams, bit for bit.
//!
//! Rules: `target_only`, `greedy`, `sample_and_match` (the rules EAGLE and SGLang use on trees),
//! `strict` (SpecInfer multi-step sampling) and `recursive_rejection`. `k_seq` (its rho* is a
//! bisection over a row-sized list) and `typical_rule` (an entropy per row) have no kernel: they
//! fail at compile time, naming the rule and the backend.
//!
//! Kernel (`tree_walk_kernel`, one block of `block_threads` threads per request): every thread runs
//! the walk (`detail::walk_tree`, written once for host and device) on block-uniform values: the
//! node tokens and the scalars p(x), q(x) it gathers, and the uniforms of the request's stream at
//! seq's addresses (node, accept / resample / target_sample). Whole-row work at the nodes it visits is
//! done by the block (request_block.cuh), in the orders of the determinism contract
//! (sampling/categorical.hpp): argmax for greedy; a sample of p (leaves, sample-and-match); the
//! residual max(0, p - min(p, q)) with the fallback to p (a node with one child); p without the
//! rejected siblings (target-only, read in place, no copy); and, for a node with several children
//! under strict or recursive rejection, the carried residual r <- max(0, r - m q') materialised in a
//! per-request row of doubles: the block writes it, then warp 0 sums it in seq's 32 interleaved lanes
//! (lane j adds the entries j, j + 32, ... of the whole row, then `reduce_lanes`), so the mass m is
//! seq's to the bit; r - m q' is rounded as seq rounds it (__dmul_rn, __dsub_rn: never an fma). Only
//! the rows of the visited nodes are read, as in seq.
//! Agreement: tokens equal seq's wherever seq runs without FMA contraction of its scalar code (the
//! default on x86-64); with `check_normalisation` a row's sum is taken in another order than seq's,
//! so a row whose sum lies within rounding of the tolerance can be flagged differently.
//!
//! Memory: the spans of `tree_batch` and `tree_outputs` are device memory; the layout (a host
//! `tree_layout`) and the streams are uploaded once per call into the workspace, as a
//! `tree_layout_view` (parent, first child, next sibling and depth per node, and each request's first
//! row). `verify_tree_workspace_bytes` then a caller-owned workspace (CUB's two-phase pattern), or
//! the overload that allocates on the stream. Kernels never trap: bad rows and ids become statuses, and
//! no token outside [0, V) is written.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/cuda/categorical.cuh"
#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/request_block.cuh"
#include "specdec/backend/seq/verify_tree.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::cuda {

//! Whether the cuda backend verifies trees with `Rule` (k_seq and typical_rule: no kernel).
template <TreeRule Rule>
inline constexpr bool verifies_tree =
    tree_method_of<Rule>::value == tree_method::target_only || tree_method_of<Rule>::value == tree_method::greedy ||
    tree_method_of<Rule>::value == tree_method::sample_and_match || tree_method_of<Rule>::value == tree_method::multi_step ||
    tree_method_of<Rule>::value == tree_method::recursive_rejection;

//! A `tree_layout` as flat arrays (device memory on the GPU; host memory for host replays): request
//! b's nodes are rows first_row[b] .. first_row[b + 1] - 1, and row r holds its node's parent, first
//! child, next sibling (local ids, `no_node` ends a list) and depth.
struct tree_layout_view {
  const std::int64_t* first_row = nullptr;        //!< [B + 1]
  const std::int32_t* parent_of = nullptr;        //!< [rows]
  const std::int32_t* first_child_of = nullptr;   //!< [rows]
  const std::int32_t* next_sibling_of = nullptr;  //!< [rows]
  const std::int32_t* depth_of = nullptr;         //!< [rows]
  std::size_t batch = 0;                          //!< B, the number of requests
  std::size_t max_depth = 0;                      //!< the largest node depth of any request

  //! The row of request b's node n: first_row[b] + n.
  SPECDEC_HOST_DEVICE std::int64_t node_row(std::size_t b, std::int32_t n) const { return first_row[b] + n; }
  //! The number of nodes of request b.
  SPECDEC_HOST_DEVICE std::int32_t num_nodes(std::size_t b) const {
    return static_cast<std::int32_t>(first_row[b + 1] - first_row[b]);
  }
  //! The parent of request b's node n (local id).
  SPECDEC_HOST_DEVICE std::int32_t parent(std::size_t b, std::int32_t n) const { return parent_of[node_row(b, n)]; }
  //! The first child of request b's node n (local id, or `no_node`).
  SPECDEC_HOST_DEVICE std::int32_t first_child(std::size_t b, std::int32_t n) const { return first_child_of[node_row(b, n)]; }
  //! The next sibling of request b's node n (local id, or `no_node`).
  SPECDEC_HOST_DEVICE std::int32_t next_sibling(std::size_t b, std::int32_t n) const { return next_sibling_of[node_row(b, n)]; }
  //! The depth of request b's node n.
  SPECDEC_HOST_DEVICE std::int32_t depth(std::size_t b, std::int32_t n) const { return depth_of[node_row(b, n)]; }
};

//! The host arrays of a `tree_layout` in `tree_layout_view`'s format (what `verify_tree` uploads).
struct tree_layout_arrays {
  std::vector<std::int64_t> first_row;  //!< [B + 1]
  std::vector<std::int32_t> links;      //!< [4][rows]: parents, first children, next siblings, depths
  std::size_t max_depth = 0;            //!< the largest node depth of any request

  //! The arrays of layout `l`.
  static tree_layout_arrays of(const tree_layout& l) {
    tree_layout_arrays a;
    const std::size_t B = l.batch_size(), rows = l.num_rows();
    a.first_row.resize(B + 1);
    a.links.resize(4 * rows);
    a.max_depth = l.max_depth();
    for (std::size_t b = 0; b < B; ++b) {
      a.first_row[b] = static_cast<std::int64_t>(l.node_row(b, 0));
      for (std::size_t n = 0; n < l.num_nodes(b); ++n) {
        const std::size_t r = l.node_row(b, n);
        a.links[r] = l.parent(b, n);
        a.links[rows + r] = l.first_child(b, n);
        a.links[2 * rows + r] = l.next_sibling(b, n);
        a.links[3 * rows + r] = l.depth(b, n);
      }
    }
    a.first_row[B] = static_cast<std::int64_t>(rows);
    return a;
  }
  //! The number of node rows, over all requests.
  std::size_t rows() const noexcept { return links.size() / 4; }
  //! The view of copies of these arrays at `first_row` and `links` (device memory, or the vectors).
  tree_layout_view view_at(const std::int64_t* first_row_at, const std::int32_t* links_at) const noexcept {
    const std::size_t r = rows();
    return {first_row_at, links_at, links_at + r, links_at + 2 * r, links_at + 3 * r, first_row.size() - 1, max_depth};
  }
  //! The view of the host vectors themselves.
  tree_layout_view view() const noexcept { return view_at(first_row.data(), links.data()); }
};

namespace detail {

//! One node's outcome: the accepted child, or `no_node` and the emitted token (seq's node_decision).
struct tree_choice {
  std::int32_t child = no_node;
  token_id emitted = no_token;
};

//! The outcome of one request's walk: where it ended and what it emits.
struct tree_walk_result {
  std::int32_t node = 0;   //!< the last accepted node (the root when nothing was accepted)
  std::int32_t depth = 0;  //!< its depth: the accepted count
  token_id emitted = no_token;
  verify_status status = verify_status::ok;
  bool ids_ok = true;  //!< false: a node token outside [0, V); nothing is written, not even the root
};

// The walk below calls the whole-row operations of `Ops` (tree_block_ops on the GPU; the host replay
// of tests/backend/cuda_tree_host.cu on the host), each on the node's rows:
//   target_normalised(node), draft_normalised(node)  check_normalisation's test (true when off)
//   target_at(node, x), draft_at(node, x)            the scalars p(x), q(x) as doubles
//   greedy(node) -> greedy_row                       greedy_usable and argmax of p
//   sample_target(node, u) -> located                sample_categorical(p, u)
//   draft_has_mass(node)                             some q(v) > 0
//   stage_children(node)                             the children's tokens, in sibling order, for
//   child_token_in(x, j)                             "x is the token of one of the first j children"
//   strict_residual(node, u) -> residual_draw        sample_residual(p, q, strict, u)
//   sample_without_children(node, k, u) -> ...       sample_masked(p, the k children's tokens, u), else p
//   scaled_residual_mass(node, s) -> mass            seq's sample_residual(p, q, scaled_draft_residual{s}) mass
//                                                    (0 when it falls back to p)
//   scaled_residual(node, s, u) -> residual_draw     that residual's token, else p's (fallback)
//   subtract(node, scale, j, materialised) -> mass   r <- max(0, r - scale q'), q' = q without the
//                                                    first j children's tokens; r = p when not materialised
//   residual_at(x), sample_residual_row(node, u)     r(x); a sample of r, else of p (fallback)

//! Greedy and sample-and-match at a node with children: the child whose token is the target's
//! choice, or that choice (seq's match_target_choice).
#pragma nv_exec_check_disable  // the walk also runs on the host (tests/backend/cuda_tree_host.cu)
template <tree_method Method, class Ops>
SPECDEC_HOST_DEVICE tree_choice match_target_choice(Ops& ops, const tree_layout_view& tree, std::size_t b, std::int32_t node,
                                                    const token_id* tokens, std::size_t vocab,
                                                    const random::request_stream& stream, verify_status& status) {
  tree_choice d;
  if constexpr (Method == tree_method::greedy) {
    const greedy_row g = ops.greedy(node);
    if (!g.usable) {
      status |= verify_status::invalid_row;
      return d;
    }
    d.emitted = g.token;
  } else {
    emit_located(ops.sample_target(node, first_uniform(stream, node, random::purpose::target_sample)), vocab, d.emitted, status);
    if (d.emitted == no_token) return d;
  }
  for (std::int32_t c = tree.first_child(b, node); c != no_node; c = tree.next_sibling(b, c))
    if (tokens[tree.node_row(b, c)] == d.emitted) return {c, no_token};
  return d;
}

//! `scaled_draft_residual::accepted_mass` with the product rounded once (never an fma), so that the
//! weights are seq's doubles.
struct scaled_accepted_mass {
  double scale;
  SPECDEC_HOST_DEVICE double operator()(double p, double q) const noexcept {
    const double scaled = product_rn(scale, q);
    return scaled < p ? scaled : p;
  }
};

//! The weight max(0, p - min(p, s q)) of a row pair, NaN for unusable inputs.
template <class PWeight, class QWeight>
struct scaled_residual_weight {
  PWeight p;
  QWeight q;
  scaled_accepted_mass mass;
  __device__ double operator()(std::size_t v) const { return specdec::detail::residual_weight(p(v), q(v), mass); }
};

//! The coin-based rules at a node with children (seq's decide_by_coins): target-only, multi-step
//! sampling (strict) and recursive rejection.
#pragma nv_exec_check_disable  // the walk also runs on the host (tests/backend/cuda_tree_host.cu)
template <tree_method Method, class Ops>
SPECDEC_HOST_DEVICE tree_choice decide_by_coins(Ops& ops, const tree_layout_view& tree, std::size_t b, std::int32_t node,
                                                const token_id* tokens, std::size_t vocab, const random::request_stream& stream,
                                                verify_status& status) {
  constexpr bool by_target_only = Method == tree_method::target_only;
  constexpr bool by_recursive_rejection = Method == tree_method::recursive_rejection;
  if constexpr (!by_target_only) {
    if (!ops.draft_normalised(node)) {
      status |= verify_status::not_normalised;
      return {};
    }
  }
  std::int32_t k = 0;
  for (std::int32_t c = tree.first_child(b, node); c != no_node; c = tree.next_sibling(b, c)) ++k;
  if constexpr (Method != tree_method::multi_step) ops.stage_children(node);
  double mass = 1.0;       // r's mass: p is taken as normalised
  double scale = 0.0;      // multi-step sampling: r = max(0, p - scale q) (scaled_draft_residual)
  double remaining = 1.0;  // recursive rejection: the draft mass not yet drawn
  bool materialised = false;
  int q_has_mass = -1;  // unknown until a child has q_j(c) = 0
  random::philox_stream coins = stream.open(static_cast<std::uint32_t>(node), random::purpose::accept);
  std::int32_t j = 0;
  for (std::int32_t c = tree.first_child(b, node); c != no_node; c = tree.next_sibling(b, c), ++j) {
    const token_id x = tokens[tree.node_row(b, c)];
    const double u = coins.uniform();
    const double px = ops.target_at(node, x);
    if (!specdec::detail::usable_weight(px)) {
      status |= verify_status::invalid_row;
      return {};
    }
    if constexpr (by_target_only) {
      // r(c) is p(c) until c is rejected, then 0; r's mass drops by what it held.
      const bool seen = ops.child_token_in(x, j);
      const double rx = seen ? 0.0 : px;
      if (u * mass < rx) return {c, no_token};
      if (!seen) mass -= rx;
    } else {
      const double qx = ops.draft_at(node, x);
      if (!specdec::detail::usable_weight(qx)) {
        status |= verify_status::invalid_row;
        return {};
      }
      const bool was_drawn = by_recursive_rejection && ops.child_token_in(x, j);
      const double q_now = was_drawn || !(remaining > 0.0) ? 0.0 : qx;
      if (q_now == 0.0) {
        status |= verify_status::draft_prob_zero;
        if (q_has_mass < 0) q_has_mass = ops.draft_has_mass(node) ? 1 : 0;
        if (q_has_mass == 0) {  // a q without mass is unusable, not a residual of p
          status |= verify_status::invalid_row;
          return {};
        }
      } else {
        double rx = materialised ? ops.residual_at(x) : px;
        if constexpr (!by_recursive_rejection) rx = scale == 0.0 ? px : px - scaled_accepted_mass{scale}(px, qx);
        if (u * mass * q_now < rx * remaining) return {c, no_token};
      }
      if (k == 1) break;  // a single child: strict's residual, read in one pass below
      if constexpr (by_recursive_rejection) {
        if (remaining > 0.0) {
          mass = ops.subtract(node, mass / remaining, j, materialised);
          materialised = true;
        }
        if (!was_drawn) remaining -= qx;
      } else {  // s_{j+1} = s_j + M_j, as seq
        scale += mass;
        mass = ops.scaled_residual_mass(node, scale);
      }
    }
  }
  // Every child was rejected: one token from the last residual.
  const double u = first_uniform(stream, node, random::purpose::resample);
  residual_draw r;
  if constexpr (by_target_only)
    r = ops.sample_without_children(node, k, u);
  else if (!by_recursive_rejection && scale > 0.0)
    r = ops.scaled_residual(node, scale, u);
  else if (!materialised)
    r = ops.strict_residual(node, u);
  else
    r = ops.sample_residual_row(node, u);
  if (r.fallback) status |= verify_status::residual_fallback;
  tree_choice d;
  emit_located(r.sample, vocab, d.emitted, status);
  return d;
}

//! The walk of request b's tree (seq's verify_tree_one for the rules above). Every call of `Ops` is
//! made by every thread with the same arguments.
#pragma nv_exec_check_disable  // the walk also runs on the host (tests/backend/cuda_tree_host.cu)
template <tree_method Method, class Ops>
SPECDEC_HOST_DEVICE tree_walk_result walk_tree(Ops& ops, const tree_layout_view& tree, std::size_t b, const token_id* tokens,
                                               std::size_t vocab, const random::request_stream& stream) {
  tree_walk_result r;
  const std::int32_t n = tree.num_nodes(b);
  for (std::int32_t i = 1; i < n; ++i)
    if (!in_vocabulary(tokens[tree.node_row(b, i)], vocab)) {
      r.status = verify_status::bad_draft_token;
      r.ids_ok = false;
      return r;
    }
  for (;;) {
    const std::int32_t node = r.node;
    if (!ops.target_normalised(node)) {
      r.status |= verify_status::not_normalised;
      return r;
    }
    tree_choice d;
    if (tree.first_child(b, node) == no_node) {  // a leaf: the bonus, drawn as the chain rule draws it
      if constexpr (Method == tree_method::greedy) {
        const greedy_row g = ops.greedy(node);
        if (g.usable)
          d.emitted = g.token;
        else
          r.status |= verify_status::invalid_row;
      } else {
        const auto what = Method == tree_method::sample_and_match ? random::purpose::target_sample : random::purpose::resample;
        emit_located(ops.sample_target(node, first_uniform(stream, node, what)), vocab, d.emitted, r.status);
      }
    } else if constexpr (Method == tree_method::greedy || Method == tree_method::sample_and_match) {
      d = match_target_choice<Method>(ops, tree, b, node, tokens, vocab, stream, r.status);
    } else {
      d = decide_by_coins<Method>(ops, tree, b, node, tokens, vocab, stream, r.status);
    }
    if (!is_valid(r.status)) return r;
    if (d.child == no_node) {
      r.emitted = d.emitted;
      return r;
    }
    r.node = d.child;
    ++r.depth;
  }
}

//! Request b's output rows (`width` entries each) from its walk: the accepted tokens then the emitted
//! one, the path root first; -1 pads both (seq's format, also for requests that stopped on an error).
SPECDEC_HOST_DEVICE inline void write_tree_row(const tree_layout_view& tree, std::size_t b, const token_id* tokens,
                                               const tree_walk_result& r, token_id* out_tokens, std::int32_t* out_path,
                                               std::size_t width) {
  for (std::size_t j = 0; j < width; ++j) {
    out_tokens[j] = no_token;
    out_path[j] = no_node;
  }
  if (!r.ids_ok) return;
  out_path[0] = 0;
  std::int32_t node = r.node;
  for (std::int32_t j = r.depth; j > 0; --j) {
    out_path[j] = node;
    out_tokens[j - 1] = tokens[tree.node_row(b, node)];
    node = tree.parent(b, node);
  }
  out_tokens[r.depth] = r.emitted;
}

//! w_v = x_v, except 0 at the first `count` tokens of `masked` (seq's `sample_masked` weights).
template <class T>
struct without_tokens {
  const T* x;
  const token_id* masked;
  std::int32_t count;
  __device__ double operator()(std::size_t v) const {
    bool hit = false;
    for (std::int32_t i = 0; i < count; ++i) hit = hit | (masked[i] == static_cast<token_id>(v));
    return hit ? 0.0 : static_cast<double>(x[v]);
  }
};

//! Everything the tree kernel reads and writes, by value.
template <class T>
struct tree_kernel_args {
  tree_layout_view tree;
  const token_id* tokens = nullptr;  //!< [rows]
  const T* target = nullptr;         //!< [rows][V]
  const T* draft = nullptr;          //!< [rows][V], or null for rules that do not read q
  std::size_t vocab = 0, tiles = 0, max_children = 0;
  const random::request_stream* streams = nullptr;  //!< [B]
  double* tile_mass = nullptr;                      //!< [B][tiles]
  double* residual = nullptr;                       //!< [B][V]: strict, recursive rejection
  token_id* children = nullptr;                     //!< [B][max_children]: target-only, recursive rejection
  bool check_normalisation = false;
  double tolerance = 0.0;
  token_id* out_tokens = nullptr;
  std::int32_t* out_path = nullptr;
  std::int32_t* out_accepted = nullptr;
  verify_status* out_status = nullptr;
  std::size_t width = 0;
};

//! The whole-row operations of the walk, done by the request's block (see the list above `walk_tree`).
template <class T>
struct tree_block_ops {
  const tree_kernel_args<T>& a;
  std::size_t b;
  request_shared& sh;

  __device__ std::size_t row(std::int32_t node) const { return static_cast<std::size_t>(a.tree.node_row(b, node)); }
  __device__ row_weight<T> target(std::int32_t node) const { return {a.target + row(node) * a.vocab}; }
  __device__ row_weight<T> draft(std::int32_t node) const { return {a.draft + row(node) * a.vocab}; }
  __device__ double* masses() const { return a.tile_mass + b * a.tiles; }
  __device__ double* residual() const { return a.residual + b * a.vocab; }  // (strict, recursive rejection)
  __device__ token_id* children() const { return a.children != nullptr ? a.children + b * a.max_children : nullptr; }

  __device__ bool target_normalised(std::int32_t node) {
    return !a.check_normalisation || block_normalised(target(node), a.vocab, a.tolerance, sh);
  }
  __device__ bool draft_normalised(std::int32_t node) {
    return !a.check_normalisation || block_normalised(draft(node), a.vocab, a.tolerance, sh);
  }
  __device__ double target_at(std::int32_t node, token_id x) const { return target(node)(static_cast<std::size_t>(x)); }
  __device__ double draft_at(std::int32_t node, token_id x) const { return draft(node)(static_cast<std::size_t>(x)); }
  __device__ greedy_row greedy(std::int32_t node) { return block_greedy(target(node), a.vocab, sh); }
  __device__ located sample_target(std::int32_t node, double u) { return block_sample(target(node), a.vocab, u, masses(), sh); }
  __device__ bool draft_has_mass(std::int32_t node) { return block_any_positive(draft(node), a.vocab); }
  __device__ void stage_children(std::int32_t node) {
    __syncthreads();  // every thread is done with the previous node's list
    if (threadIdx.x == 0) {
      std::int32_t j = 0;
      for (std::int32_t c = a.tree.first_child(b, node); c != no_node; c = a.tree.next_sibling(b, c))
        children()[j++] = a.tokens[a.tree.node_row(b, c)];
    }
    __syncthreads();
  }
  __device__ bool child_token_in(token_id x, std::int32_t j) const {
    for (std::int32_t i = 0; i < j; ++i)
      if (children()[i] == x) return true;
    return false;
  }
  //! A sample of `weight`, else (no mass) of p with the fallback flag.
  template <class Weight>
  __device__ residual_draw sample_or_p(const Weight& weight, std::int32_t node, double u) {
    const located s = block_sample(weight, a.vocab, u, masses(), sh);
    if (s.status == row_status::no_mass) return {block_sample(target(node), a.vocab, u, masses(), sh), true};
    return {s, false};
  }
  __device__ residual_draw strict_residual(std::int32_t node, double u) {
    using weight = residual_weight_of<row_weight<T>, row_weight<T>, strict_rule>;
    return sample_or_p(weight{target(node), draft(node), {strict_rule{}}}, node, u);
  }
  __device__ double scaled_residual_mass(std::int32_t node, double scale) {
    using weight = scaled_residual_weight<row_weight<T>, row_weight<T>>;
    const bool usable = block_tile_masses(weight{target(node), draft(node), {scale}}, a.vocab, masses());
    const double total = tiles_total(masses(), a.vocab);
    // seq: an unusable row's mass is NaN; a usable, finite row without mass falls back (mass 0).
    if (!usable) return __longlong_as_double(0x7FF8000000000000ll);
    return specdec::detail::usable_weight(total) && !(total > 0.0) ? 0.0 : total;
  }
  __device__ residual_draw scaled_residual(std::int32_t node, double scale, double u) {
    using weight = scaled_residual_weight<row_weight<T>, row_weight<T>>;
    return sample_or_p(weight{target(node), draft(node), {scale}}, node, u);
  }
  __device__ residual_draw sample_without_children(std::int32_t node, std::int32_t k, double u) {
    return sample_or_p(without_tokens<T>{a.target + row(node) * a.vocab, children(), k}, node, u);
  }
  __device__ double subtract(std::int32_t node, double scale, std::int32_t drawn, bool materialised) {
    const row_weight<T> p = target(node), q = draft(node);
    double* r = residual();
    const token_id* listed = children();
    __syncthreads();  // every thread has read r(x) of the previous update
    for (std::size_t v = threadIdx.x; v < a.vocab; v += blockDim.x) {
      bool hit = false;
      for (std::int32_t i = 0; i < drawn; ++i) hit = hit | (listed[i] == static_cast<token_id>(v));
      const double qv = hit ? 0.0 : q(v), rv = materialised ? r[v] : p(v);
      const double next = __dsub_rn(rv, __dmul_rn(scale, qv));
      // An unusable entry becomes NaN, so that the final draw reports the row (as seq).
      r[v] = specdec::detail::usable_weight(rv) & specdec::detail::usable_weight(qv) ? (next > 0.0 ? next : 0.0)
                                                                                     : __longlong_as_double(0x7FF8000000000000ll);
    }
    __syncthreads();
    if (threadIdx.x < warp_size) {  // seq's 32 interleaved lanes over the whole row, then the halving tree
      double acc = 0.0;
      for (std::size_t v = static_cast<std::size_t>(lane_id()); v < a.vocab; v += warp_size) acc += r[v];
      acc = reduce_lanes(acc);
      if (threadIdx.x == 0) sh.value = acc;
    }
    __syncthreads();
    const double m = sh.value;
    __syncthreads();
    return m;
  }
  __device__ double residual_at(token_id x) const { return residual()[x]; }
  __device__ residual_draw sample_residual_row(std::int32_t node, double u) {
    return sample_or_p(row_weight<double>{residual()}, node, u);
  }
};

//! One block per request: the walk, then thread 0 writes the request's outputs.
template <tree_method Method, class T>
__global__ void __launch_bounds__(block_threads) tree_walk_kernel(tree_kernel_args<T> a) {
  __shared__ request_shared sh;
  const std::size_t b = blockIdx.x;
  tree_block_ops<T> ops{a, b, sh};
  const tree_walk_result r = walk_tree<Method>(ops, a.tree, b, a.tokens, a.vocab, a.streams[b]);
  if (threadIdx.x == 0) {
    write_tree_row(a.tree, b, a.tokens, r, a.out_tokens + b * a.width, a.out_path + b * a.width, a.width);
    a.out_accepted[b] = r.depth;
    a.out_status[b] = r.status;
  }
}

//! The workspace parts of one tree verification, taken in a fixed order.
struct tree_parts {
  std::size_t batch = 0, rows = 0, vocab = 0, tiles = 0, max_children = 0;
  bool residual_rows = false, children_lists = false;

  template <class T>
  static tree_parts of(const tree_batch<T>& batch, tree_method method) {
    tree_parts p;
    p.batch = batch.layout.batch_size();
    p.rows = batch.layout.num_rows();
    p.vocab = batch.vocab_size;
    p.tiles = specdec::detail::tile_count(batch.vocab_size);
    for (std::size_t b = 0; b < p.batch; ++b) p.max_children = std::max(p.max_children, batch.layout.num_nodes(b) - 1);
    p.residual_rows = method == tree_method::multi_step || method == tree_method::recursive_rejection;
    p.children_lists = method == tree_method::target_only || method == tree_method::recursive_rejection;
    return p;
  }
  struct pointers {
    std::int64_t* first_row;
    std::int32_t* links;
    random::request_stream* streams;
    double* tile_mass;
    double* residual;
    token_id* children;
  };
  pointers take(workspace_plan& plan) const {
    pointers w{};
    w.first_row = plan.take<std::int64_t>(batch == 0 ? 0 : batch + 1);  // an empty batch needs nothing
    w.links = plan.take<std::int32_t>(4 * rows);
    w.streams = plan.take<random::request_stream>(batch);
    w.tile_mass = plan.take<double>(batch * tiles);
    w.residual = residual_rows ? plan.take<double>(batch * vocab) : nullptr;
    w.children = children_lists ? plan.take<token_id>(batch * max_children) : nullptr;
    return w;
  }
  std::size_t bytes() const {
    workspace_plan plan;
    (void)take(plan);
    return plan.bytes();
  }
};

template <TreeRule Rule, class T>
constexpr void check_tree_rule() {
  constexpr tree_method method = tree_method_of<Rule>::value;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "cuda verify_tree: float or double rows");
  static_assert(method != tree_method::k_seq,
                "specdec::verify_tree: k_seq (SpecTr K-SEQ) has no kernel on the cuda backend; use exec::seq or exec::simd");
  static_assert(
      method != tree_method::typical,
      "specdec::verify_tree: typical_rule (typical acceptance) has no kernel on the cuda backend; use exec::seq or exec::simd");
  static_assert(verifies_tree<Rule> || method == tree_method::k_seq || method == tree_method::typical,
                "specdec::verify_tree: this rule has no kernel on the cuda backend");
}

}  // namespace detail

//! Device bytes `verify_tree` needs for this batch shape and rule: the uploaded layout and streams,
//! B tile-mass rows, and for strict / recursive rejection B residual rows of V doubles.
template <TreeRule Rule, class T>
std::size_t verify_tree_workspace_bytes(const Rule&, const tree_batch<T>& batch, const verify_options& = {}) {
  detail::check_tree_rule<Rule, T>();
  return detail::tree_parts::of(batch, tree_method_of<Rule>::value).bytes();
}

//! Tree verification on `stream` with a caller-owned device `workspace` of at least
//! `verify_tree_workspace_bytes(rule, batch, options)` bytes. The spans of `batch` (tokens, draft and
//! target rows) and of `out` are device memory; the layout and `streams` (one per request) are host
//! memory. Asynchronous: the outputs are ready when the stream is. The outputs and statuses are
//! seq's (backend/seq/verify_tree.hpp) for the same streams.
//! \throws specdec::error on shape mismatches or a small workspace (before any CUDA call);
//! specdec::cuda_error on CUDA errors.
template <TreeRule Rule, class T>
void verify_tree(cudaStream_t stream, const Rule&, const tree_batch<T>& batch, std::span<const random::request_stream> streams,
                 const tree_outputs& out, std::span<std::byte> workspace, const verify_options& options = {}) {
  detail::check_tree_rule<Rule, T>();
  constexpr tree_method method = tree_method_of<Rule>::value;
  seq::detail::check_tree_shapes<Rule>(batch, streams, out);
  const auto parts = detail::tree_parts::of(batch, method);
  SPECDEC_EXPECTS(parts.batch <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
                  "cuda verify_tree: too many requests for one launch");
  workspace_plan plan(workspace);
  const auto w = parts.take(plan);
  if (parts.batch == 0) return;
  const tree_layout_arrays arrays = tree_layout_arrays::of(batch.layout);
  copy_to_device(w.first_row, arrays.first_row.data(), arrays.first_row.size(), stream);
  copy_to_device(w.links, arrays.links.data(), arrays.links.size(), stream);
  copy_to_device(w.streams, streams.data(), parts.batch, stream);
  detail::tree_kernel_args<T> a;
  a.tree = arrays.view_at(w.first_row, w.links);
  a.tokens = batch.tokens.data();
  a.target = batch.target_rows.data();
  a.draft = batch.draft_rows.empty() ? nullptr : batch.draft_rows.data();
  a.vocab = parts.vocab;
  a.tiles = parts.tiles;
  a.max_children = parts.max_children;
  a.streams = w.streams;
  a.tile_mass = w.tile_mass;
  a.residual = w.residual;
  a.children = w.children;
  a.check_normalisation = options.check_normalisation;
  a.tolerance = options.normalisation_tolerance;
  a.out_tokens = out.tokens.data();
  a.out_path = out.path.data();
  a.out_accepted = out.num_accepted.data();
  a.out_status = out.status.data();
  a.width = batch.layout.max_depth() + 1;
  detail::tree_walk_kernel<method, T><<<static_cast<unsigned>(parts.batch), detail::block_threads, 0, stream>>>(a);
  check_launch("tree_walk_kernel");
}

//! `verify_tree` with a workspace allocated (and freed) on `stream`.
template <TreeRule Rule, class T>
void verify_tree(cudaStream_t stream, const Rule& rule, const tree_batch<T>& batch,
                 std::span<const random::request_stream> streams, const tree_outputs& out, const verify_options& options = {}) {
  detail::check_tree_rule<Rule, T>();
  seq::detail::check_tree_shapes<Rule>(batch, streams, out);  // before allocating
  device_buffer workspace(verify_tree_workspace_bytes(rule, batch, options), stream);
  verify_tree(stream, rule, batch, streams, out, workspace.span(), options);
}

}  // namespace specdec::backend::cuda
