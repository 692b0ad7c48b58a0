// Chain verification through specdec::verify on ragged batches: the output format (all / none /
// some accepted, zero drafts, -1 padding), greedy cases, p == q, packed vs padded layouts,
// verify_from_logits vs verify on rows warped by hand, top-k / top-p masks, and output invariants
// on random rows for every rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/batch_builder.hpp"

namespace {

using specdec::token_id;
using specdec::verify_status;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::request_stream;
using specdec::random::stream_address;
using specdec_test::build_batch;
using specdec_test::owned_batch;
using specdec_test::owned_outputs;
using specdec_test::request_data;
using row = std::vector<double>;

row one_hot(std::size_t V, std::size_t at, double value = 1.0) {
  row r(V, 0.0);
  r[at] = value;
  return r;
}

// A target row under which draft x is accepted by the strict rule with certainty: p(x) >= q(x).
row accepting_row(const row& q, token_id x) {
  row p(q.size());
  for (std::size_t v = 0; v < q.size(); ++v) p[v] = 0.5 * q[v];
  p[static_cast<std::size_t>(x)] += 0.5;
  return p;
}

template <class Rule, class T>
owned_outputs run(const Rule& rule, const owned_batch<T>& b, const specdec::verify_options& options = {}) {
  owned_outputs out(b);
  specdec::verify(specdec::exec::seq, rule, b.view(), b.stream_span(), out.view(), options);
  return out;
}

// The output invariants every rule must keep, whatever the rows.
template <class T>
void check_invariants(const owned_batch<T>& b, const owned_outputs& o) {
  const auto view = b.view();
  for (std::size_t r = 0; r < b.batch_size(); ++r) {
    CAPTURE(r);
    const auto n = static_cast<std::int32_t>(b.num_drafts[r]);
    const auto k = o.num_accepted[r];
    const auto out = o.row(r);
    REQUIRE(out.size() == b.max_drafts() + 1);
    REQUIRE(k >= 0);
    REQUIRE(k <= n);
    for (std::int32_t i = 0; i < k; ++i)
      CHECK(out[static_cast<std::size_t>(i)] == view.draft_token(r, static_cast<std::size_t>(i)));
    const bool valid = specdec::is_valid(o.status[r]);
    if (valid) CHECK(specdec::in_vocabulary(out[static_cast<std::size_t>(k)], b.vocab));
    for (std::size_t i = static_cast<std::size_t>(k) + (valid ? 1 : 0); i < out.size(); ++i) CHECK(out[i] == specdec::no_token);
    CHECK(o.emitted(r).size() == static_cast<std::size_t>(k) + (valid ? 1 : 0));
    for (const token_id t : out) CHECK((t == specdec::no_token || specdec::in_vocabulary(t, b.vocab)));
  }
}

// Random requests: n_b drafts sampled from random q rows, random p rows.
std::vector<request_data<double>> random_requests(std::size_t B, std::size_t V, std::size_t max_n, std::uint64_t seed,
                                                  bool p_equals_q = false, double zero_fraction = 0.0) {
  philox_stream s(stream_address{seed, 0, 0, 0, purpose::user});
  std::vector<request_data<double>> reqs(B);
  for (std::size_t b = 0; b < B; ++b) {
    auto& r = reqs[b];
    r.stream = request_stream{seed, static_cast<std::uint32_t>(1000 + b), 3};
    const auto n = static_cast<std::size_t>(s.uniform() * static_cast<double>(max_n + 1));
    for (std::size_t i = 0; i < n; ++i) {
      auto q = specdec_test::random_probability_row<double>(s, V, zero_fraction);
      const auto x = specdec::sample_categorical(std::span<const double>(q), s.uniform()).token;
      r.drafts.push_back(x);
      r.target_rows.push_back(p_equals_q ? q : specdec_test::random_probability_row<double>(s, V, zero_fraction));
      r.draft_rows.push_back(std::move(q));
    }
    r.target_rows.push_back(specdec_test::random_probability_row<double>(s, V, zero_fraction));
  }
  return reqs;
}

}  // namespace

