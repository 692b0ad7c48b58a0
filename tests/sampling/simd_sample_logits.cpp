// backend::simd::sample_logits at the edges of its sparse paths (top-k, and min-p without top-k or
// top-p): temperatures so large that the paths' margins leave float's range, min_p = 1 (only the
// maximum's ties), a min_p so small that every token is a candidate, and rows with -inf. The token is
// always one the warped row keeps. (The agreement with seq on random rows: tests/backend/simd_cases.hpp.)
// Built for xsimd's default architecture; it also runs in the sanitize build.
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <catch2/catch.hpp>
#include "specdec/backend/simd/sample_logits.hpp"
#include "specdec/distributions/warp.hpp"

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
      {.temperature = 1.0, .min_p = 1.0},    // the maximum's ties only
      {.temperature = 0.7, .min_p = 1e-300}, {.temperature = 1e-3, .min_p = 0.5}, {.temperature = 2.0, .top_k = 2, .min_p = 0.3},
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
