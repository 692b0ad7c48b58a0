// SPECDEC_TEST_LABELS: simd_isa
//
// The simd backend against seq, for xsimd's default architecture of the default compile flags (SSE2
// on x86-64 without -march; NEON64 on AArch64). The cases are in simd_cases.hpp; simd_avx2.cpp and
// simd_avx512.cpp run them for wider ISAs.
#include <tuple>

#include "specdec/backend/simd/xsimd_include.hpp"

using specdec_simd_archs = std::tuple<xsimd::default_arch>;

#include "backend/simd_cases.hpp"