TEST_CASE("one-hot targets: all, none and some accepted, for every rule", "[acceptance][format]") {
  // V = 10; three requests with n_b = 3, 1, 5. The target rows are one-hot, so every rule decides the same way:
  // a draft equal to the target's token is accepted, any other is rejected and replaced by that token.
  constexpr std::size_t V = 10;
  philox_stream s(stream_address{1, 0, 0, 0, purpose::user});
  const std::vector<std::vector<token_id>> drafts{{1, 2, 3}, {4}, {5, 6, 7, 8, 9}};
  const auto make = [&](const std::vector<std::vector<token_id>>& target_tokens) {
    std::vector<request_data<double>> reqs;
    for (std::size_t b = 0; b < drafts.size(); ++b) {
      request_data<double> r;
      r.drafts = drafts[b];
      r.stream = request_stream{77, static_cast<std::uint32_t>(b), 0};
      for (std::size_t i = 0; i < drafts[b].size(); ++i) {
        auto q = specdec_test::random_probability_row<double>(s, V);
        q[static_cast<std::size_t>(drafts[b][i])] += 0.1;  // q(x) > 0 and q < 1 everywhere
        double z = 0.0;
        for (const double x : q) z += x;
        for (double& x : q) x /= z;
        r.draft_rows.push_back(q);
      }
      for (const token_id t : target_tokens[b]) r.target_rows.push_back(one_hot(V, static_cast<std::size_t>(t)));
      reqs.push_back(r);
    }
    return build_batch(reqs, V, true);
  };
  const auto check_all_rules = [&](const owned_batch<double>& b, const std::vector<std::vector<token_id>>& expected_rows,
                                   const std::vector<std::int32_t>& expected_accepted) {
    const auto check = [&](const owned_outputs& o) {
      for (std::size_t r = 0; r < b.batch_size(); ++r) {
        CAPTURE(r);
        CHECK(o.row(r) == expected_rows[r]);
        CHECK(o.num_accepted[r] == expected_accepted[r]);
        CHECK(o.status[r] == verify_status::ok);
      }
      check_invariants(b, o);
    };
    check(run(specdec::strict, b));
    check(run(specdec::lenient_rule{0.5}, b));
    check(run(specdec::lenient_rule{1.0}, b));
    check(run(specdec::greedy, b));
    check(run(specdec::sample_and_match, b));
  };
  SECTION("all accepted: the drafts then the bonus") {
    const auto b = make({{1, 2, 3, 0}, {4, 6}, {5, 6, 7, 8, 9, 2}});
    check_all_rules(b, {{1, 2, 3, 0, -1, -1}, {4, 6, -1, -1, -1, -1}, {5, 6, 7, 8, 9, 2}}, {3, 1, 5});
  }
  SECTION("none accepted: the correction then -1") {
    const auto b = make({{0, 2, 3, 0}, {9, 6}, {1, 6, 7, 8, 9, 2}});
    check_all_rules(b, {{0, -1, -1, -1, -1, -1}, {9, -1, -1, -1, -1, -1}, {1, -1, -1, -1, -1, -1}}, {0, 0, 0});
  }
  SECTION("some accepted: the accepted prefix, the correction, then -1") {
    const auto b = make({{1, 2, 7, 0}, {4, 3}, {5, 6, 7, 0, 9, 2}});
    check_all_rules(b, {{1, 2, 7, -1, -1, -1}, {4, 3, -1, -1, -1, -1}, {5, 6, 7, 0, -1, -1}}, {2, 1, 3});
  }
}

