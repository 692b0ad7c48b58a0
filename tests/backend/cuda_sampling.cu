// GPU softmax, log-softmax, log-sum-exp, filters (top-k, top-p, min-p), the whole warp and
// categorical / filtered sampling (backend/cuda/{softmax,filter,sample}.cuh) against the seq oracle:
//  - probabilities and log-sum-exp within the bounds stated in softmax.cuh (from CUDA's documented
//    expf / exp / log errors), statuses exactly seq's, unusable rows zero- or NaN-filled;
//  - filter masks identical to seq's keep_top_k / keep_top_p / keep_min_p, except top-p rows whose
//    exact cumulative mass at the boundary is within the stated (2V + 256) 2^-53 M of the goal (plus
//    the rounding of seq's fixed-point masses, distributions/logit_weights.hpp)
//    (checked explicitly; rows of dyadic values must always agree);
//  - sampled tokens identical to seq's sample_categorical for the same stream, and never outside the
//    mask or the vocabulary; a row's result does not depend on the rest of its batch;
//  - shape errors, bad parameters and small workspaces throw specdec::error.
// V covers 7, 31, 2048 (one tile / half a chunk), 2049, 32000 and 128256. Exits 77 without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/backend/cuda/sample.cuh"
#include "specdec/backend/cuda/softmax.cuh"
#include "specdec/backend/cuda/filter.cuh"
#include "specdec/core/row_batch.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "support/device_array.cuh"
#include "support/random_requests.hpp"

namespace {

namespace cu = specdec::backend::cuda;
using specdec::row_status;
using specdec::token_id;
using specdec::warp_params;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::request_stream;
using specdec::random::stream_address;
using specdec::test::device_array;

const std::size_t vocabularies[] = {7, 31, 2048, 2049, 32000, 128256};

double normal(philox_stream& s) {
  double u = s.uniform();
  while (u == 0.0) u = s.uniform();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * s.uniform());
}

//! Kinds of logit rows: 0-1 Gaussian (sigma 3, 10), 2 integer ties, 3 huge, 4 neighbours one ulp
//! apart, 5 half -inf, 6 all -inf (no_mass), 7 a NaN, 8 a +inf (not_finite), 9 one finite entry.
inline constexpr int logit_kinds = 10;

template <class T>
std::vector<T> logit_row(philox_stream& s, std::size_t V, int kind) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::vector<T> row(V);
  for (std::size_t v = 0; v < V; ++v) {
    switch (kind) {
      case 1: row[v] = static_cast<T>(10.0 * normal(s)); break;
      case 2: row[v] = static_cast<T>(static_cast<int>(s.uniform() * 3.0)); break;
      case 3: row[v] = static_cast<T>((s.uniform() - 0.5) * 1e30); break;
      case 4:
        row[v] =
            std::nextafter(T(1), T(2)) + static_cast<T>(static_cast<int>(s.uniform() * 4.0)) * std::numeric_limits<T>::epsilon();
        break;
      case 5: row[v] = s.uniform() < 0.5 ? -inf : static_cast<T>(3.0 * normal(s)); break;
      case 6: row[v] = -inf; break;
      case 9: row[v] = -inf; break;
      default: row[v] = static_cast<T>(3.0 * normal(s)); break;
    }
  }
  const std::size_t at = static_cast<std::size_t>(s.uniform() * static_cast<double>(V));
  if (kind == 7) row[at] = std::numeric_limits<T>::quiet_NaN();
  if (kind == 8) row[at] = inf;
  if (kind == 9) row[at] = T(-2.5);
  return row;
}

