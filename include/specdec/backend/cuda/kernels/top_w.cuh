//! \file backend/cuda/kernels/top_w.cuh
//! \brief The kernels of top_w.cuh: the radix top-W selection over 96-bit composite keys (`top_w_kernel`) and the
//! Gumbel keys (`gumbel_keys_kernel`).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/draft/beam.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/random/uniform.hpp"

namespace specdec::backend::cuda::detail {

inline constexpr int top_w_threads = 512;  //!< threads per block (one block per row)
inline constexpr int radix_digits = 12;    //!< 8-bit digits of the 96-bit composite key

__device__ inline double negative_infinity() { return __longlong_as_double(static_cast<long long>(0xFFF0000000000000ull)); }

//! A key with its index as one 96-bit integer: larger = earlier in the selection order.
struct composite_key {
  unsigned long long key;  //!< the order-preserving image of the double key
  unsigned inv;            //!< ~index: the lower index is the larger
};

//! The order-preserving 64-bit image of a usable double (-0 and +0 map alike, as they compare equal).
__device__ inline unsigned long long order_bits(double x) {
  const auto b = static_cast<unsigned long long>(__double_as_longlong(x == 0.0 ? 0.0 : x));
  return (b >> 63) != 0 ? ~b : (b | (1ull << 63));
}

//! Digit d (0 = most significant) of a composite key.
__host__ __device__ inline unsigned digit_of(composite_key c, int d) {
  return d < 8 ? static_cast<unsigned>(c.key >> (56 - 8 * d)) & 0xFFu : (c.inv >> (24 - 8 * (d - 8))) & 0xFFu;
}

//! The masks of a composite key's first `depth` digits.
__host__ __device__ inline unsigned long long high_mask(int depth) {
  return depth == 0 ? 0ull : depth >= 8 ? ~0ull : ~0ull << (64 - 8 * depth);
}
__host__ __device__ inline unsigned low_mask(int depth) { return depth <= 8 ? 0u : ~0u << (32 - 8 * (depth - 8)); }

//! Whether c's first `depth` digits equal the prefix's.
__host__ __device__ inline bool matches(composite_key c, composite_key prefix, int depth) {
  const unsigned long long hm = high_mask(depth);
  const unsigned lm = low_mask(depth);
  return (c.key & hm) == (prefix.key & hm) && (c.inv & lm) == (prefix.inv & lm);
}

//! Whether c's first `depth` digits are >= the prefix's (lexicographically).
__host__ __device__ inline bool at_least(composite_key c, composite_key prefix, int depth) {
  const unsigned long long hm = high_mask(depth);
  if ((c.key & hm) != (prefix.key & hm)) return (c.key & hm) > (prefix.key & hm);
  const unsigned lm = low_mask(depth);
  return (c.inv & lm) >= (prefix.inv & lm);
}

__host__ __device__ inline bool greater(composite_key a, composite_key b) {
  return a.key != b.key ? a.key > b.key : a.inv > b.inv;
}

//! The radix step of warp 0: the bucket (from the top) that holds the k-th largest, given the
//! histogram; writes the digit, the rank left inside the bucket and the bucket's count.
__device__ inline void find_bucket(const unsigned* hist, unsigned k, unsigned* digit, unsigned* k_left, unsigned* bucket_count) {
  const int lane = lane_id();
  unsigned c[8];
  unsigned total = 0;
  for (int j = 0; j < 8; ++j) total += (c[j] = hist[255 - 8 * lane - j]);  // lane 0 holds the top bins
  unsigned inclusive = total;
  for (int d = 1; d < warp_size; d *= 2) {
    const unsigned t = __shfl_up_sync(full_mask, inclusive, d);
    if (lane >= d) inclusive += t;
  }
  unsigned above = inclusive - total;
  if (above < k && k <= inclusive) {
    for (int j = 0; j < 8; ++j) {
      if (above + c[j] >= k) {
        *digit = static_cast<unsigned>(255 - 8 * lane - j);
        *k_left = k - above;
        *bucket_count = c[j];
        break;
      }
      above += c[j];
    }
  }
}

//! Shared slots for the W winners: W rounded up to a multiple of 4. The ranking loop below is unrolled
//! by 4 and nvcc loads the keys of its remainder in pairs (LDS.128 / LDS.64, sm_90, CUDA 13.0) even
//! when only one is used, so the arrays must extend to the next multiple of 4 (compute-sanitizer
//! memcheck reported 16-byte reads past a 12-byte window for W = 1 before this padding).
__host__ __device__ constexpr std::size_t chosen_slots(std::size_t w) { return (w + 3) / 4 * 4; }

//! One block per row: the W largest of keys[row * n, row * n + n) (see the file comment).
template <class K>
__global__ void __launch_bounds__(top_w_threads) top_w_kernel(const K* keys, std::size_t n, std::size_t w, std::int64_t* out) {
  extern __shared__ unsigned long long top_w_shared[];
  unsigned long long* chosen_key = top_w_shared;
  auto* chosen_inv = reinterpret_cast<unsigned*>(chosen_key + chosen_slots(w));
  __shared__ unsigned hist[256];
  __shared__ unsigned s_digit, s_k, s_count, s_selected;
  const K* x = keys + blockIdx.x * n;
  std::int64_t* o = out + blockIdx.x * w;
  const double lowest = negative_infinity();

  composite_key prefix{0ull, 0u};
  int depth = 0;
  bool select_all = false;
  unsigned k = static_cast<unsigned>(w);
  for (int d = 0; d < radix_digits; ++d) {
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (std::size_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double v = static_cast<double>(x[j]);
      if (!(v > lowest)) continue;  // -inf and NaN are never selected
      const composite_key c{order_bits(v), ~static_cast<unsigned>(j)};
      if (matches(c, prefix, d)) atomicAdd(&hist[digit_of(c, d)], 1u);
    }
    __syncthreads();
    if (threadIdx.x < warp_size) {
      if (d == 0) {  // the first pass counts every usable key: are there more than W?
        unsigned usable = 0;
        for (int b = lane_id(); b < 256; b += warp_size) usable += hist[b];
        for (int width = warp_size / 2; width >= 1; width /= 2) usable += __shfl_xor_sync(full_mask, usable, width);
        if (threadIdx.x == 0) s_selected = usable;
      }
      __syncwarp();
      if (d > 0 || s_selected > k) find_bucket(hist, k, &s_digit, &s_k, &s_count);
    }
    __syncthreads();
    if (d == 0 && s_selected <= k) {  // W or fewer usable keys: all of them
      select_all = true;
      break;
    }
    if (d < 8)
      prefix.key |= static_cast<unsigned long long>(s_digit) << (56 - 8 * d);
    else
      prefix.inv |= s_digit << (24 - 8 * (d - 8));
    k = s_k;
    depth = d + 1;
    if (s_count == k) break;  // the whole bucket is selected: nothing below this digit matters
  }
  __syncthreads();
  if (threadIdx.x == 0) s_selected = 0;
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < n; j += blockDim.x) {
    const double v = static_cast<double>(x[j]);
    if (!(v > lowest)) continue;
    const composite_key c{order_bits(v), ~static_cast<unsigned>(j)};
    if (select_all || at_least(c, prefix, depth)) {
      const unsigned slot = atomicAdd(&s_selected, 1u);
      if (slot < w) {
        chosen_key[slot] = c.key;
        chosen_inv[slot] = c.inv;
      }
    }
  }
  __syncthreads();
  const unsigned selected = s_selected < w ? s_selected : static_cast<unsigned>(w);
  for (unsigned i = threadIdx.x; i < selected; i += blockDim.x) {
    const composite_key c{chosen_key[i], chosen_inv[i]};
    unsigned rank = 0;
    for (unsigned j = 0; j < selected; ++j) rank += greater({chosen_key[j], chosen_inv[j]}, c) ? 1u : 0u;
    o[rank] = static_cast<std::int64_t>(~c.inv);
  }
  for (std::size_t r = selected + threadIdx.x; r < w; r += blockDim.x) o[r] = -1;
}

