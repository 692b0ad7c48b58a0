// verify_from_logits with a draft_side (acceptance/draft_side.hpp): the draft's rows handed over as the
// warped q rows, and q(x) of every draft given, give the tokens, counts and flags of the default (draft
// logits warped by the verifier) for every chain rule, on seq and on simd; rows that are not needed are
// not read; bad values are flagged, never turned into tokens; bad shapes throw.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/batch_builder.hpp"
#include "support/host_policies.hpp"

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
using row = std::vector<float>;

//! A batch of random logit rows with the draft tokens sampled from the warped draft rows, the same
//! rows warped (the q the drafter kept), and q(x) of each draft.
struct logit_case {
  std::vector<specdec::warp_params> target_params, draft_params;
  owned_batch<float> logits, q_rows;  // the same target logits; draft rows as logits / as q
  std::vector<float> q_at_drafts;
};

template <class Policy>
logit_case make_case(const Policy& policy, std::size_t V, std::size_t B, std::uint64_t seed) {
  philox_stream s(stream_address{seed, 0, 0, 0, purpose::user});
  logit_case c;
  c.target_params.resize(B);
  c.draft_params.resize(B);
  for (std::size_t b = 0; b < B; ++b) {  // greedy targets, top-k, top-p and min-p on either side
    c.target_params[b] = {b % 7 == 0 ? 0.0 : 0.4 + 1.2 * s.uniform(), static_cast<int>(b % 4) * 6,
                          b % 3 == 0 ? 1.0 : 0.6 + 0.4 * s.uniform(), b % 5 == 0 ? 0.05 : 0.0};
    c.draft_params[b] = {0.5 + s.uniform(), static_cast<int>(b % 3) * 5, b % 2 == 0 ? 1.0 : 0.85, b % 4 == 1 ? 0.1 : 0.0};
  }
  std::vector<request_data<float>> as_logits(B), as_q(B);
  const auto random_logits = [&] {
    row l(V);
    for (float& x : l) x = static_cast<float>(4.0 * (s.uniform() - 0.5));
    return l;
  };
  for (std::size_t b = 0; b < B; ++b) {
    as_logits[b].stream = as_q[b].stream = request_stream{seed, static_cast<std::uint32_t>(b), 3};
    for (std::size_t i = 0; i < b % 6; ++i) {
      const row ql = random_logits();
      row q(V);
      REQUIRE(specdec::warp_logits(policy, std::span<const float>(ql), std::span<float>(q), c.draft_params[b]) ==
              specdec::row_status::ok);
      const token_id x = specdec::sample_categorical(policy, std::span<const float>(q),
                                                     as_q[b].stream.open(static_cast<std::uint32_t>(i), purpose::draft).uniform())
                             .token;
      REQUIRE(x >= 0);
      c.q_at_drafts.push_back(q[static_cast<std::size_t>(x)]);
      const row pl = random_logits();
      for (auto* r : {&as_logits[b], &as_q[b]}) {
        r->drafts.push_back(x);
        r->target_rows.push_back(pl);
      }
      as_logits[b].draft_rows.push_back(ql);
      as_q[b].draft_rows.push_back(std::move(q));
    }
    const row pl = random_logits();
    as_logits[b].target_rows.push_back(pl);
    as_q[b].target_rows.push_back(pl);
  }
  c.logits = build_batch(as_logits, V, true);
  c.q_rows = build_batch(as_q, V, true);
  return c;
}

template <class Policy, class Rule>
owned_outputs run(const Policy& policy, const Rule& rule, const owned_batch<float>& batch, const logit_case& c,
                  const specdec::draft_side<float>& draft) {
  owned_outputs o(batch);
  specdec::verify_from_logits(policy, rule, batch.view(), std::span<const specdec::warp_params>(c.target_params), draft,
                              batch.stream_span(), o.view());
  return o;
}