//! A batch of `rows` logit rows cycling through the kinds, and a temperature per row.
template <class T>
std::vector<T> logit_batch(philox_stream& s, std::size_t rows, std::size_t V) {
  std::vector<T> all;
  for (std::size_t b = 0; b < rows; ++b) {
    const auto row = logit_row<T>(s, V, static_cast<int>(b % logit_kinds));
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

std::vector<double> temperature_cycle(std::size_t rows) {
  const double t[] = {1.0, 0.7, 2.5, 0.05, 1.3};
  std::vector<double> out(rows);
  for (std::size_t b = 0; b < rows; ++b) out[b] = t[b % 5];
  return out;
}

template <class T>
inline constexpr bool is_float = std::is_same_v<T, float>;

//! softmax.cuh's bounds (u = 2^-24): probabilities |d| <= rel * p_seq + abs.
template <class T, class U>
double prob_rel_tol(std::size_t V) {
  const double doubles = (2.0 * static_cast<double>(V) + 160.0) * 0x1p-53;
  return (is_float<T> || is_float<U>) ? 0x1p-20 + doubles : doubles;
}
template <class T, class U>
double prob_abs_tol() {
  return (is_float<T> || is_float<U>) ? 5.0 * 0x1p-149 : 5.0 * 0x1p-1074;
}
//! The relative error of S: 7u for float logits, (2V + 160) 2^-53 for double logits.
template <class T>
double sum_tol(std::size_t V) {
  return is_float<T> ? 7.0 * 0x1p-24 : (2.0 * static_cast<double>(V) + 160.0) * 0x1p-53;
}
template <class T>
double lse_tol(std::size_t V, double lse) {
  return sum_tol<T>(V) + 0x1p-50 * (std::abs(lse) + std::log(static_cast<double>(V)) + 1.0);
}

template <class T>
std::span<const T> row_of(const std::vector<T>& all, std::size_t b, std::size_t V) {
  return std::span<const T>(all).subspan(b * V, V);
}

//! seq's filters (top-k, top-p on the survivors, min-p) without renormalising.
std::vector<float> seq_filtered(std::span<const float> p, const warp_params& w) {
  std::vector<float> q(p.begin(), p.end());
  specdec::keep_top_k(std::span<float>(q), w.top_k);
  specdec::keep_top_p(std::span<float>(q), w.top_p);
  specdec::keep_min_p(std::span<float>(q), w.min_p);
  return q;
}

//! The smallest positive kept value of a filtered row (+inf if none).
float smallest_kept(std::span<const float> filtered) {
  float m = std::numeric_limits<float>::infinity();
  for (const float x : filtered)
    if (x > 0.0f) m = std::min(m, x);
  return m;
}

//! filter.cuh's top-p agreement: when the seq and GPU thresholds `a` and `b` (smallest kept values)
//! differ, the larger one must sit where the exact cumulative mass of top-k's survivors is within
//! (2V + 256) 2^-53 M of top_p * M (plus seq's fixed-point rounding).
bool near_top_p_boundary(std::span<const float> p, const warp_params& w, float a, float b) {
  std::vector<float> survivors(p.begin(), p.end());
  specdec::keep_top_k(std::span<float>(survivors), w.top_k);
  long double mass = 0, above = 0;
  const float v = std::max(a, b);
  for (const float x : survivors) {
    mass += x;
    if (x >= v) above += x;
  }
  const long double goal = static_cast<long double>(w.top_p) * mass;
  const long double counts =  // seq's fixed-point masses: half a count per entry, a count <= 2^-min(51, 62 - bits(V)) 2M
      static_cast<long double>(p.size()) * std::ldexp(1.0L, -std::min(51, 62 - static_cast<int>(std::bit_width(p.size()))));
  const long double tol = ((2.0L * static_cast<long double>(p.size()) + 256.0L) * 0x1p-53L + counts) * mass;
  return w.top_p < 1.0 && std::abs(above - goal) <= tol;
}

//! Random filter parameters; temperature 1.
warp_params random_filters(philox_stream& s, std::size_t V) {
  warp_params w;
  const int ks[] = {0, 1, 2, 5, 50, static_cast<int>(V) - 1, static_cast<int>(V), static_cast<int>(V) + 3};
  w.top_k = s.uniform() < 0.4 ? 0 : ks[static_cast<std::size_t>(s.uniform() * 8.0)];
  w.top_p = s.uniform() < 0.3 ? 1.0 : std::max(1e-9, s.uniform());
  w.min_p = s.uniform() < 0.5 ? 0.0 : s.uniform() * s.uniform();
  return w;
}

//! Float probability rows of several kinds (support/random_requests.hpp), softmax rows, dyadic
//! rows (every sum exact), and spoiled rows (NaN, +inf, a negative; all zeros).
std::vector<float> prob_row(philox_stream& s, std::size_t V, int kind, bool& dyadic) {
  dyadic = false;
  std::vector<float> row;
  if (kind < 6) {
    row = specdec_test::make_row<float>(s, V, specdec_test::all_kinds[kind]);
  } else if (kind == 6 || kind == 7) {
    std::vector<float> l(V);
    for (float& x : l) x = static_cast<float>((kind == 6 ? 3.0 : 10.0) * normal(s));
    row.resize(V);
    specdec::softmax(std::span<const float>(l), std::span<float>(row));
  } else if (kind == 8) {
    dyadic = true;
    row.resize(V);
    for (float& x : row) x = static_cast<float>(std::ldexp(static_cast<double>(s.next_u32() % 6), -20));
  } else if (kind == 9) {
    row.assign(V, 0.0f);
  } else {
    row = specdec_test::make_row<float>(s, V, specdec_test::row_kind::dense);
    specdec_test::spoil(row, static_cast<std::size_t>(s.uniform() * static_cast<double>(V)), kind - 10);
  }
  return row;
}
inline constexpr int prob_kinds = 13;

}  // namespace

TEST_CASE("cuda softmax, log-softmax and log-sum-exp agree with seq within the stated bounds", "[cuda][softmax]") {
  philox_stream s(stream_address{0x50F7, 1, 0, 0, purpose::user});
  std::size_t checked = 0;
  const auto run = [&](auto tag, std::size_t V) {
    using T = decltype(tag);
    const std::size_t B = 2 * logit_kinds;
    const auto logits = logit_batch<T>(s, B, V);
    const auto temps = temperature_cycle(B);
    const device_array<T> d_logits(logits);
    device_array<T> d_probs(B * V), d_logp(B * V);
    device_array<double> d_lse(B);
    device_array<row_status> d_status(B), d_status_log(B), d_status_lse(B);
    device_array<std::byte> ws(cu::softmax_workspace_bytes<T>(B, V));
    cu::softmax(nullptr, d_logits.crows(V), d_probs.rows(V), d_status.span(), std::span<const double>(temps), ws.span());
    cu::log_softmax(nullptr, d_logits.crows(V), d_logp.rows(V), d_status_log.span(), std::span<const double>(temps));
    cu::log_sum_exp(nullptr, d_logits.crows(V), d_lse.span(), d_status_lse.span(), std::span<const double>(temps), ws.span());
    const auto probs = d_probs.download(), logp = d_logp.download();
    const auto lse = d_lse.download();
    const auto status = d_status.download(), status_log = d_status_log.download(), status_lse = d_status_lse.download();
    for (std::size_t b = 0; b < B; ++b) {
      CAPTURE(V, b, temps[b], sizeof(T));
      const auto x = row_of(logits, b, V);
      std::vector<T> p(V), lp(V);
      const row_status st = specdec::softmax(x, std::span<T>(p), temps[b]);
      REQUIRE(specdec::log_softmax(x, std::span<T>(lp), temps[b]) == st);
      const double l = specdec::log_sum_exp(x, temps[b]);
      REQUIRE(status[b] == st);
      REQUIRE(status_log[b] == st);
      REQUIRE(status_lse[b] == st);
      if (st != row_status::ok) {
        for (std::size_t v = 0; v < V; ++v) {
          REQUIRE(probs[b * V + v] == T(0));
          REQUIRE(std::isnan(logp[b * V + v]));
        }
        REQUIRE((st == row_status::not_finite ? std::isnan(lse[b]) : lse[b] == -std::numeric_limits<double>::infinity()));
        continue;
      }
      REQUIRE(std::abs(lse[b] - l) <= lse_tol<T>(V, l));
      const double ltol = lse_tol<T>(V, l);
      const double eps_u = is_float<T> ? 0x1p-24 : 0x1p-53;
      for (std::size_t v = 0; v < V; ++v) {
        const double a = probs[b * V + v], e = p[v];
        if (!(std::abs(a - e) <= prob_rel_tol<T, T>(V) * std::abs(e) + prob_abs_tol<T, T>())) {
          CAPTURE(v, a, e, x[v]);
          FAIL("probability outside the stated bound");
        }
        const double la = logp[b * V + v], le = lp[v];
        if (!(la == le || std::abs(la - le) <= ltol + (2.0 * eps_u + 0x1p-51) * std::abs(le))) {
          CAPTURE(v, la, le, x[v]);
          FAIL("log-probability outside the stated bound");
        }
      }
      ++checked;
    }
  };
  for (const std::size_t V : vocabularies) {
    run(float{}, V);
    run(double{}, V);
  }
  INFO(checked << " usable rows compared");
  CHECK(checked > 0);
}

TEST_CASE("cuda softmax: a row's output does not depend on the rest of its batch", "[cuda][softmax][seeds]") {
  philox_stream s(stream_address{0x50F7, 2, 0, 0, purpose::user});
  const std::size_t V = 4099, B = 9;  // V * 4 bytes is not a multiple of 16: rows of any alignment
  const auto logits = logit_batch<float>(s, B, V);
  const auto temps = temperature_cycle(B);
  const device_array<float> d_logits(logits);
  device_array<float> d_probs(B * V);
  device_array<row_status> d_status(B);
  cu::softmax(nullptr, d_logits.crows(V), d_probs.rows(V), d_status.span(), std::span<const double>(temps));
  const auto whole = d_probs.download();
  for (const std::size_t b : {std::size_t{0}, std::size_t{3}, std::size_t{8}}) {
    // A fresh, 256-byte aligned copy of the row (in the batch, rows 3 and 8 are not 16-byte aligned).
    const device_array<float> one_in(std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(b * V),
                                                        logits.begin() + static_cast<std::ptrdiff_t>((b + 1) * V)));
    device_array<float> one(V);
    device_array<row_status> one_status(1);
    cu::softmax(nullptr, one_in.crows(V), one.rows(V), one_status.span(), std::span<const double>(temps).subspan(b, 1));
    const auto alone = one.download();
    CAPTURE(b);
    REQUIRE(std::equal(alone.begin(), alone.end(), whole.begin() + static_cast<std::ptrdiff_t>(b * V)));
  }
}

