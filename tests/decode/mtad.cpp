// SPECDEC_TEST_LABELS: statistical
//
// The MTAD loop (decode/mtad.hpp, seed 003): tau = 1 is target-only sampling (sequence-level
// chi-squared, with a negative control), tau = 0 accepts every draft with p > 0, Theorem 3.6 on pairs
// with ||log p - log q||_inf <= U, the log-likelihood / perplexity / block-efficiency statistics,
// finiteness for long drafts, cost accounting, reproducibility and bad options.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "specdec/decode/likelihood.hpp"
#include "specdec/decode/mtad.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/archetypes.hpp"
#include "specdec/models/divergence.hpp"
#include "specdec/models/enumerate.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/theory/mtad.hpp"
#include "support/chi_squared.hpp"

namespace {

using specdec::token_id;

void check_counters(const specdec::mtad_result& r, const specdec::decode_options& o, std::size_t V) {
  const auto& s = r.stats;
  CHECK(r.tokens.size() <= o.max_new_tokens);
  CHECK(s.emitted == r.tokens.size());
  CHECK(s.target_calls == s.iterations);
  CHECK(s.accepted <= s.drafted);
  CHECK(s.target_positions == s.drafted + s.iterations);
  CHECK(r.token_log_probs.size() == r.tokens.size());
  if (s.iterations) CHECK(r.block_efficiency() == Approx(double(s.emitted) / double(s.iterations)));
  for (const token_id t : r.tokens) CHECK(specdec::in_vocabulary(t, V));
}

// ||log p - log q||_inf over every row of two Markov tables of the same shape.
double sup_log_ratio(const specdec::markov_model& p, const specdec::markov_model& q) {
  double u = 0.0;
  for (std::size_t i = 0; i < p.table().size(); ++i) u = std::max(u, std::abs(std::log(p.table()[i]) - std::log(q.table()[i])));
  return u;
}

}  // namespace

TEST_CASE("MTAD with tau = 1 samples the target, one token per iteration (chi-squared)", "[mtad][decode][statistical]") {
  // V = 4, order 1, H = 3 tokens: 64 sequences; 60000 generations per arm.
  const auto pair = specdec::make_markov_pair(4, 1, 606, 0.5, 1.0);
  const std::vector<token_id> prompt{2};
  const auto exact = specdec::enumerate_sequences(pair.target, std::span<const token_id>(prompt), 3);
  std::vector<double> law;
  for (const auto& s : exact) law.push_back(s.probability);
  const std::uint64_t seed = 9001, n = 60000;

  const auto run = [&](double tau) {
    std::vector<std::uint64_t> counts(law.size(), 0);
    std::uint64_t iterations = 0;
    specdec::decode_options o;
    o.max_new_tokens = 3;
    o.seed = seed;
    const specdec::mtad_options m{.gamma = 3, .width = 4, .tau = tau};
    for (std::uint64_t i = 0; i < n; ++i) {
      o.request_id = static_cast<std::uint32_t>(i);
      const auto r = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, m, prompt, o);
      REQUIRE(r.tokens.size() == 3);
      iterations += r.stats.iterations;
      ++counts[std::size_t(r.tokens[0]) * 16 + std::size_t(r.tokens[1]) * 4 + std::size_t(r.tokens[2])];
    }
    return std::pair{counts, iterations};
  };
  const auto [counts, iterations] = run(1.0);
  CHECK(iterations == 3 * n);  // every draft rejected: one token per iteration
  const auto g = specdec_test::chi_squared_gof(counts, law);
  // Negative control: tau = 0.5 keeps high-likelihood beams, a different law from the target's.
  const auto control = specdec_test::chi_squared_gof(run(0.5).first, law);
  std::cout << "MTAD tau = 1 vs target (seed " << seed << "): " << g << "\n  negative control (tau = 0.5): " << control << "\n";
  CHECK(g.p_value > specdec_test::gof_alpha);
  CHECK(control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("MTAD with tau = 0 accepts every draft token with p > 0", "[mtad][decode]") {
  const auto pair = specdec::make_markov_pair(6, 2, 11, 0.7, 0.5);  // every p > 0
  specdec::decode_options o;
  o.max_new_tokens = 200;
  o.seed = 5;
  for (const auto mode :
       {specdec::beam_mode::search, specdec::beam_mode::sample, specdec::beam_mode::sample_without_replacement}) {
    const auto r = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft,
                                        {.gamma = 5, .width = 3, .mode = mode, .tau = 0.0}, std::vector<token_id>{0, 1}, o);
    CHECK(r.stats.accepted == r.stats.drafted);
    CHECK(r.stats.iterations == (200 + 5) / 6);  // 33 full rounds of 6 tokens, then 2 tokens
    check_counters(r, o, 6);
  }
  // With a target that gives p = 0 to part of the vocabulary, drafts of those tokens are cut.
  const auto sparse_target = specdec::random_markov_model(6, 1, 12, 1.0, 0.5);
  const auto r = specdec::decode_mtad(specdec::exec::seq, sparse_target, pair.draft, {.gamma = 5, .width = 3, .tau = 0.0},
                                      std::vector<token_id>{0}, o);
  CHECK(r.stats.accepted < r.stats.drafted);
  CHECK(std::isfinite(r.log_likelihood));  // every emitted token has p > 0
}

