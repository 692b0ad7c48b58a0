//! \file backend/cuda/primitives/warp.cuh
//! \brief Warp-level reductions in the orders the determinism contracts fix.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace specdec::backend::cuda::detail {

inline constexpr int warp_size = 32;
inline constexpr unsigned full_mask = 0xffffffffu;

__device__ inline int lane_id() noexcept { return static_cast<int>(threadIdx.x) % warp_size; }

//! Rule 3 of the sampling contract (sampling/categorical.hpp): a_j + a_{j+16} (j < 16), then by 8,
//! 4, 2, 1; the result is in lane 0. Bit-identical to `specdec::detail::reduce_lanes`.
__device__ inline double reduce_lanes(double a) noexcept {
  for (int width = warp_size / 2; width >= 1; width /= 2) a += __shfl_down_sync(full_mask, a, width);
  return a;
}

//! The largest of the lanes' `v` (-1 = none), in every lane.
__device__ inline long long warp_max_index(long long v) noexcept {
  for (int width = warp_size / 2; width >= 1; width /= 2) {
    const long long other = __shfl_xor_sync(full_mask, v, width);
    v = other > v ? other : v;
  }
  return v;
}

//! A (value, index) pair for argmax: larger value wins, the lower index on ties (specdec::argmax's
//! convention), so the result does not depend on the reduction order.
struct arg_best {
  double value;
  long long index;  //!< -1: nothing seen
};

__device__ inline arg_best better(arg_best a, arg_best b) noexcept {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

//! The warp's argmax, in every lane.
__device__ inline arg_best warp_argmax(arg_best a) noexcept {
  for (int width = warp_size / 2; width >= 1; width /= 2) {
    arg_best other{__shfl_xor_sync(full_mask, a.value, width), __shfl_xor_sync(full_mask, a.index, width)};
    a = better(a, other);
  }
  return a;
}

//! True in every lane when `x` is true in every lane / in some lane.
__device__ inline bool warp_all(bool x) noexcept { return __all_sync(full_mask, x) != 0; }
__device__ inline bool warp_any(bool x) noexcept { return __any_sync(full_mask, x) != 0; }

}  // namespace specdec::backend::cuda::detail