TEST_CASE("cuda warp_probs keeps seq's top-k, top-p and min-p masks", "[cuda][warp]") {
  philox_stream s(stream_address{0x50F7, 3, 0, 0, purpose::user});
  std::size_t rows = 0, boundary = 0, filtered = 0;
  for (const std::size_t V : vocabularies) {
    const std::size_t B = V >= 32000 ? 2 * prob_kinds : 4 * prob_kinds;
    std::vector<float> probs;
    std::vector<bool> dyadic(B);
    std::vector<warp_params> params(B);
    for (std::size_t b = 0; b < B; ++b) {
      bool d = false;
      const auto row = prob_row(s, V, static_cast<int>(b % prob_kinds), d);
      dyadic[b] = d;
      probs.insert(probs.end(), row.begin(), row.end());
      params[b] = random_filters(s, V);
    }
    device_array<float> d_probs(probs);
    device_array<row_status> d_status(B);
    device_array<std::byte> ws(cu::warp_probs_workspace_bytes(B, V));
    cu::warp_probs(nullptr, d_probs.rows(V), std::span<const warp_params>(params), d_status.span(), ws.span());
    const auto out = d_probs.download();
    const auto status = d_status.download();
    for (std::size_t b = 0; b < B; ++b) {
      const auto p = row_of(probs, b, V);
      const warp_params& w = params[b];
      CAPTURE(V, b, w.top_k, w.top_p, w.min_p, dyadic[b]);
      std::vector<float> expect(p.begin(), p.end());
      const row_status st = specdec::warp_probs(std::span<float>(expect), w);
      REQUIRE(status[b] == st);
      const auto got = row_of(out, b, V);
      if (st != row_status::ok) {
        for (std::size_t v = 0; v < V; ++v) REQUIRE(got[v] == expect[v]);  // zero-filled, or the row of zeros
        continue;
      }
      ++rows;
      const auto seq_mask = seq_filtered(p, w);
      bool same = true;
      for (std::size_t v = 0; v < V; ++v) same = same && ((got[v] != 0.0f) == (seq_mask[v] != 0.0f));
      if (!same) {
        REQUIRE_FALSE(dyadic[b]);  // every sum exact: no rounding can move the boundary
        std::vector<float> gpu_mask(V);
        for (std::size_t v = 0; v < V; ++v) gpu_mask[v] = got[v] != 0.0f ? p[v] : 0.0f;
        REQUIRE(near_top_p_boundary(p, w, smallest_kept(seq_mask), smallest_kept(gpu_mask)));
        ++boundary;
        continue;
      }
      filtered += std::count_if(seq_mask.begin(), seq_mask.end(), [](float x) { return x == 0.0f; }) > 0;
      const double tol = 0x1p-23 + (2.0 * static_cast<double>(V) + 64.0) * 0x1p-53;
      for (std::size_t v = 0; v < V; ++v)
        if (!(std::abs(static_cast<double>(got[v]) - expect[v]) <= tol * std::abs(static_cast<double>(expect[v])) + 0x1p-149)) {
          CAPTURE(v, got[v], expect[v]);
          FAIL("renormalised probability outside the stated bound");
        }
    }
  }
  INFO(rows << " usable rows, " << filtered << " with entries filtered out, " << boundary << " top-p boundary cases");
  CHECK(rows > 0);
  CHECK(filtered > 0);
  CHECK(boundary * 50 <= rows);
}

