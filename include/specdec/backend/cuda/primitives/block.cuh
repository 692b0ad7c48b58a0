//! \file backend/cuda/primitives/block.cuh
//! \brief Block-level pieces of the row kernels (softmax.cuh, filter.cuh): a row split into chunks,
//! one 256-thread block per chunk, with loads, stores and reductions in a fixed order.
//!
//! Layout: thread t of the block that owns chunk c of a row holds `chunk_vectors` vectors of 16
//! bytes; vector j covers the entries c * chunk_entries<T> + (j * 256 + t) * W + [0, W), with
//! W = 16 / sizeof(T) (a warp's vector loads are one contiguous 512-byte run). A row that is not
//! 16-byte aligned is read with scalar loads of the same entries, so which thread adds which entry,
//! and therefore every rounded result, does not depend on the row's address (nor on the other rows
//! of a batch). Splitting rows into chunks is what keeps the GPU busy at small batch: a row of
//! 128256 floats is 32 blocks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "specdec/backend/cuda/primitives/warp.cuh"

namespace specdec::backend::cuda::detail {

inline constexpr int block_threads = 256;                      //!< threads of a row-chunk block
inline constexpr int block_warps = block_threads / warp_size;  //!< warps of a row-chunk block
inline constexpr int chunk_vectors = 4;                        //!< 16-byte vectors per thread and chunk

//! Entries of T per 16-byte vector (float: 4, double: 2).
template <class T>
inline constexpr int vector_width = 16 / static_cast<int>(sizeof(T));
//! Entries of T one thread holds per chunk.
template <class T>
inline constexpr int chunk_items = (chunk_vectors * vector_width<T>);
//! Entries of T per chunk (float: 4096, double: 2048).
template <class T>
inline constexpr std::size_t chunk_entries = static_cast<std::size_t>(block_threads) * chunk_items<T>;

//! The number of chunks of a row of `vocab` entries.
template <class T>
constexpr std::size_t chunk_count(std::size_t vocab) noexcept {
  return (vocab + chunk_entries<T> - 1) / chunk_entries<T>;
}

//! The row index of this thread's item k (0 <= k < chunk_items<T>) in chunk `chunk`; items are in
//! increasing index order.
template <class T>
__device__ inline std::size_t chunk_index(std::size_t chunk, int k) noexcept {
  constexpr int w = vector_width<T>;
  return chunk * chunk_entries<T> + (static_cast<std::size_t>(k / w) * block_threads + threadIdx.x) * w +
         static_cast<std::size_t>(k % w);
}

//! How many of this thread's items of chunk `chunk` lie inside a row of `vocab` entries (its items
//! ascend, so they are the first ones).
template <class T>
__device__ inline int valid_items(std::size_t vocab, std::size_t chunk) noexcept {
  int n = 0;
#pragma unroll
  for (int k = 0; k < chunk_items<T>; ++k) n += chunk_index<T>(chunk, k) < vocab ? 1 : 0;
  return n;
}

template <class T>
struct vector16;
template <>
struct vector16<float> {
  using type = float4;
  __device__ static void unpack(const float4& v, float* x) {
    x[0] = v.x;
    x[1] = v.y;
    x[2] = v.z;
    x[3] = v.w;
  }
  __device__ static float4 pack(const float* x) { return make_float4(x[0], x[1], x[2], x[3]); }
};
template <>
struct vector16<double> {
  using type = double2;
  __device__ static void unpack(const double2& v, double* x) {
    x[0] = v.x;
    x[1] = v.y;
  }
  __device__ static double2 pack(const double* x) { return make_double2(x[0], x[1]); }
};

//! Loads this thread's items of chunk `chunk` of `row`; entries at or past `vocab` become `fill`.
template <class T>
__device__ inline void load_chunk(const T* row, std::size_t vocab, std::size_t chunk, T (&x)[chunk_items<T>], T fill) {
  constexpr int w = vector_width<T>;
  const bool aligned = reinterpret_cast<std::uintptr_t>(row) % 16 == 0;
#pragma unroll
  for (int j = 0; j < chunk_vectors; ++j) {
    const std::size_t first = chunk_index<T>(chunk, j * w);
    if (aligned && first + w <= vocab) {
      vector16<T>::unpack(*reinterpret_cast<const typename vector16<T>::type*>(row + first), x + j * w);
    } else {
#pragma unroll
      for (int i = 0; i < w; ++i) x[j * w + i] = first + i < vocab ? row[first + i] : fill;
    }
  }
}

//! Loads the entries of a row of T that sit at this thread's item positions of chunk `chunk` in the
//! layout of L (`chunk_index<L>`; entries at or past `vocab` become `fill`): `load_chunk` when T = L;
//! otherwise 16-byte vectors where a layout vector covers whole ones (double rows read in the float
//! layout: two per vector), else scalar loads. Lets a kernel of float rows read double logits.
template <class L, class T>
__device__ inline void load_chunk_as(const T* row, std::size_t vocab, std::size_t chunk, T (&x)[chunk_items<L>], T fill) {
  if constexpr (std::is_same_v<L, T>) {
    load_chunk(row, vocab, chunk, x, fill);
  } else {
    constexpr int w = vector_width<L>, wt = vector_width<T>;
    constexpr bool vectors = w % wt == 0;  // a layout vector is whole 16-byte vectors of T
    const bool aligned = vectors && reinterpret_cast<std::uintptr_t>(row) % 16 == 0;
#pragma unroll
    for (int j = 0; j < chunk_vectors; ++j) {
      const std::size_t first = chunk_index<L>(chunk, j * w);
      if constexpr (vectors) {
        if (aligned && first + w <= vocab) {
#pragma unroll
          for (int i = 0; i < w; i += wt)
            vector16<T>::unpack(*reinterpret_cast<const typename vector16<T>::type*>(row + first + i), x + j * w + i);
          continue;
        }
      }
#pragma unroll
      for (int i = 0; i < w; ++i) x[j * w + i] = first + i < vocab ? row[first + i] : fill;
    }
  }
}

//! Stores this thread's items, laid out as its items of chunk `chunk` of a row of T, into a row of U
//! (entries at or past `vocab` are not written). Vector stores when T = U and the row is aligned.
template <class T, class U>
__device__ inline void store_chunk(U* row, std::size_t vocab, std::size_t chunk, const U (&y)[chunk_items<T>]) {
  constexpr int w = vector_width<T>;
  const bool aligned = std::is_same_v<T, U> && reinterpret_cast<std::uintptr_t>(row) % 16 == 0;
#pragma unroll
  for (int j = 0; j < chunk_vectors; ++j) {
    const std::size_t first = chunk_index<T>(chunk, j * w);
    if constexpr (std::is_same_v<T, U>) {
      if (aligned && first + w <= vocab) {
        *reinterpret_cast<typename vector16<T>::type*>(row + first) = vector16<T>::pack(y + j * w);
        continue;
      }
    }
#pragma unroll
    for (int i = 0; i < w; ++i)
      if (first + i < vocab) row[first + i] = y[j * w + i];
  }
}

//! The block's sum of every thread's `x`, in a fixed order (the halving tree of `reduce_lanes` in
//! each warp, then the same tree over the warp sums, padded with +0), in every thread. `scratch`:
//! `block_warps` doubles of shared memory. Contains __syncthreads: call from every thread.
__device__ inline double block_sum_all(double x, double* scratch) {
  const double w = reduce_lanes(x);
  if (lane_id() == 0) scratch[threadIdx.x / warp_size] = w;
  __syncthreads();
  // Every warp reduces the warp sums in the same order, so no broadcast through memory is needed.
  const double s = reduce_lanes(lane_id() < block_warps ? scratch[lane_id()] : 0.0);
  __syncthreads();  // `scratch` may be reused
  return __shfl_sync(full_mask, s, 0);
}

//! The block's argmax (larger value, then lower index: `better`), in every thread. `scratch`:
//! `block_warps` entries of shared memory. Contains __syncthreads: call from every thread.
__device__ inline arg_best block_argmax(arg_best a, arg_best* scratch) {
  a = warp_argmax(a);
  if (lane_id() == 0) scratch[threadIdx.x / warp_size] = a;
  __syncthreads();
  const arg_best b = warp_argmax(lane_id() < block_warps ? scratch[lane_id()] : arg_best{0.0, -1});
  __syncthreads();
  return b;
}

//! The largest `v` of the warp, in every lane.
__device__ inline std::uint32_t warp_max_u32(std::uint32_t v) noexcept {
  for (int width = warp_size / 2; width >= 1; width /= 2) {
    const std::uint32_t other = __shfl_xor_sync(full_mask, v, width);
    v = other > v ? other : v;
  }
  return v;
}

//! Sum over the `count` doubles at `x` by one warp, in a fixed order: lane j adds x[j], x[j + 32],
//! ... in increasing order, then `reduce_lanes`; in every lane. Every block that calls it on the
//! same data gets the same bits.
__device__ inline double warp_strided_sum(const double* x, std::size_t count) {
  double acc = 0.0;
  for (std::size_t i = static_cast<std::size_t>(lane_id()); i < count; i += warp_size) acc += x[i];
  return __shfl_sync(full_mask, reduce_lanes(acc), 0);
}

}  // namespace specdec::backend::cuda::detail
