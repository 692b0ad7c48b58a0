// SPECDEC_TEST_LABELS: statistical
//
// Speculative Verification's decode loop (decode/sv.hpp): does it keep the target's distribution?
//
// A small order-1 Markov triple (V = 4): a target p, a draft q far from it and a companion c close to
// it. The acceptance estimator is fitted on profiling samples of the same models. Two checks:
//  - exact enumeration of the law of the first H tokens SV emits (every draft tuple of every round,
//    every accept/reject outcome), with the library's own decision functions: exact mode equals the
//    target's law to 1e-12; paper mode (a_j = P(accept | S_j, A_j), the decision looks at x_j) does
//    not -- its total variation from the target is printed and must be clearly positive;
//  - Pearson chi-squared on sequences decoded by `decode_sv` and `decode_sv_batch` (Boost.Math, false-
//    failure rate 1e-6, fixed printed seeds): exact mode matches the target; paper mode matches its
//    own enumerated law but is rejected against the target (the negative control).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <span>
#include <sstream>
#include <vector>

#include "specdec/decode/sv.hpp"
#include "specdec/model/prefix_cached_model.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/models/markov.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/sample_scale.hpp"

namespace {

using specdec::token_id;
namespace est = specdec::estimate;
namespace opt = specdec::optimize;

constexpr std::size_t V = 4;
constexpr token_id prompt_token = 0;
constexpr int horizon = 4;
constexpr std::size_t gamma_max = 3;
constexpr std::uint64_t table_seed = 20250301;

// Target, draft (mix 0.75 with another table) and companion (mix 0.2 with a third table).
struct triple {
  specdec_test::markov_pair pq;
  std::vector<double> companion;
  std::span<const double> c_row(std::size_t prev) const { return std::span<const double>(companion).subspan(prev * V, V); }
};

const triple& tables() {
  static const triple t = [] {
    triple r;
    r.pq = specdec_test::make_markov_pair(V, table_seed, 0.75);
    const auto other = specdec_test::random_stochastic_table(V, table_seed + 7);
    r.companion.resize(V * V);
    for (std::size_t i = 0; i < V * V; ++i) r.companion[i] = 0.8 * r.pq.target[i] + 0.2 * other[i];
    return r;
  }();
  return t;
}

specdec::markov_model chain_model(const std::vector<double>& table) {
  return specdec::markov_model::chain(std::vector<double>(V, 1.0 / V), table);
}

struct models_t {
  specdec::markov_model target = chain_model(tables().pq.target);
  specdec::markov_model draft = chain_model(tables().pq.draft);
  specdec::markov_model companion = chain_model(tables().companion);
};
const models_t& models() {
  static const models_t m;
  return m;
}

// The estimator, fitted on SD profiling runs from every start token (uniform 5x5 bins).
const est::acceptance_estimator& estimator() {
  static const est::acceptance_estimator e = [] {
    std::vector<std::vector<token_id>> prompts;
    for (token_id t = 0; t < static_cast<token_id>(V); ++t) prompts.push_back({t});
    specdec::decode_options o;
    o.seed = 0xC0FFEE;
    specdec::sv_profile_options p;
    p.gamma = gamma_max;
    p.tokens_per_prompt = 1500;
    const auto samples = specdec::profile_sv_indicators(specdec::exec::seq, models().target, models().draft,
                                                        specdec::warp_params{}, models().companion, p, prompts, o);
    return est::acceptance_estimator::fit(samples, est::binning::uniform(5, 5));
  }();
  return e;
}

// L(k) = 1 + 0.25 k: each verified draft costs a quarter of a step (a small, compute-bound target).
constexpr auto latency = [](int k) { return 1.0 + 0.25 * k; };

// ---- exact enumeration of SV's output law ---------------------------------------------------------

using chunk_law = std::vector<std::pair<std::vector<token_id>, double>>;

// What one SV round emits after `last` with `gamma` drafts, enumerated over every draft tuple.
chunk_law round_law(specdec::sv_mode mode, opt::token_counting counting, std::size_t last, std::size_t gamma) {
  const auto& t = tables();
  chunk_law law;
  std::vector<token_id> d(gamma, 0);
  std::vector<double> s(gamma), a(gamma), gains(gamma);
  const std::size_t tuples = specdec_test::num_sequences(V, static_cast<int>(gamma));
  for (std::size_t index = 0; index < tuples; ++index) {
    for (std::size_t j = 0, x = index; j < gamma; ++j, x /= V) d[gamma - 1 - j] = static_cast<token_id>(x % V);
    double prob = 1.0;
    std::vector<std::size_t> prev(gamma + 1);
    prev[0] = last;
    for (std::size_t j = 0; j < gamma; ++j) {
      const auto q = t.pq.q_row(prev[j]), c = t.c_row(prev[j]);
      prob *= q[static_cast<std::size_t>(d[j])];
      s[j] = est::similarity(q, c);
      a[j] = est::companion_acceptance(q, c, d[j]);
      prev[j + 1] = static_cast<std::size_t>(d[j]);
    }
    if (prob == 0.0) continue;
    specdec::sv_gains(estimator(), s, a, mode, gains);
    const std::size_t n = gamma == 0 ? 0
                                     : specdec::choose_sv_length(std::span<const double>(gains), latency, mode,
                                                                 specdec::length_search::incremental, counting);
    double reach = prob;
    std::vector<token_id> chunk;
    for (std::size_t k = 0; k < n; ++k) {
      const auto p = t.pq.p_row(prev[k]), q = t.pq.q_row(prev[k]);
      const std::size_t x = static_cast<std::size_t>(d[k]);
      const double alpha = std::min(1.0, p[x] / q[x]);
      double residual_mass = 0.0;
      for (std::size_t v = 0; v < V; ++v) residual_mass += std::max(0.0, p[v] - q[v]);
      if (alpha < 1.0)
        for (std::size_t v = 0; v < V; ++v) {
          const double r = std::max(0.0, p[v] - q[v]) / residual_mass;
          if (r == 0.0) continue;
          auto out = chunk;
          out.push_back(static_cast<token_id>(v));
          law.emplace_back(std::move(out), reach * (1.0 - alpha) * r);
        }
      reach *= alpha;
      chunk.push_back(d[k]);
    }
    const auto p = t.pq.p_row(prev[n]);
    for (std::size_t v = 0; v < V; ++v) {
      auto out = chunk;
      out.push_back(static_cast<token_id>(v));
      law.emplace_back(std::move(out), reach * p[v]);
    }
  }
  return law;
}

// The law of the first `horizon` tokens, in base-V sequence order (as specdec_test numbers them).
std::vector<double> sv_sequence_law(specdec::sv_mode mode, opt::token_counting counting) {
  std::map<std::pair<std::size_t, std::size_t>, chunk_law> cache;
  std::vector<double> dist(specdec_test::num_sequences(V, horizon), 0.0);
  std::vector<std::pair<std::vector<token_id>, double>> stack{{{}, 1.0}};
  while (!stack.empty()) {
    auto [prefix, prob] = std::move(stack.back());
    stack.pop_back();
    if (prefix.size() >= static_cast<std::size_t>(horizon)) {
      std::size_t index = 0;
      for (int k = 0; k < horizon; ++k) index = index * V + static_cast<std::size_t>(prefix[static_cast<std::size_t>(k)]);
      dist[index] += prob;
      continue;
    }
    const std::size_t last = prefix.empty() ? static_cast<std::size_t>(prompt_token) : static_cast<std::size_t>(prefix.back());
    const std::size_t gamma = std::min(gamma_max, static_cast<std::size_t>(horizon) - prefix.size() - 1);
    auto it = cache.find({last, gamma});
    if (it == cache.end()) it = cache.emplace(std::make_pair(last, gamma), round_law(mode, counting, last, gamma)).first;
    for (const auto& [chunk, p] : it->second) {
      auto next = prefix;
      next.insert(next.end(), chunk.begin(), chunk.end());
      stack.emplace_back(std::move(next), prob * p);
    }
  }
  return dist;
}

const std::vector<double>& target_law() {
  static const std::vector<double> t = specdec_test::target_sequence_distribution(tables().pq, prompt_token, horizon);
  return t;
}

double tv(const std::vector<double>& a, const std::vector<double>& b) {
  return specdec::total_variation(std::span<const double>(a), std::span<const double>(b));
}

// ---- simulation ------------------------------------------------------------------------------------

struct tally {
  std::vector<std::uint64_t> counts = std::vector<std::uint64_t>(specdec_test::num_sequences(V, horizon), 0);
  std::uint64_t invalid = 0, verified = 0, drafted = 0;
  double seconds = 0.0;
  void add(const specdec::sv_result& r) {
    verified += r.stats.drafted;
    drafted += r.sv.drafted;
    if (r.tokens.size() != static_cast<std::size_t>(horizon) || !specdec::is_valid(r.status)) {
      ++invalid;
      return;
    }
    std::size_t index = 0;
    for (const token_id t : r.tokens) {
      if (!specdec::in_vocabulary(t, V)) {
        ++invalid;
        return;
      }
      index = index * V + static_cast<std::size_t>(t);
    }
    ++counts[index];
  }
};

tally simulate_single(specdec::sv_mode mode, opt::token_counting counting, std::uint64_t seed, std::uint64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  specdec::decode_options o;
  o.max_new_tokens = horizon;
  o.seed = seed;
  specdec::sv_options sv;
  sv.gamma_max = gamma_max;
  sv.mode = mode;
  sv.counting = counting;
  specdec::chain_drafter<specdec::markov_model> drafter(models().draft, specdec::warp_params{});
  const std::vector<token_id> prompt{prompt_token};
  tally t;
  for (std::uint64_t i = 0; i < n; ++i) {
    o.request_id = static_cast<std::uint32_t>(i);
    t.add(specdec::decode_sv(specdec::exec::seq, models().target, drafter,
                             specdec::sv_setup{models().companion, estimator(), latency}, sv, prompt, o));
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

specdec_test::gof_result report(const char* name, std::uint64_t seed, const tally& t, const std::vector<double>& expected) {
  const auto g = specdec_test::chi_squared_gof(t.counts, expected);
  std::cout << "[sv] " << name << ": seed = 0x" << std::hex << seed << std::dec << ", table seed = " << table_seed << ", " << g
            << ", verified/drafted = " << double(t.verified) / double(std::max<std::uint64_t>(t.drafted, 1)) << ", " << t.seconds
            << " s\n";
  return g;
}

const std::uint64_t samples = specdec_test::scaled_sample_count(250'000);

}  // namespace

TEST_CASE("SV setup: a far draft, an informative companion, a fitted estimator", "[sv][setup]") {
  const auto& t = tables();
  double tv_pq = 0.0, tv_pc = 0.0;
  for (std::size_t a = 0; a < V; ++a) {
    tv_pq += specdec::total_variation(t.pq.p_row(a), t.pq.q_row(a)) / V;
    tv_pc += specdec::total_variation(t.pq.p_row(a), t.c_row(a)) / V;
  }
  const auto& e = estimator();
  std::cout << "[sv] V = " << V << ", mean TV(p, q) = " << tv_pq << ", mean TV(p, c) = " << tv_pc << ", profile: " << e.samples()
            << " samples, mean acceptance " << e.overall() << ", " << e.thin_cells() << " thin of " << e.bins().cells()
            << " cells\n";
  CHECK(tv_pq > 0.3);
  CHECK(tv_pc < tv_pq);
  CHECK(e.samples() > 5000);
}

TEST_CASE("exact enumeration: exact SV is lossless, paper SV is not", "[sv][exact]") {
  for (const auto counting : {opt::token_counting::accepted_drafts, opt::token_counting::with_target_token}) {
    const auto exact = sv_sequence_law(specdec::sv_mode::exact, counting);
    const auto paper = sv_sequence_law(specdec::sv_mode::paper, counting);
    double sum_exact = 0.0, sum_paper = 0.0;
    for (std::size_t i = 0; i < exact.size(); ++i) {
      sum_exact += exact[i];
      sum_paper += paper[i];
    }
    CAPTURE(static_cast<int>(counting));
    CHECK(std::abs(sum_exact - 1.0) < 1e-12);
    CHECK(std::abs(sum_paper - 1.0) < 1e-12);
    CHECK(specdec_test::max_abs_difference(exact, target_law()) < 1e-12);
    const double bias = tv(paper, target_law());
    std::cout << "[sv] counting " << (counting == opt::token_counting::accepted_drafts ? "accepted_drafts" : "with_target_token")
              << ": TV(paper SV law, target law) = " << bias << " (H = " << horizon << ", gamma_max = " << gamma_max << ")\n";
    CHECK(bias > 0.01);
  }
}

TEST_CASE("exact SV: sequences follow the target distribution", "[sv][statistical]") {
  const std::uint64_t seed = 0x5E0001;
  const auto t = simulate_single(specdec::sv_mode::exact, opt::token_counting::with_target_token, seed, samples);
  const auto g = report("exact SV vs target", seed, t, target_law());
  REQUIRE(t.invalid == 0);
  CHECK(g.impossible == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
  CHECK(t.verified < t.drafted);  // SV did drop drafts
}

TEST_CASE("paper SV follows its enumerated law, and the chi-squared test rejects it against the target",
          "[sv][statistical][negative]") {
  const std::uint64_t seed = 0x5E0002;
  const auto counting = opt::token_counting::with_target_token;
  const auto t = simulate_single(specdec::sv_mode::paper, counting, seed, samples);
  REQUIRE(t.invalid == 0);
  const auto own = report("paper SV vs its enumerated law", seed, t, sv_sequence_law(specdec::sv_mode::paper, counting));
  CHECK(own.p_value > specdec_test::gof_alpha);
  const auto g = report("NEGATIVE paper SV vs target", seed, t, target_law());
  CHECK(g.p_value < specdec_test::gof_alpha);
}

TEST_CASE("batched exact SV: every request follows the target distribution", "[sv][statistical][batch]") {
  const std::uint64_t seed = 0x5E0003;
  const auto t0 = std::chrono::steady_clock::now();
  specdec::decode_options o;
  o.max_new_tokens = horizon;
  o.seed = seed;
  specdec::sv_batch_options b;
  b.gamma_max = gamma_max;
  b.scheduler.counting = opt::token_counting::with_target_token;
  const opt::saturating_latency target_latency{1.0, 6.0, 0.5};  // flat up to 6 positions, then linear
  const std::vector<std::vector<token_id>> prompts(3, std::vector<token_id>{prompt_token});
  tally t;
  std::uint64_t rounds = 0;
  for (std::uint64_t i = 0; i < samples / 3; ++i) {
    o.request_id = static_cast<std::uint32_t>(3 * i);
    const auto r = specdec::decode_sv_batch(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                            specdec::sv_setup{models().companion, estimator(), target_latency}, b, prompts, o);
    rounds += r.rounds;
    for (const auto& x : r.requests) t.add(x);
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto g = report("batched exact SV (B = 3) vs target", seed, t, target_law());
  REQUIRE(t.invalid == 0);
  CHECK(g.p_value > specdec_test::gof_alpha);
  CHECK(t.verified < t.drafted);
  CHECK(rounds > 0);
}

TEST_CASE("decode_sv: counters, reproducibility, budget and stop token", "[sv]") {
  specdec::decode_options o;
  o.max_new_tokens = 40;
  o.seed = 99;
  specdec::sv_options sv;
  sv.gamma_max = 4;
  const std::vector<token_id> prompt{1};
  const specdec::cost_model cost{};  // the entry points' default
  const auto step = specdec::sv_step_latency{cost, sv.gamma_max, sv.t_companion};
  const auto r = specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                    specdec::sv_setup{models().companion, estimator(), step}, sv, prompt, o);
  const auto again = specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                        specdec::sv_setup{models().companion, estimator(), step}, sv, prompt, o);
  CHECK(r.tokens == again.tokens);
  CHECK(r.tokens.size() == o.max_new_tokens);
  CHECK(r.stats.emitted == r.tokens.size());
  CHECK(r.stats.target_calls == r.stats.iterations);
  CHECK(r.stats.accepted <= r.stats.drafted);
  CHECK(r.sv.drafted == r.stats.drafted + r.sv.dropped);
  std::size_t rounds = 0;
  for (const auto c : r.sv.verified_length_counts) rounds += c;
  CHECK(rounds == r.stats.iterations);
  CHECK(r.sv.mean_verified_length() == Approx(double(r.stats.drafted) / double(r.stats.iterations)));
  // Simulated time = drafts * t_draft + companion calls * t_companion + sum over calls of t_target(positions).
  const double expected = double(r.sv.drafted) * cost.t_draft + double(r.sv.companion_calls) * sv.t_companion +
                          double(r.stats.target_calls) * cost.t_target_base +
                          double(r.stats.target_positions) * cost.t_target_per_token;
  CHECK(r.stats.simulated_time == Approx(expected));
  for (const token_id t : r.tokens) CHECK(specdec::in_vocabulary(t, V));

  o.stop_tokens = {2};
  o.max_new_tokens = 200;
  const auto s = specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                    specdec::sv_setup{models().companion, estimator(), step}, sv, prompt, o);
  REQUIRE(!s.tokens.empty());
  if (s.tokens.size() < o.max_new_tokens) CHECK(s.tokens.back() == 2);
  o.max_new_tokens = 0;
  CHECK(specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                           specdec::sv_setup{models().companion, estimator(), step}, sv, prompt, o)
            .tokens.empty());
}

TEST_CASE("decode_sv_batch: fixed rule is SD, gamma 0 is target-only, counters add up", "[sv][batch]") {
  specdec::decode_options o;
  o.max_new_tokens = 30;
  o.seed = 7;
  const opt::saturating_latency target_latency{1.0, 4.0, 0.25};
  std::vector<std::vector<token_id>> prompts{{0}, {1}, {2}, {3}, {1, 2}};
  specdec::sv_batch_options b;
  b.gamma_max = 4;
  b.rule = specdec::batch_length_rule::fixed;
  const auto sd = specdec::decode_sv_batch(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                           specdec::sv_setup{models().companion, estimator(), target_latency}, b, prompts, o);
  // Each request is exactly what single-request SD (decode) emits with the same seed and request id.
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    specdec::decode_options oi = o;
    oi.request_id = static_cast<std::uint32_t>(i);
    const auto ref = specdec::decode(specdec::exec::seq, models().target, models().draft, specdec::warp_params{}, b.gamma_max,
                                     specdec::strict, prompts[i], oi);
    CAPTURE(i);
    CHECK(sd.requests[i].tokens == ref.tokens);
    CHECK(sd.requests[i].sv.dropped == 0);
    CHECK(sd.requests[i].sv.companion_calls == 0);
  }
  b.gamma_max = 0;  // target-only
  const auto plain = specdec::decode_sv_batch(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                              specdec::sv_setup{models().companion, estimator(), target_latency}, b, prompts, o);
  CHECK(plain.rounds == o.max_new_tokens);
  CHECK(plain.simulated_time == Approx(double(o.max_new_tokens) * target_latency(static_cast<int>(prompts.size()))));
  CHECK(plain.emitted() == prompts.size() * o.max_new_tokens);

