// SPECDEC_TEST_COMPILE_OPTIONS: -mavx512f -mavx512cd -mavx512dq -mavx512bw -mavx2 -mfma
// SPECDEC_TEST_LABELS: simd_isa
//
// The simd backend against seq for AVX-512 (the cases are in simd_cases.hpp): that it compiles
// wherever the compiler accepts the flags, and that it runs and agrees with seq where the CPU has
// AVX-512 (each case checks xsimd::available_architectures first and otherwise skips: CTest reports
// the test "Skipped" on a CPU or compiler without AVX-512, support/skip.hpp). See simd_avx2.cpp for the caveat about start-up code on CPUs without AVX.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns falsely inside xsimd's AVX-512 kernels (-W[maybe-]uninitialized on _mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <tuple>

#include <catch2/catch.hpp>

#include "support/skip.hpp"
#include "specdec/backend/simd/xsimd_include.hpp"

#if XSIMD_WITH_AVX512BW
using specdec_simd_archs = std::tuple<xsimd::avx512bw>;
#include "backend/simd_cases.hpp"
#endif

TEST_CASE("the AVX-512 build is what this file tests", "[simd]") {
#if XSIMD_WITH_AVX512BW
  if (specdec::exec::arch_runnable<xsimd::avx512bw>())
    SUCCEED("compiled for AVX-512 (F, CD, DQ, BW)");
  else
    SPECDEC_SKIP("compiled for AVX-512, but this CPU cannot run it: nothing was tested");
#else
  SPECDEC_SKIP("compiled without AVX-512 (the compiler rejected the flags): nothing was tested");
#endif
}
