//! \file config.hpp
//! \brief Configuration macros: host/device annotations, inlining, backend switches.
#pragma once

#include "specdec/version.hpp"

//! Marks scalar maths usable from both host and CUDA device code.
#if defined(__CUDACC__)
#define SPECDEC_HOST_DEVICE __host__ __device__
#else
#define SPECDEC_HOST_DEVICE
#endif

//! Placed before a `SPECDEC_HOST_DEVICE` function template whose instantiations may call host-only
//! code (the CPU simulators and the seq walks instantiate the shared host-device code with the
//! library's host samplers, the cuda backend with device-side ones): silences nvcc's execution-space
//! check for such instantiations, which only the host ever calls (the pragma Thrust and CUB use for
//! the same purpose); it expands to nothing outside nvcc.
#if defined(__CUDACC__)
#define SPECDEC_DETAIL_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define SPECDEC_DETAIL_EXEC_CHECK_DISABLE
#endif

//! 1 inside a CUDA translation unit (nvcc), where the cuda backend's kernels can be compiled.
#if defined(__CUDACC__)
#define SPECDEC_CUDA_TRANSLATION_UNIT 1
#else
#define SPECDEC_CUDA_TRANSLATION_UNIT 0
#endif

//! Backends are switched on by the CMake targets `specdec::simd` and `specdec::cuda`,
//! which define these macros; a user may also define them by hand.
#ifndef SPECDEC_ENABLE_SIMD
#define SPECDEC_ENABLE_SIMD 0
#endif
#ifndef SPECDEC_ENABLE_CUDA
#define SPECDEC_ENABLE_CUDA 0
#endif

//! What `SPECDEC_EXPECTS` does when a precondition fails:
//! 0 = throw specdec::error (default), 1 = assert, 2 = nothing.
#define SPECDEC_CONTRACTS_THROW 0
//! 1: a failed precondition prints its message and aborts, like assert() (nothing is checked under NDEBUG).
#define SPECDEC_CONTRACTS_ASSERT 1
//! 2: preconditions are not checked.
#define SPECDEC_CONTRACTS_OFF 2
//! The contract mode, one of the three above: SPECDEC_CONTRACTS_THROW unless defined before including specdec.
#ifndef SPECDEC_CONTRACTS
#define SPECDEC_CONTRACTS SPECDEC_CONTRACTS_THROW
#endif