//! One block per row: keys[j] = s_j + G(u_c) for the usable entries (c = the entry's rank among
//! the usable entries of the row), -inf for the others; a row that meets a zero uniform (or every
//! row, with `sequential`) is recomputed by one thread with `philox_stream::gumbel()`.
template <class T>
__global__ void __launch_bounds__(top_w_threads)
    gumbel_keys_kernel(const T* scores, std::size_t n, const random::stream_address* streams, double* keys, bool sequential) {
  __shared__ unsigned warp_count[top_w_threads / warp_size];
  __shared__ int zero_seen;
  const T* x = scores + blockIdx.x * n;
  double* out = keys + blockIdx.x * n;
  const random::stream_address address = streams[blockIdx.x];
  const double lowest = negative_infinity();
  const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_size;
  const int warps = static_cast<int>(blockDim.x) / warp_size;
  if (threadIdx.x == 0) zero_seen = 0;
  unsigned base = 0;  // usable entries before this chunk
  for (std::size_t chunk = 0; chunk < n; chunk += blockDim.x) {
    const std::size_t j = chunk + threadIdx.x;
    const double v = j < n ? static_cast<double>(x[j]) : lowest;
    const bool usable = v > lowest;
    const unsigned ballot = __ballot_sync(full_mask, usable);
    if (lane == 0) warp_count[warp] = static_cast<unsigned>(__popc(ballot));
    __syncthreads();
    unsigned before = 0, total = 0;
    for (int k = 0; k < warps; ++k) {
      before += k < warp ? warp_count[k] : 0u;
      total += warp_count[k];
    }
    if (j < n) {
      if (usable) {
        const unsigned c = base + before + static_cast<unsigned>(__popc(ballot & ((1u << lane) - 1u)));
        const double u = random::uniform_at(address, c);
        if (u == 0.0) atomicOr(&zero_seen, 1);
        out[j] = v + random::gumbel_from_uniform(u);
      } else {
        out[j] = lowest;
      }
    }
    base += total;
    __syncthreads();  // warp_count is rewritten by the next chunk
  }
  if ((sequential || zero_seen != 0) && threadIdx.x == 0) {  // the CPU's sequential stream, redraws included
    random::philox_stream g(address);
    for (std::size_t j = 0; j < n; ++j) {
      const double v = static_cast<double>(x[j]);
      out[j] = v > lowest ? v + g.gumbel() : lowest;
    }
  }
}

}  // namespace specdec::backend::cuda::detail
