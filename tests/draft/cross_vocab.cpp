// The cross-vocabulary drafters (draft/tli.hpp, draft/slem.hpp) on small tokenizer pairs: SLEM's
// realignment (plain, a re-spelled window, a token across the window's end); TLI's q' (the draft's row
// restricted to the intersection, renormalised, scattered to target ids) and a row without mass on the
// intersection (no drafts that round); greedy TLI and SLEM equal greedy target decoding token for
// token, and with sample-and-match both emit target-only decoding's tokens for the same seed, alone and
// in a mixed batch; bad input (vocabularies that are not what the map says, text a tokenizer cannot
// encode, a byte fallback that can, a broken draft row); a request whose text its draft's tokenizer
// cannot encode ends alone (stage_error), the rest of its batch emits what it emits alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/draft/slem.hpp"
#include "specdec/draft/tli.hpp"
#include "specdec/vocab/vocab_map.hpp"
#include "support/cross_vocab.hpp"

namespace {
using specdec::token_id;
using tokens = std::vector<token_id>;
using Catch::Matchers::Contains;
}  // namespace

TEST_CASE("slem_realign: the drafts after the emitted window, which is never changed", "[draft][slem]") {
  const auto t = specdec_test::merge_target();  // a b c ab ba
  // Plain: "ab" emitted as one token, the draft's "c" follows.
  auto a = specdec::slem_realign(t, tokens{3}, "c");
  CHECK(a.drafts == tokens{2});
  CHECK_FALSE(a.respelled);
  CHECK_FALSE(a.straddled);
  // Re-spelled: "a", "b" emitted one by one, encoded as "ab"; the drafts start after it all the same.
  a = specdec::slem_realign(t, tokens{0, 1}, "cab");
  CHECK(a.drafts == tokens{2, 3});
  CHECK(a.respelled);
  CHECK_FALSE(a.straddled);
  // Straddling: "a" emitted, "bc" drafted: "abc" encodes as "ab", "c": the draft text alone instead.
  a = specdec::slem_realign(t, tokens{0}, "bc");
  CHECK(a.drafts == tokens{1, 2});
  CHECK(a.straddled);
  // No window, no draft.
  CHECK(specdec::slem_realign(t, tokens{}, "ba").drafts == tokens{4});
  CHECK(specdec::slem_realign(t, tokens{2}, "").drafts.empty());
  CHECK_THROWS_WITH(specdec::slem_realign(t, tokens{0}, "d"), Contains("no token spells byte 0x64"));
}

namespace {
// A draft model over the merging draft (ab c a bc b ca) with fixed logits.
auto fixed_draft(std::vector<float> logits) {
  return specdec::make_model(logits.size(), [logits](std::span<const token_id>, std::span<float> out) {
    std::copy(logits.begin(), logits.end(), out.begin());
  });
}
}  // namespace

TEST_CASE("TLI: q' is the draft's row restricted to the intersection, renormalised, by target id", "[draft][tli]") {
  const auto target_tok = specdec_test::char_target();
  const auto draft_tok = specdec_test::merge_draft();
  const auto map = specdec::vocab_map::build(draft_tok.tokens(), target_tok.tokens());
  const std::vector<float> logits{0.5f, -1.0f, 0.0f, 2.0f, 1.0f, -0.5f};
  const auto draft = fixed_draft(logits);
  specdec::tli_drafter tli(specdec::make_stateful(draft), map, target_tok, draft_tok);
  specdec::stage_draft out;
  tli(tokens{0}, 3, specdec::random::request_stream{7, 0, 0}, out);
  REQUIRE(out.tokens.size() == 3);
  REQUIRE(out.q_rows.size() == 3 * 3);
  // Shared: "a" (draft 2, target 0), "b" (4, 1), "c" (1, 2).
  const double za = std::exp(0.0), zb = std::exp(1.0), zc = std::exp(-1.0), z = za + zb + zc;
  double all = 0.0;
  for (const float l : logits) all += std::exp(static_cast<double>(l));
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(out.q_rows[j * 3 + 0] == Approx(za / z));
    CHECK(out.q_rows[j * 3 + 1] == Approx(zb / z));
    CHECK(out.q_rows[j * 3 + 2] == Approx(zc / z));
    CHECK(specdec::in_vocabulary(out.tokens[j], 3));
    CHECK(tli.masses()[j] == Approx(z / all));
  }
  CHECK(out.model_calls == 3);
  CHECK(tli.empty_rows() == 0);
  // Greedy drafting picks the most likely shared token ("b"), not the row's argmax ("bc").
  specdec::tli_drafter greedy(specdec::make_stateful(draft), map, target_tok, draft_tok, {.draft_params = {.temperature = 0.0}});
  greedy(tokens{0}, 2, specdec::random::request_stream{7, 0, 0}, out);
  CHECK(out.tokens == tokens{1, 1});
  CHECK(greedy.masses()[0] == 0.0);  // under T = 0 the row's own argmax is outside the intersection
}