TEST_CASE("Theorem 3.6: tokens per iteration >= |log tau| / U", "[mtad][decode][theory]") {
  // Both orientations of q = (1 - e) p + e / V: as drafted (beams pick tokens with q < p, so the
  // bound is loose) and swapped (the draft is the peaked model: q > p on the beams, so the joint ratio
  // falls with every token and the bound is nearly tight).
  for (const double e : {0.05, 0.2})
    for (const bool swapped : {false, true}) {
      const auto made = specdec::make_markov_pair(6, 1, 77, e, 3.0);
      const specdec::markov_model& target = swapped ? made.draft : made.target;
      const specdec::markov_model& draft = swapped ? made.target : made.draft;
      const double U = sup_log_ratio(target, draft);
      for (const double tau : {0.1, 0.5, 0.9}) {
        const std::size_t gamma = 8;
        specdec::decode_options o;
        o.max_new_tokens = 3000;
        o.seed = 21;
        const auto r = specdec::decode_mtad(specdec::exec::seq, target, draft, {.gamma = gamma, .width = 4, .tau = tau},
                                            std::vector<token_id>{3}, o);
        const double bound = specdec::theory::mtad::theorem_3_6_bound(tau, U);
        const std::size_t every = specdec::theory::mtad::guaranteed_tokens_per_iteration(tau, U, gamma);
        const auto& s = r.stats;
        std::cout << "Theorem 3.6: e = " << e << (swapped ? " (swapped)" : "") << ", U = " << U << ", tau = " << tau
                  << ": gamma_bar = " << r.block_efficiency() << " >= |log tau|/U = " << bound << " (every iteration >= " << every
                  << " tokens)\n";
        CAPTURE(e, swapped, U, tau, bound, every);
        // Every iteration but possibly the last (cut by the token budget) accepts every - 1 drafts.
        if (every >= 2) CHECK(s.accepted_at[every - 2] + 1 >= s.iterations);
        // The mean over the iterations before the last (which emits at least one token):
        // emitted - 1 >= (tokens of those iterations) >= min(|log tau| / U, gamma + 1) (iterations - 1).
        CHECK(double(s.emitted - 1) >= std::min(bound, double(gamma + 1)) * double(s.iterations - 1));
        CHECK(r.block_efficiency() >= 1.0);
        check_counters(r, o, 6);
      }
    }
}

