// Host-side checks of the CUDA backend that need no GPU and no CUDA driver (built with the ordinary
// Catch2 main, so they run in every CI job that builds CUDA code):
//  - filter.cuh's radix select, replayed sequentially on the host: the histograms of each level are
//    built here exactly as `select_pass_kernel` defines them (count and significand sum per bucket,
//    the digits chosen so far as a prefix filter), the crossing of each scan is located as
//    `find_crossing` defines it, and every decision is taken by the header's own __host__ __device__
//    functions (start_row, apply_crossing, finish_select, ceil_float_key, filtered_prob, ...), in the
//    kernels' order of passes. Thresholds and masks against seq's keep_top_k / keep_top_p /
//    keep_min_p (distributions/warp.hpp) on random rows of several kinds and sizes: top-k and min-p
//    exactly, top-p exactly except within filter.cuh's stated bound (counted; none expected);
//  - top_w.cuh's composite-key digits (digit_of, matches, at_least, greater) against the byte
//    order, and `top_w_kernel`'s radix select replayed with them against specdec::top_w_indices;
//  - the tile arithmetic of primitives/categorical.cuh (`tile_range::of`) against seq's tiles;
//  - host-side API behaviour: shape and parameter errors thrown before any CUDA call (a CUDA call
//    here would throw specdec::cuda_error instead: no driver), empty batches that return without
//    one, workspace sizes and `workspace_plan`'s carving, `check`, the simulators' parameter checks.
// No kernel is launched and no CUDA runtime call that needs a device is made.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/backend/cuda/primitives/categorical.cuh"
#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/backend/cuda/indicators.cuh"
#include "specdec/backend/cuda/detail/memory.cuh"
#include "specdec/backend/cuda/sample.cuh"
#include "specdec/backend/cuda/simulate.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/top_w.cuh"
#include "specdec/backend/cuda/verify.cuh"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/errors.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/top_w.hpp"
#include "specdec/simulate/with_policy.hpp"

