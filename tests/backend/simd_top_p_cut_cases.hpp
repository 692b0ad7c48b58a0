//! \file tests/backend/simd_top_p_cut_cases.hpp
//! \brief The cases of the simd top-p path's pieces (see simd_top_p_cut.cpp), for the xsimd
//! architectures in `top_p_archs`, which the including file defines: one file per instruction set,
//! each compiled with that set's flags only, so that no case (and no scalar reference the compiler
//! vectorised) runs an instruction the CPU lacks before its check.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/exp.hpp"
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/backend/simd/softmax.hpp"
#include "specdec/backend/simd/top_p_cut.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/sample_logits.hpp"
#include "support/logits_reference.hpp"
#include "support/skip.hpp"


namespace {

using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::stream_address;
constexpr float inf = std::numeric_limits<float>::infinity();

template <class Arch>
bool runnable() {
  if (specdec::exec::arch_runnable<Arch>()) return true;
  SPECDEC_SKIP("this CPU cannot run xsimd architecture " << Arch::name());
  return false;
}

//! Float ulps between a float and the double it approximates (the spacing of floats at the double).
double ulps(float got, double want) {
  const float near = static_cast<float>(want);
  const double spacing = static_cast<double>(std::nextafter(std::abs(near), inf) - std::abs(near));
  return std::abs(static_cast<double>(got) - want) / spacing;
}

//! The top-p threshold by its definition: the positive entries sorted, the value c at which the
//! cumulative fixed-point mass first reaches the goal (S(> c) < goal <= S(>= c)).
float sorted_threshold(const std::vector<float>& row, double top_p, const specdec::detail::fixed_mass_scale& f) {
  std::vector<float> kept;
  std::int64_t total = 0;
  for (const float x : row)
    if (x > 0.0f) {
      kept.push_back(x);
      total += f(static_cast<double>(x));
    }
  return specdec::detail::fixed_threshold_in(kept, 0, specdec::detail::fixed_goal(top_p, total), 0.0f, f);
}

//! A standard normal draw (Box and Muller).
double normal(philox_stream& s) {
  const double u = s.uniform(), v = s.uniform();
  return std::sqrt(-2.0 * std::log1p(-u)) * std::cos(6.283185307179586 * v);
}

//! Weights exp(l - max) of normal logits with standard deviation `sd`, and their largest.
std::vector<float> normal_weights(philox_stream& s, std::size_t V, double sd) {
  std::vector<double> l(V);
  for (double& x : l) x = sd * normal(s);
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<float> w(V);
  for (std::size_t v = 0; v < V; ++v) w[v] = static_cast<float>(std::exp(l[v] - m));
  return w;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("simd weight_exp is seq's weight_exp bit for bit, and within 2 ulp of exp", "[simd][softmax]",
                        top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  namespace sd = specdec::detail;
  {
    using B = xsimd::batch<float, Arch>;
    constexpr std::size_t n = B::size;
    // Every 61st float of [-110, 88] by bit pattern (normal, subnormal and zero results), and the ends.
    std::vector<float> t{0.0f, -0.0f, 1.0f, -1.0f, 64.0f, -87.3f, -1000.0f, -inf, std::numeric_limits<float>::quiet_NaN()};
    for (std::uint32_t bits = 0; bits <= 0x42b00000u; bits += 61) t.push_back(std::bit_cast<float>(bits));            // (0, 88]
    for (std::uint32_t bits = 0x80000000u; bits <= 0xc2dc0000u; bits += 61) t.push_back(std::bit_cast<float>(bits));  // [-110, 0)
    while (t.size() % n) t.push_back(0.0f);
    double worst = 0.0;
    std::size_t differ = 0;
    std::array<float, n> out;
    for (std::size_t i = 0; i < t.size(); i += n) {
      specdec::backend::simd::detail::weight_exp<Arch, float>(B::load_unaligned(t.data() + i)).store_unaligned(out.data());
      for (std::size_t j = 0; j < n; ++j) {
        const float scalar = sd::weight_exp(t[i + j]);
        differ += std::bit_cast<std::uint32_t>(scalar) != std::bit_cast<std::uint32_t>(out[j]);
        const double want = std::exp(static_cast<double>(t[i + j]));
        if (want >= static_cast<double>(std::numeric_limits<float>::min())) worst = std::max(worst, ulps(scalar, want));
      }
    }
    INFO(Arch::name() << ": float, worst " << worst << " ulp over " << t.size() << " arguments");
    CHECK(differ == 0);
    CHECK(worst <= 2.0);
    CHECK(sd::weight_exp(0.0f) == 1.0f);
    CHECK(sd::weight_exp(-1000.0f) == 0.0f);
    CHECK(sd::weight_exp(-inf) == 0.0f);
    CHECK(sd::weight_exp(std::numeric_limits<float>::quiet_NaN()) == 0.0f);
    CHECK(sd::weight_exp(-103.0f) > 0.0f);  // subnormal results are kept (e^-103 is about 1.4e-45)
  }
  {
    using B = xsimd::batch<double, Arch>;
    constexpr std::size_t n = B::size;
    std::vector<double> t{0.0, -0.0, -745.0, 709.0, -1e4, -std::numeric_limits<double>::infinity()};
    philox_stream s(stream_address{0x70C, 9, 0, 0, purpose::user});
    for (int i = 0; i < 200000; ++i) t.push_back(-760.0 + 1469.0 * s.uniform());
    while (t.size() % n) t.push_back(0.0);
    double worst = 0.0;
    std::size_t differ = 0;
    std::array<double, n> out;
    for (std::size_t i = 0; i < t.size(); i += n) {
      specdec::backend::simd::detail::weight_exp<Arch, double>(B::load_unaligned(t.data() + i)).store_unaligned(out.data());
      for (std::size_t j = 0; j < n; ++j) {
        const double scalar = sd::weight_exp(t[i + j]);
        differ += std::bit_cast<std::uint64_t>(scalar) != std::bit_cast<std::uint64_t>(out[j]);
        const double want = std::exp(t[i + j]);
        if (want >= std::numeric_limits<double>::min())
          worst = std::max(worst, std::abs(scalar - want) / (std::nextafter(want, 2.0 * want) - want));
      }
    }
    INFO(Arch::name() << ": double, worst " << worst << " ulp (of glibc's exp) over " << t.size() << " arguments");
    CHECK(differ == 0);
    CHECK(worst <= 2.0);
    CHECK(sd::weight_exp(0.0) == 1.0);
  }
}

TEMPLATE_LIST_TEST_CASE("simd one_read_weights: seq's weights and reference bit for bit, the row's status", "[simd][softmax]",
                        top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x70C, 1, 0, 0, purpose::user});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::size_t V : {std::size_t{1}, std::size_t{100}, std::size_t{4096}, std::size_t{4097}, std::size_t{50001}})
    for (int variant = 0; variant < 9; ++variant)
      for (const double temperature : {1.0, 0.3}) {
        std::vector<float> l(V);
        for (float& x : l) x = static_cast<float>(2.0 * normal(s));
        if (variant == 1) l[V - 1] = 200.0f;  // a late maximum, far above the first part's
        if (variant == 2) l[V - 1] = nan;
        if (variant == 3) std::fill(l.begin(), l.end(), -inf);
        if (variant == 4) std::fill(l.begin(), l.begin() + static_cast<std::ptrdiff_t>(V / 2), -inf);  // a -inf prefix
        if (variant == 5) l[V / 2] = inf;
        if (variant == 6) l[V / 2] = 200.0f;   // a jump in a middle chunk, then chunks weighed from it
        if (variant == 7) l[V / 2 + 1] = nan;  // in a later chunk's full group: seen through its NaN weight
        if (variant == 8) l[1] = nan;          // in the first chunk
        CAPTURE(V, variant, temperature);
        std::vector<float> w(V, -1.0f);
        const auto r = specdec::backend::simd::detail::one_read_weights<Arch>(std::span<const float>(l), temperature, w.data());
        double m = 0.0;
        const specdec::row_status want = specdec::backend::simd::logit_row_max<Arch>(std::span<const float>(l), m);
        REQUIRE(r.status == want);
        if (r.status == specdec::row_status::not_finite) continue;
        if (r.status == specdec::row_status::no_mass) {
          CHECK(std::all_of(w.begin(), w.end(), [](float x) { return x == 0.0f; }));
          continue;
        }
        REQUIRE(r.max == m);
        // The reference is seq's: within 64 T below the maximum (weights <= e^64), and the maximum
        // itself after a late jump; the weights are seq's bit for bit.
        CHECK(r.reference == specdec::detail::weight_reference(std::span<const float>(l), m, temperature));
        CHECK(r.reference <= m);
        CHECK((m - r.reference) / temperature <= 64.0);
        if (variant == 1 || variant == 6) CHECK(r.reference == m);
        std::vector<float> seq_weights(V);
        specdec::detail::logit_weights(std::span<const float>(l), m, temperature, std::span<float>(seq_weights));
        REQUIRE(w == seq_weights);
        double sum = 0.0;
        for (const float x : w) sum += static_cast<double>(x);
        CHECK(std::abs(r.sum - sum) <= 0x1p-22 * sum);  // groups of 8 added as a float tree: within 3 2^-24 each
      }
}

