//! \file backend/cuda/algorithms.cuh
//! \brief The cuda backend's registrations (exec/dispatch.hpp): each algorithm it implements, on the
//! policy's stream, on device memory. Included only in CUDA translation units (exec/backends.hpp).
//! Host-row algorithms (single rows, top-W on host vectors) are not registered: with `exec::cuda`
//! they fail at compile time in `exec::missing_implementation`.
//!
//! The backend's files, in layers (as CUB lays out its device algorithms):
//!  - backend/cuda/*.cuh: one public entry header per algorithm (softmax, filter, sample, indicators,
//!    top_w, simulate, verify, verify_block, verify_tree): the documented functions, their workspace
//!    sizes, and in `detail` the host side that checks shapes, plans the workspace and launches;
//!  - backend/cuda/kernels/: the `__global__` kernels of each algorithm and the device-side state
//!    they share (one header per entry header, same name);
//!  - backend/cuda/primitives/: the warp- and block-level pieces the kernels share (warp.cuh,
//!    block.cuh: reductions, chunks; categorical.cuh: tile masses and locating u; request_block.cuh:
//!    one request's row passes by a thread block);
//!  - backend/cuda/detail/: CUDA error checks (error.cuh) and the workspace plan and device buffers
//!    (memory.cuh).
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/indicators.cuh"
#include "specdec/backend/cuda/sample.cuh"
#include "specdec/backend/cuda/simulate.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/verify.cuh"
#include "specdec/backend/cuda/verify_block.cuh"
#include "specdec/backend/cuda/verify_tree.cuh"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/exec/algorithms.hpp"
#include "specdec/exec/dispatch.hpp"

namespace specdec::backend::cuda {

//! Whether this backend verifies chains with `Rule` (typical acceptance has no kernel; block
//! verification has one for probabilities, verify_block.cuh).
template <AcceptanceRule Rule>
inline constexpr bool verifies_chain = Rule::family == rule_family::rejection || Rule::family == rule_family::greedy ||
                                       Rule::family == rule_family::sample_and_match || Rule::family == rule_family::block;

//! Whether the fused path from logits (verify.cuh) has kernels for `Rule` (not block verification).
template <AcceptanceRule Rule>
inline constexpr bool verifies_chain_from_logits = verifies_chain<Rule>&& Rule::family != rule_family::block;

//! Chain verification: the block kernel for block_rule, verify.cuh's for the others.
struct chain_verifier {
  template <class Rule, class... Args>
  static void run(const exec::cuda_policy& policy, const Rule& rule, Args&&... args) {
    static_assert(verifies_chain<Rule>,
                  "specdec::verify: typical acceptance (typical_rule) has no cuda kernel; use exec::seq or exec::simd");
    if constexpr (Rule::family == rule_family::block)
      verify_block(policy.stream, rule, std::forward<Args>(args)...);
    else
      verify(policy.stream, rule, std::forward<Args>(args)...);
  }
};

//! The workspace size of `chain_verifier`.
struct chain_workspace {
  template <class Rule, class... Args>
  static std::size_t run(const exec::cuda_policy&, const Rule& rule, Args&&... args) {
    static_assert(verifies_chain<Rule>, "specdec::verify_workspace_bytes: no cuda kernel for this rule");
    if constexpr (Rule::family == rule_family::block)
      return verify_block_workspace_bytes(rule, std::forward<Args>(args)...);
    else
      return verify_workspace_bytes(rule, std::forward<Args>(args)...);
  }
};

//! The fused chain verification from logits.
struct fused_chain_verifier {
  template <class Rule, class... Args>
  static void run(const exec::cuda_policy& policy, const Rule& rule, Args&&... args) {
    static_assert(verifies_chain_from_logits<Rule>,
                  "specdec::verify_from_logits: block verification and typical acceptance have no cuda kernel from logits; "
                  "use exec::seq or exec::simd");
    verify_from_logits(policy.stream, rule, std::forward<Args>(args)...);
  }
};

//! Tree verification and its workspace size (rules: `verifies_tree`, verify_tree.cuh).
struct tree_verifier {
  template <class Rule, class... Args>
  static void run(const exec::cuda_policy& policy, const Rule& rule, Args&&... args) {
    static_assert(verifies_tree<Rule>, "specdec::verify_tree: k_seq and typical_rule have no cuda kernel");
    verify_tree(policy.stream, rule, std::forward<Args>(args)...);
  }
};
struct tree_workspace {
  template <class Rule, class... Args>
  static std::size_t run(const exec::cuda_policy&, const Rule& rule, Args&&... args) {
    static_assert(verifies_tree<Rule>, "specdec::verify_tree_workspace_bytes: k_seq and typical_rule have no cuda kernel");
    return verify_tree_workspace_bytes(rule, std::forward<Args>(args)...);
  }
};

// `indicators` receives its batches as (data, V) from estimate/indicators.hpp, whose arguments seq and
// simd share, and passes them on as `row_batch` views.

//! Indicators: (draft, companion, tokens, V, s, a) as `compute_indicators` on two views.
struct indicators {
  template <class T, class U>
  static void run(const exec::cuda_policy& policy, std::span<const T> draft_rows, std::span<const U> companion_rows,
                  std::span<const token_id> tokens, std::size_t vocab_size, std::span<double> s, std::span<double> a) {
    compute_indicators(policy.stream, row_batch<const T>(draft_rows, vocab_size), row_batch<const U>(companion_rows, vocab_size),
                       tokens, s, a);
  }
};

//! `name`: a kernel that takes the policy's stream, then the public entry's arguments.
#define SPECDEC_CUDA_ON_STREAM(name, function)                                   \
  struct name {                                                                  \
    template <class... Args>                                                     \
    static decltype(auto) run(const exec::cuda_policy& policy, Args&&... args) { \
      return function(policy.stream, std::forward<Args>(args)...);               \
    }                                                                            \
  }

SPECDEC_CUDA_ON_STREAM(softmax_rows, softmax);
SPECDEC_CUDA_ON_STREAM(log_softmax_rows, log_softmax);
SPECDEC_CUDA_ON_STREAM(log_sum_exp_rows, log_sum_exp);
SPECDEC_CUDA_ON_STREAM(warp_logits_rows, warp_logits);
SPECDEC_CUDA_ON_STREAM(sample_categorical_rows, sample_categorical);
SPECDEC_CUDA_ON_STREAM(sample_filtered_rows, sample_filtered);
SPECDEC_CUDA_ON_STREAM(sd_chain, simulate_sd_chain);
SPECDEC_CUDA_ON_STREAM(sd_token_process, simulate_sd_token_process);
SPECDEC_CUDA_ON_STREAM(sv_accepted, simulate_sv_accepted);
SPECDEC_CUDA_ON_STREAM(sprinter_chain, simulate_sprinter_chain);
SPECDEC_CUDA_ON_STREAM(sprinter_token_process, simulate_sprinter_token_process);
#undef SPECDEC_CUDA_ON_STREAM

}  // namespace specdec::backend::cuda

