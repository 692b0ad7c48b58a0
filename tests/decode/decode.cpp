// The generation loop: drafter x length policy x acceptance rule, its counters and its guarantees.
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/model/adapters.hpp"
#include "support/sample_scale.hpp"

namespace {
using specdec::token_id;
constexpr std::size_t V = 6;

// A context-dependent model: logits depend on the last token, so greedy decoding is not constant.
auto markov_logits(double shift) {
  return [shift](std::span<const token_id> ctx, std::span<float> out) {
    const int last = ctx.empty() ? 0 : ctx.back();
    for (std::size_t v = 0; v < V; ++v) out[v] = static_cast<float>(std::sin(1.7 * double(v) + 0.9 * last + shift) * 2.0);
  };
}

// A context-free model with fixed probabilities, for the closed-form check.
auto fixed_logits(std::vector<double> p) {
  return [p](std::span<const token_id>, std::span<float> out) {
    for (std::size_t v = 0; v < p.size(); ++v) out[v] = static_cast<float>(std::log(p[v]));
  };
}

void check_counters(const specdec::decode_result& r, std::size_t max_new) {
  const auto& s = r.stats;
  CHECK(r.tokens.size() <= max_new);
  CHECK(s.emitted == r.tokens.size());
  CHECK(s.target_calls == s.iterations);
  CHECK(s.accepted <= s.drafted);
  for (std::size_t i = 0; i < s.accepted_at.size(); ++i) {
    CHECK(s.accepted_at[i] <= s.drafted_at[i]);
    if (i > 0) CHECK(s.accepted_at[i] <= s.accepted_at[i - 1]);  // a chain accepts prefixes
  }
  for (const token_id t : r.tokens) CHECK(specdec::in_vocabulary(t, V));
}
}  // namespace

TEST_CASE("greedy speculative decoding reproduces greedy target decoding", "[decode]") {
  const auto target = specdec::make_model(V, markov_logits(0.0));
  const auto draft = specdec::make_model(V, markov_logits(0.8));
  specdec::decode_options o;
  o.max_new_tokens = 40;
  o.target_params.temperature = 0.0;
  const std::vector<token_id> prompt{1, 2};
  const auto reference = specdec::decode_target_only(target, prompt, o);
  for (std::size_t gamma : {1u, 3u, 5u}) {
    const auto r =
        specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{0.0}, gamma, specdec::greedy, prompt, o);
    CAPTURE(gamma);
    CHECK(r.tokens == reference.tokens);
    check_counters(r, o.max_new_tokens);
  }
}

TEST_CASE("a draft equal to the target has every token accepted", "[decode]") {
  const auto target = specdec::make_model(V, markov_logits(0.0));
  specdec::decode_options o;
  o.max_new_tokens = 50;
  const auto r = specdec::decode(specdec::exec::seq, target, target, specdec::warp_params{}, 4, specdec::strict,
                                 std::vector<token_id>{0}, o);
  CHECK(r.stats.accepted == r.stats.drafted);
  CHECK(r.stats.acceptance_rate() == 1.0);
  CHECK(specdec::is_valid(r.status));
  check_counters(r, o.max_new_tokens);
  // 10 full rounds of 5 tokens.
  CHECK(r.stats.target_calls == 10);
  CHECK(r.stats.tokens_per_target_call() == Approx(5.0));
}

TEST_CASE("the measured tokens per target call match Leviathan's closed form", "[decode]") {
  // Context-free p and q: every round is i.i.d., acceptance alpha = sum min(p, q), and the expected
  // emitted tokens per round are (1 - alpha^(gamma+1)) / (1 - alpha) (Leviathan et al. 2023, eq. 1).
  const std::vector<double> p{0.30, 0.25, 0.20, 0.15, 0.07, 0.03}, q{0.10, 0.15, 0.20, 0.25, 0.2, 0.1};
  const auto target = specdec::make_model(V, fixed_logits(p));
  const auto draft = specdec::make_model(V, fixed_logits(q));
  const double alpha = specdec::overlap(std::span<const double>(p), std::span<const double>(q));
  const std::size_t gamma = 3;
  const double expected = (1 - std::pow(alpha, gamma + 1)) / (1 - alpha);
  specdec::decode_options o;
  o.seed = 11;
  o.max_new_tokens = specdec_test::scaled_sample_count(150000);
  const auto r = specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, gamma, specdec::strict,
                                 std::vector<token_id>{0}, o);  // context-free models: the prompt changes no row
  // Every round emits its accepted drafts plus one token (only the last may be cut by the budget).
  const double rounds = double(r.stats.iterations);
  const double per_round = (double(r.stats.accepted) + rounds) / rounds;
  // Tokens per round lie in [1, gamma + 1], so their standard deviation is at most gamma / 2.
  const double tolerance = 5.0 * (double(gamma) / 2.0) / std::sqrt(rounds);
  INFO("alpha = " << alpha << ", expected " << expected << ", measured " << per_round << " over " << rounds << " rounds");
  CHECK(std::abs(per_round - expected) < tolerance);
  CHECK(r.stats.acceptance_at(0) == Approx(alpha).margin(5.0 * 0.5 / std::sqrt(rounds)));
}

TEST_CASE("decoding is reproducible from its seed", "[decode][seed]") {
  const auto target = specdec::make_model(V, markov_logits(0.0));
  const auto draft = specdec::make_model(V, markov_logits(0.5));
  specdec::decode_options o;
  o.max_new_tokens = 30;
  o.seed = 1234;
  const std::vector<token_id> prompt{3};
  const auto a = specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::strict, prompt, o);
  const auto b = specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::strict, prompt, o);
  CHECK(a.tokens == b.tokens);
  int differing = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    const auto c = specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::strict, prompt, o);
    differing += c.tokens != a.tokens;
    check_counters(c, o.max_new_tokens);
  }
  CHECK(differing > 0);
}

TEST_CASE("stop token, zero budget and simulated time", "[decode]") {
  const auto target = specdec::make_model(V, markov_logits(0.0));
  const auto draft = specdec::make_model(V, markov_logits(0.3));
  specdec::decode_options o;
  o.max_new_tokens = 0;
  CHECK(
      specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::strict, std::vector<token_id>{0}, o)
          .tokens.empty());
  // A generation starts from at least one token (a BOS token for an unconditional one).
  CHECK_THROWS_AS(
      specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::strict, std::vector<token_id>{}, o),
      specdec::error);
  CHECK_THROWS_AS(specdec::decode_target_only(target, std::vector<token_id>{}, o), specdec::error);
  o.max_new_tokens = 200;
  o.stop_tokens = {2};
  const auto r = specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::lenient_rule(0.5),
                                 std::vector<token_id>{0}, o);
  REQUIRE(!r.tokens.empty());
  if (r.tokens.size() < o.max_new_tokens) CHECK(r.tokens.back() == 2);
  for (std::size_t i = 0; i + 1 < r.tokens.size(); ++i) CHECK(r.tokens[i] != 2);
  // simulated time = drafted * t_draft + sum over calls of t_target(k)
  const specdec::cost_model cost{};  // the default the call above charged
  const double expected = double(r.stats.drafted) * cost.t_draft + double(r.stats.target_calls) * cost.t_target_base +
                          double(r.stats.target_positions) * cost.t_target_per_token;
  CHECK(r.stats.simulated_time == Approx(expected));
  CHECK_THROWS_AS(specdec::decode(specdec::exec::seq, target, draft, specdec::warp_params{}, 4, specdec::strict,
                                  std::vector<token_id>{0}, o, specdec::cost_model{.t_draft = -1}),
                  specdec::error);
}