TEST_CASE("TLI: a row without mass on the intersection drafts nothing; the output is still the target's", "[draft][tli]") {
  const auto target_tok = specdec_test::char_target();
  const auto draft_tok = specdec_test::merge_draft();
  const auto map = specdec::vocab_map::build(draft_tok.tokens(), target_tok.tokens());
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  const auto draft = fixed_draft({0.0f, ninf, ninf, 1.0f, ninf, 0.5f});  // only merges
  const auto target = specdec_test::table_model(3, 11);
  using tli_t = specdec::tli_drafter<decltype(specdec::make_stateful(draft)), specdec::piece_tokenizer, specdec::piece_tokenizer>;
  std::vector<std::shared_ptr<tli_t>> drafters;
  const auto run = [&](bool with_tli) {
    return specdec_test::decode_requests(
        target, specdec::sample_and_match, 50, 12, 5, [&](std::uint32_t, specdec::request_options& o) {
          if (!with_tli) {
            o.drafter = specdec_test::no_drafts;
            return;
          }
          drafters.push_back(std::make_shared<tli_t>(specdec::make_stateful(draft), map, target_tok, draft_tok));
          o.drafter = specdec::shared_stage(drafters.back());
        });
  };
  const auto tli = run(true), alone = run(false);
  CHECK(tli.drafted == 0);
  CHECK(tli.outputs == alone.outputs);
  std::size_t empty = 0;
  for (const auto& d : drafters) empty += d->empty_rows();
  CHECK(empty > 50);
}

TEST_CASE("TLI and SLEM: greedy is greedy target decoding; sample-and-match is target-only decoding", "[draft][tli][slem]") {
  const auto target_tok = specdec_test::merge_target();
  const auto draft_tok = specdec_test::other_draft();
  const auto map = specdec::vocab_map::build(draft_tok.tokens(), target_tok.tokens());
  // Random Markov tables over each vocabulary: the draft knows nothing of the target.
  const auto target = specdec_test::table_model(5, 21);
  const auto draft = specdec_test::table_model(6, 22);
  constexpr std::size_t length = 40;
  // Greedy target decoding from the prompt {0}.
  tokens expected, context{0};
  std::vector<float> row(5);
  while (expected.size() < length) {
    target.next_logits(std::span<const token_id>(context), std::span<float>(row));
    expected.push_back(static_cast<token_id>(std::max_element(row.begin(), row.end()) - row.begin()));
    context.push_back(expected.back());
  }
  const auto tli = [&] { return specdec::tli_stage(specdec::make_stateful(draft), map, target_tok, draft_tok); };
  const auto slem = [&] {
    return specdec::slem_stage(specdec::make_stateful(draft), target_tok, draft_tok, {.draft_params = {.temperature = 0.0}});
  };
  for (const bool use_tli : {true, false}) {
    const auto out =
        specdec_test::decode_requests(target, specdec::greedy, 8, length, 3, [&](std::uint32_t, specdec::request_options& o) {
          o.target_params.temperature = 0.0;
          o.drafter = use_tli ? tli() : slem();
        });
    INFO((use_tli ? "TLI" : "SLEM") << ": drafted " << out.drafted << ", accepted " << out.accepted);
    CHECK(out.accepted > 0);
    for (const auto& o : out.outputs) CHECK(o == expected);
  }
  // Sample-and-match, keyed by output position: TLI, SLEM and no drafts give the same tokens, also in
  // one mixed batch (the drafter of request id is id % 3).
  const auto with = [&](int which) {
    return [&, which](std::uint32_t id, specdec::request_options& o) {
      const int k = which >= 0 ? which : static_cast<int>(id % 3);
      o.drafter = k == 0 ? tli() : k == 1 ? slem() : specdec::draft_stage(specdec_test::no_drafts);
    };
  };
  const auto only = specdec_test::decode_requests(target, specdec::sample_and_match, 60, 30, 4, with(2));
  const auto by_tli = specdec_test::decode_requests(target, specdec::sample_and_match, 60, 30, 4, with(0));
  const auto by_slem = specdec_test::decode_requests(target, specdec::sample_and_match, 60, 30, 4, with(1));
  const auto mixed = specdec_test::decode_requests(target, specdec::sample_and_match, 60, 30, 4, with(-1));
  CHECK(by_tli.accepted > 0);
  CHECK(by_slem.accepted > 0);
  CHECK(by_tli.outputs == only.outputs);
  CHECK(by_slem.outputs == only.outputs);
  CHECK(mixed.outputs == only.outputs);
  // TLI under strict reads q': a mixed batch of TLI requests gives each request's tokens alone.
  const auto strict_batch = specdec_test::decode_requests(target, specdec::strict, 60, 30, 4, with(0));
  for (std::uint32_t id = 0; id < 60; id += 7) {
    const auto one = specdec_test::decode_requests(target, specdec::strict, id + 1, 30, 4, with(0));
    CHECK(one.outputs[id] == strict_batch.outputs[id]);
  }
}

