// Decoding across vocabularies on the step decoder (draft/tli.hpp, draft/slem.hpp): the exact law of
// the first H target tokens by enumeration against 40000 decoded requests (chi-squared at the
// false-failure level 1e-6) for TLI with strict, block verification and sample-and-match, and SLEM
// with sample-and-match and strict with one-hot q, on two tokenizer pairs over one alphabet (a
// character-level target with a merging draft, and a pair where some strings exist on one side
// only). Negative controls that must fail: TLI's q restricted to the intersection but not
// renormalised; TLI's q indexed by draft ids read as target ids; a SLEM whose realignment re-spells
// emitted tokens as the target tokenizer's encoding of their text. Greedy verification (a point mass)
// is checked token for token in tests/draft/cross_vocab.cpp.
// SPECDEC_TEST_LABELS: statistical
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/draft/slem.hpp"
#include "specdec/draft/tli.hpp"
#include "specdec/models/enumerate.hpp"
#include "specdec/vocab/vocab_map.hpp"
#include "support/chi_squared.hpp"
#include "support/cross_vocab.hpp"

namespace {
using specdec::token_id;
constexpr std::uint32_t requests = 40000;

// The law of the target's first `horizon` tokens after the prompt {0}, by enumeration.
template <class Target>
std::vector<double> target_law(const Target& target, int horizon) {
  const std::vector<token_id> prompt{0};
  std::vector<double> law;
  for (const auto& s : specdec::enumerate_sequences(target, std::span<const token_id>(prompt), static_cast<std::size_t>(horizon)))
    law.push_back(s.probability);
  return law;
}

std::vector<std::uint64_t> cells(const std::vector<std::vector<token_id>>& outputs, std::size_t vocab, int horizon) {
  std::vector<std::uint64_t> counts(specdec_test::num_sequences(vocab, horizon), 0);
  for (const auto& o : outputs) {
    REQUIRE(o.size() >= static_cast<std::size_t>(horizon));
    ++counts[specdec_test::sequence_cell(std::span<const token_id>(o).first(static_cast<std::size_t>(horizon)), vocab, horizon)];
  }
  return counts;
}

// One tokenizer pair, its map and its models.
struct pair_setup {
  specdec::piece_tokenizer target_tok, draft_tok;
  specdec::vocab_map map;
  int horizon;
  decltype(specdec_test::table_model(1, 0)) target, draft;

  pair_setup(specdec::piece_tokenizer t, specdec::piece_tokenizer d, int h, std::uint64_t seed)
      : target_tok(std::move(t)),
        draft_tok(std::move(d)),
        map(specdec::vocab_map::build(draft_tok.tokens(), target_tok.tokens())),
        horizon(h),
        target(specdec_test::table_model(target_tok.vocab_size(), seed)),
        draft(specdec_test::table_model(draft_tok.vocab_size(), seed + 1)) {}

  using draft_state = decltype(specdec::make_stateful(std::declval<const decltype(draft)&>()));
  using tli = specdec::tli_drafter<draft_state, specdec::piece_tokenizer, specdec::piece_tokenizer>;
  using slem = specdec::slem_drafter<draft_state, specdec::piece_tokenizer, specdec::piece_tokenizer>;
  std::shared_ptr<tli> make_tli() const {
    return std::make_shared<tli>(specdec::make_stateful(draft), map, target_tok, draft_tok);
  }
  std::shared_ptr<slem> make_slem(specdec::slem_options o = {}) const {
    return std::make_shared<slem>(specdec::make_stateful(draft), target_tok, draft_tok, specdec::cross_vocab_options{}, o);
  }
  std::size_t vt() const { return target_tok.vocab_size(); }
};

// Which rows a negative control hands over instead of q'.
enum class tli_bug { none, not_renormalised, draft_ids };

specdec::draft_stage tli_with(const pair_setup& s, tli_bug bug) {
  auto d = s.make_tli();
  if (bug == tli_bug::none) return specdec::shared_stage(d);
  return [d, &s, bug, q = std::vector<float>{}](std::span<const token_id> c, std::size_t gamma,
                                                const specdec::random::request_stream& st, specdec::stage_draft& out) mutable {
    (*d)(c, gamma, st, out);
    const std::size_t vt = s.vt(), vd = s.map.draft_size();
    for (std::size_t j = 0; j < out.tokens.size(); ++j) {
      const std::span<float> row(out.q_rows.data() + j * vt, vt);
      if (bug == tli_bug::not_renormalised) {
        for (float& x : row) x *= static_cast<float>(d->masses()[j]);  // q restricted: q'(x) q(I)
        continue;
      }
      // q' by draft id (the map is one-to-one on these pairs), then read as if draft ids were target ids.
      q.assign(vd, 0.0f);
      for (std::size_t v = 0; v < vd; ++v) {
        const token_id t = s.map.to_target(static_cast<token_id>(v));
        if (t != specdec::no_token) q[v] = row[static_cast<std::size_t>(t)];
      }
      for (std::size_t t = 0; t < vt; ++t) row[t] = t < vd ? q[t] : 0.0f;
    }
  };
}

struct law_case {
  const char* name;
  const pair_setup* pair;
  specdec::request_acceptance acceptance;
  std::function<specdec::draft_stage()> stage;
  bool exact;
};
}  // namespace

