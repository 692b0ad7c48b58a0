//! \file acceptance/verify.hpp
//! \brief `specdec::verify`: chain verification of a ragged batch, for every rule and every backend.
//!
//! \code
//!   specdec::verify(specdec::exec::seq, specdec::strict, batch, streams, outputs);
//! \endcode
//! Request b's output row holds its accepted drafts, one correction or bonus token, then -1.
//! Randomness comes from `streams[b]` alone (seed, request id, step), so a request's tokens do not
//! depend on the rest of its batch. Bad data is flagged per request (`verify_status`), never turned
//! into a token outside [0, V); bad shapes and parameters throw `specdec::error`.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/draft_side.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/exec/backends.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Verifies a batch of drafted chains against target probabilities.
//! \param policy  the backend: `exec::seq`, `exec::simd`, `exec::cuda` (exec/policy.hpp)
//! \param rule    strict, lenient_rule{l}, greedy, sample_and_match, block (acceptance/block.hpp),
//!                typical_rule{...} (lossy, acceptance/typical.hpp)
//! \param batch   drafted tokens, draft rows q (the warped rows the drafts were sampled from) and
//!                target rows p, as probabilities
//! \param streams one per request
//! \param out     per request: the emitted tokens (accepted drafts, then one correction or bonus
//!                token, then -1), the number accepted, the status
//! \param options what the verifier may read and report (acceptance/status.hpp)
//! With `exec::cuda` the spans of `batch` and `out` are device memory, the call is asynchronous on
//! the policy's stream, and a workspace is allocated on that stream (see the workspace overload);
//! typical acceptance has no cuda kernel (a compile-time error says so).
//! \throws specdec::error on shape mismatches (V, row counts, output sizes) or a missing stream;
//! specdec::cuda_error on a CUDA error.
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, class T>
void verify(const Policy& policy, const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify");
  exec::dispatch<algorithm::verify>(policy, rule, batch, streams, out, options);
}

//! Device bytes of the workspace `verify(policy, ..., workspace)` needs, on a backend with device
//! workspaces (cuda; CUB's two-phase pattern: ask once per shape, allocate, reuse every step).
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, class T>
std::size_t verify_workspace_bytes(const Policy& policy, const Rule& rule, const chain_batch<T>& batch,
                                   const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_workspace_bytes");
  return exec::dispatch<algorithm::verify_workspace_bytes>(policy, rule, batch, options);
}

//! `verify` with a caller-owned device workspace of `verify_workspace_bytes(...)` bytes (cuda).
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, class T>
void verify(const Policy& policy, const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, std::span<std::byte> workspace, const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify");
  exec::dispatch<algorithm::verify_in_workspace>(policy, rule, batch, streams, out, workspace, options);
}

//! `verify_from_logits` with the draft side described by `draft` (acceptance/draft_side.hpp): the
//! draft's rows as logits or as the warped q rows themselves, and optionally q_i(x_i) of every draft
//! row, so that a drafter that kept what it sampled from spares the verifier warping the draft rows
//! again (strict then reads about what sample-and-match reads). Same tokens as the overload below
//! when the values given are what `warp_logits` on the same policy gives. Target rows are logits,
//! warped with `target_params` where they are read. Host backends (seq, simd); a device backend
//! takes the draft's logits and warp_params (the overload below).
//! `Draft` is deduced, so `draft` must be a `draft_side<T>` object: a bare `{}` still means the
//! overload below (draft logits warped with the target's parameters).
//! \throws specdec::error as the overload below, and when `q_at_drafts` is neither empty nor one
//! value per draft row.
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, class T, class Draft>
  requires std::same_as<Draft, draft_side<T>>
void verify_from_logits(const Policy& policy, const Rule& rule, const chain_batch<T>& batch,
                        std::span<const warp_params> target_params, const Draft& draft,
                        std::span<const random::request_stream> streams, const chain_outputs& out,
                        const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_from_logits");
  static_assert(exec::backend_of<Policy> != exec::backend::cuda,
                "specdec::verify_from_logits with a draft_side runs on exec::seq and exec::simd; with exec::cuda pass the "
                "draft's logits and warp_params");
  exec::dispatch<algorithm::verify_from_logits>(policy, rule, batch, target_params, draft, streams, out, options);
}

