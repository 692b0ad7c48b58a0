// Bad input never produces a bad token (docs/design.md, 'Statuses and errors'): NaN, inf, negative and unnormalised rows,
// rows without mass, out-of-range draft ids, q(x) = 0, shape mismatches, bad parameters, and a fuzz loop.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <type_traits>
#include <limits>
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

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();
constexpr std::size_t V = 8;

template <class Rule, class T>
owned_outputs run(const Rule& rule, const owned_batch<T>& b, const specdec::verify_options& options = {}) {
  owned_outputs out(b);
  specdec::verify(specdec::exec::seq, rule, b.view(), b.stream_span(), out.view(), options);
  return out;
}

// Every token is -1 or in [0, V); the accepted drafts come first; an invalid request emits nothing else.
template <class T>
void check_safe(const owned_batch<T>& b, const owned_outputs& o) {
  const auto view = b.view();
  for (std::size_t r = 0; r < b.batch_size(); ++r) {
    const auto out = o.row(r);
    const auto k = o.num_accepted[r];
    REQUIRE(k >= 0);
    REQUIRE(k <= b.num_drafts[r]);
    for (std::int32_t i = 0; i < k; ++i)
      REQUIRE(out[static_cast<std::size_t>(i)] == view.draft_token(r, static_cast<std::size_t>(i)));
    const bool valid = specdec::is_valid(o.status[r]);
    if (valid) REQUIRE(specdec::in_vocabulary(out[static_cast<std::size_t>(k)], b.vocab));
    for (std::size_t i = static_cast<std::size_t>(k) + (valid ? 1 : 0); i < out.size(); ++i) REQUIRE(out[i] == specdec::no_token);
    for (const token_id t : out) REQUIRE((t == specdec::no_token || specdec::in_vocabulary(t, b.vocab)));
  }
}

// One request of three drafts {1, 2, 3}: normalised q rows with q(x) = 0.25; target rows under which
// each draft is accepted with certainty (p(x) = 0.5 >= q(x)), and a bonus row. Tests then break one entry.
request_data<double> good_request() {
  request_data<double> r;
  r.drafts = {1, 2, 3};
  r.stream = request_stream{11, 0, 0};
  for (const token_id x : r.drafts) {
    row q(V, 0.75 / (V - 1));
    q[static_cast<std::size_t>(x)] = 0.25;
    row p(V, 0.5 / (V - 1));
    p[static_cast<std::size_t>(x)] = 0.5;
    r.draft_rows.push_back(q);
    r.target_rows.push_back(p);
  }
  r.target_rows.push_back(row(V, 1.0 / V));
  return r;
}

// The flag is set, or the request legitimately stopped (a rejection with a valid correction) before
// position `pos` where the bad datum sits. Rules whose earlier acceptances are random may do the latter.
bool flagged_or_stopped_before(const owned_outputs& o, verify_status flag, std::size_t pos) {
  if (has_flag(o.status[0], flag)) return true;
  return specdec::is_valid(o.status[0]) && o.num_accepted[0] < static_cast<std::int32_t>(pos);
}

// True for the rules under which good_request()'s drafts are accepted with certainty.
template <class Rule>
bool accepts_good_drafts_surely(const Rule& rule) {
  using R = std::remove_cvref_t<Rule>;
  if constexpr (std::is_same_v<R, specdec::strict_rule> || std::is_same_v<R, specdec::greedy_rule>)
    return true;
  else if constexpr (std::is_same_v<R, specdec::lenient_rule>)
    return rule.lenience() <= 1.0;
  else
    return false;
}

owned_batch<double> single(const request_data<double>& r) { return build_batch(std::vector{r}, V, true); }

using specdec_test::for_each_rule;

}  // namespace

TEST_CASE("sanity: the good request is fully accepted by the rejection rules", "[acceptance][bad_input]") {
  const auto o = run(specdec::strict, single(good_request()));
  CHECK(o.num_accepted[0] == 3);
  CHECK(o.status[0] == verify_status::ok);
}