TEMPLATE_LIST_TEST_CASE(
    "simd top_p_cut is the sorted row's threshold by fixed-point masses, with the guessed band and without it", "[simd][warp]",
    top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  namespace d = specdec::backend::simd::detail;
  constexpr std::size_t n = xsimd::batch<float, Arch>::size;
  philox_stream s(stream_address{0x70C, 2, 0, 0, purpose::user});
  int guessed = 0, missed = 0, first = 0, first_missed = 0, misplaced = 0;
  for (const std::size_t V : {std::size_t{20000}, std::size_t{128256}})
    for (const double sd : {0.5, 2.0, 4.0, 8.0})
      for (const double top_p : {0.5, 0.9, 0.95, 0.99})
        for (int variant = 0; variant < 3; ++variant) {
          std::vector<float> w = normal_weights(s, V, sd);
          if (variant == 1)  // the batches the guess samples (every stride-th) weigh a tenth: it misses
            for (std::size_t v = 0; v < V; ++v)
              if ((v / n) % (V / n / d::guess_batches) == 0) w[v] *= 0.1f;
          if (variant == 2)  // ties: values rounded to 8 levels per octave
            for (float& x : w) x = std::exp2(std::round(std::log2(x) * 8.0f) / 8.0f);
          double z = 0.0;
          for (const float x : w) z += static_cast<double>(x);
          const float top = *std::max_element(w.begin(), w.end());
          const specdec::detail::fixed_mass_scale f(static_cast<double>(top), V);
          const double goal = top_p * z;
          const float lo = std::clamp(
              d::round_down_to<float>(((z - goal) * (1.0 - 0x1p-16) - static_cast<double>(V) * std::ldexp(1.0, -f.exponent)) /
                                      static_cast<double>(V)),
              std::numeric_limits<float>::denorm_min(), top);
          const std::span<const float> row(w);
          const float want = sorted_threshold(w, top_p, f);
          CAPTURE(V, sd, top_p, variant, want);
          CHECK(d::top_p_cut<Arch>(row, top_p, f, lo, top) == want);
          CHECK(d::top_p_cut<Arch>(row, top_p, f, lo, top, z) == want);
          const auto holds = [&](const auto& band) { return (*band)[0] <= want && want < (*band)[1]; };
          if (const auto band = d::guess_cut_band<Arch>(row, z, goal, lo, top)) {
            ++guessed;
            if (!holds(band)) ++missed;
          } else if (const auto first_level = d::first_band<Arch>(row, z, top_p, lo, top, f)) {
            ++first;  // (decided for every goal the mass allows: it holds the cut)
            if (!holds(first_level)) ++first_missed;
          }
          // A z far from the row's mass misplaces both guesses; the band check catches it.
          if (const auto wrong = d::first_band<Arch>(row, 0.5 * z, top_p, lo, top, f); wrong && !holds(wrong)) ++misplaced;
          CHECK(d::top_p_cut<Arch>(row, top_p, f, lo, top, 0.5 * z) == want);
        }
  // Every path ran: guesses that held the cut (the band pass), guesses that did not (the fallback),
  // first-level bands where the subsample could not guess, and misplaced ones (the fallback).
  INFO(Arch::name() << ": " << guessed << " guesses, " << missed << " of which missed the cut; " << first
                    << " first-level bands, " << first_missed << " of which missed; " << misplaced << " misplaced");
  CHECK(guessed - missed >= 20);
  CHECK(missed >= 5);
  CHECK(first >= 20);
  CHECK(first_missed == 0);
  CHECK(misplaced >= 5);
}

