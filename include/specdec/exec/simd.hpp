//! \file exec/simd.hpp
//! \brief The simd policy's architecture: `exec::default_arch` resolved to `xsimd::default_arch`,
//! compile-time and run-time checks that an xsimd architecture can be used.
//!
//! `exec::simd` is `simd_policy<exec::default_arch>`; it means "the widest ISA these compiler flags
//! allow" (xsimd's `default_arch`: sse2 with the default x86-64 flags, avx512bw with
//! `-march=native` on a Zen 4). Name an architecture to pin it: `exec::simd_policy<xsimd::avx2>{}`
//! needs a translation unit compiled with AVX2 enabled (`-mavx2 -mfma`, or `-march=...`).
//! Needs xsimd (link `specdec::simd`).
#pragma once

#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/exec/policy.hpp"

namespace specdec::exec {

//! The xsimd architecture type that `Arch` stands for.
template <class Arch>
struct resolve_arch {
  using type = Arch;  //!< an xsimd architecture stands for itself
};
//! `exec::default_arch` stands for `xsimd::default_arch`.
template <>
struct resolve_arch<default_arch> {
  using type = xsimd::default_arch;  //!< the widest architecture of the build flags
};
//! `exec::default_arch` -> `xsimd::default_arch`; any xsimd architecture -> itself.
template <class Arch>
using resolve_arch_t = typename resolve_arch<Arch>::type;

//! The xsimd architecture of a simd policy type.
template <class Policy>
using simd_arch_t = resolve_arch_t<typename std::remove_cvref_t<Policy>::arch_type>;

//! True when this translation unit's compiler flags enable xsimd architecture `Arch`.
template <class Arch>
inline constexpr bool arch_compiled = resolve_arch_t<Arch>::supported();

//! True when the CPU running the program can execute code for `Arch` (CPUID, via xsimd). Code for an
//! architecture that is compiled but not runnable must not be called (it would stop on an illegal
//! instruction).
template <class Arch>
bool arch_runnable() noexcept {
  using A = resolve_arch_t<Arch>;
  return xsimd::available_architectures().best >= A::version();
}

}  // namespace specdec::exec

//! Fails compilation, naming the algorithm, when a simd policy names an architecture that this
//! translation unit's compiler flags do not enable.
#define SPECDEC_REQUIRE_SIMD_ARCH(Arch, algorithm)                                                  \
  static_assert(::specdec::exec::arch_compiled<Arch>,                                               \
                algorithm ": this xsimd architecture is not enabled by the compiler flags of this " \
                          "translation unit (e.g. -mavx2 -mfma for xsimd::avx2)")