namespace {

namespace cu = specdec::backend::cuda;
namespace cd = specdec::backend::cuda::detail;
using specdec::row_status;
using specdec::warp_params;

// ---- the sequential replay of the threshold search -------------------------------------------------

//! One level's histogram of a row, as a block of `select_pass_kernel` adds it up (all blocks
//! together): usable entries whose digits above `level` equal `prefix` (every entry at level 0),
//! counted and their significands summed in the bucket of their digit at `level`. Pass 0 (`first`)
//! also records the row's maximum key and whether an unusable entry was seen.
void build_histogram(std::span<const float> row, int level, std::uint32_t prefix, bool first, cd::row_histogram& h,
                     cd::select_row& r) {
  std::fill(std::begin(h.count), std::end(h.count), 0u);
  std::fill(std::begin(h.msum), std::end(h.msum), 0ull);
  const int shift = cd::digit_shift(level), above_shift = shift + cd::digit_bits(level);
  const std::uint32_t mask = (1u << cd::digit_bits(level)) - 1u;
  for (const float p : row) {
    if (!cd::usable_prob(p)) {
      if (first) r.bad = 1;
      continue;
    }
    const std::uint32_t key = cd::prob_key(p);
    if (first)
      r.max_key = std::max(r.max_key, key);
    else if ((key >> above_shift) != prefix)
      continue;
    const auto d = static_cast<std::size_t>((key >> shift) & mask);
    ++h.count[d];
    h.msum[d] += cd::key_significand(key);
  }
}

//! `find_crossing`'s result, computed sequentially: scanning from bucket 2047 down, the first bucket
//! where the inclusive count reaches `count_goal` (`by_count`) or where start + the inclusive mass
//! reaches `mass_goal`. (The kernel sums the exact bucket masses in a block scan, here they are
//! summed in order: the partial sums may differ by rounding, which filter.cuh's bound covers.)
cd::crossing host_crossing(const cd::row_histogram& h, int level, std::uint32_t exponent, bool by_count, std::uint32_t count_goal,
                           double start, double mass_goal) {
  cd::crossing x{-1, 0, start, 0.0};
  std::uint32_t count_before = 0;
  double before = 0.0;
  bool found = false;
  for (int q = 0; q < cd::radix_buckets; ++q) {
    const int d = cd::radix_buckets - 1 - q;
    const double m = cd::bucket_mass(h.msum[d], cd::bucket_exponent(d, level, exponent));
    if (!found && (by_count ? count_before + h.count[d] >= count_goal : start + (before + m) >= mass_goal)) {
      found = true;
      x.bucket = d;
      x.count_above = count_before;
      x.mass_above = start + before;
    }
    count_before += h.count[d];
    before += m;
  }
  x.total = start + before;
  return x;
}

//! `select_step`: the decisions of the last block of a pass on the row's histogram `h` of `level`
//! (top-p after top-k restarts at level 0 on `hist0`).
void host_select_step(cd::select_row& r, int level, const cd::row_histogram* h, const cd::row_histogram& hist0) {
  if (r.phase == cd::phase_start) {
    const cd::crossing all = host_crossing(*h, 0, 0, false, 0, 0.0, std::numeric_limits<double>::infinity());
    cd::start_row(r, all.total);
  }
  while (r.phase == cd::phase_top_k || r.phase == cd::phase_top_p) {
    const bool by_count = r.phase == cd::phase_top_k;
    const cd::crossing x = by_count ? host_crossing(*h, level, r.exponent, true, r.k_left, 0.0, 0.0)
                                    : host_crossing(*h, level, r.exponent, false, 0, r.above, r.goal);
    const std::uint32_t n = x.bucket >= 0 ? h->count[x.bucket] : 0;
    const unsigned long long sum = x.bucket >= 0 ? h->msum[x.bucket] : 0;
    cd::apply_crossing(r, level, x, n, sum);
    if (by_count && r.phase == cd::phase_top_p) {
      h = &hist0;
      level = 0;
      continue;
    }
    break;
  }
}

struct search_result {
  cd::select_row row;
  int passes = 0;      //!< passes the replay needed
  int pass_limit = 0;  //!< passes `run_select` launches for this row
};

//! The whole search of one row with filters `w`, in the kernels' order of passes: pass 0 (level 0,
//! usability, maximum), then one pass per further level while the row is searching.
search_result host_search(std::span<const float> row, const warp_params& w) {
  search_result s;
  cd::select_row& r = s.row;
  r = cd::select_row_for(w, row.size());
  s.pass_limit = 1 + (r.top_k > 0 ? cd::radix_levels - 1 : 0) + (r.top_p < 1.0 ? cd::radix_levels - 1 : 0);
  auto hist0 = std::make_unique<cd::row_histogram>();
  auto hist = std::make_unique<cd::row_histogram>();
  build_histogram(row, 0, 0, true, *hist0, r);
  host_select_step(r, 0, hist0.get(), *hist0);
  s.passes = 1;
  while ((r.phase == cd::phase_top_k || r.phase == cd::phase_top_p) && s.passes < 16) {
    const int level = static_cast<int>(r.level);
    build_histogram(row, level, r.prefix, false, *hist, r);
    host_select_step(r, level, hist.get(), *hist0);
    ++s.passes;
  }
  return s;
}

// ---- random rows --------------------------------------------------------------------------------

enum class row_kind { softmax, uniform, dyadic_ties, sparse, subnormal, all_equal, powers_of_two, unusable, count };

const char* kind_name(row_kind k) {
  switch (k) {
    case row_kind::softmax: return "softmax";
    case row_kind::uniform: return "uniform";
    case row_kind::dyadic_ties: return "dyadic ties";
    case row_kind::sparse: return "sparse";
    case row_kind::subnormal: return "subnormal";
    case row_kind::all_equal: return "all equal";
    case row_kind::powers_of_two: return "powers of two";
    case row_kind::unusable: return "unusable";
    default: return "?";
  }
}

std::size_t below(specdec::random::philox_stream& g, std::size_t n) {
  return std::min(n - 1, static_cast<std::size_t>(g.uniform() * static_cast<double>(n)));
}

std::vector<float> make_row(row_kind kind, std::size_t V, specdec::random::philox_stream& g) {
  std::vector<float> row(V, 0.0f);
  switch (kind) {
    case row_kind::softmax: {
      const double scale = 0.25 + 8.0 * g.uniform();
      std::vector<double> logits(V);
      for (double& l : logits) l = scale * g.gumbel();
      (void)specdec::softmax(std::span<const double>(logits), std::span<float>(row));
      break;
    }
    case row_kind::uniform:
      for (float& p : row) p = g.uniform_f();
      break;
    case row_kind::dyadic_ties:  // small multiples of a few powers of two: many exact ties
      for (float& p : row) p = std::ldexp(static_cast<float>(1 + below(g, 8)), -static_cast<int>(3 + 4 * below(g, 3)));
      break;
    case row_kind::sparse: {
      const std::size_t nonzero = 1 + below(g, std::max<std::size_t>(1, V / 16));
      for (std::size_t i = 0; i < nonzero; ++i) row[below(g, V)] = g.uniform_f() + 1e-3f;
      if (g.uniform() < 0.3) row[below(g, V)] = -0.0f;  // -0 counts as 0
      break;
    }
    case row_kind::subnormal:  // subnormal entries, with a few normal ones in some rows
      for (float& p : row) p = std::bit_cast<float>(static_cast<std::uint32_t>(1 + below(g, 0x7FFFFF)));
      if (g.uniform() < 0.5)
        for (std::size_t i = 0; i < 1 + V / 64; ++i) row[below(g, V)] = std::ldexp(g.uniform_f() + 0.5f, -120);
      break;
    case row_kind::all_equal: {
      const float v = g.uniform() < 0.5 ? 1.0f / static_cast<float>(V) : g.uniform_f() + 1e-6f;
      std::fill(row.begin(), row.end(), v);
      break;
    }
    case row_kind::powers_of_two:
      for (float& p : row) p = std::ldexp(1.0f, -static_cast<int>(below(g, 40)));
      break;
    case row_kind::unusable: {  // a NaN, an infinity or a negative entry; or no mass
      for (float& p : row) p = g.uniform_f();
      const double u = g.uniform();
      if (u < 0.25)
        row[below(g, V)] = std::numeric_limits<float>::quiet_NaN();
      else if (u < 0.5)
        row[below(g, V)] = std::numeric_limits<float>::infinity();
      else if (u < 0.75)
        row[below(g, V)] = -1e-3f;
      else
        std::fill(row.begin(), row.end(), 0.0f);
      break;
    }
    default: break;
  }
  return row;
}

warp_params random_params(std::size_t V, specdec::random::philox_stream& g) {
  warp_params w;
  if (g.uniform() < 0.5) w.top_k = static_cast<int>(1 + below(g, V + 2));  // sometimes k >= V (off)
  if (g.uniform() < 0.5) {
    const double u = g.uniform();
    w.top_p = u < 0.1 ? 0.5 : u < 0.2 ? 0.9 : 1.0 - g.uniform();  // (0, 1]
  }
  if (g.uniform() < 0.4) w.min_p = g.uniform() < 0.1 ? 1.0 : g.uniform();
  return w;
}

//! filter.cuh's top-p agreement bound, (2V + 256) 2^-53 M, plus the rounding of seq's fixed-point
//! masses (half a count per entry, a count at most 2^-min(51, 62 - bit_width(V)) of 2M:
//! distributions/logit_weights.hpp).
double top_p_bound(std::size_t V, long double M) {
  const long double counts =
      static_cast<long double>(V) * std::ldexp(1.0L, -std::min(51, 62 - static_cast<int>(std::bit_width(V))));
  return static_cast<double>(((2.0L * static_cast<long double>(V) + 256.0L) * std::ldexp(1.0L, -53) + counts) * M);
}

struct replay_counts {
  std::size_t rows = 0, top_k_rows = 0, top_p_rows = 0, min_p_rows = 0, deep_rows = 0, unusable_rows = 0;
  std::size_t top_p_exceptions = 0;
};

//! One row: the replayed search against seq, stage by stage. Returns false (after reporting) on a
//! disagreement that the stated bounds do not cover.
bool check_row(std::span<const float> row, const warp_params& w, replay_counts& counts, const std::string& label) {
  const std::size_t V = row.size();
  const search_result s = host_search(row, w);
  const cd::select_row& r = s.row;
  ++counts.rows;
  INFO(label << " V=" << V << " top_k=" << w.top_k << " top_p=" << w.top_p << " min_p=" << w.min_p);
  REQUIRE(r.phase == cd::phase_done);
  REQUIRE(s.passes <= s.pass_limit);
  if (s.passes > 2) ++counts.deep_rows;

  // seq: warp_probs for the status and the values, and the filters one by one for the masks.
  std::vector<float> warped(row.begin(), row.end());
  const row_status seq_status = specdec::warp_probs(std::span<float>(warped), w);
  REQUIRE(r.status == seq_status);
  if (seq_status != row_status::ok) {
    ++counts.unusable_rows;
    return true;
  }
  std::vector<float> after_k(row.begin(), row.end());
  specdec::keep_top_k(std::span<float>(after_k), w.top_k);
  std::vector<float> after_p = after_k;
  specdec::keep_top_p(std::span<float>(after_p), w.top_p);
  std::vector<float> after_min = after_p;
  specdec::keep_min_p(std::span<float>(after_min), w.min_p);

  const auto kept = [](float p, std::uint32_t tau) { return p > 0.0f && cd::prob_key(p) >= tau; };
  // The thresholds of top-k and top-p are keys of entries of the row (or 0).
  const auto realised = [&](std::uint32_t tau) {
    return tau == 0 || std::any_of(row.begin(), row.end(), [&](float p) { return cd::usable_prob(p) && cd::prob_key(p) == tau; });
  };
  REQUIRE(realised(r.tau_k));
  REQUIRE(realised(r.tau_p));
  const std::uint32_t tau_kp = std::max(r.tau_k, r.tau_p);
  // top-k: exact.
  if (r.top_k > 0) ++counts.top_k_rows;
  for (std::size_t v = 0; v < V; ++v)
    if ((after_k[v] != 0.0f) != kept(row[v], r.tau_k)) {
      FAIL_CHECK("top-k mask differs at v=" << v << " p=" << row[v] << " tau_k=" << r.tau_k);
      return false;
    }
  // top-p: exact unless the boundary is within the stated bound.
  if (w.top_p < 1.0) {
    ++counts.top_p_rows;
    long double M = 0.0L;  // the survivors' exact mass (long double: far inside the bound)
    for (const float p : after_k) M += p;
    REQUIRE(std::fabs(static_cast<long double>(r.kept) - M) <= top_p_bound(V, M));
    bool same = true;
    for (std::size_t v = 0; v < V && same; ++v) same = (after_p[v] != 0.0f) == kept(row[v], tau_kp);
    if (!same) {
      // Boundary values of either side: seq's smallest survivor, the GPU's threshold value.
      float seq_v = std::numeric_limits<float>::infinity();
      for (const float p : after_p)
        if (p > 0.0f) seq_v = std::min(seq_v, p);
      const float gpu_v = cd::bits_float(tau_kp);
      const long double goal = static_cast<long double>(w.top_p) * M;
      bool near = false;
      for (const float b : {seq_v, gpu_v}) {
        long double at_least = 0.0L, above = 0.0L;
        for (const float p : after_k) {
          if (p >= b) at_least += p;
          if (p > b) above += p;
        }
        near = near || std::fabs(at_least - goal) <= top_p_bound(V, M) || std::fabs(above - goal) <= top_p_bound(V, M);
      }
      if (!near) {
        FAIL_CHECK("top-p mask differs beyond the stated bound: seq boundary " << seq_v << ", replay " << gpu_v);
        return false;
      }
      ++counts.top_p_exceptions;
      std::cout << "  top-p exception within the bound: " << label << " V=" << V << " top_p=" << w.top_p << "\n";
      return true;  // the later stages start from different survivors
    }
  }
  // min-p (and the composed mask): exact.
  if (w.min_p > 0.0) ++counts.min_p_rows;
  for (std::size_t v = 0; v < V; ++v)
    if ((after_min[v] != 0.0f) != kept(row[v], r.tau)) {
      FAIL_CHECK("final mask differs at v=" << v << " p=" << row[v] << " tau=" << r.tau << " tau_k=" << r.tau_k
                                            << " tau_p=" << r.tau_p);
      return false;
    }
  // The renormalised values: filtered_prob with 1 / (the kept mass) is seq's p * (1 / sum), bit for bit
  // when the kept mass is summed in seq's order.
  double sum = 0.0;
  for (const float p : row)
    if (kept(p, r.tau)) sum += static_cast<double>(p);
  const double inv = 1.0 / sum;
  for (std::size_t v = 0; v < V; ++v)
    if (cd::filtered_prob(row[v], r.tau, inv) != warped[v]) {
      FAIL_CHECK("renormalised value differs at v=" << v);
      return false;
    }
  return true;
}

}  // namespace

