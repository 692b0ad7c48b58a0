// SPECDEC_TEST_COMPILE_OPTIONS: -mavx512f -mavx512cd -mavx512dq -mavx512bw -mavx2 -mfma
// SPECDEC_TEST_LABELS: simd_isa
//
// The pieces of the simd top-p path from logits (backend/simd/sample_logits.hpp): the vector
// `weight_exp` of backend/simd/exp.hpp against the scalar one (bit for bit) and exp in double, the
// one-read weights of backend/simd/softmax.hpp against seq's `logit_weights` (bit for bit), and
// backend/simd/top_p_cut.hpp's cut against the threshold of the sorted row by fixed-point masses,
// with the guessed band (from a subsample, or from the first level's float sums) and without it, on
// rows where the guess holds the cut and on rows built (or given a wrong mass) so that it misses; and the whole path on double rows against seq (float rows:
// tests/sampling/simd_sample_logits.cpp and simd_cases.hpp). This file: AVX-512 (simd_top_p_cut.cpp: AVX2); each case checks that
// the CPU runs the architecture first and otherwise skips (the whole program then reports a CTest
// skip). The cases are in simd_top_p_cut_cases.hpp.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns falsely inside xsimd's AVX-512 kernels (-W[maybe-]uninitialized on _mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <tuple>

#include "specdec/backend/simd/xsimd_include.hpp"

#if XSIMD_WITH_AVX512BW
using top_p_archs = std::tuple<xsimd::avx512bw>;
#else  // the compiler refused the AVX-512 flags: the default architecture, as simd_avx512.cpp does
using top_p_archs = std::tuple<xsimd::default_arch>;
#endif
#include "backend/simd_top_p_cut_cases.hpp"
