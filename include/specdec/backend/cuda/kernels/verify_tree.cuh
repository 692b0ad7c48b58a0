//! \file backend/cuda/kernels/verify_tree.cuh
//! \brief The kernel of verify_tree.cuh: the tree walk (`walk_tree`, backend/walks/tree.hpp, the one seq
//! and simd run) on one request per thread block (`tree_walk_kernel`, `tree_block_ops`).
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
#include "specdec/backend/walks/steps.hpp"
#include "specdec/backend/walks/tree.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::backend::cuda::detail {

using walks::tree_walk_result;
using walks::walk_tree;
using walks::write_tree_row;

//! Request b's tree of the layout as the walk reads it (backend/walks/tree.hpp, `Tree`).
struct request_tree {
  const tree_layout_view& tree;
  std::size_t b;
  const token_id* tokens;  //!< [rows]

  SPECDEC_HOST_DEVICE std::int32_t num_nodes() const { return tree.num_nodes(b); }
  SPECDEC_HOST_DEVICE std::int32_t first_child(std::int32_t n) const { return tree.first_child(b, n); }
  SPECDEC_HOST_DEVICE std::int32_t next_sibling(std::int32_t n) const { return tree.next_sibling(b, n); }
  SPECDEC_HOST_DEVICE std::int32_t parent(std::int32_t n) const { return tree.parent(b, n); }
  SPECDEC_HOST_DEVICE token_id token(std::int32_t n) const { return tokens[tree.node_row(b, n)]; }
};

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

//! The row operations of `walk_tree` (backend/walks/tree.hpp), done by the request's block.
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
  __device__ verify_status check_target(std::int32_t node) {
    return target_normalised(node) ? verify_status::ok : verify_status::not_normalised;
  }
  __device__ verify_status check_draft(std::int32_t node) {
    return draft_normalised(node) ? verify_status::ok : verify_status::not_normalised;
  }
  __device__ greedy_row greedy(std::int32_t node) { return block_greedy(target(node), args.vocab, sh); }
  __device__ residual_draw sample_target(std::int32_t node, double u) {
    if (!target_normalised(node)) return {verify_status::not_normalised};
    return {verify_status::ok, block_sample(target(node), args.vocab, u, masses(), sh)};
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
    if (s.status == row_status::no_mass)
      return {verify_status::ok, block_sample(target(node), args.vocab, u, masses(), sh), true};
    return {verify_status::ok, s, false};
  }
  __device__ residual_draw strict_residual(std::int32_t node, double u) {
    using weight = residual_weight_of<row_weight<T>, row_weight<T>, strict_rule>;
    return sample_or_p(weight{target(node), draft(node), {strict_rule{}}}, node, u);
  }
  __device__ double scaled_residual_mass(std::int32_t node, double scale) {
    using weight = residual_weight_of<row_weight<T>, row_weight<T>, scaled_draft_residual>;
    const bool usable =
        block_tile_masses(weight{target(node), draft(node), {scaled_draft_residual{scale}}}, args.vocab, masses());
    const double total = tiles_total(masses(), args.vocab);
    // seq: an unusable row's mass is NaN; a usable, finite row without mass falls back (mass 0).
    if (!usable) return __longlong_as_double(0x7FF8000000000000ll);
    return specdec::detail::usable_weight(total) && !(total > 0.0) ? 0.0 : total;
  }
  __device__ residual_draw scaled_residual(std::int32_t node, double scale, double u) {
    using weight = residual_weight_of<row_weight<T>, row_weight<T>, scaled_draft_residual>;
    return sample_or_p(weight{target(node), draft(node), {scaled_draft_residual{scale}}}, node, u);
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
  const request_tree tree{args.tree, b, args.tokens};
  const tree_walk_result r = walk_tree<Method>(ops, tree, args.vocab, args.streams[b]);
  if (threadIdx.x == 0) {
    write_tree_row(tree, r, args.out_tokens + b * args.width, args.out_path + b * args.width, args.width);
    args.out_accepted[b] = r.depth;
    args.out_status[b] = r.status;
  }
}

}  // namespace specdec::backend::cuda::detail
