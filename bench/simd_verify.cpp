// bench/simd_verify.cpp: chain verification (strict rule) and the residual / bonus samplers on the simd
// backend (SSE4.2, AVX2, AVX-512), against the seq backend, the naive baseline and the memory
// bandwidth measured in the same run. Results: bench/README.md ("simd backend").
//
// What is measured (fp32 probabilities, one thread)
//   BM_read_bandwidth/MB:{512,8}                   one core summing a float buffer (DRAM, L3-resident)
//   BM_verify/<backend>/B/gamma/V                  specdec::verify(policy, strict, ...), rows in DRAM
//   BM_residual/<backend>/V/{dram,cache}           sample_residual over one (p, q) row pair
//   BM_bonus/<backend>/V/{dram,cache}              the bonus token: a sample from one target row
// <backend> is seq, sse4_2, avx2, avx512 (xsimd::avx512bw; skipped on CPUs without it) or naive
// (bench/baseline_naive.hpp, verification only).
//
// Data, DRAM residency and bytes are as in bench/verify.cpp: draft rows q = softmax(l), l ~ N(0, 2^2),
// target rows p = softmax(l + s z), s calibrated so that the mean 1 - TV(p, q) is 0.70; K copies of
// each batch used round robin so that the rows read between two uses of a copy are >= 128 MB (4x L3);
// `bytes_per_call` counts what a verifier must read (one row pair at a rejection, one row at a bonus,
// two scalars per tested position). Rates use the thread's CPU time (the machine is shared).
//
// After the benchmarks, main() prints a markdown table: kernel, shape, backend, CPU time per call,
// GB/s, fraction of the DRAM probe, speedup vs seq and vs the naive baseline.
//
// Build by hand:  g++ -std=c++20 -O3 -march=native -DSPECDEC_ENABLE_SIMD=1 -I include bench/simd_verify.cpp
//                 -lbenchmark -lpthread
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns falsely inside xsimd's AVX-512 kernels (-W[maybe-]uninitialized on _mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "bandwidth.hpp"
#include "baseline_naive.hpp"
#include "simd_chain_verify.hpp"
#include "simd_common.hpp"
#include "verify_data.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/backend/simd/residual.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"

#if !SPECDEC_ENABLE_SIMD
#error "bench/simd_verify.cpp needs the simd backend: link specdec::simd or define SPECDEC_ENABLE_SIMD=1"
#endif

namespace {

using specdec::token_id;
using namespace specdec_bench;  // the row pool, verify_data, pair_data (verify_data.hpp)
using namespace specdec_bench::simd;

// ---- benchmarks ----------------------------------------------------------------------------------

template <class Backend>
void BM_verify(benchmark::State& state, std::size_t B, std::size_t gamma, std::size_t V) {
  run_chain_verify<Backend>(state, "strict", specdec::strict, B, gamma, V);
}

template <class Backend>
void BM_row_sample(benchmark::State& state, std::size_t V, bool dram, bool bonus) {
  if (!backend_runs<Backend>()) return state.SkipWithError("this CPU cannot run the architecture");
  pair_data& d = get_pair_data(V, dram);
  const specdec::random::stream_address addr{0x5eedULL, 0, 0, 0, specdec::random::purpose::user};
  std::uint32_t step = 0;
  std::uint8_t bad = 0;
  const loop_timer timer;
  for (auto _ : state) {
    const std::size_t n = step % d.N;
    const std::span<const float> p(d.p.get() + n * V, V);
    const std::span<const float> q = bonus ? std::span<const float>{} : std::span<const float>(d.q.get() + n * V, V);
    const double u = specdec::random::uniform_at(addr, step);
    specdec::residual_result r;
    if constexpr (std::is_same_v<Backend, seq_backend>)
      r = specdec::sample_residual(p, q, u);
    else if constexpr (requires { typename Backend::arch; })
      r = specdec::backend::simd::sample_residual<typename Backend::arch>(p, q, u);
    bad |= static_cast<std::uint8_t>(r.sample.status != specdec::row_status::ok);
    benchmark::DoNotOptimize(r);
    ++step;
  }
  const double cpu = timer.cpu(), wall = timer.wall();
  if (bad) state.SkipWithError("a sample was not ok");
  const double bytes = static_cast<double>(state.iterations()) * static_cast<double>((bonus ? 1 : 2) * V * sizeof(float));
  state.counters["copies"] = static_cast<double>(d.N);
  record(state, bonus ? "bonus sample" : "residual sample", "V=" + std::to_string(V) + (dram ? " dram" : " cache"),
         backend_name<Backend>(), cpu, wall, bytes);
}

// ---- registration ------------------------------------------------------------------------------------

void register_all() {
  const std::tuple<std::size_t, std::size_t, std::size_t> shapes[] = {
      {1, 4, 128256}, {16, 4, 128256}, {64, 4, 128256}, {64, 8, 128256}, {64, 4, 32000}};
  for (const auto& shape : shapes) {
    // Named, not a structured binding: clang < 16 cannot capture bindings in a lambda.
    const std::size_t B = std::get<0>(shape), gamma = std::get<1>(shape), V = std::get<2>(shape);
    for_each_backend(
        [&](auto backend) {
          using Backend = decltype(backend);
          const std::string name = "BM_verify/" + backend_name<Backend>() + "/B:" + std::to_string(B) +
                                   "/gamma:" + std::to_string(gamma) + "/V:" + std::to_string(V);
          benchmark::RegisterBenchmark(name.c_str(), BM_verify<Backend>, B, gamma, V)->Unit(benchmark::kMicrosecond);
        },
        true);
  }
  for (const bool bonus : {false, true})
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}})
      for (const bool dram : {true, false})
        for_each_backend(
            [&](auto backend) {
              using Backend = decltype(backend);
              const std::string name = std::string(bonus ? "BM_bonus/" : "BM_residual/") + backend_name<Backend>() +
                                       "/V:" + std::to_string(V) + (dram ? "/dram" : "/cache");
              benchmark::RegisterBenchmark(name.c_str(), BM_row_sample<Backend>, V, dram, bonus)->Unit(benchmark::kMicrosecond);
            },
            false);
}

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, [] {
    char buf[96];
    for (const std::size_t V : {std::size_t{32000}, std::size_t{128256}}) {
      const row_pool& pool = get_pool(V);
      std::snprintf(buf, sizeof buf, "sigma %.3f, mean 1-TV %.3f", pool.sigma, pool.mean_accept);
      benchmark::AddCustomContext("pool_V" + std::to_string(V), buf);
    }
    register_all();
  });
}
