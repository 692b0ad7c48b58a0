//! \file specdec/backend/simd/xsimd_include.hpp
//! \brief Includes xsimd. Every specdec header that needs xsimd includes it through this one.
//!
//! GCC 12's AVX-512 intrinsics start some results from `_mm512_undefined_*()`, which its
//! uninitialised-value analysis reports wherever xsimd inlines them (GCC bug 105593, fixed in
//! GCC 13). Those reports are located in GCC's intrinsic headers, which xsimd includes: the warnings
//! are silenced for the lines of those headers only, so our own code keeps the check.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
#else
#include <xsimd/xsimd.hpp>
#endif
