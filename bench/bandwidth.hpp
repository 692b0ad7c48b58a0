//! \file bench/bandwidth.hpp
//! \brief A single-core memory-read bandwidth probe for the benchmarks: sum a float buffer.
//!
//! The seq backend is single-threaded, so its "fraction of bandwidth" is measured against what one
//! core can stream. The sum uses 64 independent float accumulators so that the compiler vectorises it
//! without -ffast-math and the loop is bound by memory, not by the latency of one add chain.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <time.h>
#endif

namespace specdec_bench {

inline constexpr std::size_t MB = std::size_t{1} << 20;
inline constexpr std::size_t l3_bytes = 32 * MB;  //!< the L3 of the machine the results were taken on

//! Seconds of CPU time used by the calling thread (what Google Benchmark's default "CPU" column
//! measures). On a shared machine this leaves out the time the thread spent descheduled; where no
//! thread clock is available it falls back to wall time.
inline double thread_cpu_seconds() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#else
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

//! A 64-byte-aligned buffer of T, uninitialised (so first touch happens where the caller fills it).
template <class T>
struct aligned_buffer {
  struct deleter {
    void operator()(T* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<T[], deleter> data;
  std::size_t size = 0;

  aligned_buffer() = default;
  explicit aligned_buffer(std::size_t n)
      : data(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64}))), size(n) {}
  T* get() const noexcept { return data.get(); }
};

//! Sum of n floats (n a multiple of 64 is fastest; any n works).
inline float sum_floats(const float* x, std::size_t n) noexcept {
  constexpr std::size_t lanes = 64;
  float acc[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) acc[j] += x[i + j];
  float s = 0.0f;
  for (; i < n; ++i) s += x[i];
  for (std::size_t j = 0; j < lanes; ++j) s += acc[j];
  return s;
}

//! Bytes per second read by `sum_floats` over `bytes` of memory: one warm-up pass, then the median
//! of `passes` passes timed in thread CPU time (like the benchmarks' rate counters). Used by main() before the benchmarks run (the DRAM figure that the
//! "frac_dram_bw" counters divide by).
inline double probe_read_bandwidth(std::size_t bytes, int passes = 5) {
  const std::size_t n = bytes / sizeof(float);
  aligned_buffer<float> buf(n);
  std::fill(buf.get(), buf.get() + n, 1.0f);
  volatile float sink = sum_floats(buf.get(), n);
  std::vector<double> rates;
  for (int k = 0; k < passes; ++k) {
    const double t0 = thread_cpu_seconds();
    sink = sum_floats(buf.get(), n);
    const double t1 = thread_cpu_seconds();
    rates.push_back(static_cast<double>(n * sizeof(float)) / (t1 - t0));
  }
  (void)sink;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

//! benchmark::Initialize with a default of --benchmark_min_time=0.2 unless the caller gave one.
//! Returns false when unrecognised arguments were reported (main should then return 1).
inline bool initialize_benchmarks(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  bool has_min_time = false;
  for (int i = 1; i < argc; ++i) has_min_time = has_min_time || std::strncmp(argv[i], "--benchmark_min_time", 20) == 0;
  static char default_min_time[] = "--benchmark_min_time=0.2";
  if (!has_min_time) args.push_back(default_min_time);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  return !benchmark::ReportUnrecognizedArguments(n, args.data());
}

//! A buffer of `bytes` filled with 1.0f, kept between calls (reallocated when the size changes): the
//! data of the BM_read_bandwidth benchmarks.
inline const aligned_buffer<float>& probe_buffer(std::size_t bytes) {
  static aligned_buffer<float> buf;
  const std::size_t n = bytes / sizeof(float);
  if (buf.size != n) {
    buf = aligned_buffer<float>();  // free the old one first
    buf = aligned_buffer<float>(n);
    std::fill(buf.get(), buf.get() + n, 1.0f);
  }
  return buf;
}

}  // namespace specdec_bench