  b.gamma_max = 5;
  b.rule = specdec::batch_length_rule::sv;
  const auto sv = specdec::decode_sv_batch(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                           specdec::sv_setup{models().companion, estimator(), target_latency}, b, prompts, o);
  for (const auto& r : sv.requests) {
    CHECK(r.tokens.size() == o.max_new_tokens);  // every request makes progress to its budget
    CHECK(r.stats.iterations == r.stats.target_calls);
    CHECK(r.sv.drafted == r.stats.drafted + r.sv.dropped);
  }
  CHECK(sv.rounds <= o.max_new_tokens);
  b.mode = specdec::sv_mode::exact;
  b.scheduler.stop = opt::stop_rule::best_prefix;
  CHECK_THROWS_AS(specdec::decode_sv_batch(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                           specdec::sv_setup{models().companion, estimator(), target_latency}, b, prompts, o),
                  specdec::error);
}

TEST_CASE("batched SV on a KV-cached companion: one companion forward per round, the same tokens", "[sv][batch]") {
  // The companion as a KV-cached engine (prefix_cached_model over a sequence model of the Markov
  // companion): SV's batch stage scores every request's drafts with one score_batch, so a forward per
  // round serves the whole batch. Control: with one lane the same stage makes a forward per request.
  specdec::decode_options o;
  o.max_new_tokens = 24;
  o.seed = 3;
  const opt::saturating_latency target_latency{1.0, 4.0, 0.25};
  const std::vector<std::vector<token_id>> prompts{{0}, {1}, {2}, {3}, {1, 2}};
  specdec::sv_batch_options b;
  b.gamma_max = 3;
  const auto run = [&](const auto& companion) {
    return specdec::decode_sv_batch(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                    specdec::sv_setup{companion, estimator(), target_latency}, b, prompts, o);
  };
  const auto plain = run(models().companion);
  specdec::recomputing_sequence_model engine(models().companion), single_engine(models().companion);
  const specdec::prefix_cached_model cached(engine, prompts.size()), single(single_engine, 1);
  const auto batched = run(cached);
  const auto one_lane = run(single);
  std::size_t calls = 0, longest = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    CHECK(batched.requests[i].tokens == plain.requests[i].tokens);  // the companion's rows are the same
    CHECK(one_lane.requests[i].tokens == plain.requests[i].tokens);
    calls += batched.requests[i].sv.companion_calls;
    longest = std::max(longest, batched.requests[i].sv.companion_calls);
  }
  CHECK(cached.stats().forwards >= longest);
  CHECK(cached.stats().forwards <= batched.rounds);  // one per round with drafts
  CHECK(cached.stats().forwards < calls);            // several requests per forward
  CHECK(single.stats().forwards == calls);           // the control: one per request and round
}