TEMPLATE_LIST_TEST_CASE("simd search_cut over a range of needs: the cut when every need gives it, nothing otherwise",
                        "[simd][warp]", top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  namespace d = specdec::backend::simd::detail;
  philox_stream s(stream_address{0x70C, 3, 0, 0, purpose::user});
  int certain = 0, uncertain = 0;
  for (const double sd : {0.5, 2.0, 4.0})
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<float> w = normal_weights(s, 30000, sd);
      const std::span<const float> row(w);
      const float top = *std::max_element(w.begin(), w.end());
      const specdec::detail::fixed_mass_scale f(static_cast<double>(top), w.size());
      const std::int64_t total = d::fixed_row_mass<Arch>(row, f);
      const float lo = std::numeric_limits<float>::denorm_min();
      // Two needs close together (a few entries' counts apart, or the same): their cuts, and the range's.
      const std::int64_t first = static_cast<std::int64_t>(s.uniform() * 0.9 * static_cast<double>(total)) + 1;
      const std::int64_t second =
          first + static_cast<std::int64_t>(s.uniform() * static_cast<double>(total) * 1e-4 * (trial % 3));
      const float one = d::search_whole_row<Arch>(row, lo, top, first, f),
                  other = d::search_whole_row<Arch>(row, lo, top, second, f);
      const auto range = d::search_cut<Arch>(row, d::cut_search<float>{row, lo, inf, top, first, second, 0}, f);
      CAPTURE(sd, trial, first, second, one, other);
      if (one == other) {
        ++certain;
        REQUIRE(range.has_value());
        CHECK(*range == one);
      } else {
        ++uncertain;
        CHECK_FALSE(range.has_value());
      }
    }
  CHECK(certain >= 10);
  CHECK(uncertain >= 10);
}

