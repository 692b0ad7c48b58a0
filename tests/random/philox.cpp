// Philox4x32-10 known answers, uniform conversion, stream addressing and basic uniformity.
// SPECDEC_TEST_STATISTICAL_EXEMPT: one uniformity case (2 million draws, well under a second); the generator's known answers must keep running under the sanitizers
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <set>
#include <vector>

#include "specdec/random/philox.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/random/uniform.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::random::philox4x32_10;
using u32x4 = std::array<std::uint32_t, 4>;
using u32x2 = std::array<std::uint32_t, 2>;

// The Random123 known-answer vectors for philox4x32-10 (kat_vectors in the Random123 distribution).
constexpr u32x4 kat_zero_ctr{0u, 0u, 0u, 0u};
constexpr u32x2 kat_zero_key{0u, 0u};
constexpr u32x4 kat_zero_out{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};

constexpr u32x4 kat_ones_ctr{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
constexpr u32x2 kat_ones_key{0xffffffffu, 0xffffffffu};
constexpr u32x4 kat_ones_out{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu};

constexpr u32x4 kat_pi_ctr{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
constexpr u32x2 kat_pi_key{0xa4093822u, 0x299f31d0u};
constexpr u32x4 kat_pi_out{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};

// The generator is constexpr: the vectors hold at compile time too.
static_assert(philox4x32_10(kat_zero_ctr, kat_zero_key) == kat_zero_out, "philox4x32_10: Random123 KAT (zeros)");
static_assert(philox4x32_10(kat_ones_ctr, kat_ones_key) == kat_ones_out, "philox4x32_10: Random123 KAT (ones)");
static_assert(philox4x32_10(kat_pi_ctr, kat_pi_key) == kat_pi_out, "philox4x32_10: Random123 KAT (pi)");

// Uniform conversions are constexpr and never reach 1.
static_assert(specdec::random::uniform_double(0xffffffffu, 0xffffffffu) < 1.0);
static_assert(specdec::random::uniform_double(0u, 0u) == 0.0);
static_assert(specdec::random::uniform_float(0xffffffffu) < 1.0f);
static_assert(specdec::random::uniform_at(specdec::random::stream_address{}, 0) >= 0.0);

}  // namespace

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors", "[random][philox]") {
  CHECK(philox4x32_10(kat_zero_ctr, kat_zero_key) == kat_zero_out);
  CHECK(philox4x32_10(kat_ones_ctr, kat_ones_key) == kat_ones_out);
  CHECK(philox4x32_10(kat_pi_ctr, kat_pi_key) == kat_pi_out);
  // Run-time arguments (not folded by the compiler) give the same words.
  volatile std::uint32_t zero = 0;
  CHECK(philox4x32_10({zero, zero, zero, zero}, {zero, zero}) == kat_zero_out);
}

TEST_CASE("uniform_double and uniform_float stay in [0, 1)", "[random][uniform]") {
  using specdec::random::uniform_double;
  using specdec::random::uniform_float;
  CHECK(uniform_double(0xffffffffu, 0xffffffffu) < 1.0);
  CHECK(uniform_double(0xffffffffu, 0xffffffffu) == 1.0 - 0x1.0p-53);  // the largest value: 53 bits set
  CHECK(uniform_float(0xffffffffu) < 1.0f);
  CHECK(uniform_float(0xffffffffu) == 1.0f - 0x1.0p-24f);
  CHECK(uniform_double(0u, 0u) == 0.0);
  CHECK(uniform_float(0u) == 0.0f);
  // The smallest positive value is 2^-53 (one low bit of lo after the shift).
  CHECK(uniform_double(0u, 1u << 11) == 0x1.0p-53);
  // Every value is an integer multiple of 2^-53 in range.
  specdec::random::philox_stream s(specdec::random::stream_address{42, 1, 2, 3, specdec::random::purpose::user});
  for (int i = 0; i < 100000; ++i) {
    const double u = s.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    REQUIRE(std::ldexp(u, 53) == std::floor(std::ldexp(u, 53)));
    const float f = s.uniform_f();
    REQUIRE(f >= 0.0f);
    REQUIRE(f < 1.0f);
  }
  // Exponential and Gumbel variates from the extreme uniforms are finite.
  CHECK(std::isfinite(specdec::random::exponential_from_uniform(uniform_double(0xffffffffu, 0xffffffffu))));
  CHECK(specdec::random::exponential_from_uniform(0.0) == 0.0);
  CHECK(std::isfinite(specdec::random::gumbel_from_uniform(uniform_double(0xffffffffu, 0xffffffffu))));
}

