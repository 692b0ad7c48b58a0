//! \file exec/dispatch.hpp
//! \brief Compile-time backend checks shared by every algorithm entry point.
#pragma once

#include "specdec/exec/policy.hpp"

//! Fails compilation, naming the algorithm, when `Policy` selects a backend that is not enabled.
#define SPECDEC_REQUIRE_BACKEND(Policy, algorithm)                                                \
  static_assert(::specdec::exec::backend_of<Policy> != ::specdec::exec::backend::simd ||          \
                    ::specdec::exec::backend_enabled<::specdec::exec::backend::simd>,             \
                algorithm ": the simd backend is not enabled; link specdec::simd (needs xsimd)"); \
  static_assert(::specdec::exec::backend_of<Policy> != ::specdec::exec::backend::cuda ||          \
                    ::specdec::exec::backend_enabled<::specdec::exec::backend::cuda>,             \
                algorithm ": the cuda backend is not enabled; link specdec::cuda and compile this file with nvcc")