TEST_CASE("cuda warp_logits: softmax then seq's filters; greedy rows one-hot", "[cuda][warp]") {
  philox_stream s(stream_address{0x50F7, 4, 0, 0, purpose::user});
  std::size_t rows = 0, boundary = 0, end_to_end = 0, gaussian = 0;
  const auto run = [&](auto tag, std::size_t V) {
    using T = decltype(tag);
    const std::size_t B = 2 * logit_kinds;
    const auto logits = logit_batch<T>(s, B, V);
    std::vector<warp_params> params(B);
    std::vector<double> temps(B);
    for (std::size_t b = 0; b < B; ++b) {
      params[b] = random_filters(s, V);
      const double t[] = {1.0, 0.0, 0.6, 1.7};
      params[b].temperature = t[(b / logit_kinds + b) % 4];
      temps[b] = params[b].temperature == 0.0 ? 1.0 : params[b].temperature;
    }
    const device_array<T> d_logits(logits);
    device_array<float> d_out(B * V), d_soft(B * V);
    device_array<row_status> d_status(B), d_soft_status(B);
    cu::warp_logits(nullptr, d_logits.crows(V), d_out.rows(V), std::span<const warp_params>(params), d_status.span());
    cu::softmax(nullptr, d_logits.crows(V), d_soft.rows(V), d_soft_status.span(), std::span<const double>(temps));
    const auto out = d_out.download(), soft = d_soft.download();
    const auto status = d_status.download();
    for (std::size_t b = 0; b < B; ++b) {
      const warp_params& w = params[b];
      CAPTURE(V, b, sizeof(T), w.temperature, w.top_k, w.top_p, w.min_p);
      const auto x = row_of(logits, b, V);
      std::vector<float> expect(V);
      const row_status st = specdec::warp_logits(x, std::span<float>(expect), w);
      REQUIRE(status[b] == st);
      const auto got = row_of(out, b, V);
      if (st != row_status::ok || w.temperature == 0.0) {  // zero-filled, or exactly the one-hot row
        for (std::size_t v = 0; v < V; ++v) REQUIRE(got[v] == expect[v]);
        continue;
      }
      ++rows;
      // Decomposed: seq's filters and renormalisation on the GPU's own softmax (the same kernels).
      const auto p = row_of(soft, b, V);
      const auto seq_mask = seq_filtered(p, w);
      bool same = true;
      for (std::size_t v = 0; v < V; ++v) same = same && ((got[v] != 0.0f) == (seq_mask[v] != 0.0f));
      if (same) {
        std::vector<float> renorm(p.begin(), p.end());
        specdec::warp_probs(std::span<float>(renorm), warp_params{1.0, w.top_k, w.top_p, w.min_p});
        const double tol = 0x1p-23 + (2.0 * static_cast<double>(V) + 64.0) * 0x1p-53;
        for (std::size_t v = 0; v < V; ++v)
          if (!(std::abs(static_cast<double>(got[v]) - renorm[v]) <= tol * std::abs(static_cast<double>(renorm[v])) + 0x1p-149)) {
            CAPTURE(v, got[v], renorm[v]);
            FAIL("warped probability outside the stated bound");
          }
      } else {
        std::vector<float> gpu_mask(V);
        for (std::size_t v = 0; v < V; ++v) gpu_mask[v] = got[v] != 0.0f ? p[v] : 0.0f;
        REQUIRE(near_top_p_boundary(p, w, smallest_kept(seq_mask), smallest_kept(gpu_mask)));
        ++boundary;
      }
      // End to end against seq on Gaussian rows: masks agree unless a softmax value sits within the
      // softmax bound of a boundary (rare; counted, not required row by row).
      if (b % logit_kinds <= 1) {
        ++gaussian;
        bool mask_same = true;
        for (std::size_t v = 0; v < V; ++v) mask_same = mask_same && ((got[v] != 0.0f) == (expect[v] != 0.0f));
        end_to_end += mask_same;
      }
    }
  };
  for (const std::size_t V : vocabularies) {
    run(float{}, V);
    run(double{}, V);
  }
  INFO(rows << " usable rows, " << boundary << " top-p boundary cases; end to end " << end_to_end << " of " << gaussian
            << " Gaussian rows with seq's mask");
  CHECK(rows > 0);
  CHECK(boundary * 50 <= rows);
  CHECK(end_to_end * 10 >= gaussian * 9);
}