TEST_CASE("filter.cuh: bit helpers of the radix select", "[cuda][host][filter]") {
  // The three digits cover bits 30..0 once each.
  std::uint32_t covered = 0;
  for (int level = 0; level < cd::radix_levels; ++level) {
    const std::uint32_t mask = ((1u << cd::digit_bits(level)) - 1u) << cd::digit_shift(level);
    REQUIRE((covered & mask) == 0u);
    covered |= mask;
  }
  REQUIRE(covered == 0x7FFFFFFFu);
  REQUIRE((1 << cd::digit_bits(0)) == cd::radix_buckets);

  REQUIRE(cd::prob_key(-0.0f) == 0u);
  REQUIRE(cd::prob_key(0.0f) == 0u);
  REQUIRE_FALSE(cd::usable_prob(std::numeric_limits<float>::quiet_NaN()));
  REQUIRE_FALSE(cd::usable_prob(std::numeric_limits<float>::infinity()));
  REQUIRE_FALSE(cd::usable_prob(-1e-30f));
  REQUIRE(cd::usable_prob(-0.0f));
  REQUIRE(cd::usable_prob(std::numeric_limits<float>::max()));
  REQUIRE(cd::usable_prob(std::numeric_limits<float>::denorm_min()));

  const specdec::random::request_stream stream{20261122, 1, 0};
  auto g = stream.open(0, specdec::random::purpose::user);
  for (int i = 0; i < 200000; ++i) {
    // Random non-negative finite floats over the whole range, subnormals included.
    const std::uint32_t bits = g.next_u32() % 0x7F800000u;
    const float f = std::bit_cast<float>(bits);
    const std::uint32_t key = cd::prob_key(f);
    REQUIRE(key == bits);
    REQUIRE(cd::bits_float(cd::float_bits(f)) == f);
    // A key's significand times its power of two is its value, and the level-0 bucket holds its exponent.
    REQUIRE(cd::bucket_mass(cd::key_significand(key), key >> 23) == static_cast<double>(f));
    const int d0 = static_cast<int>(key >> cd::digit_shift(0));
    REQUIRE(cd::bucket_exponent(d0, 0, 0) == key >> 23);
    REQUIRE(cd::bucket_exponent(d0, 1, 77u) == 77u);
    // Order: keys order like values.
    const float f2 = std::bit_cast<float>(g.next_u32() % 0x7F800000u);
    REQUIRE((cd::prob_key(f) < cd::prob_key(f2)) == (f < f2));
    // ceil_float_key: the smallest float >= c, so x < c <=> key(x) < it.
    double c = g.uniform() < 0.5 ? static_cast<double>(f) * (1.0 + (g.uniform() - 0.5) * 1e-6) : static_cast<double>(f);
    if (!(c <= static_cast<double>(std::numeric_limits<float>::max()))) c = static_cast<double>(f);  // (stay in range)
    const std::uint32_t ck = cd::ceil_float_key(c);
    const float cf = cd::bits_float(ck);
    REQUIRE(static_cast<double>(cf) >= c);
    if (ck > 0) REQUIRE(static_cast<double>(cd::bits_float(ck - 1)) < c);
    REQUIRE((static_cast<double>(f2) < c) == (cd::prob_key(f2) < ck));
  }
  REQUIRE(cd::ceil_float_key(0.0) == 0u);
  REQUIRE(cd::ceil_float_key(1e-300) == 1u);  // below every subnormal: the smallest one
  REQUIRE(cd::ceil_float_key(1.0) == cd::float_bits(1.0f));

  // filtered_prob: kept entries are p * inv rounded to float, the others 0 (and -0 is 0).
  REQUIRE(cd::filtered_prob(0.25f, cd::prob_key(0.25f), 2.0) == 0.5f);
  REQUIRE(cd::filtered_prob(0.25f, cd::prob_key(0.25f) + 1, 2.0) == 0.0f);
  REQUIRE(cd::filtered_prob(-0.0f, 0u, 2.0) == 0.0f);
}