TEST_CASE("NaN, inf and negative entries in rows that are read: invalid_row", "[acceptance][bad_input]") {
  for (const double bad : {k_nan, k_inf, -0.5}) {
    CAPTURE(bad);
    DYNAMIC_SECTION("p(x) or q(x) of a drafted position (rejection rules), bad = " << bad) {
      for (std::size_t pos = 0; pos < 3; ++pos) {
        for (const bool in_q : {false, true}) {
          CAPTURE(pos, in_q);
          auto r = good_request();
          (in_q ? r.draft_rows : r.target_rows)[pos][static_cast<std::size_t>(r.drafts[pos])] = bad;
          const auto b = single(r);
          for (const auto& o : {run(specdec::strict, b), run(specdec::lenient_rule{0.5}, b)}) {
            CHECK(has_flag(o.status[0], verify_status::invalid_row));
            CHECK_FALSE(specdec::is_valid(o.status[0]));
            CHECK(o.num_accepted[0] == static_cast<std::int32_t>(pos));
            check_safe(b, o);
          }
          const auto o = run(specdec::lenient_rule{3.0}, b);  // may reject (validly) before pos
          CHECK(flagged_or_stopped_before(o, verify_status::invalid_row, pos));
          check_safe(b, o);
        }
      }
    }
    DYNAMIC_SECTION("elsewhere in a row that the residual reads, bad = " << bad) {
      for (const bool in_q : {false, true}) {
        CAPTURE(in_q);
        auto r = good_request();
        r.target_rows[1][2] = 0.0;  // forces a rejection at position 1: the residual reads both rows
        (in_q ? r.draft_rows : r.target_rows)[1][6] = bad;
        const auto b = single(r);
        for (const auto& o : {run(specdec::strict, b), run(specdec::lenient_rule{0.5}, b)}) {
          CHECK(has_flag(o.status[0], verify_status::invalid_row));
          CHECK(o.num_accepted[0] == 1);
          CHECK(o.row(0) == std::vector<token_id>{1, -1, -1, -1});
          check_safe(b, o);
        }
      }
    }
    DYNAMIC_SECTION("in the bonus row, bad = " << bad) {
      auto r = good_request();
      r.target_rows[3][5] = bad;
      const auto b = single(r);
      for_each_rule([&](const auto& rule, const char* name) {
        CAPTURE(name);
        const auto o = run(rule, b);
        if (accepts_good_drafts_surely(rule)) {
          CHECK(has_flag(o.status[0], verify_status::invalid_row));
          CHECK(o.row(0) == std::vector<token_id>{1, 2, 3, -1});  // the accepted drafts stay, no bonus
          CHECK(o.num_accepted[0] == 3);
        } else {
          CHECK(flagged_or_stopped_before(o, verify_status::invalid_row, 3));
        }
        check_safe(b, o);
      });
    }
    DYNAMIC_SECTION("greedy and sample-and-match read the whole target row, bad = " << bad) {
      auto r = good_request();
      r.target_rows[0][7] = bad;
      const auto b = single(r);
      for (const auto& o : {run(specdec::greedy, b), run(specdec::sample_and_match, b)}) {
        CHECK(has_flag(o.status[0], verify_status::invalid_row));
        CHECK(o.row(0) == std::vector<token_id>{-1, -1, -1, -1});
        check_safe(b, o);
      }
    }
  }
}