TEST_CASE("Theorem 3.6 is tight when every token moves the log ratio by exactly U", "[mtad][decode][theory]") {
  // V = 2, context-free: q = (s, 1 - s) with s = 1 / (1 + e^-U) and p = (s e^-U, (1 - s) e^U), so
  // |log p - log q| = U on both tokens. Beam search drafts token 0 throughout; prefix j has
  // log p - log q = -j U and passes iff j U < |log tau|: every iteration emits exactly
  // guaranteed_tokens_per_iteration(tau, U, gamma) tokens.
  const double U = 0.5, s = 1.0 / (1.0 + std::exp(-U));
  const std::vector<double> q{s, 1.0 - s}, p{s * std::exp(-U), (1.0 - s) * std::exp(U)};
  REQUIRE(p[0] + p[1] == Approx(1.0));
  const auto fixed = [](std::vector<double> probs) {
    return specdec::make_model(2, [probs](std::span<const token_id>, std::span<float> out) {
      for (std::size_t v = 0; v < 2; ++v) out[v] = static_cast<float>(std::log(probs[v]));
    });
  };
  const auto target = fixed(p), draft = fixed(q);
  for (const double tau : {0.1, 0.5, 0.9}) {
    const std::size_t gamma = 8;
    specdec::decode_options o;
    o.max_new_tokens = 4000;
    const auto r = specdec::decode_mtad(specdec::exec::seq, target, draft,
                                        {.gamma = gamma, .width = 2, .mode = specdec::beam_mode::search, .tau = tau},
                                        std::vector<token_id>{0}, o);  // context-free models
    const std::size_t every = specdec::theory::mtad::guaranteed_tokens_per_iteration(tau, U, gamma);
    std::cout << "Theorem 3.6 (tight): U = " << U << ", tau = " << tau << ": gamma_bar = " << r.block_efficiency()
              << ", |log tau|/U = " << specdec::theory::mtad::theorem_3_6_bound(tau, U) << ", per iteration " << every << "\n";
    CAPTURE(tau, every);
    CHECK(r.stats.accepted == (every - 1) * r.stats.iterations);
    CHECK(r.block_efficiency() >= specdec::theory::mtad::theorem_3_6_bound(tau, U));
  }
}

TEST_CASE("MTAD reports the output's log-likelihood and perplexity under the unwarped target", "[mtad][decode]") {
  const auto pair = specdec::make_markov_pair(8, 2, 303, 0.4, 0.7);
  const std::vector<token_id> prompt{1, 5};
  specdec::decode_options o;
  o.max_new_tokens = 120;
  o.seed = 8;
  o.target_params = specdec::mtad_default_warp;
  const auto r = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o);
  REQUIRE(r.tokens.size() == 120);
  const auto post =
      specdec::token_log_likelihoods(pair.target, std::span<const token_id>(prompt), std::span<const token_id>(r.tokens));
  double sum = 0.0;
  for (std::size_t i = 0; i < post.size(); ++i) {
    CHECK(r.token_log_probs[i] == Approx(post[i]).margin(1e-12));
    sum += post[i];
  }
  CHECK(r.log_likelihood == Approx(sum).epsilon(1e-12));
  CHECK(r.perplexity == Approx(std::exp(-sum / 120.0)).epsilon(1e-12));
  CHECK(r.perplexity ==
        Approx(specdec::perplexity_under(pair.target, std::span<const token_id>(prompt), std::span<const token_id>(r.tokens))));
  // The exact sequence log-probability of the Markov target agrees (float logits: ~1e-6 relative).
  CHECK(r.log_likelihood == Approx(pair.target.sequence_log_probability(prompt, r.tokens)).epsilon(1e-5));
  check_counters(r, o, 8);

  // A stop token cuts the output and its log-likelihoods alike.
  o.stop_tokens = {r.tokens[10]};
  const auto stopped = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o);
  CHECK(stopped.tokens.size() <= 11);
  CHECK(stopped.tokens.back() == o.stop_tokens[0]);
  CHECK(stopped.token_log_probs.size() == stopped.tokens.size());
  check_counters(stopped, o, 8);

  // No tokens: perplexity is undefined (NaN); one token: one iteration without drafts.
  o.stop_tokens.clear();
  o.max_new_tokens = 0;
  const auto none = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o);
  CHECK(none.tokens.empty());
  CHECK(std::isnan(none.perplexity));
  o.max_new_tokens = 1;
  const auto one = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o);
  CHECK(one.tokens.size() == 1);
  CHECK(one.stats.drafted == 0);
  CHECK(one.stats.draft_calls == 0);
}

