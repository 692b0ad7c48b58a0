//! \file backend/cuda/kernels/filter.cuh
//! \brief The kernels of filter.cuh: the radix threshold search (`select_pass_kernel`), the kept mass and the rescale
//! passes, and the device-side search state they share.
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/cuda/primitives/block.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/contracts.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/warp.hpp"

namespace specdec::backend::cuda::detail {

inline constexpr int radix_buckets = 2048;  //!< buckets of a level (level 2 uses 512)
inline constexpr int radix_levels = 3;

//! The lowest bit of level `level`'s digit, and its width: bits 30..20, 19..9, 8..0.
__host__ __device__ constexpr int digit_shift(int level) noexcept { return level == 0 ? 20 : level == 1 ? 9 : 0; }
__host__ __device__ constexpr int digit_bits(int level) noexcept { return level == 2 ? 9 : 11; }

//! The bit pattern of a float, and the float of a pattern (host and device).
__host__ __device__ inline std::uint32_t float_bits(float f) noexcept {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}
__host__ __device__ inline float bits_float(std::uint32_t u) noexcept {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

//! The key of the smallest float >= c (c >= 0 finite): x < c <=> key(x) < it, for every float x >= 0.
__host__ __device__ inline std::uint32_t ceil_float_key(double c) noexcept {
#ifdef __CUDA_ARCH__
  return __float_as_uint(__double2float_ru(c));
#else
  float f = static_cast<float>(c);
  if (static_cast<double>(f) < c) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return std::bit_cast<std::uint32_t>(f);
#endif
}

//! The order key of a usable probability: its bit pattern, 0 for -0.
__host__ __device__ inline std::uint32_t prob_key(float p) noexcept { return p > 0.0f ? float_bits(p) : 0u; }

//! seq's usable weight for a float: >= 0 (so not NaN) and finite.
__host__ __device__ inline bool usable_prob(float p) noexcept { return p >= 0.0f && p <= FLT_MAX; }

//! The filtered, renormalised probability of an entry p of a row with threshold key `tau` and
//! `inv_kept` = 1 / (the kept mass): key(p) >= tau ? float(p * inv_kept) : 0. The one formula of
//! `rescale_kernel` and of the fused verification's filtered rows (verify.cuh).
__host__ __device__ inline float filtered_prob(float p, std::uint32_t tau, double inv_kept) noexcept {
  return prob_key(p) >= tau ? static_cast<float>(static_cast<double>(p) * inv_kept) : 0.0f;
}

//! The integer significand of a key: value = significand * 2^(max(e, 1) - 150), e = key >> 23.
__host__ __device__ constexpr std::uint32_t key_significand(std::uint32_t key) noexcept {
  return (key & 0x7FFFFFu) | ((key >> 23) != 0 ? 0x800000u : 0u);
}

//! The exact mass of a sum of significands of exponent field `e` (exact while sum < 2^53).
__host__ __device__ inline double bucket_mass(unsigned long long sum, std::uint32_t e) {
  return ldexp(static_cast<double>(sum), static_cast<int>(e > 0 ? e : 1) - 150);
}

//! A row's histogram at one level: counts and significand sums per bucket.
struct row_histogram {
  std::uint32_t count[radix_buckets];
  unsigned long long msum[radix_buckets];
};

//! Where a row's threshold search stands.
enum select_phase : std::uint32_t { phase_start = 0, phase_top_k = 1, phase_top_p = 2, phase_done = 3 };

//! One row's filter parameters (set by the host) and search state (device). An aggregate without
//! initialisers (it lives in shared memory): the host value-initialises it (`select_row{}`: phase
//! start, status ok, everything else 0) and sets the parameters.
struct select_row {
  std::uint32_t top_k;        //!< 0: off (also when k >= V)
  std::uint32_t passthrough;  //!< 1: leave the row as it is (greedy rows of warp_logits)
  std::uint32_t phase;        //!< a `select_phase`
  double top_p;               //!< 1: off
  double min_p;               //!< 0: off
  // search state
  std::uint32_t arrived;   //!< blocks done with the current pass
  std::uint32_t bad;       //!< a NaN, infinite or negative entry was seen
  std::uint32_t max_key;   //!< the largest key
  std::uint32_t level;     //!< the level of the next pass
  std::uint32_t prefix;    //!< the digits chosen above `level`
  std::uint32_t exponent;  //!< the exponent field of the level-0 bucket chosen
  std::uint32_t k_left;    //!< top-k: the rank still to find inside the chosen bucket
  std::uint32_t tau_k, tau_p;
  std::uint32_t tau;  //!< the result: keep the entries whose key is >= tau
  row_status status;
  // filtered sampling: the row's request stream, uploaded with the row (sample.cuh)
  std::uint64_t seed;
  std::uint32_t request, step;
  double above;  //!< mass of the entries above the chosen bucket (of the current phase)
  double goal;   //!< top-p: top_p * (mass of top-k's survivors)
  double kept;   //!< mass of top-k's survivors
};

//! The first bucket, from the top, where a cumulative count or mass reaches its goal.
struct crossing {
  int bucket;                 //!< -1: none
  std::uint32_t count_above;  //!< entries in the buckets above it
  double mass_above;          //!< start + the mass of the buckets above it
  double total;               //!< start + the mass of every bucket
};

inline constexpr int scan_items = radix_buckets / block_threads;

//! Shared memory of `select_pass_kernel`.
struct select_shared {
  std::uint32_t count[radix_buckets];
  unsigned long long msum[radix_buckets];
  union {
    typename cub::BlockScan<double, block_threads>::TempStorage mass;
    typename cub::BlockScan<std::uint32_t, block_threads>::TempStorage count;
  } scan;
  select_row row;
  crossing found;
  int first;
  int last;
};

//! The exponent field of bucket d: from the digit at level 0, the row's below.
__host__ __device__ inline std::uint32_t bucket_exponent(int d, int level, std::uint32_t row_exponent) noexcept {
  return level == 0 ? static_cast<std::uint32_t>(d) >> 3 : row_exponent;
}

//! Scans the staged histogram from the top bucket down (block-wide; every thread gets the result):
//! with `by_count`, the first bucket where the inclusive count reaches `count_goal`; otherwise the
//! first where start + the inclusive mass reaches `mass_goal` (a goal of +inf only sums). Position
//! q = 0, 1, ... is bucket 2047 - q; thread t scans positions 8t .. 8t + 7.
__device__ inline crossing find_crossing(select_shared& sh, int level, std::uint32_t exponent, bool by_count,
                                         std::uint32_t count_goal, double start, double mass_goal) {
  const int base = static_cast<int>(threadIdx.x) * scan_items;
  if (threadIdx.x == 0) sh.first = radix_buckets;
  __syncthreads();
  if (by_count) {
    std::uint32_t count[scan_items], before[scan_items];
#pragma unroll
    for (int i = 0; i < scan_items; ++i) count[i] = sh.count[radix_buckets - 1 - (base + i)];
    cub::BlockScan<std::uint32_t, block_threads>(sh.scan.count).ExclusiveSum(count, before);
#pragma unroll
    for (int i = 0; i < scan_items; ++i)
      if (before[i] + count[i] >= count_goal) {
        atomicMin(&sh.first, base + i);
        break;
      }
    __syncthreads();
    const int q = sh.first;
#pragma unroll
    for (int i = 0; i < scan_items; ++i)  // (constant indices keep the arrays in registers)
      if (base + i == q) sh.found.count_above = before[i];
    __syncthreads();  // the scan storage is reused below
  }
  double mass[scan_items], before[scan_items], total = 0.0;
#pragma unroll
  for (int i = 0; i < scan_items; ++i) {
    const int d = radix_buckets - 1 - (base + i);
    mass[i] = bucket_mass(sh.msum[d], bucket_exponent(d, level, exponent));
  }
  cub::BlockScan<double, block_threads>(sh.scan.mass).ExclusiveSum(mass, before, total);
  if (!by_count) {
#pragma unroll
    for (int i = 0; i < scan_items; ++i)
      if (start + (before[i] + mass[i]) >= mass_goal) {
        atomicMin(&sh.first, base + i);
        break;
      }
  }
  __syncthreads();
  const int q = sh.first;
#pragma unroll
  for (int i = 0; i < scan_items; ++i)
    if (base + i == q) {
      sh.found.bucket = radix_buckets - 1 - q;
      sh.found.mass_above = start + before[i];
    }
  if (threadIdx.x == 0) {
    sh.found.total = start + total;
    if (q == radix_buckets) {
      sh.found.bucket = -1;
      sh.found.count_above = 0;
      sh.found.mass_above = start;
    }
  }
  __syncthreads();
  return sh.found;
}

//! Ends a row's search: tau = max(tau_k, tau_p, tau_min), tau_min the key of the smallest float
//! >= min_p * max (seq keeps p with double(p) >= that product).
__host__ __device__ inline void finish_select(select_row& r) {
  const std::uint32_t tau_min = r.min_p > 0.0 ? ceil_float_key(r.min_p * static_cast<double>(bits_float(r.max_key))) : 0u;
  const std::uint32_t tau = r.tau_k > r.tau_p ? r.tau_k : r.tau_p;
  r.tau = tau > tau_min ? tau : tau_min;
  r.phase = phase_done;
}

//! The state after pass 0's level-0 histogram (`total`: the row's mass): the status, and which
//! search comes first. Host and device (thread 0 of the last block; the tests replay it).
__host__ __device__ inline void start_row(select_row& r, double total) {
  if (r.bad != 0 || !(total > 0.0)) {
    r.status = r.bad != 0 ? row_status::not_finite : row_status::no_mass;
    r.tau = 0;
    r.phase = phase_done;
    return;
  }
  r.status = row_status::ok;
  r.kept = total;
  r.k_left = r.top_k;
  r.goal = r.top_p * total;
  if (r.top_k > 0) {
    r.phase = phase_top_k;
  } else if (r.top_p < 1.0) {
    r.phase = phase_top_p;
  } else {
    finish_select(r);  // min-p alone, or nothing
  }
}

//! The state after the crossing `x` of the current search at `level` (`n` entries and significand
//! sum `sum` in the chosen bucket): the next digit, or the threshold when the bucket holds one entry
//! or the last level is done; top-k's end starts top-p at level 0 (`r.level` = 0) with the mass of
//! its survivors. Host and device.
__host__ __device__ inline void apply_crossing(select_row& r, int level, const crossing& x, std::uint32_t n,
                                               unsigned long long sum) {
  const bool by_count = r.phase == phase_top_k;
  if (x.bucket < 0) {  // top-p only: rounding left the goal above the mass; every survivor stays
    r.tau_p = 0;
    finish_select(r);
    return;
  }
  const std::uint32_t d = static_cast<std::uint32_t>(x.bucket);
  const std::uint32_t e = bucket_exponent(x.bucket, level, r.exponent);
  r.prefix = level == 0 ? d : (r.prefix << digit_bits(level)) | d;
  if (level == 0) r.exponent = e;
  const bool found = n == 1 || level == radix_levels - 1;
  const std::uint32_t key = n == 1 ? (e << 23) | static_cast<std::uint32_t>(sum & 0x7FFFFFu) : r.prefix;
  if (!found) {
    if (by_count) {
      r.k_left -= x.count_above;
      r.above += x.mass_above;
    } else {
      r.above = x.mass_above;
    }
    r.level = static_cast<std::uint32_t>(level) + 1;
  } else if (by_count) {
    r.tau_k = key;
    r.kept = r.above + x.mass_above + bucket_mass(sum, e);
    if (r.top_p < 1.0) {
      r.phase = phase_top_p;
      r.goal = r.top_p * r.kept;
      r.above = 0.0;
      r.prefix = 0;
      r.level = 0;
    } else {
      finish_select(r);
    }
  } else {
    r.tau_p = key;
    finish_select(r);
  }
}

// ---- row sources ----------------------------------------------------------------------------------
// The threshold search and the kept sums read a row through a source: `load(b, vocab, c, x)` puts
// this thread's items of chunk c (the float layout of primitives/block.cuh) of search row b into x, entries
// past the row as +0. Every value is a float, so the exact bucket masses hold.

//! Search row b is the float probability row at probs + b * vocab (warp_probs, warp_logits,
//! sample_filtered).
struct prob_source {
  const float* probs;
  __device__ void load(std::size_t b, std::size_t vocab, std::size_t c, float (&x)[chunk_items<float>]) const {
    load_chunk(probs + b * vocab, vocab, c, x, 0.0f);
  }
};

//! Search row b is a logit row softmaxed on the fly: entry v is the float probability softmax.cuh's
//! write kernel would store (`softmax_entry<float>`, from the row's statistics and temperature), so
//! the search sees exactly the row `warp_logits` filters, without it being written. Row index
//! r = row_of[b] (row_of null: r = b); rows [0, first_rows) lie at `first`, the others at `second`
//! (the fused verification's target rows, then its draft rows); stats and temperature are indexed by
//! r. A row whose statistics are not ok, or whose temperature is not > 0, reads as zeros (no_mass).
template <class T>
struct softmax_source {
  const T* first;
  const T* second;
  std::int64_t first_rows;
  const std::int64_t* row_of;
  const softmax_row* stats;
  const double* temperature;
  __device__ void load(std::size_t b, std::size_t vocab, std::size_t c, float (&x)[chunk_items<float>]) const {
    const std::int64_t r = row_of != nullptr ? row_of[b] : static_cast<std::int64_t>(b);
    const softmax_row st = stats[r];
    const double t = temperature[r];
    if (st.status != row_status::ok || !(t > 0.0)) {
#pragma unroll
      for (int k = 0; k < chunk_items<float>; ++k) x[k] = 0.0f;
      return;
    }
    const T* row =
        r < first_rows ? first + static_cast<std::size_t>(r) * vocab : second + static_cast<std::size_t>(r - first_rows) * vocab;
    T raw[chunk_items<float>];
    load_chunk_as<float>(row, vocab, c, raw, T(0));
    const double inv_t = 1.0 / t, inv_sum = 1.0 / st.sum;
#pragma unroll
    for (int k = 0; k < chunk_items<float>; ++k)
      x[k] = chunk_index<float>(c, k) < vocab ? softmax_entry<float>(raw[k], st.max, t, inv_t, inv_sum) : 0.0f;
  }
};

//! Copies a global histogram into shared memory (block-wide).
__device__ inline void stage_histogram(select_shared& sh, const row_histogram& h) {
  for (int d = static_cast<int>(threadIdx.x); d < radix_buckets; d += block_threads) {
    sh.count[d] = __ldcg(&h.count[d]);
    sh.msum[d] = __ldcg(&h.msum[d]);
  }
  __syncthreads();
}

//! The selection of one level (the last block of a pass, block-wide; not inlined, so that its
//! registers do not weigh on the histogram loop): `sh` holds the row's complete
//! histogram of `level` and `sh.row` its state; `hist0` the row's level-0 histogram, restaged when
//! top-p starts after a top-k that went deeper.
__device__ __noinline__ inline void select_step(select_shared& sh, int level, const row_histogram& hist0) {
  select_row& r = sh.row;
  if (r.phase == phase_start) {  // level 0 of pass 0
    const crossing all = find_crossing(sh, 0, 0, false, 0, 0.0, std::numeric_limits<double>::infinity());
    if (threadIdx.x == 0) start_row(r, all.total);
    __syncthreads();
  }
  while (r.phase == phase_top_k || r.phase == phase_top_p) {  // (the same in every thread)
    const bool by_count = r.phase == phase_top_k;
    const crossing x = by_count ? find_crossing(sh, level, r.exponent, true, r.k_left, 0.0, 0.0)
                                : find_crossing(sh, level, r.exponent, false, 0, r.above, r.goal);
    const std::uint32_t n = x.bucket >= 0 ? sh.count[x.bucket] : 0;
    const unsigned long long sum = x.bucket >= 0 ? sh.msum[x.bucket] : 0;
    __syncthreads();  // every thread has read `r`
    if (threadIdx.x == 0) apply_crossing(r, level, x, n, sum);
    __syncthreads();
    if (by_count && r.phase == phase_top_p) {  // top-k has just ended: top-p starts at level 0
      if (level > 0) stage_histogram(sh, hist0);
      level = 0;
      continue;
    }
    break;  // done, or the next level needs the next pass
  }
}

// Doxygen misparses this internal kernel (its __launch_bounds__) as an initializer list: hidden from it.
//! \cond

//! One pass of the threshold search: one block per (row, chunk), grid = batch * chunks. `first`:
//! pass 0 (level 0 into `hist0`, usability, maximum; zeroes `hist`); later passes histogram the
//! current level into `hist`, which their last block zeroes again. `src`: a row source.
template <class Source>
__global__ void __launch_bounds__(block_threads, 3)  // 80 registers: 3 blocks per SM without spills
    select_pass_kernel(Source src, std::size_t vocab, std::size_t chunks, select_row* rows, row_histogram* hist0,
                       row_histogram* hist, bool first) {
  __shared__ select_shared sh;
  const std::size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
  select_row* row = rows + b;
  const std::uint32_t phase = row->phase;
  if (first ? phase != phase_start : (phase != phase_top_k && phase != phase_top_p)) return;
  const int level = first ? 0 : static_cast<int>(row->level);
  const std::uint32_t prefix = row->prefix;
  row_histogram* h = first ? hist0 + b : hist + b;
  for (int d = static_cast<int>(threadIdx.x); d < radix_buckets; d += block_threads) {
    sh.count[d] = 0;
    sh.msum[d] = 0;
  }
  if (first)  // this row's level histogram, for the later passes
    for (std::size_t d = c * block_threads + threadIdx.x; d < radix_buckets; d += chunks * block_threads) {
      hist[b].count[d] = 0;
      hist[b].msum[d] = 0;
    }
  float x[chunk_items<float>];
  src.load(b, vocab, c, x);
  __syncthreads();

  const int shift = digit_shift(level), above_shift = shift + digit_bits(level);
  const std::uint32_t mask = (1u << digit_bits(level)) - 1u;
  bool bad = false;
  std::uint32_t max_key = 0;
  int run = -1;  // runs of equal digits are added to shared memory at once
  std::uint32_t run_count = 0;
  unsigned long long run_sum = 0;
  const int valid = valid_items<float>(vocab, c);
#pragma unroll
  for (int k = 0; k < chunk_items<float>; ++k) {
    if (k >= valid) break;
    const float p = x[k];
    if (!usable_prob(p)) {
      bad = true;
      continue;
    }
    const std::uint32_t key = prob_key(p);
    if (first)
      max_key = key > max_key ? key : max_key;
    else if ((key >> above_shift) != prefix)
      continue;
    const int d = static_cast<int>((key >> shift) & mask);
    if (d != run) {
      if (run >= 0) {
        atomicAdd(&sh.count[run], run_count);
        atomicAdd(&sh.msum[run], run_sum);
      }
      run = d;
      run_count = 0;
      run_sum = 0;
    }
    ++run_count;
    run_sum += key_significand(key);
  }
  if (run >= 0) {
    atomicAdd(&sh.count[run], run_count);
    atomicAdd(&sh.msum[run], run_sum);
  }
  __syncthreads();
  for (int d = static_cast<int>(threadIdx.x); d < radix_buckets; d += block_threads) {
    if (sh.count[d] != 0) atomicAdd(&h->count[d], sh.count[d]);
    if (sh.msum[d] != 0) atomicAdd(&h->msum[d], sh.msum[d]);
  }
  if (first) {
    bad = __syncthreads_or(bad) != 0;
    const std::uint32_t m = warp_max_u32(max_key);
    if (lane_id() == 0 && m != 0) atomicMax(&row->max_key, m);
    if (threadIdx.x == 0 && bad) atomicOr(&row->bad, 1u);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) sh.last = atomicAdd(&row->arrived, 1u) == chunks - 1 ? 1 : 0;
  __syncthreads();
  if (sh.last == 0) return;

  // The last block of the row: every other block's atomics are visible after the fence.
  __threadfence();
  stage_histogram(sh, *h);
  if (threadIdx.x == 0) {
    sh.row = *row;
    sh.row.bad = __ldcg(&row->bad);
    sh.row.max_key = __ldcg(&row->max_key);
  }
  __syncthreads();
  select_step(sh, level, hist0[b]);
  if (threadIdx.x == 0) {
    sh.row.arrived = 0;
    *row = sh.row;
  }
  if (!first)
    for (int d = static_cast<int>(threadIdx.x); d < radix_buckets; d += block_threads) {
      h->count[d] = 0;
      h->msum[d] = 0;
    }
}
//! \endcond

//! The mass each chunk keeps (entries with key >= tau), for the renormalisation; rows that are
//! usable and not passed through. One block per (row, chunk); `src`: a row source.
template <class Source>
__global__ void __launch_bounds__(block_threads)
    kept_sum_kernel(Source src, std::size_t vocab, std::size_t chunks, const select_row* rows, double* partials) {
  __shared__ double scratch[block_warps];
  const std::size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const select_row& r = rows[b];
  if (r.passthrough != 0 || r.status != row_status::ok) return;
  float x[chunk_items<float>];
  src.load(b, vocab, c, x);
  const std::uint32_t tau = r.tau;
  double s = 0.0;
#pragma unroll
  for (int k = 0; k < chunk_items<float>; ++k)
    if (prob_key(x[k]) >= tau) s += static_cast<double>(x[k]);  // (the fill adds 0)
  s = block_sum_all(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

//! 1 / (the kept mass of a row) from its `chunks` chunk partials, by one warp in a fixed order (every
//! caller gets the same bits: `rescale_kernel` and the fused verification's per-row scale).
__device__ inline double kept_inverse(const double* partials, std::size_t chunks) {
  return 1.0 / warp_strided_sum(partials, chunks);
}

//! The filtered, renormalised row in place: p -> key(p) >= tau ? float(p * (1 / kept)) : 0;
//! not_finite rows zero-filled, no_mass and passed-through rows untouched; writes the status when
//! `statuses` is not null. One block per (row, chunk).
template <class T>  // float
__global__ void __launch_bounds__(block_threads)
    rescale_kernel(T* probs, std::size_t vocab, std::size_t chunks, const select_row* rows, const double* partials,
                   row_status* statuses) {
  static_assert(std::is_same_v<T, float>, "float rows");
  __shared__ double inv_shared;
  const std::size_t b = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const row_status status = rows[b].status;
  const std::uint32_t tau = rows[b].tau;
  if (statuses != nullptr && c == 0 && threadIdx.x == 0) statuses[b] = status;
  if (rows[b].passthrough != 0 || status == row_status::no_mass) return;
  float y[chunk_items<float>];
  if (status == row_status::not_finite) {
#pragma unroll
    for (int k = 0; k < chunk_items<float>; ++k) y[k] = 0.0f;
  } else {
    float x[chunk_items<float>];
    load_chunk(probs + b * vocab, vocab, c, x, 0.0f);
    if (threadIdx.x < warp_size) {
      const double inv = kept_inverse(partials + b * chunks, chunks);
      if (threadIdx.x == 0) inv_shared = inv;
    }
    __syncthreads();
    const double inv = inv_shared;
#pragma unroll
    for (int k = 0; k < chunk_items<float>; ++k) y[k] = filtered_prob(x[k], tau, inv);
  }
  store_chunk<float>(probs + b * vocab, vocab, c, y);
}

}  // namespace specdec::backend::cuda::detail