TEST_CASE("rows without mass: invalid_row", "[acceptance][bad_input]") {
  SECTION("a drafted position's target row is all zero") {
    auto r = good_request();
    r.target_rows[0] = row(V, 0.0);
    const auto b = single(r);
    for_each_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      const auto o = run(rule, b);
      CHECK(has_flag(o.status[0], verify_status::invalid_row));
      CHECK(o.row(0) == std::vector<token_id>{-1, -1, -1, -1});
      check_safe(b, o);
    });
  }
  SECTION("the bonus row is all zero") {
    auto r = good_request();
    r.target_rows[3] = row(V, 0.0);
    const auto b = single(r);
    for_each_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      const auto o = run(rule, b);
      if (accepts_good_drafts_surely(rule))
        CHECK(has_flag(o.status[0], verify_status::invalid_row));
      else
        CHECK(flagged_or_stopped_before(o, verify_status::invalid_row, 3));
      check_safe(b, o);
    });
  }
  SECTION("a draft row is all zero (so q(x) = 0 too)") {
    auto r = good_request();
    r.draft_rows[1] = row(V, 0.0);
    const auto b = single(r);
    for (const auto& o : {run(specdec::strict, b), run(specdec::lenient_rule{0.5}, b)}) {
      CHECK(has_flag(o.status[0], verify_status::invalid_row));
      CHECK(o.num_accepted[0] == 1);
      CHECK(o.row(0) == std::vector<token_id>{1, -1, -1, -1});
      check_safe(b, o);
    }
    // Rules that never read q do not care.
    CHECK(run(specdec::greedy, b).status[0] == verify_status::ok);
  }
  SECTION("from logits: a row of -inf, or with NaN") {
    auto logits = good_request();
    for (auto& rw : logits.draft_rows)
      for (auto& x : rw) x = std::log(x);
    for (auto& rw : logits.target_rows)
      for (auto& x : rw) x = std::log(x);
    const std::vector<specdec::warp_params> params(1);
    for (int variant = 0; variant < 4; ++variant) {
      CAPTURE(variant);
      auto r = logits;
      if (variant == 0) r.target_rows[0] = row(V, -k_inf);
      if (variant == 1) r.target_rows[0][5] = k_nan;
      if (variant == 2) r.target_rows[0][5] = k_inf;
      if (variant == 3) r.draft_rows[0][4] = k_nan;
      const auto b = single(r);
      for_each_rule([&](const auto& rule, const char* name) {
        CAPTURE(name);
        owned_outputs o(b);
        specdec::verify_from_logits(specdec::exec::seq, rule, b.view(), std::span<const specdec::warp_params>(params), {},
                                    b.stream_span(), o.view());
        if (variant < 3 || specdec::reads_draft_distribution<std::remove_cvref_t<decltype(rule)>>) {
          CHECK(has_flag(o.status[0], verify_status::invalid_row));
          CHECK(o.row(0) == std::vector<token_id>{-1, -1, -1, -1});
        } else {
          CHECK(specdec::is_valid(o.status[0]));  // greedy and sample-and-match never read q
        }
        check_safe(b, o);
      });
    }
  }
}

TEST_CASE("unnormalised rows with check_normalisation: not_normalised", "[acceptance][bad_input]") {
  specdec::verify_options check;
  check.check_normalisation = true;
  for (const bool in_q : {false, true}) {
    for (const double scale : {2.0, 0.5, 1.002}) {
      CAPTURE(in_q, scale);
      auto r = good_request();
      for (auto& x : (in_q ? r.draft_rows : r.target_rows)[0]) x *= scale;
      const auto b = single(r);
      for_each_rule([&](const auto& rule, const char* name) {
        CAPTURE(name);
        const bool reads_q = specdec::reads_draft_distribution<std::remove_cvref_t<decltype(rule)>>;
        const auto o = run(rule, b, check);
        if (in_q && !reads_q) {
          CHECK(specdec::is_valid(o.status[0]));
        } else {
          CHECK(has_flag(o.status[0], verify_status::not_normalised));
          CHECK_FALSE(specdec::is_valid(o.status[0]));
          CHECK(o.row(0) == std::vector<token_id>{-1, -1, -1, -1});
        }
        check_safe(b, o);
        // Unchecked, the same rows are used as weights.
        CHECK(specdec::is_valid(run(rule, b).status[0]));
      });
    }
  }
  // Within the tolerance: fine.
  auto r = good_request();
  for (auto& x : r.target_rows[0]) x *= 1.0005;
  CHECK(run(specdec::strict, single(r), check).status[0] == verify_status::ok);
  check.normalisation_tolerance = 1e-4;
  CHECK(has_flag(run(specdec::strict, single(r), check).status[0], verify_status::not_normalised));
}

TEST_CASE("draft ids out of range: bad_draft_token", "[acceptance][bad_input]") {
  for (const token_id bad : {token_id{-1}, static_cast<token_id>(V), token_id{1000}, std::numeric_limits<token_id>::min(),
                             std::numeric_limits<token_id>::max()}) {
    for (std::size_t pos = 0; pos < 3; ++pos) {
      CAPTURE(bad, pos);
      auto r = good_request();
      r.drafts[pos] = bad;
      const auto b = single(r);
      for_each_rule([&](const auto& rule, const char* name) {
        CAPTURE(name);
        const auto o = run(rule, b);
        // Ids are checked before anything else: the request is refused whole.
        CHECK(has_flag(o.status[0], verify_status::bad_draft_token));
        CHECK_FALSE(specdec::is_valid(o.status[0]));
        CHECK(o.num_accepted[0] == 0);
        for (const token_id t : o.tokens) CHECK(t == specdec::no_token);
        check_safe(b, o);
      });
    }
  }
}