TEST_CASE("strict rule, general rows: certain acceptances and a one-hot residual", "[acceptance][format]") {
  constexpr std::size_t V = 12;
  philox_stream s(stream_address{2, 0, 0, 0, purpose::user});
  // Request 0: 4 drafts, the first two have p(x) >= q(x) (always accepted), the third p(x) = 0 (always
  // rejected) with p - q positive only at token 11, so the correction is 11.
  // Request 1: 0 drafts, the bonus comes from a one-hot row. Request 2: 2 drafts, both accepted, bonus 3.
  std::vector<request_data<double>> reqs(3);
  {
    auto& r = reqs[0];
    r.stream = {5, 0, 0};
    r.drafts = {4, 7, 2, 9};
    for (const token_id x : r.drafts) {
      auto q = specdec_test::random_probability_row<double>(s, V);
      q[static_cast<std::size_t>(x)] += 0.05;
      r.draft_rows.push_back(q);
    }
    r.target_rows.push_back(accepting_row(r.draft_rows[0], 4));
    r.target_rows.push_back(accepting_row(r.draft_rows[1], 7));
    row p = r.draft_rows[2];  // p = q moved: p(2) = 0, its mass and a bit more sent to 11
    p[11] += p[2];
    p[2] = 0.0;
    r.target_rows.push_back(p);
    r.target_rows.push_back(specdec_test::random_probability_row<double>(s, V));
    r.target_rows.push_back(specdec_test::random_probability_row<double>(s, V));
  }
  reqs[1].stream = {5, 1, 0};
  reqs[1].target_rows.push_back(one_hot(V, 8));
  {
    auto& r = reqs[2];
    r.stream = {5, 2, 0};
    r.drafts = {0, 0};
    for (int i = 0; i < 2; ++i) {
      auto q = specdec_test::random_probability_row<double>(s, V);
      r.draft_rows.push_back(q);
      r.target_rows.push_back(accepting_row(q, 0));
    }
    r.target_rows.push_back(one_hot(V, 3));
  }
  for (const bool packed : {true, false}) {
    CAPTURE(packed);
    const auto b = build_batch(reqs, V, packed, 6);
    const auto o = run(specdec::strict, b);
    const std::size_t pad = packed ? 0 : 2;
    auto expect = [&](std::vector<token_id> v) {
      v.resize(v.size() + pad, -1);
      return v;
    };
    CHECK(o.row(0) == expect({4, 7, 11, -1, -1}));
    CHECK(o.num_accepted[0] == 2);
    CHECK(o.row(1) == expect({8, -1, -1, -1, -1}));
    CHECK(o.num_accepted[1] == 0);
    CHECK(o.row(2) == expect({0, 0, 3, -1, -1}));
    CHECK(o.num_accepted[2] == 2);
    for (std::size_t r = 0; r < 3; ++r) CHECK(o.status[r] == verify_status::ok);
    check_invariants(b, o);
  }
}

TEST_CASE("zero drafts: the bonus token only", "[acceptance][format]") {
  constexpr std::size_t V = 9;
  auto reqs = random_requests(20, V, 0, 0x2E80);  // every n_b = 0
  const auto b = build_batch(reqs, V, true);
  REQUIRE(b.max_drafts() == 0);
  for (const auto& o : {run(specdec::strict, b), run(specdec::greedy, b), run(specdec::sample_and_match, b),
                        run(specdec::lenient_rule{3.0}, b)}) {
    for (std::size_t r = 0; r < b.batch_size(); ++r) {
      CHECK(o.num_accepted[r] == 0);
      CHECK(o.status[r] == verify_status::ok);
      REQUIRE(o.row(r).size() == 1);
      const token_id t = o.row(r)[0];
      REQUIRE(specdec::in_vocabulary(t, V));
      CHECK(reqs[r].target_rows[0][static_cast<std::size_t>(t)] > 0.0);
    }
  }
  // Greedy's bonus is the argmax of the last row.
  const auto o = run(specdec::greedy, b);
  for (std::size_t r = 0; r < b.batch_size(); ++r)
    CHECK(o.row(r)[0] == specdec::argmax(std::span<const double>(reqs[r].target_rows[0])));
}

