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
//! the walk (`walk_tree`, backend/walks/tree.hpp: the one seq runs) on block-uniform values: the
//! node tokens and the scalars p(x), q(x) it gathers, and the uniforms of the request's stream at
//! seq's addresses (node, accept / resample / target_sample). Whole-row work at the nodes it visits is
//! done by the block (primitives/request_block.cuh), in the orders of the determinism contract
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

#include "specdec/backend/cuda/kernels/verify_tree.cuh"
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

namespace specdec::backend::cuda {

//! Whether the cuda backend verifies trees with `Rule` (k_seq and typical_rule: no kernel).
template <TreeRule Rule>
inline constexpr bool verifies_tree =
    tree_method_of<Rule>::value == tree_method::target_only || tree_method_of<Rule>::value == tree_method::greedy ||
    tree_method_of<Rule>::value == tree_method::sample_and_match || tree_method_of<Rule>::value == tree_method::multi_step ||
    tree_method_of<Rule>::value == tree_method::recursive_rejection;

namespace detail {

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
  detail::tree_kernel_args<T> args;
  args.tree = arrays.view_at(w.first_row, w.links);
  args.tokens = batch.tokens.data();
  args.target = batch.target_rows.data();
  args.draft = batch.draft_rows.empty() ? nullptr : batch.draft_rows.data();
  args.vocab = parts.vocab;
  args.tiles = parts.tiles;
  args.max_children = parts.max_children;
  args.streams = w.streams;
  args.tile_mass = w.tile_mass;
  args.residual = w.residual;
  args.children = w.children;
  args.check_normalisation = options.check_normalisation;
  args.tolerance = options.normalisation_tolerance;
  args.out_tokens = out.tokens.data();
  args.out_path = out.path.data();
  args.out_accepted = out.num_accepted.data();
  args.out_status = out.status.data();
  args.width = batch.layout.max_depth() + 1;
  detail::tree_walk_kernel<method, T><<<static_cast<unsigned>(parts.batch), detail::block_threads, 0, stream>>>(args);
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
