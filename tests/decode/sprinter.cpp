// SPECDEC_TEST_LABELS: statistical
//
// The SPRINTER loop (decode/sprinter.hpp) with the i.i.d. noisy-oracle verifier on exact tabular
// models (seed 000):
// - Theorem 3.1 at the sequence level: each emitted token given its prefix is distributed as
//   (1 - eta_fp) p + eta_fp q, so the law of the first H tokens is the product of those per-step
//   mixtures; 10^6 simulated sequences against the exact law by Pearson's chi-squared test
//   (false-failure rate 1e-6, fixed printed seeds), with negative controls that must fail.
// - eta_fp = 0 gives exactly the target's law.
// - lambda > 1 with a run cap: the exact law from sprinter_token_distribution and a dynamic programme
//   over the position in the run (forced checks at the cap are exact SD).
// - Theorem A.4: the measured acceptance rate on fixed rows.
// - Theorem 3.3 / 3.4: the verifier-accepted run length N (law, mean) and draft calls per run on
//   models whose first r draft tokens of a run are acceptable and the later ones are not.
// - Honest counting of target calls, target positions, draft and verifier calls, simulated time.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include "specdec/decode/sprinter.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/theory/sprinter.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/sample_scale.hpp"

namespace {

using specdec::token_id;
using specdec_test::markov_pair;
namespace theory = specdec::theory::sprinter;

constexpr std::size_t vocab = 4;
constexpr int horizon = 4;
constexpr std::size_t prompt = 0;
constexpr std::uint64_t table_seed = 20250301;
constexpr double draft_mix = 0.8;
const std::uint64_t num_samples = specdec_test::scaled_sample_count(1'000'000);

const markov_pair& pair() {
  static const markov_pair m = specdec_test::make_markov_pair(vocab, table_seed, draft_mix);
  return m;
}

specdec::markov_model chain_model(const std::vector<double>& table, std::size_t V) {
  return specdec::markov_model::chain(std::vector<double>(V, 1.0 / static_cast<double>(V)), table);
}

// The exact law of the first H tokens of SPRINTER with a verifier that accepts v with probability
// accept(p_v, q_v), and a run cap: a dynamic programme over (prefix, k), k = verifier-accepted tokens in
// the current run. At k + 1 == cap the token is a forced check (law p); otherwise the verifier keeps
// q(v) a(v) (k -> k + 1) and the target's check emits the rest of sprinter_token_distribution (k -> 0).
template <class Accept>
std::vector<double> sprinter_sequence_distribution(const markov_pair& m, std::size_t start, int H, std::size_t cap,
                                                   Accept accept) {
  const std::size_t V = m.vocab, K = cap;
  std::vector<double> kept(V * V), checked(V * V);
  for (std::size_t a = 0; a < V; ++a) {
    const auto p = m.p_row(a), q = m.q_row(a);
    std::vector<double> acc(V), out(V);
    for (std::size_t v = 0; v < V; ++v) acc[v] = accept(p[v], q[v]);
    specdec::sprinter_token_distribution(p, q, acc, out);
    for (std::size_t v = 0; v < V; ++v) {
      kept[a * V + v] = q[v] * acc[v];
      checked[a * V + v] = out[v] - kept[a * V + v];
    }
  }
  std::vector<double> cur(K, 0.0);
  cur[0] = 1.0;
  for (int t = 0; t < H; ++t) {
    const std::size_t prefixes = cur.size() / K;
    std::vector<double> next(prefixes * V * K, 0.0);
    for (std::size_t prefix = 0; prefix < prefixes; ++prefix) {
      const std::size_t last = t == 0 ? start : prefix % V;
      for (std::size_t k = 0; k < K; ++k) {
        const double mass = cur[prefix * K + k];
        if (mass == 0.0) continue;
        for (std::size_t v = 0; v < V; ++v) {
          double* out = &next[(prefix * V + v) * K];
          if (k + 1 == K) {
            out[0] += mass * m.target[last * V + v];
          } else {
            out[k + 1] += mass * kept[last * V + v];
            out[0] += mass * checked[last * V + v];
          }
        }
      }
    }
    cur.swap(next);
  }
  std::vector<double> dist(cur.size() / K, 0.0);
  for (std::size_t s = 0; s < dist.size(); ++s)
    for (std::size_t k = 0; k < K; ++k) dist[s] += cur[s * K + k];
  return dist;
}

// Theorem 3.1 applied step by step: the product of the mixtures (1 - eta_fp) p + eta_fp q
// (theory::sprinter::token_distribution).
std::vector<double> mixture_sequence_distribution(const markov_pair& m, std::size_t start, int H, double eta_fp) {
  const std::size_t V = m.vocab;
  std::vector<double> mix(V * V);
  for (std::size_t a = 0; a < V; ++a)
    theory::token_distribution(m.p_row(a), m.q_row(a), eta_fp, std::span<double>(mix).subspan(a * V, V));
  std::vector<double> cur{1.0};
  for (int t = 0; t < H; ++t) {
    std::vector<double> next(cur.size() * V, 0.0);
    for (std::size_t prefix = 0; prefix < cur.size(); ++prefix) {
      const std::size_t last = t == 0 ? start : prefix % V;
      for (std::size_t v = 0; v < V; ++v) next[prefix * V + v] = cur[prefix] * mix[last * V + v];
    }
    cur.swap(next);
  }
  return cur;
}

struct tally {
  std::vector<std::uint64_t> counts;
  specdec::decode_stats stats;  // summed
  std::size_t forced_checks = 0;
  std::uint64_t invalid = 0;  // outputs of the wrong length or with a token outside [0, V): must stay 0
  double seconds = 0.0;
};

// decode_sprinter of n sequences of H tokens after `start`; sequence i is request i under `seed`.
tally simulate(const specdec::oracle_noise_verifier& verifier, std::size_t cap, std::uint64_t seed, std::uint64_t n = num_samples,
               int H = horizon) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& m = pair();
  const auto target = chain_model(m.target, m.vocab);
  const auto draft = chain_model(m.draft, m.vocab);
  specdec::verifier_gated_drafter drafter(draft, specdec::warp_params{}, specdec::oracle_features(target), verifier,
                                          specdec::gating_params{.tau = 0.5, .max_run = cap});
  tally t;
  t.counts.assign(specdec_test::num_sequences(m.vocab, H), 0);
  specdec::decode_options o;
  o.max_new_tokens = static_cast<std::size_t>(H);
  o.seed = seed;
  const std::vector<token_id> start{static_cast<token_id>(prompt)};
  for (std::uint64_t i = 0; i < n; ++i) {
    o.request_id = static_cast<std::uint32_t>(i);
    const auto r = specdec::decode_sprinter(target, drafter, std::span<const token_id>(start), o);
    bool valid = r.tokens.size() == static_cast<std::size_t>(H);
    std::size_t index = 0;
    for (const token_id x : r.tokens) {
      valid = valid && x >= 0 && static_cast<std::size_t>(x) < m.vocab;
      index = index * m.vocab + static_cast<std::size_t>(x);
    }
    if (!valid) {
      ++t.invalid;
      continue;
    }
    ++t.counts[index];
    t.stats.drafted += r.stats.drafted;
    t.stats.accepted += r.stats.accepted;
    t.forced_checks += r.sprinter.forced_checks;
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

specdec_test::gof_result report(const char* what, const tally& t, const std::vector<double>& expected, std::uint64_t seed) {
  CHECK(t.invalid == 0);
  const auto g = specdec_test::chi_squared_gof(t.counts, expected);
  std::cout << "[sprinter] " << what << " (seed " << seed << ", " << t.seconds << " s): " << g << "\n";
  return g;
}

}  // namespace

TEST_CASE("SPRINTER + oracle verifier: sequences follow the product of Theorem 3.1's mixtures", "[sprinter][statistical]") {
  const double eta_tp = 0.7, eta_fp = 0.35;
  const std::size_t cap = 20;  // > horizon: no forced check
  const auto& m = pair();
  const auto expected = mixture_sequence_distribution(m, prompt, horizon, eta_fp);
  // The run-position programme agrees with the product of mixtures when the cap is never reached.
  const specdec::oracle_noise_verifier v(eta_tp, eta_fp, 1.0);
  const auto dp =
      sprinter_sequence_distribution(m, prompt, horizon, cap, [&](double p, double q) { return v.accept_probability(p, q); });
  CHECK(specdec_test::max_abs_difference(dp, expected) < 1e-14);

  const std::uint64_t seed = 31;
  const tally t = simulate(v, cap, seed);
  CHECK(t.forced_checks == 0);
  CHECK(report("Thm 3.1 product of mixtures", t, expected, seed).p_value >= specdec_test::gof_alpha);

  SECTION("negative controls: the target's own law and a wrong eta_fp must be rejected") {
    const auto target_law = specdec_test::target_sequence_distribution(m, prompt, horizon);
    CHECK(report("control: vs p", t, target_law, seed).p_value < specdec_test::gof_alpha);
    const auto wrong = mixture_sequence_distribution(m, prompt, horizon, eta_fp - 0.1);
    CHECK(report("control: vs eta_fp - 0.1", t, wrong, seed).p_value < specdec_test::gof_alpha);
  }
}

TEST_CASE("SPRINTER with eta_fp = 0 is lossless: exactly the target's law", "[sprinter][statistical]") {
  const std::uint64_t seed = 47;
  const tally t = simulate(specdec::oracle_noise_verifier(0.6, 0.0, 1.0), 20, seed);
  const auto target_law = specdec_test::target_sequence_distribution(pair(), prompt, horizon);
  CHECK(report("eta_fp = 0 vs p", t, target_law, seed).p_value >= specdec_test::gof_alpha);
}

TEST_CASE("SPRINTER with lambda > 1 and a run cap: the exact law", "[sprinter][statistical]") {
  // lambda = 1.5: tokens with p < q <= 1.5 p are accepted with eta_tp although Theorem 3.1 calls them
  // unacceptable; cap = 2: every second token of a run is a forced target check.
  const specdec::oracle_noise_verifier v(0.8, 0.3, 1.5);
  const std::size_t cap = 2;
  const auto& m = pair();
  const auto accept = [&](double p, double q) { return v.accept_probability(p, q); };
  const auto expected = sprinter_sequence_distribution(m, prompt, horizon, cap, accept);
  const std::uint64_t seed = 59;
  const tally t = simulate(v, cap, seed);
  CHECK(t.forced_checks > 0);
  CHECK(report("lambda 1.5, cap 2 vs exact programme", t, expected, seed).p_value >= specdec_test::gof_alpha);
  SECTION("negative control: the same verifier without the cap must be rejected") {
    const auto uncapped = sprinter_sequence_distribution(m, prompt, horizon, 20, accept);
    CHECK(report("control: vs no cap", t, uncapped, seed).p_value < specdec_test::gof_alpha);
  }
}

TEST_CASE("Theorem A.4: the measured acceptance rate is 1 - (1 - eta_fp) TV(p, q)", "[sprinter][statistical]") {
  // Order-0 models: every position has the same rows, so each drafted token is kept independently.
  const std::vector<double> p{0.35, 0.25, 0.2, 0.1, 0.06, 0.04};
  const std::vector<double> q{0.1, 0.15, 0.3, 0.25, 0.05, 0.15};
  const auto target = specdec::markov_model::categorical(p);
  const auto draft = specdec::markov_model::categorical(q);
  const double tv = specdec::total_variation(std::span<const double>(p), std::span<const double>(q));
  struct rates {
    double tp, fp;
  };
  for (const rates r : {rates{0.9, 0.3}, rates{0.5, 0.0}, rates{1.0, 0.6}}) {
    specdec::verifier_gated_drafter drafter(draft, specdec::warp_params{}, specdec::oracle_features(target),
                                            specdec::oracle_noise_verifier(r.tp, r.fp),
                                            specdec::gating_params{.tau = 0.5, .max_run = 200});
    specdec::decode_options o;
    o.max_new_tokens = 100;
    o.seed = 71;
    std::size_t drafted = 0, accepted = 0, forced = 0;
    const std::vector<token_id> start{0};  // order-0 models: the prompt changes no row
    for (std::uint32_t i = 0; i < 2000; ++i) {
      o.request_id = i;
      const auto res = specdec::decode_sprinter(target, drafter, start, o);
      drafted += res.stats.drafted;
      accepted += res.stats.accepted;
      forced += res.sprinter.forced_checks;
    }
    const double beta = theory::acceptance_rate(r.fp, tv);
    const double measured = double(accepted) / double(drafted);
    const double se = std::sqrt(beta * (1.0 - beta) / double(drafted));
    std::cout << "[sprinter] Thm A.4 eta_tp " << r.tp << " eta_fp " << r.fp << " (seed 71): measured " << measured << ", theory "
              << beta << ", " << drafted << " drafts, forced checks " << forced << "\n";
    CHECK(forced == 0);
    // Every drafted token is emitted (kept or replaced), so each request drafts exactly 100 tokens and
    // each is kept independently with probability beta: a binomial proportion.
    CHECK(drafted == 2000u * 100u);
    CHECK(std::abs(measured - beta) <= 5.5 * se);
  }
}

namespace {

// Models whose runs have exactly r acceptable draft tokens (Theorem 3.3's setting). Tokens: a_0..a_{r-1}
// (ids 0..r-1), u (id r) and z (id r + 1). After z (a run start) the draft proposes a_0, after a_k it
// proposes a_{k+1}, after a_{r-1} or u it proposes u. The target agrees (p = q, one-hot) except after
// a_{r-1} and u, where it puts all mass on z: so u is unacceptable (p(u) = 0) and is always replaced by
// z when checked, which starts the next run again with r acceptable tokens.
struct phase_models {
  std::size_t r;
  specdec::markov_model target, draft;
};

phase_models make_phase_models(std::size_t r) {
  const std::size_t V = r + 2, u = r, z = r + 1;
  std::vector<double> p(V * V, 0.0), q(V * V, 0.0);
  const auto set = [&](std::vector<double>& t, std::size_t from, std::size_t to) { t[from * V + to] = 1.0; };
  for (std::size_t k = 0; k + 1 < r; ++k) {
    set(q, k, k + 1);
    set(p, k, k + 1);
  }
  set(q, z, r == 0 ? u : 0);
  set(p, z, r == 0 ? z : 0);
  if (r > 0) {
    set(q, r - 1, u);
    set(p, r - 1, z);
  }
  set(q, u, u);
  set(p, u, z);
  return {r, chain_model(p, V), chain_model(q, V)};
}

}  // namespace

TEST_CASE("Theorem 3.3 / 3.4: run length with r acceptable tokens per run", "[sprinter][statistical]") {
  const std::size_t r = 4;
  const auto models = make_phase_models(r);
  const std::vector<token_id> start{static_cast<token_id>(r + 1)};  // z: a run starts with r acceptable tokens
  struct rates {
    double tp, fp;
  };
  SECTION("the first run's N: law (chi-squared) and mean, and draft calls per run (Theorem 3.4)") {
    for (const rates rt : {rates{0.9, 0.5}, rates{0.7, 0.2}, rates{0.95, 0.0}}) {
      specdec::verifier_gated_drafter drafter(models.draft, specdec::warp_params{}, specdec::oracle_features(models.target),
                                              specdec::oracle_noise_verifier(rt.tp, rt.fp),
                                              specdec::gating_params{.tau = 0.5, .max_run = 400});
      constexpr std::size_t cells = 16;  // N = 0..14, then N >= 15
      std::vector<std::uint64_t> counts(cells, 0);
      std::vector<double> expected(cells, 0.0);
      for (std::size_t i = 0; i + 1 < cells; ++i)
        expected[i] = theory::prob_tokens(static_cast<int>(i), rt.tp, rt.fp, static_cast<int>(r));
      double head = 0.0;
      for (std::size_t i = 0; i + 1 < cells; ++i) head += expected[i];
      expected[cells - 1] = std::max(0.0, 1.0 - head);
      const std::uint64_t n = 200'000, seed = 83;
      double sum = 0.0, draft_calls = 0.0;
      std::uint64_t unchecked = 0;  // runs that ended without a token to check: must stay 0
      specdec::draft_block block;
      specdec::gated_run run;
      for (std::uint64_t i = 0; i < n; ++i) {
        const specdec::random::request_stream stream{seed, static_cast<std::uint32_t>(i), 0};
        draft_calls += double(drafter.draft(std::span<const token_id>(start), 400, stream, block, run));
        if (!run.needs_check()) ++unchecked;
        sum += double(run.verifier_accepted);
        ++counts[std::min<std::size_t>(run.verifier_accepted, cells - 1)];
      }
      const auto g = specdec_test::chi_squared_gof(counts, expected);
      const double mean = sum / double(n), want = theory::expected_tokens(rt.tp, rt.fp, static_cast<int>(r));
      const double se = std::sqrt(theory::tokens_variance(rt.tp, rt.fp, static_cast<int>(r)) / double(n));
      std::cout << "[sprinter] Thm 3.3 r " << r << " eta_tp " << rt.tp << " eta_fp " << rt.fp << " (seed " << seed << "): " << g
                << "; E[N] measured " << mean << " theory " << want << "; draft calls/run " << draft_calls / double(n)
                << " theory " << theory::expected_stopping_time(rt.tp, rt.fp, static_cast<int>(r), 1.0) << "\n";
      CHECK(unchecked == 0);
      CHECK(g.p_value >= specdec_test::gof_alpha);
      CHECK(std::abs(mean - want) <= 5.5 * se);
      // Every run drafts N + 1 tokens (the rejected one included): T_stop / t_d = E[N] + 1.
      CHECK(std::abs(draft_calls / double(n) - (mean + 1.0)) < 1e-12);
    }
  }
  SECTION("negative control: the law with r - 1 acceptable tokens must be rejected") {
    specdec::verifier_gated_drafter drafter(models.draft, specdec::warp_params{}, specdec::oracle_features(models.target),
                                            specdec::oracle_noise_verifier(0.9, 0.5),
                                            specdec::gating_params{.tau = 0.5, .max_run = 400});
    constexpr std::size_t cells = 16;
    std::vector<std::uint64_t> counts(cells, 0);
    std::vector<double> wrong(cells, 0.0);
    double head = 0.0;
    for (std::size_t i = 0; i + 1 < cells; ++i)
      head += (wrong[i] = theory::prob_tokens(static_cast<int>(i), 0.9, 0.5, static_cast<int>(r) - 1));
    wrong[cells - 1] = 1.0 - head;
    specdec::draft_block block;
    specdec::gated_run run;
    for (std::uint32_t i = 0; i < 200'000; ++i) {
      drafter.draft(std::span<const token_id>(start), 400, specdec::random::request_stream{83, i, 0}, block, run);
      ++counts[std::min<std::size_t>(run.verifier_accepted, cells - 1)];
    }
    CHECK(specdec_test::chi_squared_gof(counts, wrong).p_value < specdec_test::gof_alpha);
  }
  SECTION("the whole loop: with eta_tp = 1 every run starts with r acceptable tokens") {
    // eta_tp = 1: the verifier never stops among a_0..a_{r-1}; it stops on a u, which the target replaces
    // by z. So runs are i.i.d. and tokens per target call = E[N] + 1 (Theorem 3.3 with eta_tp = 1).
    const double eta_fp = 0.5;
    specdec::verifier_gated_drafter drafter(models.draft, specdec::warp_params{}, specdec::oracle_features(models.target),
                                            specdec::oracle_noise_verifier(1.0, eta_fp),
                                            specdec::gating_params{.tau = 0.5, .max_run = 400});
    specdec::decode_options o;
    o.max_new_tokens = 400;
    o.seed = 97;
    double runs = 0.0, n_sum = 0.0;
    std::size_t calls = 0, checked_tokens = 0;
    for (std::uint32_t i = 0; i < 3000; ++i) {
      o.request_id = i;
      const auto res = specdec::decode_sprinter(models.target, drafter, std::span<const token_id>(start), o);
      const auto& lens = res.sprinter.run_lengths;
      // The last run may be cut by the budget; every other run ended with a target call.
      for (std::size_t k = 0; k + 1 < lens.size(); ++k) {
        runs += 1.0;
        n_sum += double(lens[k]);
      }
      calls += res.stats.target_calls;
      checked_tokens += res.sprinter.target_checks - res.sprinter.target_kept;  // u replaced by z
    }
    const double want = theory::expected_tokens(1.0, eta_fp, static_cast<int>(r));
    const double se = std::sqrt(theory::tokens_variance(1.0, eta_fp, static_cast<int>(r)) / runs);
    std::cout << "[sprinter] loop, eta_tp 1, eta_fp " << eta_fp << " (seed 97): tokens per run " << n_sum / runs + 1.0
              << " theory " << want + 1.0 << " over " << runs << " runs\n";
    CHECK(std::abs(n_sum / runs - want) <= 5.5 * se);
    CHECK(checked_tokens == calls);
  }
}

namespace {
// A verifier that accepts exactly the first `accept_first` tokens of each run (features = {position}).
auto position_features() {
  return specdec::make_feature_extractor(
      1, [](const specdec::verifier_query& q, std::span<float> out) { out[0] = static_cast<float>(q.position); });
}
auto accept_first(std::size_t k) {
  return specdec::make_verifier(1, [k](std::span<const float> f) { return f[0] < static_cast<float>(k) ? 1.0 : 0.0; });
}
}  // namespace

TEST_CASE("SPRINTER counts target calls, target positions, draft and verifier calls honestly", "[sprinter]") {
  const auto& m = pair();
  const auto target = chain_model(m.target, m.vocab);
  const auto draft = chain_model(m.draft, m.vocab);
  specdec::decode_options o;
  const specdec::cost_model cost{.t_draft = 0.1, .t_target_base = 1.0, .t_target_per_token = 0.01};
  const specdec::sprinter_options so{.t_verifier = 0.001};
  const std::vector<token_id> start{0};

  SECTION("runs of 3: two verifier-accepted tokens, the third checked by the target") {
    o.max_new_tokens = 9;
    const auto r =
        specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(), accept_first(2),
                                 specdec::gating_params{.tau = 0.5, .max_run = 20}, so, start, o, cost);
    CHECK(r.tokens.size() == 9);
    CHECK(r.stats.iterations == 3);
    CHECK(r.stats.target_calls == 3);
    CHECK(r.stats.target_positions == 9);  // each call catches up on 2 accepted tokens + scores the last
    CHECK(r.stats.draft_calls == 9);
    CHECK(r.sprinter.verifier_calls == 9);
    CHECK(r.sprinter.verifier_accepted == 6);
    CHECK(r.sprinter.target_checks == 3);
    CHECK(r.sprinter.run_lengths == std::vector<std::size_t>{2, 2, 2});
    CHECK(r.stats.simulated_time == Approx(9 * 0.1 + 9 * 0.001 + 3 * (1.0 + 3 * 0.01)));
    CHECK(r.stats.tokens_per_target_call() == Approx(3.0));
    CHECK(r.stats.accepted == 6 + r.sprinter.target_kept);
  }
  SECTION("a run cut by the budget makes no target call") {
    o.max_new_tokens = 8;
    const auto r =
        specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(), accept_first(2),
                                 specdec::gating_params{.tau = 0.5, .max_run = 20}, so, start, o, cost);
    CHECK(r.tokens.size() == 8);
    CHECK(r.stats.target_calls == 2);
    CHECK(r.stats.target_positions == 6);
    CHECK(r.sprinter.budget_ends == 1);
    CHECK(r.sprinter.verifier_calls == 8);
  }
  SECTION("the cap forces a target check without a verifier call") {
    o.max_new_tokens = 10;
    const auto r =
        specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                 accept_first(100), specdec::gating_params{.tau = 0.5, .max_run = 4}, so, start, o, cost);
    CHECK(r.tokens.size() == 10);
    CHECK(r.stats.target_calls == 2);
    CHECK(r.sprinter.forced_checks == 2);
    CHECK(r.stats.target_positions == 8);
    CHECK(r.sprinter.verifier_calls == 3 + 3 + 2);
    CHECK(r.sprinter.run_lengths == std::vector<std::size_t>{3, 3, 2});
  }
  SECTION("a stop token ends the generation") {
    o.max_new_tokens = 50;
    const auto free_run = specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                                   accept_first(2), specdec::gating_params{}, so, start, o, cost);
    REQUIRE(free_run.tokens.size() == 50);
    o.stop_tokens = {free_run.tokens[4]};
    const auto r = specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                            accept_first(2), specdec::gating_params{}, so, start, o, cost);
    REQUIRE(!r.tokens.empty());
    CHECK(r.tokens.back() == o.stop_tokens[0]);
    CHECK(r.tokens.size() <= 5);
  }
  SECTION("same seed, same tokens; another seed, other tokens") {
    o.max_new_tokens = 40;
    const auto run = [&](std::uint64_t seed) {
      o.seed = seed;
      return specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, specdec::oracle_features(target),
                                      specdec::oracle_noise_verifier(0.8, 0.3), specdec::gating_params{}, {}, start, o)
          .tokens;
    };
    CHECK(run(5) == run(5));
    CHECK(run(5) != run(6));
  }
}