TEST_CASE("q(x) = 0: draft_prob_zero, rejected, a valid correction", "[acceptance][bad_input]") {
  for (std::uint32_t seed = 0; seed < 50; ++seed) {
    auto r = good_request();
    r.stream.seed = seed;
    r.draft_rows[1][2] = 0.0;  // the draft at position 1 is x = 2
    const auto b = single(r);
    for (const auto& o : {run(specdec::strict, b), run(specdec::lenient_rule{0.5}, b)}) {
      CHECK(has_flag(o.status[0], verify_status::draft_prob_zero));
      CHECK(specdec::is_valid(o.status[0]));
      CHECK(o.num_accepted[0] == 1);
      const auto e = o.emitted(0);
      REQUIRE(e.size() == 2);
      // The correction comes from norm(max(0, p - q)): a token where p > q.
      CHECK(r.target_rows[1][static_cast<std::size_t>(e[1])] > r.draft_rows[1][static_cast<std::size_t>(e[1])]);
      check_safe(b, o);
    }
  }
}

TEST_CASE("shape mismatches and missing streams throw specdec::error", "[acceptance][bad_input]") {
  std::vector<request_data<double>> reqs{good_request(), good_request()};
  reqs[1].stream.request = 1;
  const auto good = build_batch(reqs, V, true);
  owned_outputs out(good);
  const auto verify = [&](const specdec::chain_batch<double>& batch, std::span<const request_stream> streams,
                          const specdec::chain_outputs& o) {
    specdec::verify(specdec::exec::seq, specdec::strict, batch, streams, o);
  };
  REQUIRE_NOTHROW(verify(good.view(), good.stream_span(), out.view()));
  SECTION("V mismatch: row buffers of the wrong size") {
    auto batch = good.view();
    batch.vocab_size = V + 1;
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
    batch.vocab_size = V - 1;
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
    batch = good.view();
    batch.target_rows = batch.target_rows.first(batch.target_rows.size() - 1);
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
    batch = good.view();
    batch.draft_rows = batch.draft_rows.first(batch.draft_rows.size() - V);
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
    batch = good.view();
    batch.draft_rows = {};  // the strict rule reads q
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
    batch = good.view();
    batch.draft_tokens = batch.draft_tokens.first(2);
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
    batch = good.view();
    batch.vocab_size = 0;
    CHECK_THROWS_AS(verify(batch, good.stream_span(), out.view()), specdec::error);
  }
  SECTION("streams: none, or the wrong number") {
    CHECK_THROWS_AS(verify(good.view(), {}, out.view()), specdec::error);
    CHECK_THROWS_AS(verify(good.view(), good.stream_span().first(1), out.view()), specdec::error);
    std::vector<request_stream> three(3);
    CHECK_THROWS_AS(verify(good.view(), std::span<const request_stream>(three), out.view()), specdec::error);
  }
  SECTION("outputs of the wrong size") {
    owned_outputs small(2, 2), wide(2, 4), few(1, 3);
    CHECK_THROWS_AS(verify(good.view(), good.stream_span(), small.view()), specdec::error);
    CHECK_THROWS_AS(verify(good.view(), good.stream_span(), wide.view()), specdec::error);
    CHECK_THROWS_AS(verify(good.view(), good.stream_span(), few.view()), specdec::error);
    auto o = out.view();
    o.status = o.status.first(1);
    CHECK_THROWS_AS(verify(good.view(), good.stream_span(), o), specdec::error);
  }
  SECTION("greedy without q rows is fine, with q rows of the wrong size is not") {
    auto batch = good.view();
    batch.draft_rows = {};
    CHECK_NOTHROW(specdec::verify(specdec::exec::seq, specdec::greedy, batch, good.stream_span(), out.view()));
    CHECK_NOTHROW(specdec::verify(specdec::exec::seq, specdec::sample_and_match, batch, good.stream_span(), out.view()));
    batch.draft_rows = good.view().draft_rows.first(V);
    CHECK_THROWS_AS(specdec::verify(specdec::exec::seq, specdec::greedy, batch, good.stream_span(), out.view()), specdec::error);
  }
  SECTION("layouts: negative n_b, n_b wider than the padding") {
    const std::vector<std::int32_t> negative{2, -1}, wide{2, 5};
    CHECK_THROWS_AS(specdec::ragged_layout::packed(std::span<const std::int32_t>(negative)), specdec::error);
    CHECK_THROWS_AS(specdec::ragged_layout::padded(std::span<const std::int32_t>(negative), 4), specdec::error);
    CHECK_THROWS_AS(specdec::ragged_layout::padded(std::span<const std::int32_t>(wide), 4), specdec::error);
  }
  SECTION("verify_chain checks V too") {
    const auto& r = reqs[0];
    row q, p;
    for (const auto& x : r.draft_rows) q.insert(q.end(), x.begin(), x.end());
    for (const auto& x : r.target_rows) p.insert(p.end(), x.begin(), x.end());
    const auto call = [&](std::size_t vocab) {
      return specdec::verify_chain(specdec::exec::seq, specdec::strict, std::span<const token_id>(r.drafts),
                                   std::span<const double>(q), std::span<const double>(p), vocab, r.stream);
    };
    CHECK(call(V).num_accepted == 3);
    CHECK_THROWS_AS(call(V + 1), specdec::error);
    CHECK_THROWS_AS(call(V / 2), specdec::error);
  }
}

