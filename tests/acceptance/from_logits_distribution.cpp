// SPECDEC_TEST_LABELS: statistical
//
// What verification from logits emits, with warping on both sides, for every chain rule on seq and on
// simd (docs/reference/sampling-contract.md, verification from logits).
//
// Each trial is one request over fixed rows (V = 12): target logits l_0, l_1, l_2, draft logits m_0,
// m_1. The drafts are sampled from the draft's warped rows q_i = warp(m_i) as a drafter samples them,
// and `verify_from_logits` is handed the draft's logits and its parameters. The first emitted token is
// then distributed as p_0 = warp(l_0) for the lossless rules (strict, sample-and-match, block), and as
// the closed form a(v) + R r(v) (acceptance/distribution.hpp) for lenient; with no draft it is the
// bonus, distributed as p_0 for every rule. 10^5 trials per case are compared with these by Pearson's
// chi-squared test at the suite's level (1e-6). The cases set the target's and the draft's kept sets
// equal, nested, disjoint and apart, through the simd backend's sparse filters (top-k, min-p alone)
// and its dense paths (top-p alone, no filter); top-p keeping a single token must emit it every time.
// Negative control: a verifier told the wrong draft parameters (q not the row the drafts came from)
// must fail the same test.
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance/distribution.hpp"
#include "specdec/specdec.hpp"
#include "support/chi_squared.hpp"
#include "support/sample_scale.hpp"

