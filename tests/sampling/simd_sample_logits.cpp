// backend::simd::sample_logits at the edges of its sparse paths (top-k, min-p without top-k or
// top-p, top-p alone): temperatures so large that the paths' margins leave float's range, min_p = 1
// (only the maximum's ties), a min_p so small that every token is a candidate, and rows with -inf. The
// token is always one the warped row keeps. The top-p path's tokens against seq's on random rows at
// V = 32000 and 128256 (bit for bit), and its exact frequencies, are here too (the other paths:
// tests/backend/simd_cases.hpp). Built for xsimd's default architecture; it also runs in the sanitize
// build.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include <catch2/catch.hpp>
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/sample_logits.hpp"
#include "support/logits_reference.hpp"
#include "support/sample_scale.hpp"

namespace {

using Arch = xsimd::default_arch;

// The token comes from the warped row's kept set (the seq warper's, which the sparse paths follow up to
// rounding at a boundary; none of these rows has an entry near one).
void require_kept(const std::vector<float>& logits, const specdec::warp_params& w, double u) {
  std::vector<float> probs(logits.size());
  REQUIRE(specdec::warp_logits(std::span<const float>(logits), std::span<float>(probs), w) == specdec::row_status::ok);
  const specdec::sample_result r = specdec::backend::simd::sample_logits<Arch>(std::span<const float>(logits), w, u);
  CAPTURE(w.temperature, w.top_k, w.top_p, w.min_p, u);
  REQUIRE(r.status == specdec::row_status::ok);
  REQUIRE(specdec::in_vocabulary(r.token, logits.size()));
  REQUIRE(probs[static_cast<std::size_t>(r.token)] > 0.0f);
}

}  // namespace

TEST_CASE("simd sample_logits: huge temperatures, min_p at its ends, -inf entries", "[simd][sampling][bad_input]") {
  const float lowest = std::numeric_limits<float>::lowest();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      {0.0f, 1.0f, 2.0f, 3.0f, 2.5f, -1.0f, 0.5f, 3.0f, 1.5f},
      {lowest, lowest / 2, 0.0f, -inf, 1e30f, -1e30f, 7.0f, -inf, 3.0f},
      {-inf, -inf, 5.0f, -inf, 4.0f, -inf, -inf, -inf, -inf},
  };
  const double huge = 1e300;
  const std::vector<specdec::warp_params> params = {
      {.temperature = huge, .min_p = 0.05},  // the min-p margin is below float's range
      {.temperature = huge, .top_k = 3},     // so is the top-k margin
      {.temperature = huge, .top_p = 0.5},   // the top-p path: every finite logit weighs 1
      {.temperature = 1.0, .top_p = 1e-9},   // the maximum's ties only
      {.temperature = 0.7, .top_p = 0.999999},
      {.temperature = 1e-3, .top_p = 0.5},
      {.temperature = 1.0, .min_p = 1.0},  // the maximum's ties only
      {.temperature = 0.7, .min_p = 1e-300},
      {.temperature = 1e-3, .min_p = 0.5},
      {.temperature = 2.0, .top_k = 2, .min_p = 0.3},
  };
  for (const auto& row : rows)
    for (const auto& w : params)
      for (const double u : {0.0, 0.3, 0.999999}) require_kept(row, w, u);
}

TEST_CASE("simd sample_logits' min-p path keeps what min-p keeps, and draws every kept token", "[simd][sampling]") {
  // exp((x - max) / T) >= min_p: with T = 1, min_p = e^-1 keeps the logits within 1 of the maximum.
  const std::vector<float> row = {0.0f, 3.0f, 2.5f, 1.0f, 2.1f, 1.9f};
  const specdec::warp_params w{.temperature = 1.0, .min_p = std::exp(-1.0)};
  std::vector<int> seen(row.size(), 0);
  for (int k = 0; k < 1000; ++k) {
    const double u = (k + 0.5) / 1000.0;
    require_kept(row, w, u);
    ++seen[static_cast<std::size_t>(specdec::backend::simd::sample_logits<Arch>(std::span<const float>(row), w, u).token)];
  }
  CHECK(seen == std::vector<int>{0, seen[1], seen[2], 0, seen[4], 0});
  CHECK(seen[1] > 0);
  CHECK(seen[2] > 0);
  CHECK(seen[4] > 0);
}

namespace {

// Logits of a row: N(0, sd^2), or integers (many ties) when `ties`; a few -inf entries.
std::vector<float> random_logits(specdec::random::philox_stream& s, std::size_t V, double sd, bool ties) {
  std::vector<float> l(V);
  for (auto& x : l) {
    const double g = std::sqrt(-2.0 * std::log(1.0 - s.uniform())) * std::cos(6.283185307179586 * s.uniform());
    x = static_cast<float>(ties ? std::floor(sd * g) : sd * g);
  }
  for (int k = 0; k < 3 && V > 4; ++k)
    l[static_cast<std::size_t>(s.uniform() * static_cast<double>(V))] = -std::numeric_limits<float>::infinity();
  return l;
}

}  // namespace