TEST_CASE("sprinter_token_distribution reduces to Theorem 3.1 and to p", "[sprinter]") {
  const auto& m = pair();
  for (std::size_t a = 0; a < m.vocab; ++a) {
    const auto p = m.p_row(a), q = m.q_row(a);
    std::vector<double> acc(m.vocab), out(m.vocab), want(m.vocab);
    const specdec::oracle_noise_verifier v(0.6, 0.25);
    for (std::size_t x = 0; x < m.vocab; ++x) acc[x] = v.accept_probability(p[x], q[x]);
    specdec::sprinter_token_distribution(p, q, acc, out);
    theory::token_distribution(p, q, 0.25, want);
    CHECK(specdec_test::max_abs_difference(out, want) < 1e-15);
    std::fill(acc.begin(), acc.end(), 0.0);  // the verifier always rejects: standard SD, law p
    specdec::sprinter_token_distribution(p, q, acc, out);
    CHECK(specdec_test::max_abs_difference(out, std::vector<double>(p.begin(), p.end())) < 1e-15);
  }
  std::vector<double> p{0.5, 0.5}, q{0.5, 0.5}, bad{0.5, 1.5}, out(2);
  CHECK_THROWS_AS(specdec::sprinter_token_distribution(p, q, bad, out), specdec::error);
  CHECK_THROWS_AS(specdec::sprinter_token_distribution(p, std::vector<double>{0.9, 0.9}, q, out), specdec::error);
}