TEMPLATE_LIST_TEST_CASE("simd estimated band masses: the needs they allow hold the exact one", "[simd][warp]", top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  namespace d = specdec::backend::simd::detail;
  constexpr std::size_t n = xsimd::batch<float, Arch>::size;
  philox_stream s(stream_address{0x70C, 4, 0, 0, purpose::user});
  for (const std::size_t V : {std::size_t{37}, std::size_t{20001}, std::size_t{128256}})
    for (const double sd : {0.5, 2.0, 8.0})
      for (const double top_p : {0.5, 0.9, 0.99}) {
        const std::vector<float> w = normal_weights(s, V, sd);
        const std::span<const float> row(w);
        const float top = *std::max_element(w.begin(), w.end());
        const specdec::detail::fixed_mass_scale f(static_cast<double>(top), V);
        const float lo = 0.05f * top * static_cast<float>(s.uniform()) + 1e-30f, hi = lo * 1.5f;
        std::vector<float> band(V + n);
        d::estimated_masses<Arch> estimate;
        const auto got = d::gather_band<Arch, float, false>(row, lo, hi, band.data(), estimate);
        d::exact_masses<Arch> exact(f);
        const auto same = d::gather_band<Arch, float, false>(row, lo, hi, band.data(), exact);
        REQUIRE(got.size == same.size);
        const std::int64_t band_mass = d::fixed_row_mass<Arch>(std::span<const float>(band.data(), got.size), f);
        const std::int64_t total = exact.all.total(), above = exact.above.total();
        const std::int64_t need = specdec::detail::fixed_goal(top_p, total) - above;
        const auto range = d::estimated_needs(estimate.total(), estimate.below(), band_mass, top_p, V, f);
        CAPTURE(V, sd, top_p, need, range[0], range[1]);
        CHECK(range[0] <= need);
        CHECK(need <= range[1]);
        CHECK(range[1] - range[0] <= total / 100000 + 4 * static_cast<std::int64_t>(V) + 8);  // (tight enough to be of use)
      }
}