TEST_CASE("cuda sample_categorical gives seq's tokens and statuses bit for bit", "[cuda][sampling]") {
  philox_stream s(stream_address{0x50F7, 5, 0, 0, purpose::user});
  std::size_t ok = 0, flagged = 0;
  const auto run = [&](auto tag, std::size_t V, std::size_t B, std::uint32_t position, purpose what) {
    using T = decltype(tag);
    std::vector<T> probs;
    std::vector<request_stream> streams(B);
    for (std::size_t b = 0; b < B; ++b) {
      std::vector<T> row;
      const int kind = static_cast<int>(b % 9);
      if (kind < 6) {
        row = specdec_test::make_row<T>(s, V, specdec_test::all_kinds[kind]);
      } else if (kind == 6) {
        row.assign(V, T(0));  // no_mass
      } else {
        row = specdec_test::make_row<T>(s, V, specdec_test::row_kind::dense);
        specdec_test::spoil(row, static_cast<std::size_t>(s.uniform() * static_cast<double>(V)),
                            static_cast<int>(s.next_u32() % 3));
      }
      probs.insert(probs.end(), row.begin(), row.end());
      streams[b] = request_stream{0xC0FFEE + b % 3, static_cast<std::uint32_t>(1000 + b), static_cast<std::uint32_t>(b % 5)};
    }
    const device_array<T> d_probs(probs);
    device_array<token_id> d_tokens(B);
    device_array<row_status> d_status(B);
    device_array<std::byte> ws(cu::sample_categorical_workspace_bytes(B, V));
    cu::sample_categorical(nullptr, d_probs.crows(V), std::span<const request_stream>(streams), d_tokens.span(), d_status.span(),
                           ws.span(), specdec::row_sampling{position, what});
    const auto tokens = d_tokens.download();
    const auto status = d_status.download();
    for (std::size_t b = 0; b < B; ++b) {
      const double u = streams[b].open(position, what).uniform();
      const auto expect = specdec::sample_categorical(row_of(probs, b, V), u);
      CAPTURE(V, b, sizeof(T), u);
      REQUIRE(tokens[b] == expect.token);
      REQUIRE(status[b] == expect.status);
      if (expect.status == row_status::ok) {
        REQUIRE(specdec::in_vocabulary(tokens[b], V));
        REQUIRE(probs[b * V + static_cast<std::size_t>(tokens[b])] > T(0));
        ++ok;
      } else {
        ++flagged;
      }
    }
  };
  for (const std::size_t V : vocabularies) {
    const std::size_t B = V >= 32000 ? 27 : 90;
    run(float{}, V, B, 0, purpose::target_sample);
    run(double{}, V, B, 3, purpose::resample);
  }
  INFO(ok << " rows sampled, " << flagged << " flagged");
  CHECK(ok > 0);
  CHECK(flagged > 0);
}