TEST_CASE("sizes whose products wrap around throw specdec::error instead of reaching outside the buffers",
          "[acceptance][bad_input]") {
  // Found by the fuzz harness tests/fuzz/verify.cpp. The row counts of a padded layout (B * (width + 1))
  // and the buffer sizes (rows * V) were computed in std::size_t without a check, so a huge width or V
  // wrapped them around to the sizes of small (or empty) buffers and verification indexed far outside them.
  constexpr std::size_t top = std::size_t{1} << 63, max = std::numeric_limits<std::size_t>::max();
  SECTION("a padded width whose row count overflows") {
    const std::vector<std::int32_t> two{0, 0}, three{0, 1, 0};
    CHECK_THROWS_AS(specdec::ragged_layout::padded(std::span<const std::int32_t>(two), top), specdec::error);
    CHECK_THROWS_AS(specdec::ragged_layout::padded(std::span<const std::int32_t>(two), max), specdec::error);
    CHECK_THROWS_AS(specdec::ragged_layout::padded(std::span<const std::int32_t>(three), max / 3 + 1), specdec::error);
    CHECK_THROWS_AS(specdec::ragged_layout::padded(std::span<const std::int32_t>(three), max / 3), specdec::error);
    const auto widest = specdec::ragged_layout::padded(std::span<const std::int32_t>(three), max / 3 - 1);
    CHECK(widest.num_target_rows() == max / 3 * 3);          // B * (width + 1) still fits
    CHECK_NOTHROW(specdec::ragged_layout::padded({}, max));  // no request: no row
  }
  SECTION("a vocab_size whose products with the row counts wrap around to the buffers' sizes") {
    // One request with one draft: 2 target rows, 1 draft row. Greedy reads no q, so empty q rows pass.
    const std::vector<std::int32_t> one{1};
    const std::vector<token_id> drafts{0};
    std::vector<token_id> tokens(2);
    std::vector<std::int32_t> accepted(1);
    std::vector<verify_status> status(1);
    const std::vector<request_stream> streams{{1, 0, 0}};
    const specdec::chain_outputs out{tokens, accepted, status};
    for (const std::size_t V : {top, top >> 1, max}) {
      CAPTURE(V);
      const specdec::chain_batch<double> huge{
          specdec::ragged_layout::packed(std::span<const std::int32_t>(one)), V, drafts, {}, {}};
      for_each_rule([&](const auto& rule, const char* name) {
        CAPTURE(name);
        CHECK_THROWS_AS(specdec::verify(specdec::exec::seq, rule, huge, streams, out), specdec::error);
      });
    }
  }
}

