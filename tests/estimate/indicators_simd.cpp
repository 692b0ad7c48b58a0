// SV's indicators through the public entry point on the simd policy: `estimate::compute_indicators(
// exec::simd, ...)` dispatches to backend/simd/indicators.hpp and agrees with exec::seq (S within
// 1e-12, A identical, the same errors), and the SV loop gives the same tokens on both policies. The simd header is included first on purpose: it includes the
// seq header itself, and the dispatch must work in either include order.
#include "specdec/backend/simd/indicators.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "specdec/decode/sv.hpp"
#include "specdec/estimate/indicators.hpp"
#include "specdec/exec/simd.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/random/stream.hpp"
#include "support/batch_builder.hpp"
#include "support/sequence_enumeration.hpp"

static_assert(SPECDEC_ENABLE_SIMD, "this test is built with specdec::simd");

TEST_CASE("compute_indicators on exec::simd agrees with exec::seq", "[estimate][indicators][simd]") {
  if (!specdec::exec::arch_runnable<specdec::exec::default_arch>()) return;
  using specdec::token_id;
  specdec::random::philox_stream s(specdec::random::stream_address{0x51DE, 0, 0, 0, specdec::random::purpose::user});
  for (const std::size_t V : {std::size_t{3}, std::size_t{37}, std::size_t{2288}}) {
    const std::size_t n = 7;
    std::vector<float> d_rows, c_rows;
    std::vector<token_id> tokens;
    for (std::size_t i = 0; i < n; ++i) {
      const auto d = specdec_test::random_probability_row<float>(s, V, 0.2);
      const auto c = specdec_test::random_probability_row<float>(s, V, 0.2);
      d_rows.insert(d_rows.end(), d.begin(), d.end());
      c_rows.insert(c_rows.end(), c.begin(), c.end());
      token_id t = static_cast<token_id>(s.uniform() * static_cast<double>(V));
      while (d[static_cast<std::size_t>(t)] == 0.0f) t = static_cast<token_id>((static_cast<std::size_t>(t) + 1) % V);
      tokens.push_back(t);
    }
    std::vector<double> s_seq(n), a_seq(n), s_simd(n), a_simd(n);
    specdec::estimate::compute_indicators(specdec::exec::seq, specdec::row_batch<const float>(d_rows, V),
                                          specdec::row_batch<const float>(c_rows, V), std::span<const token_id>(tokens),
                                          std::span<double>(s_seq), std::span<double>(a_seq));
    specdec::estimate::compute_indicators(specdec::exec::simd, specdec::row_batch<const float>(d_rows, V),
                                          specdec::row_batch<const float>(c_rows, V), std::span<const token_id>(tokens),
                                          std::span<double>(s_simd), std::span<double>(a_simd));
    for (std::size_t i = 0; i < n; ++i) {
      CAPTURE(V, i);
      CHECK(std::abs(s_simd[i] - s_seq[i]) <= 1e-12);
      CHECK(a_simd[i] == a_seq[i]);
    }
    // The same errors: a NaN in a companion row.
    c_rows[1] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_AS(
        specdec::estimate::compute_indicators(specdec::exec::simd, specdec::row_batch<const float>(d_rows, V),
                                              specdec::row_batch<const float>(c_rows, V), std::span<const token_id>(tokens),
                                              std::span<double>(s_simd), std::span<double>(a_simd)),
        specdec::error);
  }
}

TEST_CASE("decode_sv on exec::simd emits the tokens of exec::seq", "[decode][sv][simd]") {
  if (!specdec::exec::arch_runnable<specdec::exec::default_arch>()) return;
  using specdec::token_id;
  constexpr std::size_t V = 6;
  const auto chain = [](std::uint64_t seed) {
    return specdec::markov_model::chain(std::vector<double>(V, 1.0 / V), specdec_test::random_stochastic_table(V, seed));
  };
  const auto target = chain(31), draft = chain(32), companion = chain(33);
  specdec::decode_options o;
  o.seed = 0x51DE5;
  const std::vector<std::vector<token_id>> prompts{{0}, {1}, {2}};
  const auto samples = specdec::profile_sv_indicators(specdec::exec::seq, target, draft, specdec::warp_params{}, companion,
                                                      specdec::sv_profile_options{}, prompts, o);
  const auto estimator = specdec::estimate::acceptance_estimator::fit(samples, specdec::estimate::binning::uniform(5, 5));
  const auto latency = [](int k) { return 1.0 + 0.2 * k; };
  o.max_new_tokens = 30;
  int same = 0;
  const int runs = 40;
  for (int i = 0; i < runs; ++i) {
    o.request_id = static_cast<std::uint32_t>(i);
    const std::vector<token_id> prompt{static_cast<token_id>(static_cast<std::size_t>(i) % V)};
    const auto a = specdec::decode_sv(specdec::exec::seq, target, draft, specdec::warp_params{},
                                      specdec::sv_setup{companion, estimator, latency}, specdec::sv_options{}, prompt, o);
    const auto b = specdec::decode_sv(specdec::exec::simd, target, draft, specdec::warp_params{},
                                      specdec::sv_setup{companion, estimator, latency}, specdec::sv_options{}, prompt, o);
    same += a.tokens == b.tokens;
  }
  // Only a float reduction that flips an acceptance test, a sample or a bin boundary can differ.
  CHECK(same >= runs - 2);
}
