//! \file backend/cuda/primitives/categorical.cuh
//! \brief The two-level inverse CDF of sampling/categorical.hpp on the GPU, one warp per tile: the
//! same tokens as seq for the same uniform (bit-identical, by the determinism contract).
//!
//! Pass 1 (`warp_tile_mass`, any number of warps and blocks per row): lane j of the warp that owns a
//! tile sums the entries j, j + 32, ... in index order (rule 2) and the warp adds the 32 lane sums
//! with `__shfl_down_sync` by 16, 8, 4, 2, 1 (rule 3). Splitting a row over many warps is what keeps
//! the GPU busy at small batch. Pass 2 (`warp_locate`, one warp per row): rule 4 over the tile masses
//! (every lane runs the same sequential loop, so no broadcast is needed), then the chosen tile is
//! staged in shared memory, lane k sums strip k (rule 5) and lane 0 walks the strips and the chosen
//! strip; the fallbacks of rules 5-6 are warp votes. Weights are doubles computed by the same
//! host/device functions as seq (`specdec::detail::residual_weight`, `usable_weight`).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "specdec/backend/cuda/primitives/warp.cuh"
#include "specdec/core/token.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"

namespace specdec::backend::cuda::detail {

//! Doubles of shared memory one warp needs for `warp_locate`: 32 strips of 64 entries with one
//! double of padding each (no bank conflicts on the strip sums), plus the 32 strip masses.
inline constexpr std::size_t strip_stride = sampling_strip + 1;
inline constexpr std::size_t locate_shared_doubles = sampling_lanes * strip_stride + sampling_lanes;

//! w_v = double(x_v): a probability row, a bonus row, or a target sample.
template <class T>
struct row_weight {
  const T* x;
  __device__ double operator()(std::size_t v) const { return static_cast<double>(x[v]); }
};

//! The accepted mass a(p, q) of a rejection rule, as the callable `residual_weight` takes.
template <class Rule>
struct accepted_mass_of {
  Rule rule;
  __host__ __device__ double operator()(double p, double q) const { return rule.accepted_mass(p, q); }
};

//! w_v = max(0, p_v - a(p_v, q_v)), NaN for unusable inputs: the residual (sampling/residual.hpp);
//! p and q are weight functors of the two rows (`row_weight`, or rows computed on the fly).
template <class PWeight, class QWeight, class Rule>
struct residual_weight_of {
  PWeight p;
  QWeight q;
  accepted_mass_of<Rule> mass;
  __device__ double operator()(std::size_t v) const { return specdec::detail::residual_weight(p(v), q(v), mass); }
};

//! Tile t's entries [begin, end) of a row of `size` entries.
struct tile_range {
  std::size_t begin, end;
  __host__ __device__ static tile_range of(std::size_t t, std::size_t size) {
    const std::size_t b = t * sampling_tile;
    return {b, b + sampling_tile < size ? b + sampling_tile : size};
  }
};

//! Entries a lane loads before it uses any (`for_lane_loaded`).
inline constexpr int load_batch = 16;

//! Rule 2's order (v = begin + lane, + 32, ... in increasing order; every per-tile pass, masses,
//! argmax and flags, walks its tile this way), with the loads separated from their use: for a whole tile each lane computes
//! `load(v)` for `load_batch` of its entries into registers, then calls `visit(v, load(v))` for them
//! in increasing v. Whatever `visit` does (accumulations, votes) then cannot stand between two loads,
//! so each lane has `load_batch` loads in flight: a pass over a row pair ran at a fraction of the
//! bandwidth when the compiler interleaved each load with the additions of the entry before it.
template <class Load, class Visit>
__device__ void for_lane_loaded(tile_range tile, const Load& load, Visit&& visit) {
  using value = decltype(load(std::size_t{}));
  const std::size_t first = tile.begin + static_cast<std::size_t>(lane_id());
  if (tile.end - tile.begin == sampling_tile) {
    for (std::size_t k0 = 0; k0 < sampling_tile / warp_size; k0 += load_batch) {
      value x[load_batch];
#pragma unroll
      for (int k = 0; k < load_batch; ++k) x[k] = load(first + (k0 + k) * warp_size);
#pragma unroll
      for (int k = 0; k < load_batch; ++k) visit(first + (k0 + k) * warp_size, x[k]);
    }
  } else {
    for (std::size_t v = first; v < tile.end; v += warp_size) visit(v, load(v));
  }
}

//! Rules 2-3 for one tile, called by all 32 lanes of a warp: the tile mass (in lane 0) and, in
//! `usable`, whether this lane's weights were all usable.
template <class Weight>
__device__ double warp_tile_mass(const Weight& weight, tile_range tile, bool& usable) {
  double acc = 0.0;
  for_lane_loaded(tile, weight, [&](std::size_t, double w) {
    usable = usable & specdec::detail::usable_weight(w);
    acc += w;
  });
  return reduce_lanes(acc);
}

//! A row located by `warp_locate`.
struct located {
  token_id token = no_token;
  row_status status = row_status::no_mass;
};

//! Stages tile `tile`'s weights in shared memory (strip k at `shared + k * strip_stride`; entries past
//! the row end are +0, which changes no sum). Each lane computes `stage_batch` weights into registers
//! before storing any: a store through `shared` between two loads would keep the compiler from
//! issuing the loads together, and one warp staging its 64 entries per lane one load at a time took
//! ~40 us on an H100 (HBM latency x 64).
inline constexpr int stage_batch = 16;
template <class Weight>
__device__ void stage_tile(const Weight& weight, tile_range tile, double* shared) {
  constexpr int per_lane = static_cast<int>(sampling_tile) / warp_size;
  const bool full = tile.end - tile.begin == sampling_tile;
  for (int k0 = 0; k0 < per_lane; k0 += stage_batch) {
    double w[stage_batch];
    if (full) {
#pragma unroll
      for (int k = 0; k < stage_batch; ++k)
        w[k] = weight(tile.begin + static_cast<std::size_t>((k0 + k) * warp_size + lane_id()));
    } else {
#pragma unroll
      for (int k = 0; k < stage_batch; ++k) {
        const std::size_t v = tile.begin + static_cast<std::size_t>((k0 + k) * warp_size + lane_id());
        w[k] = v < tile.end ? weight(v) : 0.0;
      }
    }
#pragma unroll
    for (int k = 0; k < stage_batch; ++k) {
      const auto e = static_cast<std::size_t>((k0 + k) * warp_size + lane_id());
      shared[(e / sampling_strip) * strip_stride + e % sampling_strip] = w[k];
    }
  }
  __syncwarp();
}

//! The last entry of the staged tile with positive weight (rules 5-6), in every lane; -1 if none.
__device__ inline long long last_positive_staged(tile_range tile, const double* shared) {
  long long best = -1;
  for (std::size_t e = static_cast<std::size_t>(lane_id()); e < sampling_tile; e += warp_size)
    if (shared[(e / sampling_strip) * strip_stride + e % sampling_strip] > 0.0) best = static_cast<long long>(tile.begin + e);
  return warp_max_index(best);
}

//! Rule 5 in the staged tile: lane k sums strip k; lane 0 walks the strips from `prefix`; the token
//! (or -1 when no strip crosses) in every lane.
__device__ inline long long first_crossing_staged(tile_range tile, double prefix, double goal, double* shared) {
  const int lane = lane_id();
  double* strip_mass = shared + sampling_lanes * strip_stride;
  double m = 0.0;
  for (std::size_t e = 0; e < sampling_strip; ++e) m += shared[static_cast<std::size_t>(lane) * strip_stride + e];
  strip_mass[lane] = m;
  __syncwarp();
  long long found = -1;
  if (lane == 0) {
    double r = prefix;
    for (std::size_t k = 0; k < sampling_lanes && found < 0; ++k) {
      if (r + strip_mass[k] > goal) {
        double s = 0.0;
        for (std::size_t e = 0; e < sampling_strip; ++e) {
          s += shared[k * strip_stride + e];
          if (r + s > goal) {
            found = static_cast<long long>(tile.begin + k * sampling_strip + e);
            break;
          }
        }
      }
      r += strip_mass[k];
    }
  }
  found = __shfl_sync(full_mask, found, 0);
  __syncwarp();  // `shared` may be restaged by the caller
  return found < static_cast<long long>(tile.end) ? found : -1;
}

//! Rules 4-6 for one row, called by all 32 lanes of one warp: `tile_mass[0, tiles)` from pass 1,
//! `usable` whether every weight was usable, `u` the uniform; `shared` holds
//! `locate_shared_doubles` doubles (and first the tile masses). The same token and status as `specdec::sample_by_weights`.
template <class Weight>
__device__ located warp_locate(const Weight& weight, std::size_t size, const double* tile_mass, bool usable, double u,
                               double* shared) {
  const std::size_t tiles = specdec::detail::tile_count(size);
  // A caller may locate a second row with the same `shared` (the residual's fallback to p): every
  // lane must be done reading the first call's tile masses before they are overwritten (a hazard
  // compute-sanitizer racecheck reported in locate_rejection).
  __syncwarp();
  // The tile masses are read twice in sequence below; a row of up to 2080 tiles (V <= 4.2M) first
  // copies them to shared memory in one coalesced round, so each step is a shared load, not an L2 one.
  if (tiles <= sampling_lanes * strip_stride) {
    for (std::size_t t = static_cast<std::size_t>(lane_id()); t < tiles; t += warp_size) shared[t] = tile_mass[t];
    __syncwarp();
    tile_mass = shared;
  }
  double total = 0.0;
  for (std::size_t t = 0; t < tiles; ++t) total += tile_mass[t];
  if (!usable || !(total <= std::numeric_limits<double>::max())) return {no_token, row_status::not_finite};
  if (!(total > 0.0)) return {no_token, row_status::no_mass};

  const double goal = u * total;
  double prefix = 0.0;
  std::size_t last_with_mass = 0;
  for (std::size_t t = 0; t < tiles; ++t) {
    const double m = tile_mass[t];
    if (prefix + m > goal) {
      const tile_range tile = tile_range::of(t, size);
      __syncwarp();  // every lane is past its reads of the masses before the tile overwrites them
      stage_tile(weight, tile, shared);
      long long v = first_crossing_staged(tile, prefix, goal, shared);
      if (v < 0) v = last_positive_staged(tile, shared);  // rule 5's fallback
      return {static_cast<token_id>(v), row_status::ok};
    }
    if (m > 0.0) last_with_mass = t;
    prefix += m;
  }
  // Rule 6: the last positive entry of the row lies in the last tile with positive mass.
  const tile_range tile = tile_range::of(last_with_mass, size);
  __syncwarp();
  stage_tile(weight, tile, shared);
  return {static_cast<token_id>(last_positive_staged(tile, shared)), row_status::ok};
}

}  // namespace specdec::backend::cuda::detail
