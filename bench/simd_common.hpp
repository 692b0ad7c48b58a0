//! \file bench/simd_common.hpp
//! \brief Shared by the simd benchmarks (bench/simd_*.cpp): the backends compared, the read-bandwidth
//! probe (bench/bandwidth.hpp) as a benchmark, a `main` helper, and the markdown table printed after
//! a run: kernel, shape, backend, CPU and wall time per call, GB/s, fraction of the read bandwidth,
//! speedup vs seq and vs the naive baseline.
//!
//! Two bandwidth denominators are reported: the DRAM probe run by `main` before any benchmark (the
//! `frac_dram_bw` counters, as in bench/verify.cpp) and the larger of that and
//! `BM_read_bandwidth/MB:512` measured during the run (the machine is shared, and the two often
//! differ by 10-25 %); the table's "frac (best probe)" column uses the latter, the stricter one.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "bandwidth.hpp"
#include "specdec/exec/simd.hpp"

namespace specdec_bench::simd {

//! Bytes/s of one core reading DRAM: measured by `run_main` before the benchmarks, and the best of
//! that and BM_read_bandwidth/MB:512.
inline double g_dram_bw = 0.0;
inline double g_best_dram_bw = 0.0;

// ---- backends ------------------------------------------------------------------------------------

struct seq_backend {
  static constexpr const char* name = "seq";
};
template <class Arch>
struct simd_backend {
  using arch = Arch;
};
struct naive_backend {
  static constexpr const char* name = "naive";
};
template <class B>
std::string backend_name() {
  if constexpr (requires { B::name; })
    return B::name;
  else if constexpr (std::is_same_v<typename B::arch, xsimd::avx512bw>)
    return "avx512";
  else
    return B::arch::name();
}
template <class B>
bool backend_runs() {
  if constexpr (requires { typename B::arch; })
    return specdec::exec::arch_runnable<typename B::arch>();
  else
    return true;
}
//! Calls fn(backend) for seq, SSE4.2, AVX2, AVX-512 (those the compile flags enable: the benchmarks
//! are built with -march=native) and, if asked, the naive baseline.
template <class Fn>
void for_each_backend(Fn&& fn, bool with_naive) {
  fn(seq_backend{});
#if XSIMD_WITH_SSE4_2
  fn(simd_backend<xsimd::sse4_2>{});
#endif
#if XSIMD_WITH_AVX2
  fn(simd_backend<xsimd::avx2>{});
#endif
#if XSIMD_WITH_AVX512BW
  fn(simd_backend<xsimd::avx512bw>{});
#endif
  if (with_naive) fn(naive_backend{});
}

// ---- results ---------------------------------------------------------------------------------------

struct result {
  std::string kernel, shape, backend;
  double cpu_per_call = 0.0, wall_per_call = 0.0, bytes_per_call = 0.0;
};
inline std::vector<result> g_results;  // in the order the benchmarks ran; a later run of the same row wins

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

//! Sets the rate counters and keeps the row for the final table. `bytes` is the total over all
//! iterations; `cpu` and `wall` the seconds of the whole loop.
inline void record(benchmark::State& state, const std::string& kernel, const std::string& shape, const std::string& backend,
                   double cpu, double wall, double bytes) {
  const auto iters = static_cast<double>(state.iterations());
  state.counters["bytes_per_call"] = benchmark::Counter(bytes / iters);
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
  state.counters["frac_dram_bw"] = benchmark::Counter(bytes / g_dram_bw, benchmark::Counter::kIsRate);
  const result r{kernel, shape, backend, cpu / iters, wall / iters, bytes / iters};
  for (auto& old : g_results)
    if (old.kernel == kernel && old.shape == shape && old.backend == backend) {
      old = r;
      return;
    }
  g_results.push_back(r);
}

//! Times the loop of a benchmark in thread CPU time and wall time.
struct loop_timer {
  double c0 = thread_cpu_seconds(), w0 = wall_seconds();
  double cpu() const { return thread_cpu_seconds() - c0; }
  double wall() const { return wall_seconds() - w0; }
};

//! One core summing a float buffer of range(0) MB (bench/bandwidth.hpp), recorded like a kernel.
inline void BM_read_bandwidth(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) * MB;
  const aligned_buffer<float>& buf = probe_buffer(bytes);
  const std::size_t n = buf.size;
  const loop_timer t;
  for (auto _ : state) {
    float s = sum_floats(buf.get(), n);
    benchmark::DoNotOptimize(s);
  }
  const double total = static_cast<double>(state.iterations()) * static_cast<double>(bytes);
  record(state, "read bandwidth (probe)", std::to_string(state.range(0)) + " MB", "sum_floats", t.cpu(), t.wall(), total);
  if (state.range(0) >= 256) g_best_dram_bw = std::max(g_best_dram_bw, total / t.cpu());
}

