//! \file backend/simd/all.hpp
//! \brief Every kernel of the simd backend (`specdec::exec::simd_policy<Arch>`), and how each one
//! relates to its seq oracle. Needs xsimd (link `specdec::simd`).
//!
//! The kernels are templates on an xsimd architecture (`backend::simd::kernel<Arch>(...)`); the public
//! entry points that take a policy (`specdec::verify`, `verify_from_logits`,
//! `estimate::compute_indicators`) resolve `exec::simd` to `xsimd::default_arch` of the translation
//! unit's flags (exec/simd.hpp). Tested on SSE2, SSE4.2, AVX2 and AVX-512 (tests/backend/), and on
//! NEON64 with an aarch64 cross compiler under qemu (tests/backend/simd_default.cpp).
//!
//! | kernel (header) | agreement with seq |
//! |---|---|
//! | `sample_categorical` (categorical.hpp) | identical token, status, mass (the determinism contract of sampling/categorical.hpp) |
//! | `sample_residual`, bonus (residual.hpp) | identical; rules without `vector_residual` (any rule but strict and lenient) **fall back to seq** |
//! | `verify`, chain batches (verify.hpp) | identical tokens, counts and flags, every rule |
//! | `argmax`, row checks (reduce.hpp) | identical |
//! | `sum` (reduce.hpp) | lane-order double sum, relative 1e-12 |
//! | `log_sum_exp`, `softmax`, `log_softmax` (softmax.hpp) | float rows: (2 abs(t) + 4) 2^-23 relative; double rows: (2V + 8) 2^-53; mixed element types **fall back to seq** |
//! | `keep_top_k`, `keep_min_p` (warp.hpp) | identical rows |
//! | `keep_top_p` (warp.hpp) | identical rows unless a cumulative mass is within ~1e-15 of the goal |
//! | `warp_probs` (warp.hpp) | same masks; probabilities within 1 ulp (float rows) or (2V + 8) 2^-53 relative (double rows); temperature other than 0 and 1 **falls back to seq** |
//! | `warp_logits` (warp.hpp) | statuses identical; masks agree in > 99 % of rows (a top-p boundary can move by one entry) |
//! | `verify_from_logits` (verify.hpp) | rows warped as above; > 99 % of requests identical |
//! | `sample_logits` (sample_logits.hpp) | no seq function of that name: > 99.9 % of tokens equal to seq's warp_logits + sample_categorical |
//! | `overlap`, `total_variation` (divergence.hpp) | within 1e-12 of the sum of abs(terms); mixed element types **fall back to seq** |
//! | `entropy`, `cross_entropy`, `kl_divergence` (divergence.hpp, log.hpp) | float rows: the log in float precision, within 2^-21 of sum_{p_v > 0} p_v abs(log x_v) (x_v = p_v, q_v, p_v / q_v); rows with subnormal, infinite, NaN or negative entries, or an infinite result, are seq's exactly; double rows: within 1e-12 of the sum of abs(terms); mixed element types, and double rows on SSE/NEON, **fall back to seq** |
//! | `similarity`, `compute_indicators` (indicators.hpp) | S within 1e-12, A identical, the same errors |
//! | `kth_largest`, `top_w_indices` (select.hpp, top_w.hpp) | identical |
//! Every other public algorithm runs seq under the simd policy.
#pragma once

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/categorical.hpp"
#include "specdec/backend/simd/divergence.hpp"
#include "specdec/backend/simd/indicators.hpp"
#include "specdec/backend/simd/log.hpp"
#include "specdec/backend/simd/reduce.hpp"
#include "specdec/backend/simd/residual.hpp"
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/backend/simd/select.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/top_w.hpp"
#include "specdec/backend/simd/verify.hpp"
#include "specdec/backend/simd/verify_tree.hpp"
#include "specdec/backend/simd/warp.hpp"
#include "specdec/exec/simd.hpp"