TEST_CASE("MTAD stays finite for long drafts whose joint probability underflows", "[mtad][decode][numerics]") {
  // Target = draft, near-uniform over V = 50: 1000 drafts of probability ~0.02 each; the joint ~1e-1700.
  const auto m = specdec::random_markov_model(50, 1, 5, 200.0);
  specdec::decode_options o;
  o.max_new_tokens = 1001;
  const auto r =
      specdec::decode_mtad(specdec::exec::seq, m, m, {.gamma = 1000, .width = 2, .tau = 0.9}, std::vector<token_id>{0}, o);
  CHECK(r.stats.iterations == 1);
  CHECK(r.stats.accepted == 1000);
  CHECK(r.tokens.size() == 1001);
  CHECK(std::isfinite(r.log_likelihood));
  CHECK(r.log_likelihood < -3000.0);
  CHECK(r.perplexity > 30.0);
  CHECK(r.perplexity < 60.0);
}

TEST_CASE("MTAD charges the beam draft per step or per beam", "[mtad][decode][cost]") {
  const auto pair = specdec::make_markov_pair(8, 1, 9, 0.3);
  specdec::decode_options o;
  o.max_new_tokens = 60;
  o.seed = 4;
  const specdec::cost_model cost{.t_draft = 0.05, .t_target_base = 1.0, .t_target_per_token = 0.01};
  const specdec::mtad_options step{.gamma = 4, .width = 4, .tau = 0.5},
      beam{.gamma = 4, .width = 4, .tau = 0.5, .draft_cost = specdec::mtad_draft_cost::per_beam};
  const auto a = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, step, std::vector<token_id>{0}, o, cost);
  const auto b = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, beam, std::vector<token_id>{0}, o, cost);
  CHECK(a.tokens == b.tokens);  // the cost model never changes the tokens
  const double targets = double(a.stats.iterations) * 1.0 + double(a.stats.target_positions) * 0.01;
  CHECK(a.stats.simulated_time == Approx(targets + 0.05 * double(a.stats.drafted)));
  CHECK(b.stats.simulated_time == Approx(targets + 0.05 * double(b.stats.draft_calls)));
  CHECK(b.stats.draft_calls > a.stats.drafted);
  CHECK(specdec::simulated_speedup(a.stats, cost) > specdec::simulated_speedup(b.stats, cost));
  // The composing form takes the draft cost with the method's pieces, before the prompt.
  specdec::beam_drafter<specdec::markov_model> drafter(pair.draft, {.width = 4, .warp = o.target_params});
  const auto c = specdec::decode_mtad(specdec::exec::seq, pair.target, drafter, specdec::fixed_length{4}, specdec::mtad_rule(0.5),
                                      specdec::mtad_draft_cost::per_beam, std::vector<token_id>{0}, o, cost);
  CHECK(c.tokens == b.tokens);
  CHECK(c.stats.simulated_time == b.stats.simulated_time);
}

TEST_CASE("MTAD composes from its pieces: beam drafter x length policy x rule", "[mtad][decode]") {
  const auto pair = specdec::make_markov_pair(8, 1, 29, 0.3);
  specdec::decode_options o;
  o.max_new_tokens = 50;
  o.seed = 6;
  o.target_params = specdec::mtad_default_warp;
  const std::vector<token_id> prompt{2};
  const specdec::mtad_options m{.gamma = 3, .width = 4, .tau = 0.3};
  const auto a = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, m, prompt, o);
  specdec::beam_drafter<specdec::markov_model> drafter(pair.draft, {.width = 4, .warp = o.target_params});
  const auto b = specdec::decode_mtad(specdec::exec::seq, pair.target, drafter, specdec::fixed_length{3}, specdec::mtad_rule(0.3),
                                      prompt, o);
  CHECK(a.tokens == b.tokens);
  CHECK(a.log_likelihood == b.log_likelihood);
  // Any length policy: here gamma grows with the iteration count.
  struct growing {
    std::size_t next_length(const specdec::decode_stats& s) const { return 1 + s.iterations % 5; }
  };
  const auto c = specdec::decode_mtad(specdec::exec::seq, pair.target, drafter, growing{}, specdec::mtad_rule(0.3), prompt, o);
  CHECK(c.stats.drafted_at.size() <= 5);
  check_counters(c, o, 8);
  const auto other = specdec::random_markov_model(6, 1, 2, 1.0);
  specdec::beam_drafter<specdec::markov_model> wrong(other, {});
  CHECK_THROWS_AS(
      specdec::decode_mtad(specdec::exec::seq, pair.target, wrong, specdec::fixed_length{3}, specdec::mtad_rule(0.3), prompt, o),
      specdec::error);
}

