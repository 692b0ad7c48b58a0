// The step decoder (decode/batch_decoder.hpp) on SequenceModels: decode()'s tokens for the same
// options, batch invariance (alone, in a batch of 64 of other parameters, joining and leaving
// mid-run), KV consistency after every step, the exact target distribution through the new path
// (chi-squared, with a negative control that must fail), greedy = greedy target decoding, and bad input.
// SPECDEC_TEST_STATISTICAL_EXEMPT: one chi-squared case among the decoder's core tests, which must keep running under the sanitizers
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/length/sv_batch.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/models/kv_cache.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_counts.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/kv_checks.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;
constexpr std::size_t V = 6;

using specdec_test::wave_logits;

using specdec_test::table_logits;

// A model whose rows are NaN after token `poison` (to check per-request error handling).
auto poisoned_logits(token_id poison) {
  return [poison, base = wave_logits(0.0)](std::span<const token_id> ctx, std::span<float> out) {
    base(ctx, out);
    if (!ctx.empty() && ctx.back() == poison) out[0] = std::nanf("");
  };
}

specdec::request_options options_for(std::uint32_t id, std::size_t gamma, double temperature, std::size_t max_new) {
  specdec::request_options o;
  o.prompt = {static_cast<token_id>(id % V), static_cast<token_id>((id * 7 + 1) % V)};
  o.seed = 1000 + id;
  o.request_id = id;
  o.gamma = gamma;
  o.max_new_tokens = max_new;
  o.target_params.temperature = temperature;
  o.draft_params.temperature = temperature == 0.0 ? 0.0 : 1.1;
  return o;
}

// decode()'s options for the same request.
specdec::decode_options decode_options_for(const specdec::request_options& r) {
  specdec::decode_options o;
  o.max_new_tokens = r.max_new_tokens;
  o.target_params = r.target_params;
  o.seed = r.seed;
  o.request_id = r.request_id;
  o.stop_tokens = r.stop_tokens;
  return o;
}

// A verification latency that grows with the drafted tokens verified (for SV's batch stage).
struct scheduler_latency {
  double operator()(int k) const { return 1.0 + 0.01 * k; }
};

// Recomputing adapters over a target and a draft model, and a decoder with `rule` on them.
template <class M, class N, class Rule>
struct recomputing_rig {
  specdec::recomputing_sequence_model<M> t;
  specdec::recomputing_sequence_model<N> q;
  specdec::batch_decoder<specdec::exec::sequenced_policy, specdec::recomputing_sequence_model<M>,
                         specdec::recomputing_sequence_model<N>>
      decoder;
  recomputing_rig(const M& target, const N& draft, Rule rule) : t(target), q(draft), decoder(specdec::exec::seq, t, q, rule) {}
};

// Runs the decoder until every request finished; returns each handle's tokens.
template <class Decoder>
std::map<specdec::request_handle, std::vector<token_id>> run_all(Decoder& d) {
  std::map<specdec::request_handle, std::vector<token_id>> out;
  while (d.active() > 0)
    for (const auto& e : d.step()) out[e.request].insert(out[e.request].end(), e.tokens.begin(), e.tokens.end());
  return out;
}
}  // namespace

TEST_CASE("batch_decoder: chain drafting on the draft model and a chain drafter stage give the same tokens", "[decode][batch]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.7));
  const auto check = [&](const auto& rule, const char* name) {
    recomputing_rig rig(target, draft, rule);
    auto& decoder = rig.decoder;
    std::vector<specdec::request_options> opts;
    std::vector<specdec::request_handle> handles;
    for (std::uint32_t id = 0; id < 12; ++id) {
      opts.push_back(options_for(id, id % 5, id % 4 == 0 ? 0.0 : 0.8 + 0.1 * (id % 3), 10 + 3 * id));
      if (id == 5) opts.back().stop_tokens = {3};
      handles.push_back(decoder.add(opts.back()));
    }
    const auto got = run_all(decoder);
    for (std::size_t i = 0; i < opts.size(); ++i) {
      const auto o = decode_options_for(opts[i]);
      // The same request with a chain drafter as its drafter stage: drafted one call per request on
      // the whole context and verified from probabilities, not batched on the draft model and
      // verified from logits.
      specdec::chain_drafter<decltype(draft)> drafter(draft, opts[i].draft_params);
      const auto ref =
          specdec::decode(specdec::exec::seq, target, drafter, specdec::fixed_length{opts[i].gamma}, rule, opts[i].prompt, o);
      CAPTURE(name, i);
      CHECK(got.at(handles[i]) == ref.tokens);
    }
  };
  SECTION("strict") { check(specdec::strict, "strict"); }
  SECTION("lenient") { check(specdec::lenient_rule{0.6}, "lenient"); }
  SECTION("greedy") { check(specdec::greedy, "greedy"); }
}

