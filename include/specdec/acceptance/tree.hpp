//! \file acceptance/tree.hpp
//! \brief `specdec::verify_tree`: verification of a ragged batch of token trees, for every tree rule.
//!
//! \code
//!   specdec::verify_tree(specdec::exec::seq, specdec::target_only, batch, streams, outputs);
//! \endcode
//! A tree (core/tree.hpp) has a root (the verified context) and drafted nodes with one target row
//! each (and one draft row for rules that read q). The rules (acceptance/multi_candidate.hpp) act per
//! node with fresh coins addressed by (seed, request, step, node), so the accepted path and the
//! emitted tokens follow the target's law for the lossless ones; request b's output is its accepted
//! path (node ids, root first), its tokens (accepted ones, then one correction or bonus token) and
//! a status from the chain vocabulary (`verify_status`). A chain tree gives the chain verifier's
//! tokens for `strict`, `greedy`, `sample_and_match` and `typical_rule`.
//! Bad data is flagged per request, never turned into a token outside [0, V); bad shapes throw
//! `specdec::error`, and malformed trees cannot be built (tree_layout validates them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/exec/backends.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Verifies a batch of token trees against target probabilities.
//! \param policy  the backend: `exec::seq`, `exec::simd`, `exec::cuda` (exec/policy.hpp)
//! \param rule    strict (SpecInfer), recursive_rejection, k_seq, target_only, greedy,
//!                sample_and_match, typical_rule{...}
//! \param batch   the trees, their node tokens, draft rows q (rules that read q: the warped rows
//!                the children were drawn from) and target rows p, as probabilities
//! \param streams one per request
//! \param out     per request: the accepted path (node ids, root first), the tokens, the number
//!                accepted, the status
//! \param options what the verifier may read and report (acceptance/status.hpp)
//! With `exec::cuda` (every rule but k_seq and typical_rule: `backend::cuda::verifies_tree`) the
//! spans of `batch` and `out` are device memory, the layout and the streams host memory; the call is
//! asynchronous on the policy's stream and allocates a workspace on it (see the workspace overload);
//! the outputs are seq's, bit for bit.
//! \throws specdec::error on shape mismatches (V, row counts, output sizes) or a missing stream;
//! specdec::cuda_error on a CUDA error
template <exec::ExecutionPolicy Policy, TreeRule Rule, class T>
void verify_tree(const Policy& policy, const Rule& rule, const tree_batch<T>& batch,
                 std::span<const random::request_stream> streams, const tree_outputs& out, const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_tree");
  exec::dispatch<algorithm::verify_tree>(policy, rule, batch, streams, out, options);
}

//! Device bytes of the workspace `verify_tree(policy, ..., workspace)` needs on a backend with device
//! workspaces (cuda; ask once per shape, allocate, reuse every step).
template <exec::ExecutionPolicy Policy, TreeRule Rule, class T>
std::size_t verify_tree_workspace_bytes(const Policy& policy, const Rule& rule, const tree_batch<T>& batch,
                                        const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_tree_workspace_bytes");
  return exec::dispatch<algorithm::verify_tree_workspace_bytes>(policy, rule, batch, options);
}

//! `verify_tree` with a caller-owned device workspace of `verify_tree_workspace_bytes(...)` bytes (cuda).
template <exec::ExecutionPolicy Policy, TreeRule Rule, class T>
void verify_tree(const Policy& policy, const Rule& rule, const tree_batch<T>& batch,
                 std::span<const random::request_stream> streams, const tree_outputs& out, std::span<std::byte> workspace,
                 const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_tree");
  exec::dispatch<algorithm::verify_tree_in_workspace>(policy, rule, batch, streams, out, workspace, options);
}

//! Verifies a batch of token trees from target logits: each target row the walk reads is warped
//! first with its request's parameters (temperature, top-k, top-p, min-p), and only those rows (an
//! EAGLE tree of 60 nodes typically reads one to a few). Draft rows are the probabilities the
//! candidates were drawn from, as a tree drafter writes them. Same tokens as `verify_tree` on the
//! warped rows, except that each target sample (sample-and-match's at every node, the other rules'
//! bonus at a leaf) is the backend's `sample_logits` of the node's logits (the sampling contract,
//! verification from logits; on seq the two are the same computation). Host backends (seq, simd);
//! on a device backend warp the rows and call `verify_tree`.
//! \throws specdec::error as `verify_tree`, and without one valid `warp_params` per request
template <exec::ExecutionPolicy Policy, TreeRule Rule, class T>
void verify_tree_from_logits(const Policy& policy, const Rule& rule, const tree_batch<T>& logits_batch,
                             std::span<const warp_params> target_params, std::span<const random::request_stream> streams,
                             const tree_outputs& out, const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_tree_from_logits");
  exec::dispatch<algorithm::verify_tree_from_logits>(policy, rule, logits_batch, target_params, streams, out, options);
}

//! The result of verifying one tree.
struct tree_result {
  std::vector<token_id> tokens;              //!< accepted tokens, then the correction or bonus token
  std::vector<std::int32_t> path;            //!< accepted node ids, root (0) first
  std::int32_t num_accepted = 0;             //!< drafted nodes accepted
  verify_status status = verify_status::ok;  //!< ok, or what was wrong with the request's data
};

//! Verifies one request's tree given by a parent per node (`parents[0] = no_node`), a token per node,
//! draft rows [n][V] (may be empty for rules that do not read q) and target rows [n][V].
template <exec::ExecutionPolicy Policy, TreeRule Rule, class T>
tree_result verify_one_tree(const Policy& policy, const Rule& rule, std::span<const std::int32_t> parents,
                            std::span<const token_id> tokens, std::span<const T> draft_rows, std::span<const T> target_rows,
                            std::size_t vocab_size, const random::request_stream& stream, const verify_options& options = {}) {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda,
                "specdec::verify_one_tree takes host memory; with exec::cuda call specdec::verify_tree on device buffers");
  const auto n = static_cast<std::int32_t>(parents.size());
  tree_batch<T> batch{tree_layout::from_parents(std::span<const std::int32_t>(&n, 1), parents), vocab_size, tokens, draft_rows,
                      target_rows};
  const std::size_t width = batch.layout.max_depth() + 1;
  std::vector<token_id> out_tokens(width);
  std::vector<std::int32_t> out_path(width);
  tree_result r;
  verify_tree(
      policy, rule, batch, std::span<const random::request_stream>(&stream, 1),
      tree_outputs{out_tokens, out_path, std::span<std::int32_t>(&r.num_accepted, 1), std::span<verify_status>(&r.status, 1)},
      options);
  for (const token_id t : out_tokens)
    if (t != no_token) r.tokens.push_back(t);
  for (const std::int32_t v : out_path)
    if (v != no_node) r.path.push_back(v);
  return r;
}

}  // namespace specdec