template <class Policy>
void check_every_draft_side(const Policy& policy) {
  for (const std::size_t V : {std::size_t{9}, std::size_t{300}}) {
    const logit_case c = make_case(policy, V, 48, 0xD5 + V);
    const auto dparams = std::span<const specdec::warp_params>(c.draft_params);
    const auto qx = std::span<const float>(c.q_at_drafts);
    const auto compare = [&](const auto& rule, const char* name) {
      CAPTURE(V, name);
      owned_outputs reference(c.logits);  // the draft's logits warped by the verifier
      specdec::verify_from_logits(policy, rule, c.logits.view(), std::span<const specdec::warp_params>(c.target_params), dparams,
                                  c.logits.stream_span(), reference.view());
      const owned_outputs variants[] = {
          run(policy, rule, c.q_rows, c, {.rows = specdec::draft_rows_kind::probabilities}),
          run(policy, rule, c.q_rows, c, {.rows = specdec::draft_rows_kind::probabilities, .q_at_drafts = qx}),
          run(policy, rule, c.logits, c, {.params = dparams, .q_at_drafts = qx}),
      };
      std::size_t rejected = 0;
      for (const owned_outputs& o : variants)
        for (std::size_t b = 0; b < c.logits.batch_size(); ++b) {
          CAPTURE(b);
          CHECK(o.row(b) == reference.row(b));
          CHECK(o.num_accepted[b] == reference.num_accepted[b]);
          CHECK(o.status[b] == reference.status[b]);
          CHECK(specdec::is_valid(o.status[b]));
          rejected += reference.num_accepted[b] < c.logits.num_drafts[b] ? 1 : 0;
        }
      CHECK(rejected > 0);  // the residual path ran
    };
    compare(specdec::strict, "strict");
    compare(specdec::lenient_rule{0.6}, "lenient");
    compare(specdec::block, "block");
    compare(specdec::sample_and_match, "sample_and_match");
    compare(specdec::greedy, "greedy");
    compare(specdec::typical_rule{}, "typical");
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("verify_from_logits: every draft side gives the default's tokens", "[acceptance][logits][draft_side]",
                        specdec_test::host_policies) {
  check_every_draft_side(TestType{});
}

TEST_CASE("with q(x) given, an accepted draft's row is not read; a rejected one's is", "[acceptance][logits][draft_side]") {
  // V = 4, one request of two drafts. The draft rows are NaN: with q(x) given and p = q on the drafts,
  // both drafts are accepted (u < p / q = 1) and the bonus comes from p; no draft row was read. With
  // q(x_1) = 1 > p(x_1), a rejection can happen, the residual needs row 1, and it is unusable:
  // invalid_row with the accepted prefix kept, no token out of range.
  constexpr std::size_t V = 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  request_data<float> r;
  r.stream = request_stream{7, 0, 0};
  r.drafts = {1, 2};
  r.draft_rows = {row(V, nan), row(V, nan)};
  r.target_rows = {{0.f, 1.f, 0.5f, 0.f}, {0.f, 0.2f, 1.f, 0.3f}, {1.f, 0.f, 0.f, 0.f}};
  const auto batch = build_batch(std::vector<request_data<float>>{r}, V, true);
  const std::vector<specdec::warp_params> params(1);
  std::vector<float> p_at(2);
  for (std::size_t i = 0; i < 2; ++i) {  // the target's warped p(x_i)
    row p(V);
    REQUIRE(specdec::warp_logits(std::span<const float>(batch.view().target_row(0, i)), std::span<float>(p), params[0]) ==
            specdec::row_status::ok);
    p_at[i] = p[static_cast<std::size_t>(r.drafts[i])];
  }
  owned_outputs o(batch);
  specdec::verify_from_logits(specdec::exec::seq, specdec::strict, batch.view(), std::span<const specdec::warp_params>(params),
                              specdec::draft_side<float>{.q_at_drafts = p_at}, batch.stream_span(), o.view());
  CHECK(o.status[0] == verify_status::ok);
  CHECK(o.num_accepted[0] == 2);
  CHECK(o.row(0)[0] == 1);
  CHECK(o.row(0)[1] == 2);
  CHECK((o.row(0)[2] >= 0 && o.row(0)[2] < static_cast<token_id>(V)));

  // q(x) = 1 where p(x) is small: over many streams some request rejects and must read its NaN row.
  std::size_t invalid = 0;
  for (std::uint32_t id = 0; id < 64; ++id) {
    request_data<float> rr = r;
    rr.stream = request_stream{7, id, 0};
    const auto bb = build_batch(std::vector<request_data<float>>{rr}, V, true);
    const std::vector<float> ones{1.f, 1.f};
    owned_outputs oo(bb);
    specdec::verify_from_logits(specdec::exec::seq, specdec::strict, bb.view(), std::span<const specdec::warp_params>(params),
                                specdec::draft_side<float>{.q_at_drafts = ones}, bb.stream_span(), oo.view());
    for (const token_id t : oo.row(0)) CHECK(t < static_cast<token_id>(V));
    if (oo.status[0] != verify_status::ok) {
      CHECK(specdec::has_flag(oo.status[0], verify_status::invalid_row));
      ++invalid;
    }
  }
  CHECK(invalid > 0);
}

TEST_CASE("verify_from_logits: bad q(x) values are flagged, bad shapes throw", "[acceptance][logits][draft_side]") {
  const logit_case c = make_case(specdec::exec::seq, 20, 12, 0xBAD);
  const auto dparams = std::span<const specdec::warp_params>(c.draft_params);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -0.5f, std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    std::vector<float> qx(c.q_at_drafts.size(), bad);
    const owned_outputs o = run(specdec::exec::seq, specdec::strict, c.logits, c, {.params = dparams, .q_at_drafts = qx});
    for (std::size_t b = 0; b < c.logits.batch_size(); ++b) {
      CAPTURE(b);
      for (const token_id t : o.row(b)) CHECK(t < 20);
      if (c.logits.num_drafts[b] > 0) {
        CHECK(specdec::has_flag(o.status[b], verify_status::invalid_row));
        CHECK(o.num_accepted[b] == 0);
      }
    }
  }
  const std::vector<float> short_qx(c.q_at_drafts.size() - 1, 0.5f);
  CHECK_THROWS_AS(run(specdec::exec::seq, specdec::strict, c.logits, c, {.params = dparams, .q_at_drafts = short_qx}),
                  specdec::error);
  const std::vector<specdec::warp_params> one_param(1);
  CHECK_THROWS_AS(run(specdec::exec::seq, specdec::strict, c.logits, c, {.params = one_param}), specdec::error);
}

namespace {

//! One request, one draft: block verification reads the target row twice (its forward pass, then
//! its scan), the second time from the verifier's scratch. A second call on the same buffers, whose
//! target row now gives the draft no probability, must reject it: nothing of the first call's row
//! may be reused.
template <class Policy>
void check_rewritten_logits(const Policy& policy) {
  constexpr std::size_t V = 300;
  constexpr token_id x = 5;
  philox_stream s(stream_address{0x12E, 0, 0, 0, purpose::user});
  row draft(V);
  for (float& l : draft) l = static_cast<float>(4.0 * (s.uniform() - 0.5));
  draft[x] = 3.0f;  // among the largest: a top-k 50 keeps it
  request_data<float> r;
  r.stream = request_stream{0x12E, 0, 3};
  r.drafts = {x};
  r.draft_rows = {draft};
  r.target_rows = {draft, draft};
  owned_batch<float> batch = build_batch(std::vector<request_data<float>>{r}, V, true);
  const float* const rows_before = batch.target_rows.data();
  for (const specdec::warp_params w :
       {specdec::warp_params{.temperature = 1.0}, specdec::warp_params{.temperature = 1.0, .top_k = 50}}) {
    CAPTURE(w.top_k);
    const std::vector<specdec::warp_params> params{w};
    std::copy(draft.begin(), draft.end(), batch.target_rows.begin());
    owned_outputs first(batch);
    specdec::verify_from_logits(policy, specdec::block, batch.view(), std::span<const specdec::warp_params>(params),
                                std::span<const specdec::warp_params>(params), batch.stream_span(), first.view());
    CHECK(first.num_accepted[0] == 1);                               // p = q: block accepts
    batch.target_rows[x] = -std::numeric_limits<float>::infinity();  // rewritten in place: p(x) = 0
    REQUIRE(batch.target_rows.data() == rows_before);
    owned_outputs second(batch);
    specdec::verify_from_logits(policy, specdec::block, batch.view(), std::span<const specdec::warp_params>(params),
                                std::span<const specdec::warp_params>(params), batch.stream_span(), second.view());
    CHECK(second.num_accepted[0] == 0);
    CHECK(second.tokens[0] != x);
    CHECK(specdec::is_valid(second.status[0]));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("verify_from_logits reads logits rewritten in place between calls afresh (block)", "[acceptance][logits]",
                        specdec_test::host_policies) {
  check_rewritten_logits(TestType{});
}
