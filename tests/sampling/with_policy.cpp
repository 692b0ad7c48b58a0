// warp_logits and sample_categorical through an execution policy: exec::seq is the reference itself,
// and exec::simd (when built) gives seq's token for every row and u, with probabilities within the
// agreement backend/simd/warp.hpp states (float rows: a few ulp of the row's largest probability).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "specdec/random/stream.hpp"
#include "specdec/sampling/with_policy.hpp"
#include "support/host_policies.hpp"

namespace {

std::vector<float> random_logits(std::size_t V, std::uint64_t seed) {
  const specdec::random::request_stream stream{.seed = seed, .request = 0, .step = 0};
  auto gen = stream.open(0, specdec::random::purpose::accept);
  std::vector<float> logits(V);
  for (auto& x : logits) x = static_cast<float>(6.0 * gen.uniform() - 3.0);
  return logits;
}

template <class Policy>
void check_against_seq(const Policy& policy) {
  const std::vector<specdec::warp_params> params{{},
                                                 {.temperature = 0.0},
                                                 {.temperature = 0.7, .top_k = 40},
                                                 {.temperature = 1.3, .top_p = 0.9},
                                                 {.min_p = 0.05},
                                                 {.temperature = 0.8, .top_k = 50, .top_p = 0.95, .min_p = 0.02}};
  std::size_t rows = 0;
  for (const std::size_t V : {std::size_t{7}, std::size_t{1000}, std::size_t{32000}}) {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      const auto logits = random_logits(V, seed);
      for (const auto& w : params) {
        std::vector<float> ref(V), got(V);
        const auto s_ref = specdec::warp_logits(std::span<const float>(logits), std::span<float>(ref), w);
        const auto s_got = specdec::warp_logits(policy, std::span<const float>(logits), std::span<float>(got), w);
        REQUIRE(s_got == s_ref);
        const float largest = *std::max_element(ref.begin(), ref.end());
        for (std::size_t v = 0; v < V; ++v) REQUIRE(std::abs(got[v] - ref[v]) <= 4e-7f * largest);
        for (const double u : {0.0, 0.1234, 0.5, 0.9, 0.999999}) {
          const auto a = specdec::sample_categorical(std::span<const float>(ref), u);
          const auto b = specdec::sample_categorical(policy, std::span<const float>(ref), u);
          REQUIRE(a.token == b.token);
          REQUIRE(a.status == b.status);
        }
        ++rows;
      }
    }
  }
  CHECK(rows == 3 * 6 * params.size());
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("warp_logits and sample_categorical with every host policy follow seq's reference", "[sampling]",
                        specdec_test::host_policies) {
  check_against_seq(TestType{});
}