TEST_CASE("filter.cuh: the host replay of the radix select gives seq's masks", "[cuda][host][filter]") {
  const std::uint64_t seed = 0x5eed0fcafe;
  std::cout << "filter replay: seed " << seed << "\n";
  struct size_plan {
    std::size_t V, rows;
  };
  const size_plan plans[] = {{7, 6000}, {31, 6000}, {2048, 3000}, {2049, 3000}, {32000, 600}};
  replay_counts total;
  for (const size_plan& plan : plans) {
    replay_counts counts;
    for (std::size_t i = 0; i < plan.rows; ++i) {
      const specdec::random::request_stream stream{seed, static_cast<std::uint32_t>(plan.V), static_cast<std::uint32_t>(i)};
      auto g = stream.open(0, specdec::random::purpose::user);
      const auto kind = static_cast<row_kind>(i % static_cast<std::size_t>(row_kind::count));
      const std::vector<float> row = make_row(kind, plan.V, g);
      const warp_params w = random_params(plan.V, g);
      const std::string label = std::string(kind_name(kind)) + " row " + std::to_string(i);
      if (!check_row(row, w, counts, label)) break;
    }
    std::cout << "  V=" << plan.V << ": " << counts.rows << " rows (top-k " << counts.top_k_rows << ", top-p "
              << counts.top_p_rows << ", min-p " << counts.min_p_rows << ", more than 2 passes " << counts.deep_rows
              << ", unusable " << counts.unusable_rows << "), top-p exceptions within the bound: " << counts.top_p_exceptions
              << "\n";
    total.rows += counts.rows;
    total.top_k_rows += counts.top_k_rows;
    total.top_p_rows += counts.top_p_rows;
    total.deep_rows += counts.deep_rows;
    total.top_p_exceptions += counts.top_p_exceptions;
    CHECK(counts.rows == plan.rows);
  }
  // The rows exercise every search, and the deeper levels.
  CHECK(total.top_k_rows > 1000);
  CHECK(total.top_p_rows > 1000);
  CHECK(total.deep_rows > 500);
  // Random rows almost surely keep their boundaries far from the goal: no exception expected.
  CHECK(total.top_p_exceptions == 0);
}

TEST_CASE("filter.cuh: the replay on hand-made rows", "[cuda][host][filter]") {
  replay_counts counts;
  const auto run = [&](std::vector<float> row, warp_params w, const char* what) { REQUIRE(check_row(row, w, counts, what)); };
  // Ties at the top-k boundary are all kept (search ends at the last level with several entries).
  run({0.25f, 0.125f, 0.125f, 0.125f, 0.375f}, {1.0, 2, 1.0, 0.0}, "tied k-th");
  // A top-p goal hit exactly by a partial sum keeps only what reaches it.
  run({0.5f, 0.25f, 0.125f, 0.125f}, {1.0, 0, 0.75, 0.0}, "exact goal");
  run({0.5f, 0.25f, 0.125f, 0.125f}, {1.0, 0, 0.875, 0.0}, "exact goal, tie below");
  // Entries differing only in their lowest bits (level 2 decides).
  const float base = 0.3f;
  std::vector<float> close;
  for (int i = 0; i < 300; ++i)
    close.push_back(std::bit_cast<float>(std::bit_cast<std::uint32_t>(base) + static_cast<std::uint32_t>(i)));
  run(close, {1.0, 17, 1.0, 0.0}, "lowest bits, top-k");
  run(close, {1.0, 0, 0.3, 0.0}, "lowest bits, top-p");
  run(close, {1.0, 40, 0.5, 0.0}, "lowest bits, top-k then top-p");
  run(close, {1.0, 0, 1.0, 1.0}, "lowest bits, min-p 1");
  // min-p with a cut that is not a float.
  run({0.3f, 0.1f, 0.09999999f, 0.1000001f, 0.0f}, {1.0, 0, 1.0, 1.0 / 3.0}, "min-p cut between floats");
  // Subnormal-only rows and a single non-zero entry.
  run({1e-45f, 2e-45f, 3e-45f, 0.0f, 3e-45f}, {1.0, 2, 0.6, 0.5}, "subnormals");
  run({0.0f, 0.0f, 7.0f, 0.0f}, {1.0, 3, 0.1, 0.9}, "one entry");
  // Unusable rows: statuses as seq.
  run({0.5f, std::numeric_limits<float>::quiet_NaN()}, {1.0, 1, 0.5, 0.0}, "NaN");
  run({0.0f, -0.0f, 0.0f}, {1.0, 1, 0.5, 0.1}, "no mass");
  CHECK(counts.top_p_exceptions == 0);
}

TEST_CASE("categorical.cuh: tiles are seq's tiles", "[cuda][host][sampling]") {
  for (const std::size_t size : {std::size_t{1}, std::size_t{7}, std::size_t{2047}, std::size_t{2048}, std::size_t{2049},
                                 std::size_t{4096}, std::size_t{32000}, std::size_t{128256}}) {
    const std::size_t tiles = specdec::detail::tile_count(size);
    REQUIRE(tiles * specdec::sampling_tile >= size);
    std::size_t next = 0;
    for (std::size_t t = 0; t < tiles; ++t) {
      const cd::tile_range tile = cd::tile_range::of(t, size);
      // seq (sampling/categorical.hpp, rule 1): [t * sampling_tile, min(V, (t + 1) * sampling_tile)).
      REQUIRE(tile.begin == t * specdec::sampling_tile);
      REQUIRE(tile.end == std::min(size, tile.begin + specdec::sampling_tile));
      REQUIRE(tile.begin == next);
      REQUIRE(tile.end > tile.begin);
      next = tile.end;
    }
    REQUIRE(next == size);
  }
}