TEST_CASE("decode_sv: bad options are refused", "[sv][bad-input]") {
  specdec::decode_options o;
  specdec::sv_options sv;
  sv.mode = specdec::sv_mode::exact;
  sv.search = specdec::length_search::brute_force;
  const std::vector<token_id> prompt{0};
  CHECK_THROWS_AS(specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                     specdec::sv_setup{models().companion, estimator(), latency}, sv, prompt, o),
                  specdec::error);
  sv.search = specdec::length_search::incremental;
  sv.t_companion = -1.0;
  CHECK_THROWS_AS(specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                     specdec::sv_setup{models().companion, estimator(), latency}, sv, prompt, o),
                  specdec::error);
  sv.t_companion = 0.0;
  const auto decreasing = [](int k) { return 2.0 - 0.1 * k; };
  CHECK_THROWS_AS(specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                     specdec::sv_setup{models().companion, estimator(), decreasing}, sv, prompt, o),
                  specdec::error);
  const auto wide =
      specdec::markov_model::chain(std::vector<double>(V + 1, 1.0 / (V + 1)), specdec_test::random_stochastic_table(V + 1, 3));
  CHECK_THROWS_AS(specdec::decode_sv(specdec::exec::seq, models().target, models().draft, specdec::warp_params{},
                                     specdec::sv_setup{wide, estimator(), latency}, sv, prompt, o),
                  specdec::error);
}
