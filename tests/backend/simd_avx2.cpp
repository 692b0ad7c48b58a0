// SPECDEC_TEST_COMPILE_OPTIONS: -mavx2 -mfma
// SPECDEC_TEST_LABELS: simd_isa
//
// The simd backend against seq for SSE4.2 and AVX2 (the cases are in simd_cases.hpp). Compiled with
// -mavx2 -mfma when the compiler accepts them; each case first checks that the CPU runs the ISA
// (xsimd::available_architectures) and otherwise skips (support/skip.hpp). The Catch2 main is compiled
// without these flags; this file's own start-up code may still use AVX (VEX) encodings, so a CPU
// without AVX at all may stop on an illegal instruction before the check.
#include <tuple>

#include <catch2/catch.hpp>

#include "support/skip.hpp"
#include "specdec/backend/simd/xsimd_include.hpp"

#if XSIMD_WITH_AVX2
using specdec_simd_archs = std::tuple<xsimd::sse4_2, xsimd::avx2>;
#include "backend/simd_cases.hpp"
#elif XSIMD_WITH_SSE4_2
using specdec_simd_archs = std::tuple<xsimd::sse4_2>;
#include "backend/simd_cases.hpp"
#endif

TEST_CASE("the AVX2 build is what this file tests", "[simd]") {
#if XSIMD_WITH_AVX2
  SUCCEED("compiled for AVX2 and SSE4.2");
#else
  SPECDEC_SKIP("compiled without AVX2 (the compiler rejected -mavx2 -mfma): at most SSE4.2 was tested");
#endif
}