namespace {
//! `top_w_kernel`'s selection, replayed sequentially on composite keys {image, ~index} with the
//! header's digit functions (matches, digit_of, at_least, greater); `find_bucket`'s result (the
//! first bucket from the top whose inclusive count reaches k) is located here. Every key usable.
std::vector<std::int64_t> replay_top_w(std::span<const unsigned long long> images, std::size_t w) {
  cd::composite_key prefix{0ull, 0u};
  int depth = 0;
  bool select_all = false;
  auto k = static_cast<unsigned>(w);
  for (int d = 0; d < cd::radix_digits; ++d) {
    unsigned hist[256] = {};
    for (std::size_t j = 0; j < images.size(); ++j) {
      const cd::composite_key c{images[j], ~static_cast<unsigned>(j)};
      if (cd::matches(c, prefix, d)) ++hist[cd::digit_of(c, d)];
    }
    if (d == 0) {
      unsigned usable = 0;
      for (const unsigned h : hist) usable += h;
      if (usable <= k) {
        select_all = true;
        break;
      }
    }
    unsigned above = 0, digit = 0, k_left = 0, count = 0;
    for (int b = 255; b >= 0; --b) {
      if (above + hist[b] >= k) {
        digit = static_cast<unsigned>(b);
        k_left = k - above;
        count = hist[b];
        break;
      }
      above += hist[b];
    }
    if (d < 8)
      prefix.key |= static_cast<unsigned long long>(digit) << (56 - 8 * d);
    else
      prefix.inv |= digit << (24 - 8 * (d - 8));
    k = k_left;
    depth = d + 1;
    if (count == k) break;
  }
  std::vector<cd::composite_key> chosen;
  for (std::size_t j = 0; j < images.size(); ++j) {
    const cd::composite_key c{images[j], ~static_cast<unsigned>(j)};
    if ((select_all || cd::at_least(c, prefix, depth)) && chosen.size() < w) chosen.push_back(c);
  }
  std::vector<std::int64_t> out(w, -1);
  for (const cd::composite_key& c : chosen) {
    std::size_t rank = 0;
    for (const cd::composite_key& o : chosen) rank += cd::greater(o, c) ? 1 : 0;
    out[rank] = static_cast<std::int64_t>(~c.inv);
  }
  return out;
}
}  // namespace

TEST_CASE("top_w.cuh: composite-key digits and the replayed radix select", "[cuda][host][top_w]") {
  const specdec::random::request_stream stream{20261122, 2, 0};
  auto g = stream.open(0, specdec::random::purpose::user);
  const auto u64 = [&] { return (static_cast<unsigned long long>(g.next_u32()) << 32) | g.next_u32(); };
  // Digits: 12 bytes, most significant first, and the order of `greater` is theirs.
  for (int i = 0; i < 20000; ++i) {
    const cd::composite_key a{u64(), g.next_u32()};
    cd::composite_key b = a;
    const int flip = static_cast<int>(below(g, 13));  // b shares a's first `flip` digits
    if (flip < 12) {
      const unsigned bit = 1u << below(g, 8);
      if (flip < 8)
        b.key ^= static_cast<unsigned long long>(bit) << (56 - 8 * flip);
      else
        b.inv ^= bit << (24 - 8 * (flip - 8));
      if (g.uniform() < 0.5) {  // and random lower digits
        if (flip < 7) b.key = (b.key & cd::high_mask(flip + 1)) | (u64() & ~cd::high_mask(flip + 1));
        b.inv = flip < 8 ? g.next_u32() : (b.inv & cd::low_mask(flip + 1)) | (g.next_u32() & ~cd::low_mask(flip + 1));
      }
    }
    unsigned long long key = 0;
    unsigned inv = 0;
    int first_diff = 12;
    for (int d = 0; d < cd::radix_digits; ++d) {
      REQUIRE(cd::digit_of(a, d) < 256u);
      if (d < 8)
        key = (key << 8) | cd::digit_of(a, d);
      else
        inv = (inv << 8) | cd::digit_of(a, d);
      if (first_diff == 12 && cd::digit_of(a, d) != cd::digit_of(b, d)) first_diff = d;
    }
    REQUIRE(key == a.key);
    REQUIRE(inv == a.inv);
    REQUIRE(first_diff == flip);
    REQUIRE(cd::greater(a, b) == (first_diff < 12 && cd::digit_of(a, first_diff) > cd::digit_of(b, first_diff)));
    for (int depth = 0; depth <= cd::radix_digits; ++depth) {
      REQUIRE(cd::matches(a, b, depth) == (first_diff >= depth));
      const bool ge = first_diff >= depth || cd::digit_of(a, first_diff) > cd::digit_of(b, first_diff);
      REQUIRE(cd::at_least(a, b, depth) == ge);
    }
  }
  // The replayed selection gives top_w_indices' indices, in its order (key descending, then index).
  std::size_t rows = 0;
  for (const std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{300}, std::size_t{4096}}) {
    for (int kind = 0; kind < 4; ++kind) {
      for (int rep = 0; rep < 6; ++rep) {
        std::vector<unsigned long long> images(n);
        const unsigned long long high = u64() & 0xFFFFFFFFFFFF0000ull;
        for (auto& x : images)
          x = kind == 0 ? u64() : kind == 1 ? below(g, 4) : kind == 2 ? high | below(g, 3) : 0ull;  // ties: index digits decide
        for (const std::size_t w : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}, n, n + 3}) {
          std::vector<std::size_t> expected;
          specdec::top_w_indices(std::span<const unsigned long long>(images), w, expected);
          const std::vector<std::int64_t> got = replay_top_w(images, w);
          REQUIRE(got.size() == w);
          for (std::size_t i = 0; i < w; ++i)
            REQUIRE(got[i] == (i < expected.size() ? static_cast<std::int64_t>(expected[i]) : -1));
          ++rows;
        }
      }
    }
  }
  std::cout << "top_w replay: " << rows << " selections\n";
}

// ---- host-side API behaviour ------------------------------------------------------------------------

TEST_CASE("cuda check: errors become cuda_error naming the call", "[cuda][host][api]") {
  REQUIRE_NOTHROW(cu::check(cudaSuccess, "nothing"));
  try {
    cu::check(cudaErrorInvalidValue, "my_call_name");
    FAIL("check did not throw");
  } catch (const specdec::cuda_error& e) {
    const std::string message = e.what();
    CHECK(message.find("my_call_name") != std::string::npos);
    CHECK(message.find("cudaErrorInvalidValue") != std::string::npos);
  }
  REQUIRE_THROWS_AS(cu::check(cudaErrorMemoryAllocation, "x"), specdec::cuda_error);
}

