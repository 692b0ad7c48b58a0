//! \file backend/cuda/top_w.cuh
//! \brief Batched top-W selection on the GPU, the selection step of beam drafts (MTAD, seed 003,
//! section 2.1; draft/beam.hpp): for each of R rows of n joint scores s(i, v) (the W x V candidate
//! matrix of one beam step, flattened beam-major, -inf where q~(v | beam i) = 0), the indices of
//!   - `beam_mode::search`: the W largest scores (deterministic beam search);
//!   - `beam_mode::sample_without_replacement`: the W largest s + G, G i.i.d. standard Gumbel
//!     (Gumbel-top-k, Vieira 2014; Kool et al. 2019): W draws from p_beam (eq. (2)) without
//!     replacement.
//! Output: row r's indices in out[r * W, r * W + W), ordered by key descending, then index ascending
//! (`specdec::top_w_indices`' strict total order), padded with -1 when the row has fewer than W
//! usable keys (neither -inf nor NaN).
//!
//! **Same result as the CPU.** `search` is exact: the same indices as `top_w_indices` on the row
//! (only comparisons; -0 and +0 tie, as with `==`). `sample_without_replacement` draws its Gumbels
//! as the CPU beam drafter does: the candidates are the usable entries in index order (beam, then
//! token), and candidate c reads the c-th uniform u_c of the row's stream (`uniform_at(address, c)`,
//! the value `philox_stream::gumbel()` reads for the c-th candidate), G = gumbel_from_uniform(u_c).
//! A zero uniform makes the CPU redraw, which shifts every later candidate's uniform; the kernel
//! detects it and recomputes that row's keys sequentially with `philox_stream::gumbel()` itself. The
//! uniforms are bit-identical; the Gumbel transform uses the device's log/log1p (CUDA: within 1 ulp)
//! where the CPU uses the host's, so a key may differ by a few ulp, and the selected set can differ
//! from the CPU's only where two keys lie within those few ulp of each other at the W-th place (for
//! keys spread like Gumbels, a probability of order n 10^-15 per row).
//!
//! **Algorithm** (one block per row; n < 2^32, W <= `max_top_w`): the keys are ordered as 96-bit
//! integers (the key's order-preserving 64-bit image, then the inverted index, so every key is
//! distinct and ties go to the lower index); a most-significant-digit radix select with 8-bit digits
//! finds the W-th largest, stopping as soon as every entry of the chosen bucket is selected (2-3
//! passes over the row for continuous keys; up to 12 when many keys tie, since the index digits then
//! decide); one more pass gathers the W winners, which are ranked in shared memory. `sample_without_replacement` first writes the keys to a workspace (one pass: a block-wide
//! count of usable entries gives each its candidate index).
//! Memory: `top_w_workspace_bytes` then a caller-owned device workspace, or the overload that
//! allocates on the stream. Scores, streams and output are device memory. Asynchronous.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cuda/error.cuh"
#include "specdec/backend/cuda/memory.cuh"
#include "specdec/backend/cuda/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/draft/beam.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/random/uniform.hpp"