TEMPLATE_LIST_TEST_CASE("simd sample_logits' top-p path on double rows gives seq's token bit for bit", "[simd][sampling]",
                        top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  philox_stream s(stream_address{0x70C, 3, 0, 0, purpose::user});
  std::size_t draws = 0;
  for (const std::size_t V : {std::size_t{5000}, std::size_t{40000}})
    for (const double sd : {1.0, 2.0, 4.0})
      for (const double top_p : {0.5, 0.9, 0.99})
        for (const double temperature : {1.0, 0.7}) {
          std::vector<double> l(V);
          for (double& x : l) x = sd * normal(s);
          const specdec::warp_params w{.temperature = temperature, .top_p = top_p};
          std::vector<double> probs(V);
          REQUIRE(specdec::warp_logits(std::span<const double>(l), std::span<double>(probs), w) == specdec::row_status::ok);
          const specdec_test::logits_reference<double> reference(std::span<const double>(l), w);
          for (int k = 0; k < 20; ++k) {
            const double u = s.uniform();
            const auto a = reference(u);
            const auto b = specdec::backend::simd::sample_logits<Arch>(std::span<const double>(l), w, u);
            CAPTURE(V, sd, top_p, temperature, u);
            REQUIRE(b.status == specdec::row_status::ok);
            REQUIRE(b.token == a.token);
            REQUIRE(b.mass == a.mass);
            REQUIRE(probs[static_cast<std::size_t>(b.token)] > 0.0);  // inside seq's kept set
            ++draws;
          }
        }
  INFO(Arch::name() << ": " << draws << " tokens equal to seq's");
}

TEMPLATE_LIST_TEST_CASE("simd top-p rescan by exact strip sums: the dense rescan's token for every u", "[simd][sampling]",
                        top_p_archs) {
  using Arch = TestType;
  if (!runnable<Arch>()) return;
  namespace d = specdec::backend::simd::detail;
  // The condition: kept entries within 2^23 of the largest (by binary exponent).
  CHECK(d::strip_sums_exact(1.0f, 0x1p-23f));
  CHECK_FALSE(d::strip_sums_exact(1.0f, 0x1p-24f));
  CHECK_FALSE(d::strip_sums_exact(1.0f, 0.0f));
  CHECK(d::strip_sums_exact(0x1p-120f, std::numeric_limits<float>::denorm_min()));
  {  // why it is needed: outside it, a strip's sum depends on the order (1 + 63 tiny entries)
    std::array<double, specdec::sampling_strip> strip;
    strip.fill(static_cast<double>(0x1.8p-53f));
    strip[0] = 1.0;
    double forward = 0.0, backward = 0.0;
    for (const double x : strip) forward += x;
    for (auto it = strip.rbegin(); it != strip.rend(); ++it) backward += *it;
    CHECK(forward != backward);
  }
  philox_stream s(stream_address{0x70C, 5, 0, 0, purpose::user});
  int exact = 0, draws = 0;
  for (const std::size_t V : {std::size_t{20001}, std::size_t{128256}})
    for (const double sd : {1.0, 2.0, 4.0})
      for (const std::size_t kept : {std::size_t{1}, std::size_t{100}, V / 3}) {
        const std::vector<float> w = normal_weights(s, V, sd);
        std::vector<float> sorted = w;
        std::sort(sorted.begin(), sorted.end());
        const float cut = sorted[V - kept], top = sorted[V - 1];
        if (!d::strip_sums_exact(top, cut)) continue;
        ++exact;
        std::vector<float> zeroed = w;
        for (float& x : zeroed)
          if (x < cut) x = 0.0f;
        for (int k = 0; k < 100; ++k) {
          const double u = k < 50 ? (k + 0.5) / 50.0 : s.uniform();
          d::threshold_row_step<Arch, float> dense_step{w.data(), V, cut}, strip_step{w.data(), V, cut};
          const auto dense = d::sample_with_step<Arch>(V, dense_step, u);
          const auto strips = d::sample_with_step<Arch>(V, strip_step, u, [&](const auto& rescan) {
            return d::exact_strip_tiles<Arch, std::remove_cvref_t<decltype(rescan)>>{w.data(), cut, rescan};
          });
          const auto seq = specdec::sample_categorical(std::span<const float>(zeroed), u);
          CAPTURE(V, sd, kept, u);
          REQUIRE(strips.status == specdec::row_status::ok);
          REQUIRE(strips.token == dense.token);
          REQUIRE(strips.token == seq.token);
          REQUIRE(strips.mass == seq.mass);
          ++draws;
        }
      }
  INFO(Arch::name() << ": " << exact << " rows in the exact regime, " << draws << " draws");
  CHECK(exact >= 12);
}