TEST_CASE("an empty batch (B = 0) is a no-op", "[acceptance][bad_input]") {
  const std::vector<request_data<double>> none;
  for (const bool packed : {true, false}) {
    const auto b = build_batch(none, V, packed, 3);
    owned_outputs o(b);
    REQUIRE(o.tokens.empty());
    for_each_rule([&](const auto& rule, const char*) {
      CHECK_NOTHROW(specdec::verify(specdec::exec::seq, rule, b.view(), b.stream_span(), o.view()));
      CHECK_NOTHROW(specdec::verify_from_logits(specdec::exec::seq, rule, b.view(), {}, {}, b.stream_span(), o.view()));
    });
  }
}

TEST_CASE("gamma = 0 everywhere: bonus only", "[acceptance][bad_input]") {
  std::vector<request_data<double>> reqs(5);
  for (std::uint32_t i = 0; i < 5; ++i) {
    reqs[i].stream = {3, i, 0};
    reqs[i].target_rows.push_back(row(V, 1.0 / V));
  }
  for (const bool packed : {true, false}) {
    const auto b = build_batch(reqs, V, packed, 0);
    REQUIRE(b.draft_rows.empty());
    for_each_rule([&](const auto& rule, const char* name) {
      CAPTURE(name, packed);
      const auto o = run(rule, b);
      for (std::size_t r = 0; r < 5; ++r) {
        CHECK(o.num_accepted[r] == 0);
        CHECK(o.status[r] == verify_status::ok);
        CHECK(specdec::in_vocabulary(o.row(r).at(0), V));
      }
    });
  }
}

TEST_CASE("bad rule and warp parameters throw specdec::error", "[acceptance][bad_input]") {
  for (const double l : {0.0, -1.0, k_nan, k_inf, -k_inf}) {
    CAPTURE(l);
    CHECK_THROWS_AS(specdec::lenient_rule{l}, specdec::error);
  }
  CHECK_NOTHROW(specdec::lenient_rule{1e-300});
  const auto b = single(good_request());
  owned_outputs o(b);
  const auto call = [&](const std::vector<specdec::warp_params>& tp, const std::vector<specdec::warp_params>& dp) {
    specdec::verify_from_logits(specdec::exec::seq, specdec::strict, b.view(), std::span<const specdec::warp_params>(tp),
                                std::span<const specdec::warp_params>(dp), b.stream_span(), o.view());
  };
  CHECK_NOTHROW(call({specdec::warp_params{}}, {}));
  for (const double top_p : {0.0, -0.1, 1.5, k_nan}) {
    CAPTURE(top_p);
    CHECK_THROWS_AS(call({specdec::warp_params{1.0, 0, top_p, 0.0}}, {}), specdec::error);
    CHECK_THROWS_AS(call({specdec::warp_params{}}, {specdec::warp_params{1.0, 0, top_p, 0.0}}), specdec::error);
  }
  CHECK_THROWS_AS(call({specdec::warp_params{-1.0, 0, 1.0, 0.0}}, {}), specdec::error);
  CHECK_THROWS_AS(call({specdec::warp_params{1.0, -3, 1.0, 0.0}}, {}), specdec::error);
  CHECK_THROWS_AS(call({}, {}), specdec::error);  // one params per request
  CHECK_THROWS_AS(call({specdec::warp_params{}, specdec::warp_params{}}, {}), specdec::error);
  CHECK_THROWS_AS(call({specdec::warp_params{}}, {specdec::warp_params{}, specdec::warp_params{}}), specdec::error);
}