TEST_CASE("greedy verification with near one-hot targets", "[acceptance][greedy]") {
  // Target rows put 0.91 on one token and 0.01 on each other one (V = 10), so the argmax is fixed.
  constexpr std::size_t V = 10;
  const auto peaked = [](token_id t) {
    row r(V, 0.01);
    r[static_cast<std::size_t>(t)] = 0.91;
    return r;
  };
  // Requests: (drafts, target argmaxes incl. the bonus row) -> expected row of width max_n + 1 = 4.
  struct greedy_case {
    std::vector<token_id> drafts, target;
    std::vector<token_id> expected;
    std::int32_t accepted;
  };
  const std::vector<greedy_case> cases{
      {{1, 2, 3}, {1, 2, 3, 4}, {1, 2, 3, 4}, 3},     // perfect match + bonus
      {{1, 5, 3}, {1, 2, 3, 4}, {1, 2, -1, -1}, 1},   // early mismatch
      {{7, 2, 3}, {1, 2, 3, 4}, {1, -1, -1, -1}, 0},  // first token wrong
      {{6}, {6, 0}, {6, 0, -1, -1}, 1},               // single token, accepted
      {{}, {5}, {5, -1, -1, -1}, 0},                  // empty: bonus only
      {{2, 9}, {2, 8, 1}, {2, 8, -1, -1}, 1},         // multiple mismatches: first one wins
  };
  std::vector<request_data<double>> reqs;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    request_data<double> r;
    r.drafts = cases[c].drafts;
    r.stream = {1, static_cast<std::uint32_t>(c), 0};
    for (const token_id t : cases[c].target) r.target_rows.push_back(peaked(t));
    for (std::size_t i = 0; i < r.drafts.size(); ++i) r.draft_rows.push_back(row(V, 0.1));
    reqs.push_back(r);
  }
  for (const bool packed : {true, false}) {
    CAPTURE(packed);
    auto b = build_batch(reqs, V, packed, 3);
    const auto check = [&](const owned_outputs& o) {
      for (std::size_t c = 0; c < cases.size(); ++c) {
        CAPTURE(c);
        CHECK(o.row(c) == cases[c].expected);
        CHECK(o.num_accepted[c] == cases[c].accepted);
        CHECK(o.status[c] == verify_status::ok);
      }
    };
    check(run(specdec::greedy, b));
    // Greedy never reads q: the draft rows may be absent.
    b.draft_rows.clear();
    check(run(specdec::greedy, b));
  }
  // Ties: the lowest id is the argmax.
  request_data<double> tie;
  tie.drafts = {4};
  tie.draft_rows = {row(V, 0.1)};
  tie.target_rows = {row{0, 0, 0, 0, 0.5, 0, 0, 0, 0.5, 0}, row{0, 0, 0.5, 0.5, 0, 0, 0, 0, 0, 0}};
  tie.stream = {1, 99, 0};
  const auto o = run(specdec::greedy, build_batch(std::vector{tie}, V, true));
  CHECK(o.row(0) == std::vector<token_id>{4, 2});
  tie.drafts = {8};
  const auto o2 = run(specdec::greedy, build_batch(std::vector{tie}, V, true));
  CHECK(o2.row(0) == std::vector<token_id>{4, -1});
}

TEST_CASE("draft == target: every draft is accepted, no NaN, status ok", "[acceptance][format]") {
  constexpr std::size_t V = 50;
  const auto reqs = random_requests(64, V, 7, 0xE0A1, /*p_equals_q=*/true, 0.3);
  const auto b = build_batch(reqs, V, true);
  const auto check = [&](const owned_outputs& o) {
    for (std::size_t r = 0; r < b.batch_size(); ++r) {
      CAPTURE(r);
      CHECK(o.num_accepted[r] == b.num_drafts[r]);
      CHECK(o.status[r] == verify_status::ok);
      const auto e = o.emitted(r);
      REQUIRE(e.size() == reqs[r].drafts.size() + 1);
      CHECK(std::equal(reqs[r].drafts.begin(), reqs[r].drafts.end(), e.begin()));
      CHECK(reqs[r].target_rows.back()[static_cast<std::size_t>(e.back())] > 0.0);
    }
    check_invariants(b, o);
  };
  check(run(specdec::strict, b));
  check(run(specdec::lenient_rule{1.0}, b));
  check(run(specdec::lenient_rule{0.25}, b));
  // Float rows too.
  std::vector<request_data<float>> freqs;
  for (const auto& r : reqs) {
    request_data<float> f;
    f.drafts = r.drafts;
    f.stream = r.stream;
    for (const auto& q : r.draft_rows) f.draft_rows.emplace_back(q.begin(), q.end());
    for (std::size_t i = 0; i < r.drafts.size(); ++i) f.target_rows.push_back(f.draft_rows[i]);
    f.target_rows.emplace_back(r.target_rows.back().begin(), r.target_rows.back().end());
    freqs.push_back(f);
  }
  const auto fb = build_batch(freqs, V, true);
  const auto fo = run(specdec::strict, fb);
  for (std::size_t r = 0; r < fb.batch_size(); ++r) {
    CHECK(fo.num_accepted[r] == fb.num_drafts[r]);
    CHECK(fo.status[r] == verify_status::ok);
  }
}

