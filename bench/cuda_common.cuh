//! \file bench/cuda_common.cuh
//! \brief Shared by the GPU benchmarks: CUDA-event timing for Google Benchmark's manual time, and the
//! device's read bandwidth measured in the same run (a kernel that sums a buffer much larger than L2).
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "specdec/backend/cuda/detail/error.cuh"
#include "../tests/support/device_array.cuh"

namespace specdec_bench {

using specdec::backend::cuda::check;

//! Times `launch()` (which enqueues work on `stream`) with CUDA events, once per benchmark iteration,
//! and reports the GPU time as the iteration's manual time.
template <class Launch>
void time_with_events(benchmark::State& state, cudaStream_t stream, Launch&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (auto _ : state) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(static_cast<double>(ms) * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

namespace detail {
template <class Float4>  // a template, so that the header may be included by several units
__global__ void sum_kernel(const Float4* x, std::size_t n, float* out) {
  float acc = 0.0f;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const Float4 v = x[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  if (acc == 1234.5f) *out = acc;  // keeps the loads; practically never written
}
}  // namespace detail

//! The device's read bandwidth in bytes/s: the best of 20 timed sums of a 1 GiB buffer.
inline double device_read_bandwidth() {
  const std::size_t bytes = std::size_t{1} << 30, n = bytes / sizeof(float4);
  specdec::test::device_array<float4> buffer(n);
  specdec::test::device_array<float> sink(1);
  check(cudaMemset(buffer.data(), 0, bytes), "cudaMemset");
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  float best = 1e30f;
  for (int i = 0; i < 21; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    detail::sum_kernel<<<static_cast<unsigned>(sms * 8), 512>>>(buffer.data(), n, sink.data());
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (i > 0 && ms < best) best = ms;  // the first run warms up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(bytes) / (static_cast<double>(best) * 1e-3);
}

//! Prints the device and the bandwidth probe once, and returns the probe.
inline double print_device_and_bandwidth() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const double bw = device_read_bandwidth();
  std::printf("device: %s (sm_%d%d, %d SMs, L2 %d MiB), driver %d, runtime %d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, driver, runtime);
  std::printf("read bandwidth probe (1 GiB sum, best of 20): %.1f GB/s\n", bw * 1e-9);
  return bw;
}

//! The main of every GPU benchmark: exits 1 with "no CUDA device" when there is none; otherwise
//! prints the device, stores the bandwidth probe in `bandwidth` (bytes/s), and runs the benchmarks
//! with 15 repetitions reporting aggregates only (the median is the figure to quote) unless the
//! command line sets --benchmark_repetitions.
inline int gpu_benchmark_main(int argc, char** argv, const char* name, double& bandwidth) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "%s: no CUDA device\n", name);
    return 1;
  }
  bandwidth = print_device_and_bandwidth();
  std::vector<char*> args(argv, argv + argc);
  static char repetitions[] = "--benchmark_repetitions=15", aggregates[] = "--benchmark_report_aggregates_only=true";
  bool has_repetitions = false;
  for (int i = 1; i < argc; ++i) has_repetitions = has_repetitions || std::strncmp(argv[i], "--benchmark_repetitions", 23) == 0;
  if (!has_repetitions) {
    args.push_back(repetitions);
    args.push_back(aggregates);
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace specdec_bench
