//! \file backend/simd/all.hpp
//! \brief Every kernel of the simd backend (`specdec::exec::simd_policy<Arch>`), and how each one
//! relates to its seq oracle. Needs xsimd (link `specdec::simd`).
//!
//! The kernels are templates on an xsimd architecture (`backend::simd::kernel<Arch>(...)`); the public
//! entry points that take a policy (exec/dispatch.hpp) resolve `exec::simd` to `xsimd::default_arch`
//! of the translation unit's flags (exec/simd.hpp). Tested on SSE2, SSE4.2, AVX2 and AVX-512 (tests/backend/), and on
//! NEON64 with an aarch64 cross compiler under qemu (tests/backend/simd_default.cpp).
//!
//! What each kernel guarantees against its seq oracle (identical, or within a stated bound) is the
//! table "What each backend guarantees against seq" of docs/reference/backends-and-determinism.md;
//! the registrations are in backend/simd/algorithms.hpp.
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