TEST_CASE("workspace_plan: counting and carving agree", "[cuda][host][memory]") {
  const auto takes = [](cu::workspace_plan& plan, std::vector<std::size_t>& offsets, const std::byte* base) {
    const auto record = [&](const void* p) {
      offsets.push_back(p == nullptr ? std::size_t(-1) : static_cast<std::size_t>(static_cast<const std::byte*>(p) - base));
    };
    record(plan.take<double>(3));
    record(plan.take<std::uint8_t>(1));
    record(plan.take<cd::select_row>(5));
    record(plan.take<cd::row_histogram>(2));
    record(plan.take<float>(0));
    record(plan.take<std::int64_t>(257));
  };
  cu::workspace_plan counting;
  std::vector<std::size_t> counted;
  takes(counting, counted, nullptr);
  for (const std::size_t o : counted) REQUIRE(o == std::size_t(-1));  // counting hands out null pointers
  const std::size_t bytes = counting.bytes();
  REQUIRE(bytes % cu::workspace_plan::alignment == 0);
  REQUIRE(bytes >= 3 * sizeof(double) + 1 + 5 * sizeof(cd::select_row) + 2 * sizeof(cd::row_histogram) + 257 * 8);

  // Carving a host buffer (pointer arithmetic only) hands out parts at the same rounded offsets.
  std::vector<std::byte> buffer(bytes + 1024);
  const std::span<std::byte> exact(buffer.data(), bytes);
  cu::workspace_plan carving(exact);
  std::vector<std::size_t> carved;
  takes(carving, carved, buffer.data());
  REQUIRE(carving.bytes() == bytes);
  std::size_t expected = 0;
  const std::size_t sizes[] = {3 * sizeof(double),        1, 5 * sizeof(cd::select_row), 2 * sizeof(cd::row_histogram), 0,
                               257 * sizeof(std::int64_t)};
  for (std::size_t i = 0; i < carved.size(); ++i) {
    CHECK(carved[i] == expected);
    CHECK(carved[i] % cu::workspace_plan::alignment == 0);
    expected += (sizes[i] + cu::workspace_plan::alignment - 1) / cu::workspace_plan::alignment * cu::workspace_plan::alignment;
  }
  REQUIRE(expected == bytes);
  // One byte short: specdec::error, not a pointer past the buffer.
  cu::workspace_plan short_plan(std::span<std::byte>(buffer.data(), bytes - 1));
  std::vector<std::size_t> ignored;
  REQUIRE_THROWS_AS(takes(short_plan, ignored, buffer.data()), specdec::error);
  // The parts of the real entry points carve a host buffer of their byte count without throwing.
  {
    const std::size_t B = 5, V = 9000;
    cu::workspace_plan count;
    (void)cd::filter_parts(count, B, V);
    std::vector<std::byte> space(count.bytes());
    cu::workspace_plan carve(space);
    const cd::filter_parts parts(carve, B, V);
    CHECK(reinterpret_cast<std::byte*>(parts.select.rows) == space.data());
    CHECK(reinterpret_cast<std::byte*>(parts.kept) + B * cd::chunk_count<float>(V) * sizeof(double) <=
          space.data() + space.size());
    CHECK(count.bytes() == cu::warp_probs_workspace_bytes(B, V));
  }
}

namespace {
template <class F>
void require_growth(F bytes) {
  // Deterministic, aligned, and non-decreasing in both the batch and the vocabulary.
  for (const std::size_t B : {1, 3, 64}) {
    for (const std::size_t V : {7, 2048, 2049, 32000, 128256}) {
      const std::size_t b = bytes(B, V);
      REQUIRE(b == bytes(B, V));
      REQUIRE(b % cu::workspace_plan::alignment == 0);
      REQUIRE(bytes(2 * B, V) >= b);
      REQUIRE(bytes(B, 2 * V) >= b);
    }
  }
  REQUIRE(bytes(4096, 128256) > bytes(1, 128256));
}
}  // namespace

TEST_CASE("workspace sizes: deterministic and growing with B and V", "[cuda][host][memory]") {
  require_growth([](std::size_t B, std::size_t V) { return cu::softmax_workspace_bytes<float>(B, V); });
  require_growth([](std::size_t B, std::size_t V) { return cu::softmax_workspace_bytes<double>(B, V); });
  require_growth([](std::size_t B, std::size_t V) { return cu::warp_probs_workspace_bytes(B, V); });
  require_growth([](std::size_t B, std::size_t V) { return cu::warp_logits_workspace_bytes<float>(B, V); });
  require_growth([](std::size_t B, std::size_t V) { return cu::sample_categorical_workspace_bytes(B, V); });
  require_growth([](std::size_t B, std::size_t V) { return cu::sample_filtered_workspace_bytes(B, V); });
  require_growth([](std::size_t B, std::size_t V) { return cu::indicators_workspace_bytes(B, V); });
  require_growth([](std::size_t B, std::size_t V) {
    return cu::top_w_workspace_bytes(specdec::beam_mode::sample_without_replacement, B, V);
  });
  REQUIRE(cu::top_w_workspace_bytes(specdec::beam_mode::search, 64, 32000) == 0);
  REQUIRE(cu::softmax_workspace_bytes<float>(0, 32000) == 0);

  // verify / verify_from_logits: from the layout only.
  const auto batch_of = [](std::size_t B, std::size_t V) {
    std::vector<std::int32_t> drafts(B);
    for (std::size_t b = 0; b < B; ++b) drafts[b] = static_cast<std::int32_t>(b % 5);
    specdec::chain_batch<float> batch;
    batch.layout = specdec::ragged_layout::packed(drafts);
    batch.vocab_size = V;
    return batch;
  };
  const auto verify_bytes = [&](std::size_t B, std::size_t V) {
    return cu::verify_workspace_bytes(specdec::strict, batch_of(B, V));
  };
  const auto logits_bytes = [&](std::size_t B, std::size_t V) {
    return cu::verify_from_logits_workspace_bytes(specdec::strict, batch_of(B, V));
  };
  const auto greedy_bytes = [&](std::size_t B, std::size_t V) {
    return cu::verify_workspace_bytes(specdec::greedy, batch_of(B, V));
  };
  require_growth(verify_bytes);
  require_growth(logits_bytes);
  require_growth(greedy_bytes);
  // The fused path needs more (statistics, filters, a search group) than the probability path.
  CHECK(logits_bytes(8, 32000) > verify_bytes(8, 32000));
}

