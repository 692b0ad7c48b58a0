// SPRINTER's verifier-gated drafter (draft/verifier_gated.hpp): how a run ends (verifier rejection,
// cap, budget), what the verifier is shown, that its draws are chain drafting's draws (same Philox
// addresses), and its errors.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/draft/chain.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"
#include "specdec/models/markov.hpp"
#include "support/sequence_enumeration.hpp"

namespace {
using specdec::token_id;

specdec::markov_model draft_model() {
  const auto m = specdec_test::make_markov_pair(5, 777, 0.5);
  return specdec::markov_model::chain(std::vector<double>(5, 0.2), m.draft);
}

// Features = {position, prefix length, token}; verifier: accept while position < k.
auto recording_features() {
  return specdec::make_feature_extractor(3, [](const specdec::verifier_query& q, std::span<float> out) {
    out[0] = static_cast<float>(q.position);
    out[1] = static_cast<float>(q.prefix.size());
    out[2] = static_cast<float>(q.token);
  });
}
auto accept_while(std::size_t k) {
  return specdec::make_verifier(3, [k](std::span<const float> f) { return f[0] < static_cast<float>(k) ? 1.0 : 0.0; });
}
}  // namespace

TEST_CASE("a gated run ends at the verifier's first rejection", "[verifier_gated]") {
  const auto model = draft_model();
  specdec::verifier_gated_drafter d(model, specdec::warp_params{}, recording_features(), accept_while(3),
                                    specdec::gating_params{.tau = 0.5, .max_run = 20});
  STATIC_REQUIRE(specdec::Drafter<decltype(d)>);
  const std::vector<token_id> context{1, 2};
  const specdec::random::request_stream stream{9, 3, 4};
  specdec::draft_block block;
  specdec::gated_run run;
  CHECK(d.draft(context, 100, stream, block, run) == 4);
  CHECK(block.tokens.size() == 4);
  CHECK(block.q_rows.size() == 4 * 5);
  CHECK(run.verifier_calls == 4);
  CHECK(run.verifier_accepted == 3);
  CHECK(run.verifier_rejected);
  CHECK_FALSE(run.forced_check);
  CHECK(run.needs_check());

  SECTION("the draws are chain drafting's draws at the same addresses") {
    specdec::chain_drafter chain(model, specdec::warp_params{});
    specdec::draft_block ref;
    chain.draft(context, 4, stream, ref);
    CHECK(ref.tokens == block.tokens);
    CHECK(ref.q_rows == block.q_rows);
  }
  SECTION("the Drafter form drops the run record") {
    specdec::draft_block again;
    CHECK(d.draft(context, 100, stream, again) == 4);
    CHECK(again.tokens == block.tokens);
  }
}

TEST_CASE("the cap forces a target check; the budget ends a run without one", "[verifier_gated]") {
  const auto model = draft_model();
  const std::vector<token_id> context{0};
  const specdec::random::request_stream stream{1, 0, 0};
  specdec::draft_block block;
  specdec::gated_run run;
  SECTION("cap 5, a verifier that accepts everything: 5 tokens, 4 verifier calls, the 5th forced") {
    specdec::verifier_gated_drafter d(model, specdec::warp_params{}, recording_features(), accept_while(1000),
                                      specdec::gating_params{.tau = 0.5, .max_run = 5});
    CHECK(d.draft(context, 100, stream, block, run) == 5);
    CHECK(run.verifier_calls == 4);
    CHECK(run.verifier_accepted == 4);
    CHECK(run.forced_check);
    CHECK_FALSE(run.verifier_rejected);
  }
  SECTION("budget 3 < cap: three verifier-accepted tokens and nothing to check") {
    specdec::verifier_gated_drafter d(model, specdec::warp_params{}, recording_features(), accept_while(1000),
                                      specdec::gating_params{.tau = 0.5, .max_run = 5});
    CHECK(d.draft(context, 3, stream, block, run) == 3);
    CHECK(run.verifier_calls == 3);
    CHECK(run.verifier_accepted == 3);
    CHECK_FALSE(run.needs_check());
  }
  SECTION("cap 1: every token is a forced check (standard SD with gamma = 1), no verifier call") {
    specdec::verifier_gated_drafter d(model, specdec::warp_params{}, recording_features(), accept_while(1000),
                                      specdec::gating_params{.tau = 0.5, .max_run = 1});
    CHECK(d.draft(context, 100, stream, block, run) == 1);
    CHECK(run.verifier_calls == 0);
    CHECK(run.forced_check);
  }
  SECTION("a verifier that rejects everything: one token, one verifier call") {
    specdec::verifier_gated_drafter d(model, specdec::warp_params{}, recording_features(), accept_while(0),
                                      specdec::gating_params{.tau = 0.5, .max_run = 5});
    CHECK(d.draft(context, 100, stream, block, run) == 1);
    CHECK(run.verifier_calls == 1);
    CHECK(run.verifier_accepted == 0);
    CHECK(run.verifier_rejected);
  }
}