TEST_CASE("the padded layout gives the packed layout's results", "[acceptance][layout]") {
  constexpr std::size_t V = 33;
  const auto reqs = random_requests(40, V, 6, 0x9ADD, false, 0.2);
  const auto packed = build_batch(reqs, V, true);
  const auto padded = build_batch(reqs, V, false, 9);  // wider than needed; padding rows hold NaN
  const auto compare = [&](const owned_outputs& a, const owned_outputs& b) {
    for (std::size_t r = 0; r < reqs.size(); ++r) {
      CAPTURE(r);
      CHECK(a.emitted(r) == b.emitted(r));
      CHECK(a.num_accepted[r] == b.num_accepted[r]);
      CHECK(a.status[r] == b.status[r]);
      CHECK(b.status[r] == verify_status::ok);  // the NaN padding is never read
    }
  };
  compare(run(specdec::strict, packed), run(specdec::strict, padded));
  compare(run(specdec::lenient_rule{0.7}, packed), run(specdec::lenient_rule{0.7}, padded));
  compare(run(specdec::greedy, packed), run(specdec::greedy, padded));
  compare(run(specdec::sample_and_match, packed), run(specdec::sample_and_match, padded));
  check_invariants(padded, run(specdec::strict, padded));
}

TEST_CASE("verify_from_logits equals verify on rows warped with warp_logits", "[acceptance][logits]") {
  constexpr std::size_t V = 64, B = 24;
  philox_stream s(stream_address{0x10, 0, 0, 0, purpose::user});
  std::vector<specdec::warp_params> target_params(B), draft_params(B);
  for (std::size_t b = 0; b < B; ++b) {
    // A spread of parameters, greedy (T = 0) included.
    target_params[b] = {b % 6 == 0 ? 0.0 : 0.3 + 1.5 * s.uniform(), static_cast<int>(b % 4) * 5,
                        b % 3 == 0 ? 1.0 : 0.5 + 0.5 * s.uniform(), b % 5 == 0 ? 0.1 : 0.0};
    draft_params[b] = {0.5 + s.uniform(), static_cast<int>(b % 3) * 7, b % 2 == 0 ? 1.0 : 0.8, 0.0};
  }
  for (const bool same_params : {false, true}) {
    CAPTURE(same_params);
    const auto& dparams = same_params ? target_params : draft_params;
    std::vector<request_data<double>> logit_reqs(B), prob_reqs(B);
    for (std::size_t b = 0; b < B; ++b) {
      auto& lr = logit_reqs[b];
      auto& pr = prob_reqs[b];
      lr.stream = pr.stream = request_stream{0xAB, static_cast<std::uint32_t>(b), 1};
      const std::size_t n = b % 5;
      const auto warp = [&](const row& logits, const specdec::warp_params& w) {
        row p(V);
        REQUIRE(specdec::warp_logits(std::span<const double>(logits), std::span<double>(p), w) == specdec::row_status::ok);
        return p;
      };
      const auto random_logits = [&] {
        row l(V);
        for (double& x : l) x = 3.0 * (s.uniform() - 0.5);
        return l;
      };
      for (std::size_t i = 0; i < n; ++i) {
        const row ql = random_logits(), pl = random_logits();
        const row q = warp(ql, dparams[b]);
        // The draft token is sampled from the warped draft row (the q the verifier reads must be that row; docs/design.md, 'Drafting').
        const token_id x = specdec::sample_categorical(std::span<const double>(q),
                                                       lr.stream.open(static_cast<std::uint32_t>(i), purpose::draft).uniform())
                               .token;
        lr.drafts.push_back(x);
        pr.drafts.push_back(x);
        lr.draft_rows.push_back(ql);
        pr.draft_rows.push_back(q);
        lr.target_rows.push_back(pl);
        pr.target_rows.push_back(warp(pl, target_params[b]));
      }
      const row pl = random_logits();
      lr.target_rows.push_back(pl);
      pr.target_rows.push_back(warp(pl, target_params[b]));
    }
    const auto lb = build_batch(logit_reqs, V, true), pb = build_batch(prob_reqs, V, true);
    const auto compare = [&](const auto& rule) {
      owned_outputs lo(lb);
      specdec::verify_from_logits(
          specdec::exec::seq, rule, lb.view(), std::span<const specdec::warp_params>(target_params),
          same_params ? std::span<const specdec::warp_params>{} : std::span<const specdec::warp_params>(draft_params),
          lb.stream_span(), lo.view());
      const auto po = run(rule, pb);
      for (std::size_t b = 0; b < B; ++b) {
        CAPTURE(b);
        CHECK(lo.row(b) == po.row(b));
        CHECK(lo.num_accepted[b] == po.num_accepted[b]);
        CHECK(lo.status[b] == po.status[b]);
        CHECK(specdec::is_valid(lo.status[b]));
      }
      check_invariants(lb, lo);
    };
    compare(specdec::strict);
    compare(specdec::lenient_rule{0.5});
    compare(specdec::greedy);
    compare(specdec::sample_and_match);
  }
}