TEST_CASE("cuda entry points: shape and parameter errors before any CUDA call", "[cuda][host][api]") {
  // Host buffers stand in for device memory: every call below throws specdec::error before it
  // dereferences a pointer or calls the CUDA runtime (a CUDA call on this machine would throw
  // specdec::cuda_error instead, which REQUIRE_THROWS_AS does not accept).
  const cudaStream_t s = nullptr;
  const std::size_t B = 2, V = 5;
  std::vector<float> in(B * V, 0.1f), out(B * V);
  std::vector<double> din(B * V, 0.1);
  std::vector<row_status> statuses(B);
  std::vector<std::byte> none;
  const std::span<const float> cin(in);
  const std::span<float> fout(out);
  const std::span<row_status> st(statuses);
  const auto rows = [&](auto span) { return specdec::row_batch(span, V); };  // rows of V

  SECTION("softmax, log_softmax, log_sum_exp") {
    std::vector<std::byte> ws(cu::softmax_workspace_bytes<float>(B, V));
    REQUIRE_THROWS_AS(cu::softmax(s, rows(cin.first(B * V - 1)), rows(fout), st, {}, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::softmax(s, rows(cin), rows(fout.first(V)), st, {}, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::softmax(s, rows(cin), rows(fout), st.first(1), {}, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::softmax(s, specdec::row_batch(cin.first(0), 0), specdec::row_batch(fout.first(0), 0), st, {}, ws),
                      specdec::error);                                                                             // V = 0
    REQUIRE_THROWS_AS(cu::softmax(s, rows(cin), rows(fout), st, {}, std::span<std::byte>(none)), specdec::error);  // workspace
    const std::vector<double> one_t{1.0}, bad_t{1.0, 0.0}, nan_t{std::nan(""), 1.0};
    REQUIRE_THROWS_AS(cu::softmax(s, rows(cin), rows(fout), st, one_t, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::softmax(s, rows(cin), rows(fout), st, bad_t, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::log_softmax(s, rows(cin), rows(fout), st, nan_t, ws), specdec::error);
    std::vector<double> lse(B + 1);
    REQUIRE_THROWS_AS(cu::log_sum_exp(s, rows(cin), std::span<double>(lse), st, {}, ws), specdec::error);
    // Empty batches return without touching the device.
    REQUIRE_NOTHROW(cu::softmax(s, rows(cin.first(0)), rows(fout.first(0)), st.first(0), {}, std::span<std::byte>(none)));
  }
  SECTION("warp_probs, warp_logits") {
    std::vector<std::byte> ws(cu::warp_logits_workspace_bytes<float>(B, V));
    const std::vector<warp_params> ok(B), one(1);
    std::vector<warp_params> hot(B), bad_p(B), bad_k(B), bad_min(B), bad_t(B);
    hot[1].temperature = 0.7;
    bad_p[0].top_p = 0.0;
    bad_k[1].top_k = -1;
    bad_min[0].min_p = 1.5;
    bad_t[0].temperature = -1.0;
    REQUIRE_THROWS_AS(cu::warp_probs(s, rows(fout.first(V)), ok, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::warp_probs(s, rows(fout), one, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::warp_probs(s, rows(fout), hot, st, ws), specdec::error);  // temperature != 1
    for (const auto* p : {&bad_p, &bad_k, &bad_min}) {
      REQUIRE_THROWS_AS(cu::warp_probs(s, rows(fout), *p, st, ws), specdec::error);
      REQUIRE_THROWS_AS(cu::warp_logits(s, rows(cin), rows(fout), *p, st, ws), specdec::error);
    }
    REQUIRE_THROWS_AS(cu::warp_logits(s, rows(cin), rows(fout), bad_t, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::warp_logits(s, rows(cin), rows(fout), one, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::warp_logits(s, rows(std::span<const double>(din)), rows(fout), ok, st.first(1), ws), specdec::error);
    const std::size_t probs_bytes = cu::warp_probs_workspace_bytes(B, V);
    REQUIRE(probs_bytes < ws.size());
    REQUIRE_THROWS_AS(cu::warp_probs(s, rows(fout), ok, st, std::span<std::byte>(ws).first(probs_bytes - 1)), specdec::error);
    REQUIRE_THROWS_AS(cu::warp_logits(s, rows(cin), rows(fout), ok, st, std::span<std::byte>(none)), specdec::error);
    REQUIRE_NOTHROW(
        cu::warp_probs(s, rows(fout.first(0)), std::span<const warp_params>{}, st.first(0), std::span<std::byte>(none)));
  }
  SECTION("sample_categorical, sample_filtered, top_p_sample") {
    std::vector<std::byte> ws(cu::sample_filtered_workspace_bytes(B, V) + cu::sample_categorical_workspace_bytes(B, V));
    std::vector<specdec::random::request_stream> streams(B);
    std::vector<specdec::token_id> tokens(B);
    const std::span<const specdec::random::request_stream> cs(streams);
    const std::span<specdec::token_id> tk(tokens);
    REQUIRE_THROWS_AS(cu::sample_categorical(s, rows(cin), cs.first(1), tk, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::sample_categorical(s, rows(cin), cs, tk.first(1), st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::sample_categorical(s, rows(cin.first(V)), cs, tk, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::sample_categorical(s, rows(std::span<const double>(din)), cs, tk, st.first(0), ws), specdec::error);
    REQUIRE_THROWS_AS(cu::sample_categorical(s, rows(cin), cs, tk, st, std::span<std::byte>(none)), specdec::error);
    const std::vector<warp_params> ok(B), one(1);
    std::vector<warp_params> hot(B);
    hot[0].temperature = 2.0;
    REQUIRE_THROWS_AS(cu::sample_filtered(s, rows(cin), one, cs, tk, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::sample_filtered(s, rows(cin), hot, cs, tk, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::sample_filtered(s, rows(cin), ok, cs, tk, st, std::span<std::byte>(none)), specdec::error);
    const std::vector<double> top_p_one{0.5}, top_p_zero{0.5, 0.0};
    REQUIRE_THROWS_AS(cu::top_p_sample(s, rows(cin), top_p_one, cs, tk, st, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_p_sample(s, rows(cin), top_p_zero, cs, tk, st, ws), specdec::error);
    REQUIRE_NOTHROW(
        cu::sample_categorical(s, rows(cin.first(0)), cs.first(0), tk.first(0), st.first(0), std::span<std::byte>(none)));
  }
  SECTION("compute_indicators") {
    const std::vector<specdec::token_id> tokens{0, 1};
    std::vector<double> sv(B), av(B);
    std::vector<cu::indicator_status> ist(B);
    std::vector<std::byte> ws(cu::indicators_workspace_bytes(B, V));
    const std::span<double> S(sv), A(av);
    const std::span<cu::indicator_status> IS(ist);
    REQUIRE_THROWS_AS(
        cu::compute_indicators(s, rows(cin.first(V)), rows(cin), std::span<const specdec::token_id>(tokens), S, A, IS, ws),
        specdec::error);
    REQUIRE_THROWS_AS(
        cu::compute_indicators(s, rows(cin), rows(cin), std::span<const specdec::token_id>(tokens), S.first(1), A, IS, ws),
        specdec::error);
    REQUIRE_THROWS_AS(
        cu::compute_indicators(s, rows(cin), rows(cin), std::span<const specdec::token_id>(tokens), S, A, IS.first(1), ws),
        specdec::error);
    REQUIRE_THROWS_AS(cu::compute_indicators(s, specdec::row_batch(cin.first(0), 0), specdec::row_batch(cin.first(0), 0),
                                             std::span<const specdec::token_id>(tokens), S, A, IS, ws),
                      specdec::error);
    // The allocating overload checks the shapes before it allocates.
    REQUIRE_THROWS_AS(cu::compute_indicators(s, rows(cin), rows(cin.first(V)), std::span<const specdec::token_id>(tokens), S, A),
                      specdec::error);
    REQUIRE_NOTHROW(cu::compute_indicators(s, rows(cin.first(0)), rows(cin.first(0)), std::span<const specdec::token_id>{},
                                           S.first(0), A.first(0), IS.first(0), std::span<std::byte>(none)));
  }
  SECTION("top_w") {
    const std::size_t n = V, w = 2;
    std::vector<std::int64_t> o(B * w);
    std::vector<specdec::random::stream_address> addresses(B);
    const std::span<const specdec::random::stream_address> sa(addresses);
    const std::span<std::int64_t> out_w(o);
    std::vector<std::byte> ws(cu::top_w_workspace_bytes(specdec::beam_mode::sample_without_replacement, B, n));
    const auto search = specdec::beam_mode::search, gumbel = specdec::beam_mode::sample_without_replacement;
    REQUIRE_THROWS_AS(cu::top_w(s, specdec::beam_mode::sample, rows(cin), w, sa, out_w, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_w(s, search, specdec::row_batch(cin.first(0), 0), w, sa, out_w, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_w(s, search, rows(cin.first(B * V - 1)), w, sa, out_w, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_w(s, search, rows(cin), cu::max_top_w + 1, sa, out_w, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_w(s, search, rows(cin), w, sa, out_w.first(3), ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_w(s, gumbel, rows(cin), w, sa.first(1), out_w, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::top_w(s, gumbel, rows(cin), w, sa, out_w, std::span<std::byte>(ws).first(ws.size() - 8)),
                      specdec::error);
    // The allocating overload checks the shapes first.
    REQUIRE_THROWS_AS(cu::top_w(s, gumbel, rows(cin), w, sa.first(1), out_w), specdec::error);
    // No rows, or W = 0: nothing to launch.
    REQUIRE_NOTHROW(cu::top_w(s, gumbel, rows(cin.first(0)), w, sa.first(0), out_w.first(0), std::span<std::byte>(none)));
    REQUIRE_NOTHROW(cu::top_w(s, search, rows(cin), 0, sa, out_w.first(0), std::span<std::byte>(none)));
  }
  SECTION("simulators") {
    const specdec::exec::cuda_policy policy{};
    const specdec::simulate::run_options options{1, 0, 0, 1000};
    REQUIRE_THROWS_AS(specdec::simulate::sd::chain(policy, 1.5, 3, options), specdec::error);
    const std::vector<double> alphas{0.5, -0.1};
    REQUIRE_THROWS_AS(specdec::simulate::sd::chain(policy, std::span<const double>(alphas), options), specdec::error);
    REQUIRE_THROWS_AS(specdec::simulate::sv::accepted(policy, std::span<const double>(alphas), 3, options), specdec::error);
    REQUIRE_THROWS_AS(specdec::simulate::sprinter::verifier_chain(policy, 1.5, 0.1, 2, options), specdec::error);
    const specdec::simulate::run_options overflow{1, 0, ~std::uint64_t{0}, 2};
    REQUIRE_THROWS_AS(specdec::simulate::sd::chain(policy, 0.5, 3, overflow), specdec::error);
    // The token simulators' histograms: V <= count_tally's limit, checked before any upload.
    REQUIRE_THROWS_AS(cd::check_token_vocabulary(specdec::simulate::count_tally::histogram_limit + 1), specdec::error);
    REQUIRE_NOTHROW(cd::check_token_vocabulary(specdec::simulate::count_tally::histogram_limit));
    CHECK(cd::bins_for(0) == 1);
    CHECK(cd::bins_for(7) == 8);
    CHECK(cd::bins_for(~std::uint64_t{0}) == specdec::simulate::count_tally::histogram_limit);
  }
  SECTION("verify, verify_from_logits") {
    const std::vector<std::int32_t> drafts{2, 1};
    const auto layout = specdec::ragged_layout::packed(drafts);  // 3 draft rows, 5 target rows
    const std::vector<specdec::token_id> draft_tokens{0, 1, 2};
    const std::vector<float> target(5 * V, 0.2f), draft(3 * V, 0.2f);
    specdec::chain_batch<float> batch{layout, V, draft_tokens, draft, target};
    std::vector<specdec::random::request_stream> streams(B);
    std::vector<specdec::token_id> tokens(B * 3);
    std::vector<std::int32_t> accepted(B);
    std::vector<specdec::verify_status> vstatus(B);
    const specdec::chain_outputs outs{tokens, accepted, vstatus};
    const std::span<const specdec::random::request_stream> cs(streams);
    std::vector<std::byte> ws(cu::verify_from_logits_workspace_bytes(specdec::strict, batch));
    REQUIRE(ws.size() >= cu::verify_workspace_bytes(specdec::strict, batch));
    const auto wrong = [&](auto change) {
      specdec::chain_batch<float> b = batch;
      change(b);
      return b;
    };
    const auto short_target = wrong([&](auto& b) { b.target_rows = b.target_rows.first(4 * V); });
    const auto short_draft = wrong([&](auto& b) { b.draft_rows = b.draft_rows.first(2 * V); });
    const auto short_tokens = wrong([&](auto& b) { b.draft_tokens = b.draft_tokens.first(2); });
    REQUIRE_THROWS_AS(cu::verify(s, specdec::strict, short_target, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify(s, specdec::strict, short_draft, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify(s, specdec::strict, short_tokens, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify(s, specdec::strict, batch, cs.first(1), outs, ws), specdec::error);
    const specdec::chain_outputs short_out{std::span<specdec::token_id>(tokens).first(5), accepted, vstatus};
    REQUIRE_THROWS_AS(cu::verify(s, specdec::strict, batch, cs, short_out, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify(s, specdec::strict, batch, cs, outs, std::span<std::byte>(ws).first(256)), specdec::error);
    const std::vector<warp_params> ok(B), one(1);
    std::vector<warp_params> bad(B);
    bad[1].top_p = 2.0;
    REQUIRE_THROWS_AS(cu::verify_from_logits(s, specdec::strict, short_target, ok, {}, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_from_logits(s, specdec::strict, batch, one, {}, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_from_logits(s, specdec::strict, batch, ok, one, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_from_logits(s, specdec::strict, batch, bad, {}, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_from_logits(s, specdec::strict, batch, ok, bad, cs, outs, ws), specdec::error);
    REQUIRE_THROWS_AS(cu::verify_from_logits(s, specdec::strict, batch, ok, {}, cs, outs, std::span<std::byte>(none)),
                      specdec::error);
    // An empty batch returns before any device work.
    specdec::chain_batch<float> empty{specdec::ragged_layout::packed(std::span<const std::int32_t>{}), V, {}, {}, {}};
    REQUIRE_NOTHROW(cu::verify(s, specdec::strict, empty, {}, specdec::chain_outputs{}, std::span<std::byte>(none)));
    REQUIRE_NOTHROW(
        cu::verify_from_logits(s, specdec::strict, empty, {}, {}, {}, specdec::chain_outputs{}, std::span<std::byte>(none)));
  }
}