namespace {
// A length policy that looks at the counters: longer drafts while everything was accepted.
struct adaptive_length {
  std::size_t next_length(const specdec::decode_stats& s) const {
    return s.iterations == 0 ? 2 : (s.accepted == s.drafted ? 5 : 1);
  }
};
}  // namespace

TEST_CASE("batch_decoder: a LengthPolicy as the length stage gives decode()'s tokens with that policy", "[decode][batch]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.4));
  recomputing_rig rig(target, draft, specdec::strict);
  auto& decoder = rig.decoder;
  std::vector<specdec::request_options> opts;
  std::vector<specdec::request_handle> handles;
  for (std::uint32_t id = 0; id < 6; ++id) {
    opts.push_back(options_for(id, 4, 0.9, 30));
    opts.back().length = specdec::length_stage(adaptive_length{});
    handles.push_back(decoder.add(opts.back()));
  }
  const auto got = run_all(decoder);
  for (std::size_t i = 0; i < opts.size(); ++i) {
    const auto o = decode_options_for(opts[i]);
    specdec::chain_drafter<decltype(draft)> drafter(draft, opts[i].draft_params);
    const auto ref = specdec::decode(specdec::exec::seq, target, drafter, adaptive_length{}, specdec::strict, opts[i].prompt, o);
    CAPTURE(i);
    CHECK(got.at(handles[i]) == ref.tokens);
  }
}

TEST_CASE("batch_decoder: a request's tokens do not depend on its batch", "[decode][batch]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.5));
  const auto probe = options_for(77, 4, 1.0, 60);
  std::vector<token_id> alone;
  {
    recomputing_rig rig(target, draft, specdec::strict);
    auto& decoder = rig.decoder;
    const auto h = decoder.add(probe);
    alone = run_all(decoder).at(h);
  }
  REQUIRE(alone.size() == 60);
  // In a batch of 64 with other seeds, lengths, temperatures and budgets; others join every step
  // and some are cancelled.
  recomputing_rig rig(target, draft, specdec::strict);
  auto& decoder = rig.decoder;
  std::vector<specdec::request_handle> others;
  for (std::uint32_t id = 0; id < 40; ++id) others.push_back(decoder.add(options_for(id, id % 7, 0.5 + 0.05 * id, 5 + id)));
  const auto long_one = decoder.add(options_for(99, 2, 1.0, 500));
  std::map<specdec::request_handle, std::vector<token_id>> out;
  std::uint32_t next_id = 100;
  specdec::request_handle probe_handle = 0;
  for (int step = 0; decoder.active() > 0; ++step) {
    if (step == 3) probe_handle = decoder.add(probe);
    if (step < 24) others.push_back(decoder.add(options_for(next_id++, static_cast<std::size_t>(2 + step % 3), 0.9, 7)));
    if (step == 5) decoder.cancel(long_one);
    for (const auto& e : decoder.step()) out[e.request].insert(out[e.request].end(), e.tokens.begin(), e.tokens.end());
  }
  CHECK(out.at(probe_handle) == alone);
  CHECK(out.at(long_one).size() <= 5 * 3);  // cancelled after 5 rounds of at most 3 tokens
}