TEST_CASE("cuda top_p_sample and sample_filtered: seq's token whenever the masks agree, never outside the mask",
          "[cuda][sampling]") {
  philox_stream s(stream_address{0x50F7, 6, 0, 0, purpose::user});
  std::size_t compared = 0, boundary = 0, flagged = 0;
  const auto run = [&](std::size_t V, bool top_p_only) {
    const std::size_t B = V >= 32000 ? 2 * prob_kinds : 5 * prob_kinds;
    std::vector<float> probs;
    std::vector<warp_params> params(B);
    std::vector<double> top_p(B);
    std::vector<request_stream> streams(B);
    for (std::size_t b = 0; b < B; ++b) {
      bool dyadic = false;
      const auto row = prob_row(s, V, static_cast<int>(b % prob_kinds), dyadic);
      probs.insert(probs.end(), row.begin(), row.end());
      params[b] = random_filters(s, V);
      if (top_p_only) params[b] = warp_params{1.0, 0, b % 4 == 0 ? 1.0 : 0.5 + 0.5 * s.uniform(), 0.0};
      top_p[b] = params[b].top_p;
      streams[b] = request_stream{42, static_cast<std::uint32_t>(b), 7};
    }
    const device_array<float> d_probs(probs);
    device_array<token_id> d_tokens(B);
    device_array<row_status> d_status(B);
    if (top_p_only)
      cu::top_p_sample(nullptr, d_probs.crows(V), std::span<const double>(top_p), std::span<const request_stream>(streams),
                       d_tokens.span(), d_status.span());
    else
      cu::sample_filtered(nullptr, d_probs.crows(V), std::span<const warp_params>(params),
                          std::span<const request_stream>(streams), d_tokens.span(), d_status.span());
    // The GPU's masks, from the same threshold search (warp_probs on a copy).
    device_array<float> d_masked(probs);
    device_array<row_status> d_mask_status(B);
    cu::warp_probs(nullptr, d_masked.rows(V), std::span<const warp_params>(params), d_mask_status.span());
    const auto tokens = d_tokens.download();
    const auto status = d_status.download();
    const auto masked = d_masked.download();
    for (std::size_t b = 0; b < B; ++b) {
      const auto p = row_of(probs, b, V);
      const warp_params& w = params[b];
      CAPTURE(V, b, w.top_k, w.top_p, w.min_p, top_p_only);
      const double u = streams[b].open(0, purpose::target_sample).uniform();
      bool usable = true;
      for (const float x : p) usable = usable && specdec::detail::usable_weight(static_cast<double>(x));
      if (!usable) {
        REQUIRE(status[b] == row_status::not_finite);
        REQUIRE(tokens[b] == specdec::no_token);
        ++flagged;
        continue;
      }
      const auto seq_mask = seq_filtered(p, w);
      const auto expect = specdec::sample_categorical(std::span<const float>(seq_mask), u);
      if (expect.status != row_status::ok) {
        REQUIRE(status[b] == expect.status);
        REQUIRE(tokens[b] == specdec::no_token);
        ++flagged;
        continue;
      }
      REQUIRE(status[b] == row_status::ok);
      REQUIRE(specdec::in_vocabulary(tokens[b], V));
      const auto gpu_row = row_of(masked, b, V);
      REQUIRE(gpu_row[static_cast<std::size_t>(tokens[b])] > 0.0f);  // inside the GPU's mask
      bool same = true;
      for (std::size_t v = 0; v < V; ++v) same = same && ((gpu_row[v] != 0.0f) == (seq_mask[v] != 0.0f));
      if (same) {
        REQUIRE(tokens[b] == expect.token);
        ++compared;
      } else {
        std::vector<float> gpu_mask(V);
        for (std::size_t v = 0; v < V; ++v) gpu_mask[v] = gpu_row[v] != 0.0f ? p[v] : 0.0f;
        REQUIRE(near_top_p_boundary(p, w, smallest_kept(seq_mask), smallest_kept(gpu_mask)));
        ++boundary;
      }
    }
  };
  for (const std::size_t V : vocabularies) {
    run(V, true);
    run(V, false);
  }
  INFO(compared << " tokens identical, " << boundary << " top-p boundary rows, " << flagged << " flagged");
  CHECK(compared > 0);
  CHECK(flagged > 0);
  CHECK(boundary * 50 <= compared);
}