inline std::string format_time(double seconds) {
  char buf[32];
  if (seconds >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f µs", seconds * 1e6);
  return buf;
}

//! The markdown table of every recorded row, grouped by (kernel, shape) in run order, backends in the
//! order seq, sse4.2, avx2, avx512, others.
inline void print_table() {
  std::printf("\nDRAM read probe: %.2f GB/s in main() before the benchmarks, %.2f GB/s best (with BM_read_bandwidth/MB:512)\n",
              g_dram_bw / 1e9, g_best_dram_bw / 1e9);
  std::printf(
      "\n| kernel | shape | backend | CPU time / call | wall / call | GB/s | frac (main probe) | frac (best probe) | vs seq | vs naive |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const auto rank = [](const std::string& b) {
    const char* order[] = {"seq", "sse4.2", "avx2", "avx512"};
    for (int i = 0; i < 4; ++i)
      if (b == order[i]) return i;
    return 4;
  };
  std::vector<std::pair<std::string, std::string>> groups;
  for (const auto& r : g_results)
    if (std::find(groups.begin(), groups.end(), std::make_pair(r.kernel, r.shape)) == groups.end())
      groups.emplace_back(r.kernel, r.shape);
  for (const auto& g : groups) {
    std::vector<const result*> rows;
    const result *seq = nullptr, *naive = nullptr;
    for (const auto& r : g_results)
      if (r.kernel == g.first && r.shape == g.second) {
        rows.push_back(&r);
        if (r.backend == "seq") seq = &r;
        if (r.backend == "naive") naive = &r;
      }
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const result* a, const result* b) { return rank(a->backend) < rank(b->backend); });
    for (const result* r : rows) {
      const double gbps = r->bytes_per_call / r->cpu_per_call;
      std::printf("| %s | %s | %s | %s | %s | %.2f | %.2f | %.2f | ", r->kernel.c_str(), r->shape.c_str(), r->backend.c_str(),
                  format_time(r->cpu_per_call).c_str(), format_time(r->wall_per_call).c_str(), gbps / 1e9, gbps / g_dram_bw,
                  gbps / g_best_dram_bw);
      if (seq)
        std::printf("%.1fx | ", seq->cpu_per_call / r->cpu_per_call);
      else
        std::printf("– | ");
      if (naive)
        std::printf("%.1fx |\n", naive->cpu_per_call / r->cpu_per_call);
      else
        std::printf("– |\n");
    }
  }
}

//! main() of a simd benchmark: default --benchmark_min_time=0.2, the DRAM probe, `setup()` (adds
//! context, registers benchmarks), the run, then the table.
template <class Setup>
int run_main(int argc, char** argv, Setup&& setup) {
  if (!initialize_benchmarks(argc, argv)) return 1;
  g_dram_bw = g_best_dram_bw = probe_read_bandwidth(512 * MB);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", g_dram_bw / 1e9);
  benchmark::AddCustomContext("dram_read_GBps", buf);
  benchmark::AddCustomContext("avx512_runnable", specdec::exec::arch_runnable<xsimd::avx512bw>() ? "yes" : "no");
  benchmark::RegisterBenchmark("BM_read_bandwidth", BM_read_bandwidth)
      ->ArgName("MB")
      ->Arg(512)
      ->Arg(8)
      ->Unit(benchmark::kMicrosecond);
  setup();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_table();
  return 0;
}

}  // namespace specdec_bench::simd