namespace specdec::exec {
// clang-format off
template <> struct implementation<backend::cuda, algorithm::verify> : specdec::backend::cuda::chain_verifier {};
template <> struct implementation<backend::cuda, algorithm::verify_in_workspace> : specdec::backend::cuda::chain_verifier {};
template <> struct implementation<backend::cuda, algorithm::verify_workspace_bytes> : specdec::backend::cuda::chain_workspace {};
template <> struct implementation<backend::cuda, algorithm::verify_from_logits_fused> : specdec::backend::cuda::fused_chain_verifier {};
template <> struct implementation<backend::cuda, algorithm::verify_tree> : specdec::backend::cuda::tree_verifier {};
template <> struct implementation<backend::cuda, algorithm::verify_tree_in_workspace> : specdec::backend::cuda::tree_verifier {};
template <> struct implementation<backend::cuda, algorithm::verify_tree_workspace_bytes> : specdec::backend::cuda::tree_workspace {};
template <> struct implementation<backend::cuda, algorithm::compute_indicators> : specdec::backend::cuda::indicators {};
template <> struct implementation<backend::cuda, algorithm::softmax_rows> : specdec::backend::cuda::softmax_rows {};
template <> struct implementation<backend::cuda, algorithm::log_softmax_rows> : specdec::backend::cuda::log_softmax_rows {};
template <> struct implementation<backend::cuda, algorithm::log_sum_exp_rows> : specdec::backend::cuda::log_sum_exp_rows {};
template <> struct implementation<backend::cuda, algorithm::warp_logits_rows> : specdec::backend::cuda::warp_logits_rows {};
template <> struct implementation<backend::cuda, algorithm::sample_categorical_rows> : specdec::backend::cuda::sample_categorical_rows {};
template <> struct implementation<backend::cuda, algorithm::sample_filtered_rows> : specdec::backend::cuda::sample_filtered_rows {};
template <> struct implementation<backend::cuda, algorithm::simulate_sd_chain> : specdec::backend::cuda::sd_chain {};
template <> struct implementation<backend::cuda, algorithm::simulate_sd_token_process> : specdec::backend::cuda::sd_token_process {};
template <> struct implementation<backend::cuda, algorithm::simulate_sv_accepted> : specdec::backend::cuda::sv_accepted {};
template <> struct implementation<backend::cuda, algorithm::simulate_sprinter_chain> : specdec::backend::cuda::sprinter_chain {};
template <> struct implementation<backend::cuda, algorithm::simulate_sprinter_token_process> : specdec::backend::cuda::sprinter_token_process {};
// clang-format on
}  // namespace specdec::exec