TEST_CASE("MTAD is reproducible from its seed", "[mtad][decode][seed]") {
  const auto pair = specdec::make_markov_pair(8, 1, 19, 0.3);
  specdec::decode_options o;
  o.max_new_tokens = 40;
  o.seed = 77;
  const std::vector<token_id> prompt{4};
  const auto a = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o);
  const auto b = specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o);
  CHECK(a.tokens == b.tokens);
  CHECK(a.log_likelihood == b.log_likelihood);
  int differing = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    o.seed = seed;
    differing += specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, o).tokens != a.tokens;
  }
  CHECK(differing >= 8);
}

TEST_CASE("MTAD refuses bad options", "[mtad][decode][errors]") {
  const auto pair = specdec::make_markov_pair(5, 1, 1, 0.3);
  const std::vector<token_id> prompt{0};
  const specdec::decode_options o;
  const auto call = [&](const specdec::mtad_options& m) {
    return specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, m, prompt, o);
  };
  CHECK_THROWS_AS(call({.gamma = 0}), specdec::error);
  CHECK_THROWS_AS(call({.width = 0}), specdec::error);
  CHECK_THROWS_AS(call({.tau = -0.01}), specdec::error);
  CHECK_THROWS_AS(call({.tau = 1.01}), specdec::error);
  CHECK_THROWS_AS(call({.tau = std::numeric_limits<double>::quiet_NaN()}), specdec::error);
  CHECK_THROWS_AS(call({.draft_cost = static_cast<specdec::mtad_draft_cost>(7)}), specdec::error);
  const auto other = specdec::random_markov_model(6, 1, 2, 1.0);
  CHECK_THROWS_AS(specdec::decode_mtad(specdec::exec::seq, pair.target, other, {}, prompt, o), specdec::error);
  specdec::decode_options bad = o;
  bad.target_params.top_p = 0.0;
  CHECK_THROWS_AS(specdec::decode_mtad(specdec::exec::seq, pair.target, pair.draft, {}, prompt, bad), specdec::error);
  CHECK_NOTHROW(call({.tau = 1.0}));
  CHECK_NOTHROW(call({.tau = 0.0}));
}

TEST_CASE("MTAD runs on the minimal model archetypes", "[mtad][decode][archetype]") {
  const specdec::model_archetype draft(4), target(4);
  const specdec::parallel_scoring_model_archetype scoring_target(4);
  const specdec::batched_model_archetype batched_draft(4);
  specdec::decode_options o;
  o.max_new_tokens = 9;
  const std::vector<token_id> prompt{0};
  for (const auto mode :
       {specdec::beam_mode::search, specdec::beam_mode::sample, specdec::beam_mode::sample_without_replacement}) {
    const specdec::mtad_options m{.gamma = 3, .width = 2, .mode = mode, .tau = 0.5};
    const auto a = specdec::decode_mtad(specdec::exec::seq, target, draft, m, prompt, o);
    const auto b = specdec::decode_mtad(specdec::exec::seq, scoring_target, batched_draft, m, prompt, o);
    CHECK(a.tokens.size() == 9);
    CHECK(b.tokens.size() == 9);
    check_counters(a, o, 4);
    check_counters(b, o, 4);
  }
}