TEST_CASE("batch_decoder keeps each model's state equal to a fresh evaluation of the committed tokens", "[decode][batch][kv]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(1.3));  // a poor draft: many rejections
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  std::map<specdec::request_handle, std::vector<token_id>> committed;
  for (std::uint32_t id = 0; id < 16; ++id) {
    const auto o = options_for(id, 1 + id % 6, 1.0, 30);
    const auto h = decoder.add(o);
    committed[h] = o.prompt;
  }
  std::size_t checked = 0;
  while (decoder.active() > 0) {
    for (const auto& e : decoder.step()) {
      auto& c = committed[e.request];
      c.insert(c.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished != specdec::finish_reason::none) continue;
      specdec_test::require_kv_consistent(t, q, e.request, c);
      ++checked;
    }
  }
  CHECK(checked > 50);
  CHECK(t.stats().rolled_back > 0);  // rejections happened and were rolled back
  CHECK(q.stats().rolled_back > 0);
}

TEST_CASE("batch_decoder: greedy SD equals greedy target decoding", "[decode][batch]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.9));
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::greedy);
  std::vector<specdec::request_options> opts;
  std::vector<specdec::request_handle> handles;
  for (std::uint32_t id = 0; id < 8; ++id) {
    opts.push_back(options_for(id, 1 + id % 5, 0.0, 40));
    handles.push_back(decoder.add(opts.back()));
  }
  const auto got = run_all(decoder);
  for (std::size_t i = 0; i < opts.size(); ++i) {
    // Greedy target decoding, written out: the argmax (lowest id on ties) of each next-token row.
    std::vector<token_id> context = opts[i].prompt, expected;
    std::vector<float> row(V);
    while (expected.size() < 40) {
      target.next_logits(std::span<const token_id>(context), std::span<float>(row));
      const auto best = static_cast<token_id>(std::max_element(row.begin(), row.end()) - row.begin());
      expected.push_back(best);
      context.push_back(best);
    }
    CHECK(got.at(handles[i]) == expected);
  }
}