TEST_CASE("cuda sampling: a row's token does not depend on the rest of its batch", "[cuda][sampling][seeds]") {
  philox_stream s(stream_address{0x50F7, 7, 0, 0, purpose::user});
  const std::size_t V = 5003, B = 16;
  std::vector<float> probs;
  std::vector<warp_params> params(B);
  std::vector<request_stream> streams(B);
  for (std::size_t b = 0; b < B; ++b) {
    bool dyadic = false;
    const auto row = prob_row(s, V, static_cast<int>(6 + b % 3), dyadic);
    probs.insert(probs.end(), row.begin(), row.end());
    params[b] = random_filters(s, V);
    streams[b] = request_stream{9, static_cast<std::uint32_t>(77 + b), 1};
  }
  const auto sample = [&](const std::vector<std::size_t>& which) {
    std::vector<float> p;
    std::vector<warp_params> w;
    std::vector<request_stream> r;
    for (const std::size_t b : which) {
      p.insert(p.end(), probs.begin() + static_cast<std::ptrdiff_t>(b * V),
               probs.begin() + static_cast<std::ptrdiff_t>((b + 1) * V));
      w.push_back(params[b]);
      r.push_back(streams[b]);
    }
    const device_array<float> d_probs(p);
    device_array<token_id> filtered(which.size()), plain(which.size());
    device_array<row_status> st(which.size());
    cu::sample_filtered(nullptr, d_probs.crows(V), std::span<const warp_params>(w), std::span<const request_stream>(r),
                        filtered.span(), st.span());
    cu::sample_categorical(nullptr, d_probs.crows(V), std::span<const request_stream>(r), plain.span(), st.span());
    return std::pair{filtered.download(), plain.download()};
  };
  std::vector<std::size_t> all(B), part;
  for (std::size_t b = 0; b < B; ++b) all[b] = b;
  for (std::size_t b = B; b-- > 0;)
    if (b % 3 != 1) part.push_back(b);
  const auto whole = sample(all), some = sample(part);
  for (std::size_t i = 0; i < part.size(); ++i) {
    CAPTURE(part[i]);
    REQUIRE(some.first[i] == whole.first[part[i]]);
    REQUIRE(some.second[i] == whole.second[part[i]]);
  }
}