//! Verifies from logits: each row that is read is warped with its request's parameters first
//! (temperature, top-k, top-p, min-p). `draft_params` empty means the draft used the target's
//! parameters; either way q is the warped row the draft token was sampled from.
//! A backend that registers `algorithm::verify_from_logits_fused` runs its fused path (cuda: no
//! probability row is stored, only a few scalars per row; device memory as for `verify`; temperatures,
//! top-k, top-p and min-p: a filtered row's weights are exactly the float probabilities of
//! `backend::cuda::warp_logits`, also for double logits, agreeing with seq within the bounds of
//! backend/cuda/verify.cuh; block verification and typical acceptance have no kernel there). The
//! others run the `draft_side` overload above with `draft_side<T>{.params = draft_params}`.
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, class T>
void verify_from_logits(const Policy& policy, const Rule& rule, const chain_batch<T>& logits_batch,
                        std::span<const warp_params> target_params, std::span<const warp_params> draft_params,
                        std::span<const random::request_stream> streams, const chain_outputs& out,
                        const verify_options& options = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::verify_from_logits");
  if constexpr (exec::implements<exec::backend_of<Policy>, algorithm::verify_from_logits_fused>)
    exec::dispatch<algorithm::verify_from_logits_fused>(policy, rule, logits_batch, target_params, draft_params, streams, out,
                                                        options);
  else
    verify_from_logits(policy, rule, logits_batch, target_params, draft_side<T>{.params = draft_params}, streams, out, options);
}

//! The result of verifying one chain.
struct chain_result {
  std::vector<token_id> tokens;              //!< accepted drafts then the correction or bonus token (no padding)
  std::int32_t num_accepted = 0;             //!< drafts accepted
  verify_status status = verify_status::ok;  //!< ok, or what was wrong with the request's data
};

//! Verifies one request's chain: `draft_probs` is [n][V], `target_probs` is [n + 1][V].
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, class T>
chain_result verify_chain(const Policy& policy, const Rule& rule, std::span<const token_id> drafts,
                          std::span<const T> draft_probs, std::span<const T> target_probs, std::size_t vocab_size,
                          const random::request_stream& stream, const verify_options& options = {}) {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda,
                "specdec::verify_chain takes host memory; with exec::cuda call specdec::verify on device buffers");
  const std::int32_t n = static_cast<std::int32_t>(drafts.size());
  chain_batch<T> batch{ragged_layout::packed(std::span<const std::int32_t>(&n, 1)), vocab_size, drafts, draft_probs,
                       target_probs};
  std::vector<token_id> tokens(drafts.size() + 1);
  chain_result r;
  verify(policy, rule, batch, std::span<const random::request_stream>(&stream, 1),
         chain_outputs{tokens, std::span<std::int32_t>(&r.num_accepted, 1), std::span<verify_status>(&r.status, 1)}, options);
  for (const token_id t : tokens)
    if (t != no_token) r.tokens.push_back(t);
  return r;
}

//! `verify_chain` on any contiguous containers (std::vector, std::array, spans): drafts of token ids,
//! draft rows [n][V] and target rows [n + 1][V] of the same element type.
template <exec::ExecutionPolicy Policy, AcceptanceRule Rule, std::ranges::contiguous_range Drafts,
          // clang-format off
          std::ranges::contiguous_range DraftRows, std::ranges::contiguous_range TargetRows>
  requires std::same_as<std::ranges::range_value_t<Drafts>, token_id> &&
           std::same_as<std::ranges::range_value_t<DraftRows>, std::ranges::range_value_t<TargetRows>>
chain_result verify_chain(const Policy& policy, const Rule& rule, const Drafts& drafts, const DraftRows& draft_probs,
                          const TargetRows& target_probs, std::size_t vocab_size, const random::request_stream& stream,
                          const verify_options& options = {}) {
  using T = std::ranges::range_value_t<TargetRows>;
  return verify_chain(policy, rule, std::span<const token_id>(std::ranges::data(drafts), std::ranges::size(drafts)),
                      std::span<const T>(std::ranges::data(draft_probs), std::ranges::size(draft_probs)),
                      std::span<const T>(std::ranges::data(target_probs), std::ranges::size(target_probs)), vocab_size,
                      stream, options);
}
// clang-format on

}  // namespace specdec
