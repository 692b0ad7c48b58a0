//! \file backend/simd/algorithms.hpp
//! \brief The simd backend's registrations (exec/dispatch.hpp): each algorithm it implements, on
//! the policy's xsimd architecture (`exec::simd_policy<Arch>`). What each kernel guarantees against
//! seq is in docs/reference/backends-and-determinism.md; the algorithms not listed here run seq's implementation.
#pragma once

#include <utility>

#include "specdec/backend/simd/all.hpp"
#include "specdec/exec/algorithms.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/exec/simd.hpp"

//! Registers `backend::simd::name<Arch>` as the simd implementation of `algorithm::name`, called
//! with the public entry's arguments after the policy.
#define SPECDEC_SIMD_IMPLEMENTS(name)                                                            \
  template <>                                                                                    \
  struct specdec::exec::implementation<specdec::exec::backend::simd, specdec::algorithm::name> { \
    template <class Policy, class... Args>                                                       \
    static decltype(auto) run(const Policy&, Args&&... args) {                                   \
      return specdec::backend::simd::name<simd_arch_t<Policy>>(std::forward<Args>(args)...);     \
    }                                                                                            \
  }

SPECDEC_SIMD_IMPLEMENTS(verify);
SPECDEC_SIMD_IMPLEMENTS(verify_from_logits);
SPECDEC_SIMD_IMPLEMENTS(verify_tree);
SPECDEC_SIMD_IMPLEMENTS(verify_tree_from_logits);
SPECDEC_SIMD_IMPLEMENTS(compute_indicators);
SPECDEC_SIMD_IMPLEMENTS(softmax);
SPECDEC_SIMD_IMPLEMENTS(log_softmax);
SPECDEC_SIMD_IMPLEMENTS(log_sum_exp);
SPECDEC_SIMD_IMPLEMENTS(warp_logits);
SPECDEC_SIMD_IMPLEMENTS(warp_probs);
SPECDEC_SIMD_IMPLEMENTS(sample_categorical);
SPECDEC_SIMD_IMPLEMENTS(sample_logits);
SPECDEC_SIMD_IMPLEMENTS(argmax);
SPECDEC_SIMD_IMPLEMENTS(top_w_indices);
SPECDEC_SIMD_IMPLEMENTS(overlap);
SPECDEC_SIMD_IMPLEMENTS(total_variation);
SPECDEC_SIMD_IMPLEMENTS(entropy);
SPECDEC_SIMD_IMPLEMENTS(cross_entropy);
SPECDEC_SIMD_IMPLEMENTS(kl_divergence);

#undef SPECDEC_SIMD_IMPLEMENTS