TEST_CASE("TLI and SLEM: bad input is a clear error", "[draft][tli][slem][bad_input]") {
  const auto target_tok = specdec_test::char_target();
  const auto draft_tok = specdec_test::merge_draft();
  const auto map = specdec::vocab_map::build(draft_tok.tokens(), target_tok.tokens());
  const auto draft = specdec_test::table_model(6, 1);
  const auto small_draft = specdec_test::table_model(5, 1);
  // A draft whose vocabulary is not what the map (its metadata) says.
  CHECK_THROWS_WITH(specdec::tli_stage(specdec::make_stateful(small_draft), map, target_tok, draft_tok),
                    Contains("not the draft model's"));
  CHECK_THROWS_WITH(specdec::tli_stage(specdec::make_stateful(draft), map, specdec_test::merge_target(), draft_tok),
                    Contains("not the target tokenizer's"));
  CHECK_THROWS_WITH(specdec::slem_stage(specdec::make_stateful(small_draft), target_tok, draft_tok),
                    Contains("not the draft model's"));
  CHECK_THROWS_WITH(specdec::slem_stage(specdec::make_stateful(draft), target_tok, draft_tok, {}, {.one_hot_vocab = 4}),
                    Contains("one_hot_vocab"));
  CHECK_THROWS_WITH(
      specdec::tli_stage(specdec::make_stateful(draft), map, target_tok, draft_tok, {.draft_params = {.temperature = -1.0}}),
      Contains("temperature"));

  // Text the draft's tokenizer cannot encode (the target's "d"): only its request ends, next test case.
  // Draft text the target's tokenizer cannot encode ("d"): an error; with a byte fallback, its token.
  const auto draft_d = specdec::piece_tokenizer::of_pieces({"a", "d"});
  const auto always_d = fixed_draft({-10.0f, 0.0f});
  const auto slem_d = [&](const specdec::piece_tokenizer& t) {
    specdec::slem_drafter slem(specdec::make_stateful(always_d), t, draft_d);
    specdec::stage_draft out;
    slem(tokens{0}, 2, specdec::random::request_stream{1, 0, 0}, out);
    return out.tokens;
  };
  CHECK_THROWS_WITH(slem_d(target_tok), Contains("no token spells byte 0x64"));
  using kind = specdec::token_kind;
  const specdec::piece_tokenizer with_fallback(
      specdec::token_list{{"a", "b", "<0x64>"}, {kind::normal, kind::normal, kind::byte}, specdec::text_convention::raw});
  CHECK(slem_d(with_fallback) == tokens{2, 2});

  // A broken draft row ends the request with invalid_row.
  const auto nan_draft = fixed_draft({0.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f, 0.0f, 0.0f});
  const auto target3 = specdec_test::table_model(3, 3);
  for (const bool use_tli : {true, false}) {
    specdec::kv_cached_model<decltype(target3)> t(target3);
    specdec::no_sequence_model none(3);
    specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::sample_and_match);
    specdec::request_options o;
    o.prompt = {0};
    o.drafter = use_tli ? specdec::tli_stage(specdec::make_stateful(nan_draft), map, target_tok, draft_tok)
                        : specdec::slem_stage(specdec::make_stateful(nan_draft), target_tok, draft_tok);
    decoder.add(o);
    const auto events = decoder.step();
    REQUIRE(events.size() == 1);
    CHECK(events[0].finished == specdec::finish_reason::error);
    CHECK(specdec::has_flag(events[0].status, specdec::verify_status::invalid_row));
  }
}

