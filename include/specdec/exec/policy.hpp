//! \file exec/policy.hpp
//! \brief Execution policies: `exec::seq`, `exec::simd`, `exec::cuda`, as types and objects.
//!
//! A public algorithm takes a policy as its first argument (`specdec::verify(specdec::exec::seq, ...)`),
//! as Thrust, oneDPL and std::execution do; the policy's type picks the backend at compile time.
//! A backend that is not enabled ends in a `static_assert` naming the algorithm and the CMake target
//! to link. The policy types exist whether or not their backend is enabled, so code that names them
//! compiles everywhere.
#pragma once

#include <concepts>
#include <type_traits>

#include "specdec/config.hpp"

struct CUstream_st;  // what cudaStream_t points to; declared so the core needs no CUDA header

namespace specdec::exec {

//! The backends.
enum class backend { seq, simd, cuda };

//! Scalar, simple, the reference oracle every other backend is tested against.
struct sequenced_policy {
  static constexpr backend backend_kind = backend::seq;  //!< the backend this policy selects
};

//! Stands for xsimd's best architecture for the build flags (`xsimd::default_arch`); the simd
//! backend resolves it. Any xsimd architecture type may be named instead.
struct default_arch {};

//! xsimd kernels for architecture `Arch`; kernels without a SIMD version fall back to seq
//! (each backend header lists which).
template <class Arch = default_arch>
struct simd_policy {
  static constexpr backend backend_kind = backend::simd;  //!< the backend this policy selects
  using arch_type = Arch;                                 //!< the xsimd architecture (or `default_arch`)
};

//! CUDA kernels on a stream (the default stream unless `.on(stream)` names one).
struct cuda_policy {
  static constexpr backend backend_kind = backend::cuda;  //!< the backend this policy selects
  CUstream_st* stream = nullptr;                          //!< the stream kernels run on (nullptr: the default stream)
  //! The same policy on another stream.
  constexpr cuda_policy on(CUstream_st* s) const noexcept { return cuda_policy{s}; }
};

inline constexpr sequenced_policy seq{};  //!< the seq backend: scalar, the reference
inline constexpr simd_policy<> simd{};    //!< the simd backend on the widest architecture of the build flags
inline constexpr cuda_policy cuda{};      //!< the cuda backend on the default stream

//! A type is an execution policy when it names its backend.
template <class P>
concept ExecutionPolicy = requires {
  { std::remove_cvref_t<P>::backend_kind } -> std::convertible_to<backend>;
};

//! The backend a policy type selects.
template <ExecutionPolicy P>
inline constexpr backend backend_of = std::remove_cvref_t<P>::backend_kind;

//! Whether a backend is compiled in (seq always; simd with `specdec::simd`; cuda with `specdec::cuda`
//! in a CUDA translation unit).
// NOLINTBEGIN(misc-redundant-expression): the macros are 0 or 1 in each build
template <backend B>
inline constexpr bool backend_enabled = B == backend::seq || (B == backend::simd && SPECDEC_ENABLE_SIMD) ||
                                        (B == backend::cuda && SPECDEC_ENABLE_CUDA && SPECDEC_CUDA_TRANSLATION_UNIT);
// NOLINTEND(misc-redundant-expression)

}  // namespace specdec::exec