TEST_CASE("a token outside the target's top-k (or top-p) mask is never emitted", "[acceptance][logits]") {
  // V = B = 100. Target logits are 0.1 * rank (a small gap); the draft is an unwarped random row, so it
  // often drafts tokens outside the target's mask, which must be rejected and never resampled.
  constexpr std::size_t V = 100, B = 100, gamma = 3;
  philox_stream s(stream_address{0x70C, 0, 0, 0, purpose::user});
  struct mask_case {
    int top_k;
    double top_p;
  };
  for (const mask_case mc : {mask_case{1, 1.0}, mask_case{5, 1.0}, mask_case{99, 1.0}, mask_case{0, 0.5}, mask_case{0, 0.9},
                             mask_case{0, 0.99}, mask_case{10, 0.5}}) {
    CAPTURE(mc.top_k, mc.top_p);
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<request_data<double>> reqs(B);
      std::vector<std::vector<row>> masks(B);  // the warped target rows (the mask is their support)
      const specdec::warp_params tp{1.0, mc.top_k, mc.top_p, 0.0};
      for (std::size_t b = 0; b < B; ++b) {
        auto& r = reqs[b];
        r.stream = request_stream{static_cast<std::uint64_t>(trial), static_cast<std::uint32_t>(b), 0};
        for (std::size_t i = 0; i <= gamma; ++i) {
          std::vector<std::size_t> order(V);
          std::iota(order.begin(), order.end(), std::size_t{0});
          for (std::size_t k = V - 1; k > 0; --k)
            std::swap(order[k], order[static_cast<std::size_t>(s.uniform() * static_cast<double>(k + 1))]);
          row pl(V);
          for (std::size_t k = 0; k < V; ++k) pl[order[k]] = 0.1 * static_cast<double>(k);
          row warped(V);
          REQUIRE(specdec::warp_logits(std::span<const double>(pl), std::span<double>(warped), tp) == specdec::row_status::ok);
          masks[b].push_back(warped);
          r.target_rows.push_back(pl);
          if (i == gamma) break;
          row ql(V);
          for (double& x : ql) x = s.uniform();
          row q(V);
          specdec::softmax(std::span<const double>(ql), std::span<double>(q));
          r.drafts.push_back(specdec::sample_categorical(std::span<const double>(q),
                                                         r.stream.open(static_cast<std::uint32_t>(i), purpose::draft).uniform())
                                 .token);
          r.draft_rows.push_back(ql);
        }
      }
      const auto bt = build_batch(reqs, V, true);
      const std::vector<specdec::warp_params> target_params(B, tp), draft_params(B, specdec::warp_params{});
      owned_outputs o(bt);
      specdec::verify_from_logits(specdec::exec::seq, specdec::strict, bt.view(),
                                  std::span<const specdec::warp_params>(target_params),
                                  std::span<const specdec::warp_params>(draft_params), bt.stream_span(), o.view());
      std::size_t outside_drafts = 0;
      for (std::size_t b = 0; b < B; ++b) {
        CAPTURE(b);
        REQUIRE(o.status[b] == verify_status::ok);
        const auto row_out = o.row(b);
        for (std::size_t i = 0; i < row_out.size() && row_out[i] != specdec::no_token; ++i)
          REQUIRE(masks[b][i][static_cast<std::size_t>(row_out[i])] > 0.0);
        for (std::size_t i = 0; i < gamma; ++i)
          if (masks[b][i][static_cast<std::size_t>(reqs[b].drafts[i])] == 0.0) ++outside_drafts;
      }
      if (mc.top_k != 99 && mc.top_p != 0.99) CHECK(outside_drafts > 0);  // the test did exercise rejections
    }
  }
}