TEST_CASE("stream addressing: every field of the address selects its own draws", "[random][stream]") {
  using specdec::random::purpose;
  using specdec::random::request_stream;
  using specdec::random::stream_address;
  const auto first_words = [](const stream_address& a) {
    specdec::random::philox_stream s(a);
    std::array<std::uint32_t, 8> w{};
    for (auto& x : w) x = s.next_u32();
    return w;
  };
  const stream_address base{0x0123456789abcdefull, 7, 11, 3, purpose::accept};
  const auto ref = first_words(base);

  SECTION("same address, same draws") {
    CHECK(first_words(base) == ref);
    specdec::random::philox_stream a(base);
    specdec::random::philox_stream b = a;  // a copy replays the same draws
    for (int i = 0; i < 50; ++i) CHECK(a.uniform() == b.uniform());
  }
  SECTION("each field changes the draws") {
    std::vector<stream_address> variants;
    auto v = base;
    v.seed ^= 1;
    variants.push_back(v);  // low seed word
    v = base;
    v.seed ^= 1ull << 40;
    variants.push_back(v);  // high seed word
    v = base;
    v.request += 1;
    variants.push_back(v);
    v = base;
    v.step += 1;
    variants.push_back(v);
    v = base;
    v.position += 1;
    variants.push_back(v);
    v = base;
    v.what = purpose::resample;
    variants.push_back(v);
    v = base;
    v.what = purpose::draft;
    variants.push_back(v);
    v = base;
    v.what = purpose::user;
    variants.push_back(v);
    std::set<std::array<std::uint32_t, 8>> seen{ref};
    for (const auto& a : variants) {
      const auto w = first_words(a);
      CHECK(w != ref);
      seen.insert(w);
    }
    CHECK(seen.size() == variants.size() + 1);  // all distinct from one another too
  }
  SECTION("request_stream builds the same addresses") {
    const request_stream rs{base.seed, base.request, base.step};
    const auto a = rs.at(base.position, base.what);
    CHECK(a.seed == base.seed);
    CHECK(a.request == base.request);
    CHECK(a.step == base.step);
    CHECK(a.position == base.position);
    CHECK(a.what == base.what);
    auto s = rs.open(base.position, base.what);
    specdec::random::philox_stream t(base);
    for (int i = 0; i < 20; ++i) CHECK(s.next_u32() == t.next_u32());
  }
  SECTION("uniform_at(i) is the i-th uniform of the sequential reader") {
    specdec::random::philox_stream s(base);
    for (std::uint32_t i = 0; i < 1000; ++i) {
      CAPTURE(i);
      REQUIRE(specdec::random::uniform_at(base, i) == s.uniform());
    }
  }
  SECTION("the stream crosses Philox blocks without repeating") {
    specdec::random::philox_stream s(base);
    std::set<std::uint32_t> words;
    for (int i = 0; i < 4096; ++i) words.insert(s.next_u32());
    CHECK(words.size() > 4090);  // 32-bit collisions among 4096 words are rare (expected ~0.002)
  }
}

TEST_CASE("uniforms are uniform: binned chi-squared", "[random][statistical]") {
  constexpr std::uint64_t seed = 0xC0FFEEull;
  constexpr int bins = 1000;
  constexpr int n = 2'000'000;
  std::vector<std::uint64_t> counts(bins, 0), counts_f(bins, 0), counts_at(bins, 0);
  specdec::random::philox_stream s(specdec::random::stream_address{seed, 0, 0, 0, specdec::random::purpose::simulate});
  for (int i = 0; i < n; ++i) {
    ++counts[static_cast<std::size_t>(s.uniform() * bins)];
    ++counts_f[static_cast<std::size_t>(static_cast<double>(s.uniform_f()) * bins)];
  }
  // Many short streams (one draw each, different requests): the addressing is uniform too.
  for (std::uint32_t r = 0; r < static_cast<std::uint32_t>(n / 4); ++r)
    ++counts_at[static_cast<std::size_t>(specdec::random::uniform_at({seed, r, 5, 1, specdec::random::purpose::accept}, 0) *
                                         bins)];
  const std::vector<double> expected(bins, 1.0 / bins);
  const auto g = specdec_test::chi_squared_gof(counts, expected);
  const auto gf = specdec_test::chi_squared_gof(counts_f, expected);
  const auto ga = specdec_test::chi_squared_gof(counts_at, expected);
  std::cout << "[philox] seed " << seed << " uniform(): " << g << "\n[philox] uniform_f(): " << gf
            << "\n[philox] uniform_at over requests: " << ga << "\n";
  CHECK(g.p_value > specdec_test::gof_alpha);
  CHECK(gf.p_value > specdec_test::gof_alpha);
  CHECK(ga.p_value > specdec_test::gof_alpha);
  // Negative control: a biased transform (u^1.01) is detected.
  std::vector<std::uint64_t> biased(bins, 0);
  specdec::random::philox_stream t(specdec::random::stream_address{seed, 1, 0, 0, specdec::random::purpose::simulate});
  for (int i = 0; i < n; ++i) ++biased[static_cast<std::size_t>(std::pow(t.uniform(), 1.01) * bins)];
  CHECK(specdec_test::chi_squared_gof(biased, expected).p_value < specdec_test::gof_alpha);
}

TEST_CASE("exponential variates have mean 1 and variance 1", "[random][statistical]") {
  specdec::random::philox_stream s(specdec::random::stream_address{0xE4, 0, 0, 0, specdec::random::purpose::simulate});
  constexpr int n = 1'000'000;
  double sum = 0.0, sum2 = 0.0, gsum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = s.exponential();
    REQUIRE(e >= 0.0);
    REQUIRE(std::isfinite(e));
    sum += e;
    sum2 += e * e;
    const double g = s.gumbel();
    REQUIRE(std::isfinite(g));
    gsum += g;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  // Standard errors: mean 1e-3, variance ~2.2e-3 (Exp(1) has fourth central moment 9); 6 sigma.
  CHECK(std::abs(mean - 1.0) < 6e-3);
  CHECK(std::abs(var - 1.0) < 1.4e-2);
  // Gumbel mean is the Euler-Mascheroni constant; sd pi/sqrt(6) ~ 1.28, so se ~1.3e-3.
  CHECK(std::abs(gsum / n - 0.5772156649015329) < 8e-3);
}