TEST_CASE("TLI and SLEM: a tokenizer that cannot encode a request's text ends that request only",
          "[draft][tli][slem][bad_input]") {
  // The target spells a, b, c, d. Healthy requests draft with a tokenizer that has "d"; failing ones
  // with merge_draft, which has no "d": from the prompt "d" (the first round fails), or from "a" until
  // the target emits its first "d" (drafts never spell "d", so it ends its round: the next one fails).
  const auto target_d = specdec::piece_tokenizer::of_pieces({"a", "b", "c", "d"});
  const auto with_d = specdec::piece_tokenizer::of_pieces({"ab", "c", "a", "bc", "b", "ca", "d"});
  const auto without_d = specdec_test::merge_draft();
  const auto map_with = specdec::vocab_map::build(with_d.tokens(), target_d.tokens());
  const auto map_without = specdec::vocab_map::build(without_d.tokens(), target_d.tokens());
  const auto target = specdec_test::table_model(4, 2);
  const auto draft7 = specdec_test::table_model(7, 3);
  const auto draft6 = specdec_test::table_model(6, 3);
  constexpr std::size_t length = 40;
  struct result {
    tokens output;
    specdec::finish_reason finished = specdec::finish_reason::none;
    specdec::verify_status status = specdec::verify_status::ok;
  };
  enum class kind { healthy, fails_at_prompt, fails_later, target_only };
  // Requests `kinds` in one batch (request ids `first_id` on), TLI or SLEM, under sample-and-match.
  const auto run = [&](bool use_tli, const std::vector<kind>& kinds, std::uint32_t first_id = 0) {
    specdec::kv_cached_model<decltype(target)> t(target);
    specdec::no_sequence_model none(4);
    specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::sample_and_match);
    std::vector<result> out(kinds.size());
    for (std::uint32_t id = 0; id < kinds.size(); ++id) {
      specdec::request_options o;
      o.prompt = {kinds[id] == kind::fails_at_prompt ? token_id{3} : token_id{0}};
      o.seed = 17;
      o.request_id = first_id + id;
      o.gamma = 3;
      o.max_new_tokens = length;
      const bool healthy = kinds[id] == kind::healthy;
      if (kinds[id] == kind::target_only)
        o.drafter = specdec_test::no_drafts;
      else if (use_tli)
        o.drafter = healthy ? specdec::tli_stage(specdec::make_stateful(draft7), map_with, target_d, with_d)
                            : specdec::tli_stage(specdec::make_stateful(draft6), map_without, target_d, without_d);
      else
        o.drafter = healthy ? specdec::slem_stage(specdec::make_stateful(draft7), target_d, with_d)
                            : specdec::slem_stage(specdec::make_stateful(draft6), target_d, without_d);
      REQUIRE(decoder.add(o) == id + 1);
    }
    while (decoder.active() > 0)
      for (const auto& e : decoder.step()) {
        result& r = out[e.request - 1];
        r.output.insert(r.output.end(), e.tokens.begin(), e.tokens.end());
        r.finished = e.finished;
        r.status = e.status;
      }
    return out;
  };
  for (const bool use_tli : {true, false}) {
    INFO((use_tli ? "TLI" : "SLEM"));
    const std::vector<kind> kinds{kind::healthy, kind::fails_at_prompt, kind::healthy, kind::fails_later, kind::healthy};
    const auto batch = run(use_tli, kinds);
    // Target-only decoding of each prompt with each request's id and seed (sample-and-match keys the
    // target's samples by output position: any drafter emits these tokens).
    const auto only = run(use_tli, std::vector<kind>(kinds.size(), kind::target_only));
    for (std::uint32_t id = 0; id < kinds.size(); ++id) {
      INFO("request " << id);
      const result& r = batch[id];
      if (kinds[id] == kind::healthy) {
        // As when run alone (a batch of one, with its own request id).
        const auto alone = run(use_tli, {kind::healthy}, id);
        CHECK(r.finished == specdec::finish_reason::length);
        CHECK(r.status == specdec::verify_status::ok);
        CHECK(r.output == alone[0].output);
        CHECK(r.output == only[id].output);
        continue;
      }
      CHECK(r.finished == specdec::finish_reason::error);
      CHECK(specdec::has_flag(r.status, specdec::verify_status::stage_error));
      CHECK_FALSE(specdec::has_flag(r.status, specdec::verify_status::invalid_row));
      if (kinds[id] == kind::fails_at_prompt) {
        CHECK(r.output.empty());
        continue;
      }
      // Target-only's tokens up to its first "d", then nothing.
      const auto first_d = std::find(only[id].output.begin(), only[id].output.end(), token_id{3});
      REQUIRE(first_d != only[id].output.end());
      REQUIRE(first_d - only[id].output.begin() > 3);  // it ran some rounds before failing
      CHECK(r.output == tokens(only[id].output.begin(), first_d + 1));
    }
  }
}
