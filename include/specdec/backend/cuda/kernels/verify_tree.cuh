//! \file backend/cuda/kernels/verify_tree.cuh
//! \brief The kernel of verify_tree.cuh: the tree walk of one request per thread block (`walk_tree`,
//! `tree_walk_kernel`), shared with the host replay tests.
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
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/request_block.cuh"
#include "specdec/backend/cuda/tree_layout.cuh"
#include "specdec/backend/seq/verify_tree.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::cuda::detail {

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
    emit_sample(ops.sample_target(node, first_uniform(stream, node, random::purpose::target_sample)), vocab, d.emitted, status);
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
  emit_sample(r.sample, vocab, d.emitted, status);
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
        emit_sample(ops.sample_target(node, first_uniform(stream, node, what)), vocab, d.emitted, r.status);
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
  const tree_kernel_args<T>& args;
  std::size_t b;
  request_shared& sh;

  __device__ std::size_t row(std::int32_t node) const { return static_cast<std::size_t>(args.tree.node_row(b, node)); }
  __device__ row_weight<T> target(std::int32_t node) const { return {args.target + row(node) * args.vocab}; }
  __device__ row_weight<T> draft(std::int32_t node) const { return {args.draft + row(node) * args.vocab}; }
  __device__ double* masses() const { return args.tile_mass + b * args.tiles; }
  __device__ double* residual() const { return args.residual + b * args.vocab; }  // (strict, recursive rejection)
  __device__ token_id* children() const { return args.children != nullptr ? args.children + b * args.max_children : nullptr; }

  __device__ bool target_normalised(std::int32_t node) {
    return !args.check_normalisation || block_normalised(target(node), args.vocab, args.tolerance, sh);
  }
  __device__ bool draft_normalised(std::int32_t node) {
    return !args.check_normalisation || block_normalised(draft(node), args.vocab, args.tolerance, sh);
  }
  __device__ double target_at(std::int32_t node, token_id x) const { return target(node)(static_cast<std::size_t>(x)); }
  __device__ double draft_at(std::int32_t node, token_id x) const { return draft(node)(static_cast<std::size_t>(x)); }
  __device__ greedy_row greedy(std::int32_t node) { return block_greedy(target(node), args.vocab, sh); }
  __device__ located sample_target(std::int32_t node, double u) {
    return block_sample(target(node), args.vocab, u, masses(), sh);
  }
  __device__ bool draft_has_mass(std::int32_t node) { return block_any_positive(draft(node), args.vocab); }
  __device__ void stage_children(std::int32_t node) {
    __syncthreads();  // every thread is done with the previous node's list
    if (threadIdx.x == 0) {
      std::int32_t j = 0;
      for (std::int32_t c = args.tree.first_child(b, node); c != no_node; c = args.tree.next_sibling(b, c))
        children()[j++] = args.tokens[args.tree.node_row(b, c)];
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
    const located s = block_sample(weight, args.vocab, u, masses(), sh);
    if (s.status == row_status::no_mass) return {block_sample(target(node), args.vocab, u, masses(), sh), true};
    return {s, false};
  }
  __device__ residual_draw strict_residual(std::int32_t node, double u) {
    using weight = residual_weight_of<row_weight<T>, row_weight<T>, strict_rule>;
    return sample_or_p(weight{target(node), draft(node), {strict_rule{}}}, node, u);
  }
  __device__ double scaled_residual_mass(std::int32_t node, double scale) {
    using weight = scaled_residual_weight<row_weight<T>, row_weight<T>>;
    const bool usable = block_tile_masses(weight{target(node), draft(node), {scale}}, args.vocab, masses());
    const double total = tiles_total(masses(), args.vocab);
    // seq: an unusable row's mass is NaN; a usable, finite row without mass falls back (mass 0).
    if (!usable) return __longlong_as_double(0x7FF8000000000000ll);
    return specdec::detail::usable_weight(total) && !(total > 0.0) ? 0.0 : total;
  }
  __device__ residual_draw scaled_residual(std::int32_t node, double scale, double u) {
    using weight = scaled_residual_weight<row_weight<T>, row_weight<T>>;
    return sample_or_p(weight{target(node), draft(node), {scale}}, node, u);
  }
  __device__ residual_draw sample_without_children(std::int32_t node, std::int32_t k, double u) {
    return sample_or_p(without_tokens<T>{args.target + row(node) * args.vocab, children(), k}, node, u);
  }
  __device__ double subtract(std::int32_t node, double scale, std::int32_t drawn, bool materialised) {
    const row_weight<T> p = target(node), q = draft(node);
    double* r = residual();
    const token_id* listed = children();
    __syncthreads();  // every thread has read r(x) of the previous update
    for (std::size_t v = threadIdx.x; v < args.vocab; v += blockDim.x) {
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
      for (std::size_t v = static_cast<std::size_t>(lane_id()); v < args.vocab; v += warp_size) acc += r[v];
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
__global__ void __launch_bounds__(block_threads) tree_walk_kernel(tree_kernel_args<T> args) {
  __shared__ request_shared sh;
  const std::size_t b = blockIdx.x;
  tree_block_ops<T> ops{args, b, sh};
  const tree_walk_result r = walk_tree<Method>(ops, args.tree, b, args.tokens, args.vocab, args.streams[b]);
  if (threadIdx.x == 0) {
    write_tree_row(args.tree, b, args.tokens, r, args.out_tokens + b * args.width, args.out_path + b * args.width, args.width);
    args.out_accepted[b] = r.depth;
    args.out_status[b] = r.status;
  }
}

}  // namespace specdec::backend::cuda::detail
