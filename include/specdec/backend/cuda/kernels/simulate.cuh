//! \file backend/cuda/kernels/simulate.cuh
//! \brief The kernel of simulate.cuh: the grid-stride tally of simulated draws into histograms and counters
//! (`tally_kernel`).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/chain.hpp"
#include "specdec/simulate/detail/sampling_table.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/simulate/sv.hpp"
#include "specdec/simulate/tally.hpp"

namespace specdec::backend::cuda::detail {

inline constexpr int simulate_threads = 256;                   //!< threads per block of the tally kernel
inline constexpr int simulate_blocks_per_sm = 8;               //!< resident blocks per SM the grid aims at
inline constexpr std::size_t simulate_shared_bins = 2048;      //!< histogram 0's bins kept in shared memory
inline constexpr unsigned long long no_bin = ~0ull;            //!< "this draw adds nothing to this histogram"
inline constexpr std::size_t simulate_record_capacity = 1024;  //!< first size of the overflow record buffer

//! What one draw adds: a value per histogram (or `no_bin`) and an increment per sum.
template <int H, int C>
struct draw_tally {
  unsigned long long bin[H];
  unsigned long long add[C];
};

//! The histograms of a tally kernel: histogram h has size[h] bins at offset[h] of the counts.
template <int H>
struct tally_layout {
  unsigned long long size[H];
  unsigned long long offset[H];
  unsigned shared_bins;  //!< histogram 0's bins [0, shared_bins) are counted in shared memory first
};

//! A value that fell beyond its histogram: draw index, histogram, value.
struct overflow_record {
  unsigned long long draw, histogram, value;
};

//! Where a tally kernel writes (device memory, zeroed before the launch).
template <int H, int C>
struct tally_sinks {
  unsigned long long* counts;        //!< all histograms, concatenated
  unsigned long long* sums;          //!< [C]
  unsigned long long* max_value;     //!< [H]: the largest value seen (0 without draws)
  overflow_record* records;          //!< [capacity]
  unsigned long long* record_count;  //!< records offered (may exceed capacity)
  unsigned long long capacity;
};

__device__ inline unsigned long long warp_sum(unsigned long long v) {
  for (int width = warp_size / 2; width >= 1; width /= 2) v += __shfl_down_sync(full_mask, v, width);
  return v;
}
__device__ inline unsigned long long warp_max(unsigned long long v) {
  for (int width = warp_size / 2; width >= 1; width /= 2) {
    const unsigned long long other = __shfl_down_sync(full_mask, v, width);
    v = other > v ? other : v;
  }
  return v;
}

//! The tally kernel: one thread per draw, `step(draw_stream(o, i))` gives the draw's outcome.
template <int H, int C, class Step>
__global__ void __launch_bounds__(simulate_threads)
    tally_kernel(simulate::run_options o, Step step, tally_layout<H> layout, tally_sinks<H, C> sinks) {
  extern __shared__ unsigned long long shared_bins[];
  for (unsigned b = threadIdx.x; b < layout.shared_bins; b += blockDim.x) shared_bins[b] = 0;
  __syncthreads();
  unsigned long long sum[C], largest[H];
#pragma unroll
  for (int c = 0; c < C; ++c) sum[c] = 0;
#pragma unroll
  for (int h = 0; h < H; ++h) largest[h] = 0;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long j = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; j < o.draws; j += stride) {
    const std::uint64_t i = o.first + j;
    const draw_tally<H, C> t = step(simulate::draw_stream(o, i));
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const unsigned long long v = t.bin[h];
      if (v == no_bin) continue;
      largest[h] = v > largest[h] ? v : largest[h];
      if (h == 0 && v < layout.shared_bins) {
        atomicAdd(&shared_bins[v], 1ull);
      } else if (v < layout.size[h]) {
        atomicAdd(&sinks.counts[layout.offset[h] + v], 1ull);
      } else {
        const unsigned long long slot = atomicAdd(sinks.record_count, 1ull);
        if (slot < sinks.capacity) sinks.records[slot] = {i, static_cast<unsigned long long>(h), v};
      }
    }
#pragma unroll
    for (int c = 0; c < C; ++c) sum[c] += t.add[c];
  }
  const bool lane0 = lane_id() == 0;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const unsigned long long s = warp_sum(sum[c]);
    if (lane0 && s != 0) atomicAdd(&sinks.sums[c], s);
  }
#pragma unroll
  for (int h = 0; h < H; ++h) {
    const unsigned long long m = warp_max(largest[h]);
    if (lane0 && m != 0) atomicMax(&sinks.max_value[h], m);
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b < layout.shared_bins; b += blockDim.x)
    if (shared_bins[b] != 0) atomicAdd(&sinks.counts[layout.offset[0] + b], shared_bins[b]);
}

}  // namespace specdec::backend::cuda::detail