namespace {

using specdec::token_id;
using specdec::warp_params;
using specdec::random::purpose;
using specdec::random::request_stream;

constexpr std::size_t V = 12;
const std::uint64_t trials = specdec_test::scaled_sample_count(100'000);

// One configuration: the logits of both sides and their warps.
struct kept_sets_case {
  std::string name;
  std::array<std::array<float, V>, 3> target;  // l_0, l_1, l_2
  std::array<std::array<float, V>, 2> draft;   // m_0, m_1
  warp_params target_params, draft_params;
};

// Logits that rank the tokens `order[0] > order[1] > ...` with gaps `gap` (and a lift for row i, so
// that the rows of one side differ).
std::array<float, V> ranked(const std::array<int, V>& order, double gap, double lift) {
  std::array<float, V> l{};
  for (std::size_t r = 0; r < V; ++r)
    l[static_cast<std::size_t>(order[r])] = static_cast<float>(lift * static_cast<double>(r % 3) - gap * static_cast<double>(r));
  return l;
}

constexpr std::array<int, V> low_first{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
constexpr std::array<int, V> low_first_swapped{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10};
constexpr std::array<int, V> high_first{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
constexpr std::array<int, V> interleaved{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11};

kept_sets_case make_case(std::string name, const std::array<int, V>& target_order, const std::array<int, V>& draft_order,
                         const warp_params& tp, const warp_params& dp) {
  kept_sets_case c{std::move(name), {}, {}, tp, dp};
  for (std::size_t i = 0; i < 3; ++i) c.target[i] = ranked(target_order, 0.45, 0.2 * static_cast<double>(i));
  for (std::size_t i = 0; i < 2; ++i) c.draft[i] = ranked(draft_order, 0.35, 0.15 * static_cast<double>(i + 1));
  return c;
}

std::vector<kept_sets_case> cases() {
  return {
      // Both top-k 4 over the same four tokens, in another order.
      make_case("equal kept sets (top-k 4 on both sides)", low_first, low_first_swapped, {1.0, 4, 1.0, 0.0}, {1.0, 4, 1.0, 0.0}),
      // The draft keeps 3 of the target's 6; the target adds top-p and a temperature.
      make_case("nested kept sets (top-k 6 + top-p 0.95, T 0.8; draft top-k 3)", low_first, low_first_swapped,
                {0.8, 6, 0.95, 0.0}, {1.0, 3, 1.0, 0.0}),
      // The draft keeps only tokens the target cuts: every draft is rejected, the residual is p.
      make_case("disjoint kept sets (top-k 4; draft top-k 4 on the other end)", low_first, high_first, {1.0, 4, 1.0, 0.0},
                {1.0, 4, 1.0, 0.0}),
      // Overlapping: min-p alone (the sparse min-p filter) against a draft with top-p alone (dense).
      make_case("overlapping kept sets (min-p 0.15; draft top-p 0.8)", low_first, interleaved, {1.0, 0, 1.0, 0.15},
                {1.0, 0, 0.8, 0.0}),
      // A dense target (top-p alone, T 1.3) against a sparse draft (top-k 5 + min-p 0.05).
      make_case("top-p target, top-k draft", interleaved, low_first, {1.3, 0, 0.7, 0.0}, {1.0, 5, 1.0, 0.05}),
      // No filter on either side, different temperatures.
      make_case("no filters (T 1 and T 0.6)", low_first, interleaved, {1.0, 0, 1.0, 0.0}, {0.6, 0, 1.0, 0.0}),
  };
}

// p = warp(logits) in double: the exact distribution the tests compare with.
std::vector<double> warped(const std::array<float, V>& logits, const warp_params& w) {
  std::vector<double> l(logits.begin(), logits.end()), p(V);
  REQUIRE(specdec::warp_logits(std::span<const double>(l), std::span<double>(p), w) == specdec::row_status::ok);
  return p;
}

// Counts of the first emitted token over `trials` requests with `n` drafts (0 or 2), verified by
// `policy` in batches; the verifier is told `told` as the draft's parameters.
template <class Policy, class Rule>
std::vector<std::uint64_t> first_tokens(const Policy& policy, const Rule& rule, const kept_sets_case& c, std::size_t n,
                                        const warp_params& told, std::uint64_t seed) {
  constexpr std::size_t batch = 4096;
  std::vector<std::uint64_t> counts(V, 0);
  // The warped draft rows the drafts are sampled from (seq's warp: the drafter's own sampler).
  std::array<std::vector<float>, 2> q;
  for (std::size_t i = 0; i < 2; ++i) {
    q[i].resize(V);
    REQUIRE(specdec::warp_logits(std::span<const float>(c.draft[i]), std::span<float>(q[i]), c.draft_params) ==
            specdec::row_status::ok);
  }
  for (std::uint64_t first = 0; first < trials; first += batch) {
    const std::size_t B = static_cast<std::size_t>(std::min<std::uint64_t>(batch, trials - first));
    const std::vector<std::int32_t> num_drafts(B, static_cast<std::int32_t>(n));
    std::vector<token_id> drafts;
    std::vector<float> draft_rows, target_rows;
    std::vector<request_stream> streams;
    for (std::size_t b = 0; b < B; ++b) {
      streams.push_back(request_stream{seed, static_cast<std::uint32_t>(first + b), 0});
      for (std::size_t i = 0; i < n; ++i) {
        drafts.push_back(specdec::sample_categorical(std::span<const float>(q[i]),
                                                     streams.back().open(static_cast<std::uint32_t>(i), purpose::draft).uniform())
                             .token);
        draft_rows.insert(draft_rows.end(), c.draft[i].begin(), c.draft[i].end());
      }
      for (std::size_t i = 0; i <= n; ++i) target_rows.insert(target_rows.end(), c.target[i].begin(), c.target[i].end());
    }
    const specdec::chain_batch<float> chains{specdec::ragged_layout::packed(num_drafts), V, drafts, draft_rows, target_rows};
    std::vector<token_id> tokens(B * (n + 1));
    std::vector<std::int32_t> accepted(B);
    std::vector<specdec::verify_status> status(B);
    const std::vector<warp_params> target_params(B, c.target_params), draft_params(B, told);
    specdec::verify_from_logits(policy, rule, chains, std::span<const warp_params>(target_params),
                                std::span<const warp_params>(draft_params), streams, {tokens, accepted, status});
    for (std::size_t b = 0; b < B; ++b) {
      REQUIRE(status[b] == specdec::verify_status::ok);
      const token_id t = tokens[b * (n + 1)];
      REQUIRE(specdec::in_vocabulary(t, V));
      ++counts[static_cast<std::size_t>(t)];
    }
  }
  return counts;
}

// The first token's exact distribution: p_0 for a lossless rule or a bonus, the closed form for lenient.
template <class Rule>
std::vector<double> expected_first(const Rule& rule, const kept_sets_case& c, std::size_t n) {
  const std::vector<double> p = warped(c.target[0], c.target_params);
  if constexpr (std::is_same_v<Rule, specdec::lenient_rule>) {
    if (n > 0) {
      const std::vector<double> q = warped(c.draft[0], c.draft_params);
      std::vector<double> out(V);
      specdec::token_distribution(rule, std::span<const double>(p), std::span<const double>(q), std::span<double>(out));
      return out;
    }
  }
  return p;
}

template <class Policy>
void check_every_rule(const Policy& policy, const char* backend) {
  std::uint64_t seed = 1;
  for (const kept_sets_case& c : cases()) {
    const auto check = [&](const auto& rule, const char* rule_name) {
      for (const std::size_t n : {std::size_t{0}, std::size_t{2}}) {
        const auto counts = first_tokens(policy, rule, c, n, c.draft_params, ++seed);
        const auto expected = expected_first(rule, c, n);
        const auto r = specdec_test::chi_squared_gof(std::span<const std::uint64_t>(counts), std::span<const double>(expected));
        INFO(backend << ", " << c.name << ", " << rule_name << ", " << n << " drafts: " << r);
        CHECK(r.impossible == 0);
        CHECK(r.p_value >= specdec_test::gof_alpha);
      }
    };
    check(specdec::strict, "strict");
    check(specdec::lenient_rule{0.5}, "lenient 0.5");
    check(specdec::sample_and_match, "sample-and-match");
    check(specdec::block, "block");
  }
}

template <class Policy>
void check_single_token_top_p(const Policy& policy) {
  // T 1, top-p 0.05: only the maximum survives; every rule emits it first whatever the drafts.
  kept_sets_case c = make_case("top-p keeps one token", interleaved, low_first, {1.0, 0, 0.05, 0.0}, {1.0, 0, 1.0, 0.0});
  const auto only = static_cast<std::size_t>(interleaved[0]);
  const auto check = [&](const auto& rule) {
    for (const std::size_t n : {std::size_t{0}, std::size_t{2}}) {
      const auto counts = first_tokens(policy, rule, c, n, c.draft_params, 7);
      CHECK(counts[only] == trials);
    }
  };
  check(specdec::strict);
  check(specdec::lenient_rule{0.5});
  check(specdec::sample_and_match);
  check(specdec::block);
}

template <class Policy>
void check_negative_control(const Policy& policy) {
  // The drafts come from top-k 3 rows; the verifier is told the draft had no filter at T 1, so its q
  // is not the row the drafts were sampled from: the first token must fail the test.
  const kept_sets_case c = make_case("wrong q", low_first, low_first_swapped, {1.0, 6, 1.0, 0.0}, {1.0, 3, 1.0, 0.0});
  const auto counts = first_tokens(policy, specdec::strict, c, 2, warp_params{1.0, 0, 1.0, 0.0}, 11);
  const auto expected = expected_first(specdec::strict, c, 2);
  const auto r = specdec_test::chi_squared_gof(std::span<const std::uint64_t>(counts), std::span<const double>(expected));
  INFO(r);
  CHECK(r.p_value < specdec_test::gof_alpha);
}

}  // namespace

TEST_CASE("verify_from_logits (seq): the first token follows the warped target for every kept-set case",
          "[acceptance][logits][distribution][statistical]") {
  check_every_rule(specdec::exec::seq, "seq");
  check_single_token_top_p(specdec::exec::seq);
}

TEST_CASE("verify_from_logits (simd): the first token follows the warped target for every kept-set case",
          "[acceptance][logits][distribution][statistical]") {
  check_every_rule(specdec::exec::simd, "simd");
  check_single_token_top_p(specdec::exec::simd);
}

TEST_CASE("negative control: a verifier told the wrong draft parameters fails the test",
          "[acceptance][logits][distribution][statistical][negative]") {
  check_negative_control(specdec::exec::seq);
  check_negative_control(specdec::exec::simd);
}