TEST_CASE("TLI and SLEM keep the target's sequence law; TLI's unrenormalised or misindexed q fails", "[decode][cross_vocab]") {
  // Pair 1: character-level target, merging draft (4 tokens of 3: 81 cells); pair 2: strings on one
  // side only (3 tokens of 5: 125 cells).
  const pair_setup one(specdec_test::char_target(), specdec_test::merge_draft(), 4, 0xC805);
  const pair_setup two(specdec_test::merge_target(), specdec_test::other_draft(), 3, 0xC806);
  const auto slem_one_hot = [&] { return specdec::shared_stage(two.make_slem({.one_hot_vocab = two.vt()})); };
  const std::vector<law_case> cases{
      {"TLI, strict (pair 1)", &one, specdec::strict, [&] { return tli_with(one, tli_bug::none); }, true},
      {"TLI, block verification (pair 1)", &one, specdec::block, [&] { return tli_with(one, tli_bug::none); }, true},
      {"TLI, sample-and-match (pair 1)", &one, specdec::sample_and_match, [&] { return tli_with(one, tli_bug::none); }, true},
      {"TLI, strict (pair 2)", &two, specdec::strict, [&] { return tli_with(two, tli_bug::none); }, true},
      {"SLEM, sample-and-match (pair 1)", &one, specdec::sample_and_match, [&] { return specdec::shared_stage(one.make_slem()); },
       true},
      {"SLEM, sample-and-match (pair 2)", &two, specdec::sample_and_match, [&] { return specdec::shared_stage(two.make_slem()); },
       true},
      {"SLEM, strict with one-hot q (pair 2)", &two, specdec::strict, slem_one_hot, true},
      {"TLI, strict, q restricted but not renormalised (negative control)", &one, specdec::strict,
       [&] { return tli_with(one, tli_bug::not_renormalised); }, false},
      {"TLI, strict, q indexed by draft ids (negative control)", &one, specdec::strict,
       [&] { return tli_with(one, tli_bug::draft_ids); }, false},
  };
  std::uint64_t seed = 20261129;
  for (const law_case& c : cases) {
    const pair_setup& s = *c.pair;
    const auto out = specdec_test::decode_requests(s.target, specdec::strict, requests, static_cast<std::size_t>(s.horizon),
                                                   seed++, [&](std::uint32_t, specdec::request_options& o) {
                                                     o.drafter = c.stage();
                                                     o.acceptance = c.acceptance;
                                                   });
    const auto result = specdec_test::chi_squared_gof(cells(out.outputs, s.vt(), s.horizon), target_law(s.target, s.horizon));
    INFO(c.name << ": " << result << ", drafted " << out.drafted << ", accepted " << out.accepted);
    CHECK(out.drafted > 20000);  // the drafts were there to judge
    CHECK(out.accepted > 5000);  // and often kept: the rule's acceptance path ran
    CHECK((result.p_value > specdec_test::gof_alpha) == c.exact);
  }
}

TEST_CASE("SLEM realigns without touching emitted tokens; a realignment that re-spells them fails", "[decode][cross_vocab]") {
  const pair_setup two(specdec_test::merge_target(), specdec_test::other_draft(), 3, 0xC807);
  std::vector<std::shared_ptr<pair_setup::slem>> drafters;
  // Twice the horizon, so that the re-spelled output still has `horizon` tokens.
  const auto out =
      specdec_test::decode_requests(two.target, specdec::sample_and_match, requests, 2 * static_cast<std::size_t>(two.horizon),
                                    20261130, [&](std::uint32_t, specdec::request_options& o) {
                                      drafters.push_back(two.make_slem());
                                      o.drafter = specdec::shared_stage(drafters.back());
                                    });
  specdec::slem_stats total;
  for (const auto& d : drafters) {
    total.rounds += d->stats().rounds;
    total.respelled += d->stats().respelled;
    total.straddled += d->stats().straddled;
  }
  INFO("rounds " << total.rounds << ", re-spelled windows " << total.respelled << ", straddling tokens " << total.straddled);
  CHECK(total.respelled > 1000);  // the test saw re-tokenization change the window's tokens
  CHECK(total.straddled > 1000);  // and tokens across the window's end
  const auto law = target_law(two.target, two.horizon);
  const auto exact = specdec_test::chi_squared_gof(cells(out.outputs, two.vt(), two.horizon), law);
  INFO("SLEM: " << exact);
  CHECK(exact.p_value > specdec_test::gof_alpha);
  // The control: the emitted tokens re-spelled as the target tokenizer's encoding of their text (what a
  // realignment that rewrote emitted tokens to the re-tokenization would emit).
  std::vector<std::vector<token_id>> respelled;
  for (const auto& o : out.outputs) {
    std::string text;
    specdec::append_text(two.target_tok, std::span<const token_id>(o), text);
    respelled.push_back(two.target_tok.encode(text));
  }
  const auto rewritten = specdec_test::chi_squared_gof(cells(respelled, two.vt(), two.horizon), law);
  INFO("SLEM with emitted tokens re-spelled (negative control): " << rewritten);
  CHECK(rewritten.p_value <= specdec_test::gof_alpha);
}
