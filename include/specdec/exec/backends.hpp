//! \file exec/backends.hpp
//! \brief The backends' registrations: each enabled backend's header of `exec::implementation`
//! specialisations (exec/dispatch.hpp). Every public entry that dispatches includes this file; a
//! new backend is a folder under backend/ plus one line here.
#pragma once

#include "specdec/config.hpp"
#include "specdec/exec/algorithms.hpp"
#include "specdec/exec/dispatch.hpp"

#include "specdec/backend/seq/algorithms.hpp"
#if SPECDEC_ENABLE_SIMD
#include "specdec/backend/simd/algorithms.hpp"  // xsimd only when the simd backend is enabled
#endif
#if SPECDEC_ENABLE_CUDA && SPECDEC_CUDA_TRANSLATION_UNIT
#include "specdec/backend/cuda/algorithms.cuh"  // CUDA headers only in CUDA translation units
#endif
