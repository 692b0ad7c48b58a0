//! \file sampling/with_policy.hpp
//! \brief `warp_logits` and `sample_categorical` through an execution policy: `exec::seq` runs the
//! reference (distributions/warp.hpp, sampling/categorical.hpp), `exec::simd` the simd kernels
//! (backend/simd/warp.hpp: seq's probabilities up to the last bits of the normalising sum;
//! backend/simd/categorical.hpp: seq's token for the same row and u). The step decoder warps and
//! samples its draft rows with these, so that a draft is drawn from the very row that
//! `verify_from_logits` on the same policy computes as q. Host rows only: a cuda policy is refused.
#pragma once

#include <span>

#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/sampling/categorical.hpp"

#if SPECDEC_ENABLE_SIMD
#include "specdec/backend/simd/categorical.hpp"  // xsimd only when the simd backend is enabled
#include "specdec/backend/simd/warp.hpp"
#include "specdec/exec/simd.hpp"
#endif

namespace specdec {

//! probs = warp(softmax(logits / T)) on `Policy`'s backend (see `warp_logits(logits, probs, w)`).
//! \throws specdec::error on invalid `w` or sizes.
template <exec::ExecutionPolicy Policy, class T, class U>
row_status warp_logits(const Policy&, std::span<const T> logits, std::span<U> probs, const warp_params& w) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::warp_logits");
  static_assert(exec::backend_of<Policy> != exec::backend::cuda, "specdec::warp_logits(policy, ...): host rows; use seq or simd");
#if SPECDEC_ENABLE_SIMD
  if constexpr (exec::backend_of<Policy> == exec::backend::simd)
    return backend::simd::warp_logits<exec::simd_arch_t<Policy>>(logits, probs, w);
#endif
  return warp_logits(logits, probs, w);
}

//! One token from `weights` with the uniform u on `Policy`'s backend (see `sample_categorical`).
template <exec::ExecutionPolicy Policy, class T>
sample_result sample_categorical(const Policy&, std::span<const T> weights, double u) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::sample_categorical");
  static_assert(exec::backend_of<Policy> != exec::backend::cuda,
                "specdec::sample_categorical(policy, ...): host rows; use seq or simd");
#if SPECDEC_ENABLE_SIMD
  if constexpr (exec::backend_of<Policy> == exec::backend::simd)
    return backend::simd::sample_categorical<exec::simd_arch_t<Policy>>(weights, u);
#endif
  return sample_categorical(weights, u);
}

}  // namespace specdec