TEST_CASE("cuda softmax, warp and sampling entry points reject bad shapes, parameters and workspaces", "[cuda][errors]") {
  const std::size_t B = 3, V = 100;
  const std::vector<float> host(B * V, 0.01f);
  device_array<float> probs(host), out(B * V);
  device_array<row_status> status(B), short_status(B - 1);
  device_array<token_id> tokens(B);
  const std::vector<request_stream> streams(B);
  const std::vector<warp_params> params(B);
  const std::span<const request_stream> rs(streams);
  const std::span<const warp_params> ws(params);
  // shapes
  CHECK_THROWS_AS(cu::softmax(nullptr, probs.crows(V), specdec::row_batch(out.span().first((B - 1) * V), V), status.span()),
                  specdec::error);
  CHECK_THROWS_AS(cu::softmax(nullptr, probs.crows(V), out.rows(V), short_status.span()), specdec::error);
  CHECK_THROWS_AS(cu::sample_categorical(nullptr, probs.crows(V), rs.first(B - 1), tokens.span(), status.span()), specdec::error);
  CHECK_THROWS_AS(cu::warp_probs(nullptr, out.rows(V), ws.first(1), status.span()), specdec::error);
  CHECK_THROWS_AS(cu::softmax(nullptr, probs.crows(0), out.rows(0), status.span()), specdec::error);
  // parameters (as seq: specdec::validate; temperatures finite and > 0; probabilities need T = 1)
  const std::vector<double> bad_t = {1.0, 0.0, 1.0};
  CHECK_THROWS_AS(cu::softmax(nullptr, probs.crows(V), out.rows(V), status.span(), std::span<const double>(bad_t)),
                  specdec::error);
  std::vector<warp_params> bad = params;
  bad[1].top_p = 0.0;
  CHECK_THROWS_AS(cu::warp_logits(nullptr, probs.crows(V), out.rows(V), std::span<const warp_params>(bad), status.span()),
                  specdec::error);
  bad[1] = warp_params{2.0, 0, 1.0, 0.0};
  CHECK_THROWS_AS(
      cu::sample_filtered(nullptr, probs.crows(V), std::span<const warp_params>(bad), rs, tokens.span(), status.span()),
      specdec::error);
  const std::vector<double> bad_p = {0.5, 1.5, 0.5};
  CHECK_THROWS_AS(cu::top_p_sample(nullptr, probs.crows(V), std::span<const double>(bad_p), rs, tokens.span(), status.span()),
                  specdec::error);
  // workspaces one byte short
  device_array<std::byte> small_soft(cu::softmax_workspace_bytes<float>(B, V) - 1);
  CHECK_THROWS_AS(cu::softmax(nullptr, probs.crows(V), out.rows(V), status.span(), {}, small_soft.span()), specdec::error);
  device_array<std::byte> small_sample(cu::sample_filtered_workspace_bytes(B, V) - 1);
  CHECK_THROWS_AS(cu::sample_filtered(nullptr, probs.crows(V), ws, rs, tokens.span(), status.span(), small_sample.span()),
                  specdec::error);
  // an empty batch does nothing
  CHECK_NOTHROW(cu::softmax(nullptr, specdec::row_batch(std::span<const float>(), V), specdec::row_batch(std::span<float>(), V),
                            std::span<row_status>()));
  CHECK_NOTHROW(cu::sample_categorical(nullptr, specdec::row_batch(std::span<const float>(), V),
                                       std::span<const request_stream>(), std::span<token_id>(), std::span<row_status>()));
}