TEST_CASE("batch_decoder preserves the target's sequence distribution (strict), and a lenient run fails the test",
          "[decode][batch][statistical]") {
  constexpr std::size_t vocab = 4;
  constexpr int horizon = 3;
  const auto pair = specdec_test::make_markov_pair(vocab, 0xBA7C4, 0.6);
  const auto target = specdec::make_model(vocab, table_logits(pair.target, vocab));
  const auto draft = specdec::make_model(vocab, table_logits(pair.draft, vocab));
  const auto law = specdec_test::target_sequence_distribution(pair, 1, horizon);
  const auto sample = [&](const auto& rule, std::uint64_t seed, bool sv_stage = false) {
    specdec::kv_cached_model<decltype(target)> t(target);
    specdec::kv_cached_model<decltype(draft)> q(draft);
    specdec::batch_decoder decoder(specdec::exec::seq, t, q, rule);
    if (sv_stage) decoder.set_batch_length_stage(specdec::sv_batch_length<scheduler_latency>{{}, 0.05});
    return specdec_test::chi_squared_gof(
        specdec_test::count_sequences(decoder, vocab, horizon, law.size(), seed, [](specdec::request_options&) {}).counts, law);
  };
  const auto exact = sample(specdec::strict, 20261124);
  INFO("strict: " << exact);
  CHECK(exact.p_value > specdec_test::gof_alpha);
  // SV's batch scheduler picks each round's lengths from past rounds only: still exact.
  const auto scheduled = sample(specdec::strict, 20261125, true);
  INFO("strict, SV batch length stage: " << scheduled);
  CHECK(scheduled.p_value > specdec_test::gof_alpha);
  const auto control = sample(specdec::lenient_rule{0.3}, 20261124);
  INFO("lenient 0.3 (negative control): " << control);
  CHECK(control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("batch_decoder: bad input gets an error or a per-request status", "[decode][batch][bad_input]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.5));
  recomputing_rig rig(target, draft, specdec::strict);
  auto& decoder = rig.decoder;
  auto o = options_for(1, 3, 1.0, 10);
  SECTION("refused at add") {
    auto bad = o;
    bad.prompt.clear();
    CHECK_THROWS_AS(decoder.add(bad), specdec::error);
    bad = o;
    bad.prompt.push_back(static_cast<token_id>(V));
    CHECK_THROWS_AS(decoder.add(bad), specdec::error);
    bad = o;
    bad.stop_tokens = {-1};
    CHECK_THROWS_AS(decoder.add(bad), specdec::error);
    bad = o;
    bad.target_params.top_p = 1.5;
    CHECK_THROWS_AS(decoder.add(bad), specdec::error);
    CHECK(decoder.active() == 0);
    CHECK_THROWS_AS(decoder.cancel(12345), specdec::error);
    CHECK_THROWS_AS(decoder.tokens(12345), specdec::error);
  }
  SECTION("max_new_tokens = 0 finishes at once, the others run on") {
    auto zero = o;
    zero.max_new_tokens = 0;
    const auto hz = decoder.add(zero);
    const auto h = decoder.add(o);
    const auto events = decoder.step();
    REQUIRE(events.size() == 2);
    CHECK(events[0].request == hz);
    CHECK(events[0].tokens.empty());
    CHECK(events[0].finished == specdec::finish_reason::length);
    CHECK(events[1].request == h);
    CHECK(!events[1].tokens.empty());
  }
  SECTION("rollback past the start") { CHECK_THROWS_AS(rig.t.rollback(999, 1), specdec::error); }
  SECTION("the models' vocabularies differ") {
    const auto small = specdec::make_model(V - 1, wave_logits(0.0));
    specdec::recomputing_sequence_model<decltype(small)> s(small);
    CHECK_THROWS_AS(specdec::batch_decoder(specdec::exec::seq, rig.t, s, specdec::strict), specdec::error);
  }
}

namespace {
// Runs 24 requests of 40 tokens to the end on `decoder`: every emitted token must be in the
// vocabulary, and every request that ends with an error must carry `invalid_row` and pass
// `check_error(event)`. Returns {requests ended by an error, requests that reached their length}.
template <class Decoder, class CheckError>
std::pair<std::size_t, std::size_t> run_with_bad_rows(Decoder& decoder, CheckError&& check_error) {
  for (std::uint32_t id = 0; id < 24; ++id) decoder.add(options_for(id, 3, 1.0, 40));
  std::size_t errors = 0, completed = 0;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      for (const token_id x : e.tokens) REQUIRE(specdec::in_vocabulary(x, V));
      if (e.finished == specdec::finish_reason::error) {
        ++errors;
        CHECK(specdec::has_flag(e.status, specdec::verify_status::invalid_row));
        check_error(e);
      }
      completed += e.finished == specdec::finish_reason::length;
    }
  return {errors, completed};
}
}  // namespace

TEST_CASE("batch_decoder: a model's NaN row ends that request alone", "[decode][batch][bad_input]") {
  const auto target = specdec::make_model(V, poisoned_logits(5));
  const auto draft = specdec::make_model(V, wave_logits(0.5));
  recomputing_rig rig(target, draft, specdec::strict);
  const auto [errors, completed] =
      run_with_bad_rows(rig.decoder, [&](const specdec::step_event& e) { CHECK(rig.decoder.tokens(e.request).size() < 40); });
  CHECK(errors > 0);  // some requests met token 5 and its NaN row
  CHECK(errors + completed == 24);
}

TEST_CASE("sv_batch_length: lengths within each request's bound, none when verifying costs too much", "[decode][batch][sv]") {
  std::vector<specdec::decode_stats> stats(4);
  for (std::size_t b = 0; b < stats.size(); ++b)
    for (int r = 0; r < 20; ++r) stats[b].record_round(4, b == 0 ? 4 : (b == 1 ? 0 : static_cast<std::size_t>(r % 3)));
  std::vector<specdec::length_request> requests;
  for (std::size_t b = 0; b < stats.size(); ++b) requests.push_back({&stats[b], 2 + b});
  std::vector<std::size_t> lengths{2, 3, 4, 5};
  specdec::sv_batch_length<scheduler_latency>{{}, 0.01}(requests, lengths);
  for (std::size_t b = 0; b < lengths.size(); ++b) CHECK(lengths[b] <= requests[b].max_length);
  CHECK(lengths[0] == 2);  // always accepted: its whole allowance
  CHECK(lengths[1] == 0);  // never accepted: nothing
  struct costly {
    double operator()(int k) const { return 1.0 + 10.0 * k; }
  };
  std::vector<std::size_t> none{2, 3, 4, 5};
  specdec::sv_batch_length<costly>{{}, 0.0}(requests, none);
  CHECK(none == std::vector<std::size_t>{0, 0, 0, 0});
}

TEST_CASE("batch_decoder on StatefulModels (stateful_sequence_model) gives the same tokens", "[decode][batch]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.6));
  const auto tokens_with = [&](auto& t, auto& q) {
    specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
    std::vector<specdec::request_handle> handles;
    for (std::uint32_t id = 0; id < 5; ++id) handles.push_back(decoder.add(options_for(id, 1 + id, 1.0, 25)));
    const auto got = run_all(decoder);
    std::vector<std::vector<token_id>> out;
    for (const auto h : handles) out.push_back(got.at(h));
    return out;
  };
  specdec::recomputing_sequence_model<decltype(target)> rt(target);
  specdec::recomputing_sequence_model<decltype(draft)> rq(draft);
  auto make_target = [&] { return specdec::make_stateful(target); };
  auto make_draft = [&] { return specdec::make_stateful(draft); };
  specdec::stateful_sequence_model<decltype(make_target)> st(make_target, V);
  specdec::stateful_sequence_model<decltype(make_draft)> sq(make_draft, V);
  CHECK(tokens_with(st, sq) == tokens_with(rt, rq));
  CHECK(st.stats().rolled_back > 0);
}

TEST_CASE("batch_decoder: a draft model's NaN row ends that request alone, after its verified tokens",
          "[decode][batch][bad_input]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, poisoned_logits(2));
  recomputing_rig rig(target, draft, specdec::strict);
  const auto [errors, completed] = run_with_bad_rows(rig.decoder, [](const specdec::step_event& e) {
    CHECK(!e.tokens.empty());  // the round's verified tokens (at least the target's own)
  });
  CHECK(errors > 0);
  CHECK(errors + completed == 24);
}

TEST_CASE("decode()'s two overloads (chain drafting, a Drafter stage) give the same tokens, counters and status",
          "[decode][batch]") {
  const auto target = specdec::make_model(V, wave_logits(0.0));
  const auto draft = specdec::make_model(V, wave_logits(0.7));
  for (std::uint32_t id = 0; id < 8; ++id) {
    const auto opts = options_for(id, id % 6, id % 3 == 0 ? 0.0 : 1.0, 20 + 5 * id);
    auto o = decode_options_for(opts);
    const specdec::cost_model cost{0.1, 1.0, 0.02};
    if (id == 3) o.stop_tokens = {4};
    const auto fast =
        specdec::decode(specdec::exec::seq, target, draft, opts.draft_params, opts.gamma, specdec::strict, opts.prompt, o, cost);
    specdec::chain_drafter<decltype(draft)> drafter(draft, opts.draft_params);
    const auto staged = specdec::decode(specdec::exec::seq, target, drafter, specdec::fixed_length{opts.gamma}, specdec::strict,
                                        opts.prompt, o, cost);
    CAPTURE(id);
    CHECK(fast.tokens == staged.tokens);
    CHECK(fast.status == staged.status);
    const auto& a = fast.stats;
    const auto& b = staged.stats;
    CHECK(a.iterations == b.iterations);
    CHECK(a.target_calls == b.target_calls);
    CHECK(a.target_positions == b.target_positions);
    CHECK(a.draft_calls == b.draft_calls);
    CHECK(a.drafted == b.drafted);
    CHECK(a.accepted == b.accepted);
    CHECK(a.emitted == b.emitted);
    CHECK(a.drafted_at == b.drafted_at);
    CHECK(a.accepted_at == b.accepted_at);
    CHECK(a.simulated_time == Approx(b.simulated_time));
  }
}