TEST_CASE("simd sample_logits' top-p path gives seq's token bit for bit", "[simd][sampling]") {
  // Rows as wide as a vocabulary: V = 128256 with sd 2 keeps ~30000 tokens at top_p 0.9, the hard
  // case for the cut (seq sorts the row and cumulates; simd narrows bands: the fixed-point masses
  // make them agree).
  specdec::random::philox_stream s(specdec::random::stream_address{0x70B, 1, 0, 0, specdec::random::purpose::user});
  std::size_t draws = 0;
  const bool reduced = specdec_test::sample_scale() < 1.0;
  for (const std::size_t V : {std::size_t{7}, std::size_t{1000}, std::size_t{32000}, std::size_t{128256}})
    for (const double top_p : {1e-6, 0.5, 0.9, 0.999})
      for (const double temperature : {1.0, 0.7, 1.6})
        for (const double sd : {2.0, 6.0})
          for (const bool ties : {false, true}) {
            if (V == 128256 && (ties || temperature == 1.6 || sd == 6.0)) continue;  // (time: seq sorts the whole row)
            // Scaled builds (the sanitizers, SPECDEC_TEST_SAMPLE_SCALE < 1) keep one wide row shape, at V = 32000.
            if (reduced && (V == 128256 || (V == 32000 && (ties || temperature != 1.0 || sd != 2.0)))) continue;
            const auto l = random_logits(s, V, sd, ties);
            const specdec::warp_params w{.temperature = temperature, .top_p = top_p};
            std::vector<float> probs(V);
            REQUIRE(specdec::warp_logits(std::span<const float>(l), std::span<float>(probs), w) == specdec::row_status::ok);
            const specdec_test::logits_reference<float> reference(std::span<const float>(l), w);
            for (int k = 0; k < 40; ++k) {
              const double u = k == 0 ? 0.0 : s.uniform();
              const auto a = reference(u);
              const auto b = specdec::backend::simd::sample_logits<Arch>(std::span<const float>(l), w, u);
              CAPTURE(V, top_p, temperature, sd, ties, u);
              REQUIRE(b.status == specdec::row_status::ok);
              REQUIRE(b.token == a.token);
              REQUIRE(b.mass == a.mass);
              REQUIRE(probs[static_cast<std::size_t>(b.token)] > 0.0f);      // a kept token
              REQUIRE(std::isfinite(l[static_cast<std::size_t>(b.token)]));  // never a -inf logit
              if (top_p == 1e-6) REQUIRE(l[static_cast<std::size_t>(b.token)] == *std::max_element(l.begin(), l.end()));
              ++draws;
            }
          }
  INFO(draws << " tokens equal to seq's");
}

TEST_CASE("simd sample_logits' top-p path draws each kept token with seq's probability", "[simd][sampling]") {
  // Exact frequencies: u on a grid of N points draws token v for a fraction of the grid within 1 / N
  // of its warped probability (the inverse CDF is monotone in u). Negative control: the unwarped
  // softmax gives other frequencies.
  const std::vector<float> row = {0.0f, 3.0f, 2.5f, 1.0f, 2.1f, -std::numeric_limits<float>::infinity(), 1.9f, 3.0f};
  for (const double top_p : {0.3, 0.6, 0.95}) {
    const specdec::warp_params w{.temperature = 0.8, .top_p = top_p};
    std::vector<float> probs(row.size()), plain(row.size());
    REQUIRE(specdec::warp_logits(std::span<const float>(row), std::span<float>(probs), w) == specdec::row_status::ok);
    REQUIRE(specdec::softmax(std::span<const float>(row), std::span<float>(plain), w.temperature) == specdec::row_status::ok);
    constexpr int N = 20000;
    std::vector<int> seen(row.size(), 0);
    for (int k = 0; k < N; ++k)
      ++seen[static_cast<std::size_t>(
          specdec::backend::simd::sample_logits<Arch>(std::span<const float>(row), w, (k + 0.5) / N).token)];
    double worst = 0.0, control = 0.0;
    for (std::size_t v = 0; v < row.size(); ++v) {
      const double f = static_cast<double>(seen[v]) / N;
      CAPTURE(top_p, v, f, probs[v]);
      if (probs[v] == 0.0f) REQUIRE(seen[v] == 0);
      worst = std::max(worst, std::abs(f - static_cast<double>(probs[v])));
      control = std::max(control, std::abs(f - static_cast<double>(plain[v])));
    }
    CAPTURE(top_p);
    CHECK(worst <= 2.0 / N);
    CHECK(control > 0.01);  // the negative control fails the same test
  }
}