TEST_CASE("SPRINTER rejects bad input with clear errors", "[sprinter][errors]") {
  const auto& m = pair();
  const auto target = chain_model(m.target, m.vocab);
  const auto draft = chain_model(m.draft, m.vocab);
  const std::vector<token_id> start{0};
  specdec::decode_options o;
  o.max_new_tokens = 10;
  const auto nan_verifier =
      specdec::make_verifier(1, [](std::span<const float>) { return std::numeric_limits<double>::quiet_NaN(); });
  // A verifier's NaN or out-of-range score ends the generation: no token, `invalid_row`.
  const auto nan_run = specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                                nan_verifier, specdec::gating_params{}, {}, start, o);
  CHECK(nan_run.tokens.empty());
  CHECK(specdec::has_flag(nan_run.status, specdec::verify_status::invalid_row));
  const auto big = specdec::make_verifier(1, [](std::span<const float>) { return 1.5; });
  const auto big_run = specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                                big, specdec::gating_params{}, {}, start, o);
  CHECK(big_run.tokens.empty());
  CHECK(specdec::has_flag(big_run.status, specdec::verify_status::invalid_row));
  CHECK_THROWS_AS(specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                           accept_first(1), specdec::gating_params{.tau = 1.5, .max_run = 20}, {}, start, o),
                  specdec::error);
  CHECK_THROWS_AS(specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(),
                                           accept_first(1), specdec::gating_params{.tau = 0.5, .max_run = 0}, {}, start, o),
                  specdec::error);
  CHECK_THROWS_AS(
      specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, position_features(), accept_first(1),
                               specdec::gating_params{}, specdec::sprinter_options{.t_verifier = -1.0}, start, o),
      specdec::error);
  // Features of the wrong size for the verifier.
  CHECK_THROWS_AS(
      specdec::decode_sprinter(specdec::exec::seq, target, draft, specdec::warp_params{}, specdec::draft_row_features{},
                               accept_first(1), specdec::gating_params{}, {}, start, o),
      specdec::error);
  // A draft model over another vocabulary.
  const auto other = specdec::markov_model::categorical({0.5, 0.5});
  CHECK_THROWS_AS(specdec::decode_sprinter(specdec::exec::seq, target, other, specdec::warp_params{}, position_features(),
                                           accept_first(1), specdec::gating_params{}, {}, start, o),
                  specdec::error);
}