namespace specdec::backend::cuda {

//! The largest W the kernels take (the winners are ranked in shared memory).
inline constexpr std::size_t max_top_w = 1024;

namespace detail {

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

//! The shapes of a call, checked.
struct top_w_shape {
  std::size_t rows;
  bool gumbel;
};

template <class T>
top_w_shape check_top_w(beam_mode mode, std::span<const T> scores, std::size_t n, std::size_t w,
                        std::span<const random::stream_address> streams, std::span<std::int64_t> out) {
  SPECDEC_EXPECTS(mode == beam_mode::search || mode == beam_mode::sample_without_replacement,
                  "specdec::backend::cuda::top_w: the mode must be search or sample_without_replacement");
  SPECDEC_EXPECTS(n >= 1 && n <= 0xFFFFFFFFull, "specdec::backend::cuda::top_w: the row length n must be in [1, 2^32)");
  SPECDEC_EXPECTS(scores.size() % n == 0, "specdec::backend::cuda::top_w: scores must hold whole rows of n entries");
  SPECDEC_EXPECTS(w <= max_top_w, "specdec::backend::cuda::top_w: W must be <= max_top_w");
  const std::size_t rows = scores.size() / n;
  SPECDEC_EXPECTS(out.size() == rows * w, "specdec::backend::cuda::top_w: out must hold W entries per row");
  const bool gumbel = mode == beam_mode::sample_without_replacement;
  SPECDEC_EXPECTS(!gumbel || streams.size() == rows, "specdec::backend::cuda::top_w: one stream address per row");
  return {rows, gumbel};
}

//! Launches the keys (Gumbel mode) and the selection; `keys` is the workspace part (Gumbel only).
template <class T>
void launch_top_w(cudaStream_t stream, const top_w_shape& shape, const T* scores, std::size_t n, std::size_t w,
                  const random::stream_address* streams, std::int64_t* out, double* keys, bool sequential) {
  if (shape.rows == 0 || w == 0) return;
  const auto grid = static_cast<unsigned>(shape.rows);
  const std::size_t shared = chosen_slots(w) * (sizeof(unsigned long long) + sizeof(unsigned));
  if (shape.gumbel) {
    gumbel_keys_kernel<T><<<grid, top_w_threads, 0, stream>>>(scores, n, streams, keys, sequential);
    check_launch("specdec::backend::cuda::top_w: gumbel_keys_kernel");
    top_w_kernel<double><<<grid, top_w_threads, shared, stream>>>(keys, n, w, out);
  } else {
    top_w_kernel<T><<<grid, top_w_threads, shared, stream>>>(scores, n, w, out);
  }
  check_launch("specdec::backend::cuda::top_w: top_w_kernel");
}

}  // namespace detail

//! Device bytes `top_w` needs: rows * n doubles of keys for `sample_without_replacement`, none for
//! `search`.
inline std::size_t top_w_workspace_bytes(beam_mode mode, std::size_t rows, std::size_t n) {
  workspace_plan plan;
  if (mode == beam_mode::sample_without_replacement) plan.take<double>(rows * n);
  return plan.bytes();
}

//! The W best of each row of `scores` ([rows][n], device memory) into `out` ([rows][W], device
//! memory), by `mode` (see the file comment); `streams` ([rows], device memory) are the rows' stream
//! addresses (the beam drafter's `request_stream.at(t, purpose::beam)`; unused by `search`).
//! `workspace`: device memory of at least `top_w_workspace_bytes(mode, rows, n)` bytes. Asynchronous
//! on `stream`.
//! \pre mode is search or sample_without_replacement; 1 <= n < 2^32; scores.size() a multiple of n;
//!      W <= max_top_w; out.size() == rows * W; one stream per row for sample_without_replacement.
//! \throws specdec::error otherwise or when the workspace is too small; specdec::cuda_error on CUDA errors.
template <class T>
void top_w(cudaStream_t stream, beam_mode mode, std::span<const T> scores, std::size_t n, std::size_t w,
           std::span<const random::stream_address> streams, std::span<std::int64_t> out, std::span<std::byte> workspace) {
  const detail::top_w_shape shape = detail::check_top_w(mode, scores, n, w, streams, out);
  workspace_plan plan(workspace);
  double* keys = shape.gumbel ? plan.take<double>(shape.rows * n) : nullptr;
  detail::launch_top_w(stream, shape, scores.data(), n, w, streams.data(), out.data(), keys, false);
}

//! `top_w` with a workspace allocated (and freed) on `stream`.
template <class T>
void top_w(cudaStream_t stream, beam_mode mode, std::span<const T> scores, std::size_t n, std::size_t w,
           std::span<const random::stream_address> streams, std::span<std::int64_t> out) {
  const detail::top_w_shape shape = detail::check_top_w(mode, scores, n, w, streams, out);
  const device_buffer buffer(top_w_workspace_bytes(mode, shape.rows, n), stream);
  top_w(stream, mode, scores, n, w, streams, out, buffer.span());
}

}  // namespace specdec::backend::cuda