TEST_CASE("output invariants on random p and q, every rule", "[acceptance][format]") {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    CAPTURE(seed);
    const std::size_t V = 3 + seed * 7;
    const auto reqs = random_requests(32, V, 6, seed, false, seed % 2 == 0 ? 0.5 : 0.0);
    const auto b = build_batch(reqs, V, seed % 3 != 0, 6);
    for (const auto& o : {run(specdec::strict, b), run(specdec::lenient_rule{0.5}, b), run(specdec::lenient_rule{4.0}, b),
                          run(specdec::greedy, b), run(specdec::sample_and_match, b)}) {
      check_invariants(b, o);
      for (std::size_t r = 0; r < b.batch_size(); ++r) {
        CHECK(specdec::is_valid(o.status[r]));
        const auto e = o.emitted(r);
        REQUIRE(!e.empty());
        // The last token has positive target probability at its position.
        CHECK(reqs[r].target_rows[e.size() - 1][static_cast<std::size_t>(e.back())] > 0.0);
      }
    }
  }
}

TEST_CASE("test_position: the decision and status rules of one drafted position", "[acceptance][format]") {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  int draws = 0;
  const auto u = [&draws](double value) {
    return [&draws, value] {
      ++draws;
      return value;
    };
  };
  using specdec::position_outcome;
  for (const double bad : {nan, inf, -0.25}) {
    CHECK(specdec::test_position(specdec::strict, bad, 0.5, u(0.0)) == position_outcome::unusable);
    CHECK(specdec::test_position(specdec::strict, 0.5, bad, u(0.0)) == position_outcome::unusable);
  }
  CHECK(specdec::test_position(specdec::strict, 0.5, 0.0, u(0.0)) == position_outcome::draft_prob_zero);
  CHECK(draws == 0);  // no uniform is drawn for an unusable pair or q(x) = 0
  CHECK(specdec::test_position(specdec::strict, 0.3, 0.6, u(0.49)) == position_outcome::accepted);  // u q < p
  CHECK(specdec::test_position(specdec::strict, 0.3, 0.6, u(0.5)) == position_outcome::rejected);
  CHECK(specdec::test_position(specdec::strict, 0.0, 0.6, u(0.0)) == position_outcome::rejected);
  CHECK(specdec::test_position(specdec::lenient_rule{0.5}, 0.3, 0.6, u(0.99)) == position_outcome::accepted);
  CHECK(draws == 4);
}