TEST_CASE("decode_sprinter and decode_target_only take the policy first; every host policy gives the same tokens",
          "[sprinter][policy]") {
  const auto& m = pair();
  const auto target = chain_model(m.target, m.vocab);
  const auto draft = chain_model(m.draft, m.vocab);
  specdec::verifier_gated_drafter drafter(draft, specdec::warp_params{}, specdec::oracle_features(target),
                                          specdec::oracle_noise_verifier(0.9, 0.1),
                                          specdec::gating_params{.tau = 0.5, .max_run = 4});
  const specdec::sprinter_options so{.t_verifier = 0.001};
  const std::vector<token_id> start{static_cast<token_id>(prompt)};
  specdec::decode_options o;
  o.max_new_tokens = 24;
  for (std::uint32_t id = 0; id < 16; ++id) {
    o.request_id = id;
    const auto old_form = specdec::decode_sprinter(target, drafter, std::span<const token_id>(start), o);
    const auto seq = specdec::decode_sprinter(specdec::exec::seq, target, drafter, so, std::span<const token_id>(start), o);
    CHECK(seq.tokens == old_form.tokens);  // t_verifier changes the simulated time only
    CHECK(seq.stats.simulated_time ==
          Approx(old_form.stats.simulated_time + so.t_verifier * static_cast<double>(seq.sprinter.verifier_calls)));
    const auto base = specdec::decode_target_only(target, std::span<const token_id>(start), o);
    CHECK(specdec::decode_target_only(specdec::exec::seq, target, std::span<const token_id>(start), o).tokens == base.tokens);
#if SPECDEC_ENABLE_SIMD
    CHECK(specdec::decode_sprinter(specdec::exec::simd, target, drafter, so, std::span<const token_id>(start), o).tokens ==
          seq.tokens);
    CHECK(specdec::decode_target_only(specdec::exec::simd, target, std::span<const token_id>(start), o).tokens == base.tokens);
#endif
  }
}