TEST_CASE("fuzz: garbage batches never throw and never emit a token outside [0, V)", "[acceptance][bad_input][fuzz]") {
  philox_stream s(stream_address{0xF022, 0, 0, 0, purpose::user});
  const auto garbage = [&](double clean) -> double {
    const double u = s.uniform();
    if (u < clean) return s.exponential();
    const double pick = s.uniform();
    if (pick < 0.2) return k_nan;
    if (pick < 0.3) return k_inf;
    if (pick < 0.4) return -k_inf;
    if (pick < 0.6) return -s.exponential();
    if (pick < 0.7) return 1e308;
    if (pick < 0.8) return 0x1p-1070;  // subnormal
    if (pick < 0.9) return -0.0;
    return 0.0;
  };
  std::size_t invalid = 0, valid = 0, checks_thrown = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const std::size_t vocab = 1 + static_cast<std::size_t>(s.uniform() * 40);
    const std::size_t B = static_cast<std::size_t>(s.uniform() * 6);
    const double clean = s.uniform() < 0.3 ? 1.0 : 0.9 + 0.1 * s.uniform();  // some batches without garbage
    std::vector<request_data<double>> reqs(B);
    std::size_t width = 0;
    for (std::size_t b = 0; b < B; ++b) {
      auto& r = reqs[b];
      r.stream = request_stream{static_cast<std::uint64_t>(iter), static_cast<std::uint32_t>(b), 0};
      const std::size_t n = static_cast<std::size_t>(s.uniform() * 5);
      width = std::max(width, n);
      for (std::size_t i = 0; i < n; ++i) {
        const double pick = s.uniform();
        token_id x = static_cast<token_id>(s.uniform() * static_cast<double>(vocab));
        if (pick < 0.05)
          x = -1;
        else if (pick < 0.1)
          x = static_cast<token_id>(vocab);
        else if (pick < 0.12)
          x = static_cast<token_id>(s.next_u32());
        r.drafts.push_back(x);
        row q(vocab), p(vocab);
        for (auto& v : q) v = garbage(clean);
        for (auto& v : p) v = garbage(clean);
        if (s.uniform() < 0.3 && specdec::in_vocabulary(x, vocab))
          p[static_cast<std::size_t>(x)] = q[static_cast<std::size_t>(x)];
        r.draft_rows.push_back(q);
        r.target_rows.push_back(p);
      }
      row bonus(vocab);
      for (auto& v : bonus) v = garbage(clean);
      r.target_rows.push_back(bonus);
    }
    const bool packed = s.uniform() < 0.5;
    const auto b = build_batch(reqs, vocab, packed, width + (packed ? 0 : 1));
    specdec::verify_options options;
    options.check_normalisation = s.uniform() < 0.3;
    CAPTURE(iter, vocab, B, packed, options.check_normalisation);
    for_each_rule([&](const auto& rule, const char* name) {
      CAPTURE(name);
      owned_outputs o(b);
      REQUIRE_NOTHROW(specdec::verify(specdec::exec::seq, rule, b.view(), b.stream_span(), o.view(), options));
      check_safe(b, o);
      for (std::size_t r = 0; r < B; ++r) (specdec::is_valid(o.status[r]) ? valid : invalid) += 1;
      // The same garbage read as logits.
      const std::vector<specdec::warp_params> params(
          B, specdec::warp_params{0.5 + s.uniform(), static_cast<int>(s.uniform() * 4), 0.5 + 0.5 * s.uniform(), 0.0});
      owned_outputs lo(b);
      try {
        specdec::verify_from_logits(specdec::exec::seq, rule, b.view(), std::span<const specdec::warp_params>(params), {},
                                    b.stream_span(), lo.view(), options);
      } catch (const specdec::error&) {
        ++checks_thrown;
      }
      check_safe(b, lo);
    });
    // Float rows.
    std::vector<request_data<float>> freqs;
    for (const auto& r : reqs) {
      request_data<float> f;
      f.drafts = r.drafts;
      f.stream = r.stream;
      for (const auto& x : r.draft_rows) f.draft_rows.emplace_back(x.begin(), x.end());
      for (const auto& x : r.target_rows) f.target_rows.emplace_back(x.begin(), x.end());
      freqs.push_back(f);
    }
    const auto fb = build_batch(freqs, vocab, packed, width + (packed ? 0 : 1));
    owned_outputs fo(fb);
    REQUIRE_NOTHROW(specdec::verify(specdec::exec::seq, specdec::strict, fb.view(), fb.stream_span(), fo.view(), options));
    check_safe(fb, fo);
  }
  CHECK(checks_thrown == 0);  // data problems are flags, never exceptions
  std::cout << "[bad_input] fuzz: " << valid << " valid and " << invalid << " invalid request verifications\n";
  CHECK(valid > 1000);  // the loop exercised both outcomes
  CHECK(invalid > 1000);
}