TEST_CASE("the verifier sees the growing prefix, the token and its position", "[verifier_gated]") {
  const auto model = draft_model();
  std::vector<std::vector<float>> seen;
  auto features = specdec::make_feature_extractor(3, [&seen](const specdec::verifier_query& q, std::span<float> out) {
    out[0] = static_cast<float>(q.position);
    out[1] = static_cast<float>(q.prefix.size());
    out[2] = q.q_row[static_cast<std::size_t>(q.token)];
    seen.emplace_back(out.begin(), out.end());
  });
  specdec::verifier_gated_drafter d(model, specdec::warp_params{}, features, accept_while(2),
                                    specdec::gating_params{.tau = 0.5, .max_run = 10});
  const std::vector<token_id> context{4, 4, 4};
  specdec::draft_block block;
  specdec::gated_run run;
  d.draft(context, 10, specdec::random::request_stream{2, 0, 0}, block, run);
  REQUIRE(seen.size() == 3);
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(seen[j][0] == static_cast<float>(j));
    CHECK(seen[j][1] == static_cast<float>(3 + j));
    CHECK(seen[j][2] == block.q_rows[j * 5 + static_cast<std::size_t>(block.tokens[j])]);
  }
}

TEST_CASE("the gated drafter rejects bad input", "[verifier_gated][errors]") {
  const auto model = draft_model();
  using specdec::gating_params;
  CHECK_THROWS_AS(specdec::verifier_gated_drafter(model, specdec::warp_params{}, recording_features(), accept_while(1),
                                                  gating_params{.tau = -0.5, .max_run = 5}),
                  specdec::error);
  CHECK_THROWS_AS(specdec::verifier_gated_drafter(model, specdec::warp_params{}, recording_features(), accept_while(1),
                                                  gating_params{.tau = 0.5, .max_run = 0}),
                  specdec::error);
  CHECK_THROWS_AS(specdec::verifier_gated_drafter(model, specdec::warp_params{.top_p = 0.0}, recording_features(),
                                                  accept_while(1), gating_params{}),
                  specdec::error);
  // Feature sizes that disagree.
  CHECK_THROWS_AS(specdec::verifier_gated_drafter(model, specdec::warp_params{}, specdec::draft_row_features{}, accept_while(1),
                                                  gating_params{}),
                  specdec::error);
  specdec::verifier_gated_drafter d(model, specdec::warp_params{}, recording_features(), accept_while(1), gating_params{});
  specdec::draft_block block;
  specdec::gated_run run;
  const std::vector<token_id> context{0};
  CHECK_THROWS_AS(d.draft(context, 0, specdec::random::request_stream{}, block, run), specdec::error);
  // A verifier that returns NaN stops the run with an error, not a decision.
  auto nan_v = specdec::make_verifier(3, [](std::span<const float>) { return std::numeric_limits<double>::quiet_NaN(); });
  specdec::verifier_gated_drafter bad(model, specdec::warp_params{}, recording_features(), nan_v, gating_params{});
  CHECK_THROWS_AS(bad.draft(context, 10, specdec::random::request_stream{}, block, run), specdec::numerical_error);
}
