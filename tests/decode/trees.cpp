// SPECDEC_TEST_LABELS: statistical
//
// Tree verification on the step decoder (decode/batch_decoder.hpp, `tree_acceptance`): a drafter stage
// writes a small tree (two root candidates, each continued as a chain to the round's depth), the target
// scores every node in one tree-shaped append of a KV-cached model and keeps the accepted path
// (`commit_tree`). Checked: greedy on trees is greedy decoding of the target token for token; the
// target's cache equals a fresh evaluation after every step; the law of three-token generations
// (40000 requests, Pearson chi-squared of tests/support, false-failure rate 1e-6) is the target's for
// target-only (top-k candidates), SpecInfer's multi-step rule and K-SEQ (i.i.d. candidates) and recursive
// rejection (candidates without replacement); a negative control (top-k candidates under the multi-step
// rule, whose ratio needs candidates drawn from q) must fail. Block verification and typical acceptance
// run as chain rules through the same decoder.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

#include "specdec/decode/batch_decoder.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/models/kv_cache.hpp"
#include "support/chi_squared.hpp"
#include "support/kv_checks.hpp"
#include "support/sequence_counts.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;
constexpr std::size_t vocab = 4;
constexpr int horizon = 3;

const specdec_test::markov_pair& tables() {
  static const auto pair = specdec_test::make_markov_pair(vocab, 0x7AEE, 0.6);
  return pair;
}

// How the test stage picks the two root candidates and each chain's next token.
enum class pick { top, iid, without_replacement };

// A tree of two root candidates, each continued by one candidate per level to depth gamma, drafted from
// the Markov draft table; q rows per node (the root's first). Sampling reads (node, draft) streams.
specdec::draft_stage tree_stage(pick how) {
  return [how](std::span<const token_id> context, std::size_t gamma, const specdec::random::request_stream& stream,
               specdec::stage_draft& out) {
    const auto& pair = tables();
    const auto q_of = [&](token_id last) { return pair.q_row(static_cast<std::size_t>(last)); };
    const auto push_row = [&](token_id last) {
      for (const double v : q_of(last)) out.q_rows.push_back(static_cast<float>(v));
    };
    const auto draw = [&](std::span<const double> q, std::uint32_t node, int draw_index, token_id excluded) {
      auto s = stream.open(node, specdec::random::purpose::draft);
      double u = s.uniform();
      for (int k = 0; k < draw_index; ++k) u = s.uniform();
      double mass = 0.0;
      for (std::size_t v = 0; v < q.size(); ++v)
        if (static_cast<token_id>(v) != excluded) mass += q[v];
      double acc = 0.0;
      for (std::size_t v = 0; v < q.size(); ++v) {
        if (static_cast<token_id>(v) == excluded) continue;
        acc += q[v] / mass;
        if (u < acc) return static_cast<token_id>(v);
      }
      for (std::size_t v = q.size(); v-- > 0;)
        if (static_cast<token_id>(v) != excluded && q[v] > 0.0) return static_cast<token_id>(v);
      return token_id{0};
    };
    const auto top = [](std::span<const double> q, int rank) {
      std::vector<token_id> ids(q.size());
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(),
                       [&](token_id a, token_id b) { return q[static_cast<std::size_t>(a)] > q[static_cast<std::size_t>(b)]; });
      return ids[static_cast<std::size_t>(rank)];
    };
    if (gamma == 0) return;
    const token_id root_last = context.back();
    push_row(root_last);
    // Root candidates.
    token_id first = 0, second = 0;
    const auto q0 = q_of(root_last);
    if (how == pick::top) {
      first = top(q0, 0);
      second = top(q0, 1);
    } else {
      first = draw(q0, 0, 0, -1);
      second = draw(q0, 0, 1, how == pick::without_replacement ? first : -1);
    }
    // Two chains: node ids 1.. in order, each node's parent before it.
    for (const token_id start : {first, second}) {
      std::int32_t parent = 0;
      token_id t = start;
      for (std::size_t d = 0; d < gamma; ++d) {
        out.tokens.push_back(t);
        out.parents.push_back(parent);
        push_row(t);
        parent = static_cast<std::int32_t>(out.tokens.size());
        const auto q = q_of(t);
        t = how == pick::top ? top(q, 0) : draw(q, static_cast<std::uint32_t>(parent), 0, -1);
      }
    }
    out.model_calls = out.tokens.size() + 1;
    out.charged_steps = gamma;
  };
}

struct fixture {
  decltype(specdec::make_model(vocab, specdec_test::table_logits({}, vocab))) target =
      specdec::make_model(vocab, specdec_test::table_logits(tables().target, vocab));
  decltype(target) draft = specdec::make_model(vocab, specdec_test::table_logits(tables().draft, vocab));
};

template <class TreeRule>
specdec_test::gof_result sample_tree_law(TreeRule rule, pick how, std::uint64_t seed) {
  fixture f;
  specdec::kv_cached_model<decltype(f.target)> t(f.target);
  specdec::no_sequence_model none(vocab);
  specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::strict);
  const auto law = specdec_test::target_sequence_distribution(tables(), 1, horizon);
  const auto stage = tree_stage(how);
  const auto c = specdec_test::count_sequences(decoder, vocab, horizon, law.size(), seed, [&](specdec::request_options& o) {
    o.drafter = stage;
    o.acceptance = specdec::tree_acceptance{rule};
  });
  return specdec_test::chi_squared_gof(c.counts, law);
}
}  // namespace

TEST_CASE("greedy tree verification on the step decoder is greedy decoding of the target", "[decode][tree]") {
  fixture f;
  specdec::kv_cached_model<decltype(f.target)> t(f.target);
  specdec::no_sequence_model none(vocab);
  specdec::batch_decoder decoder(specdec::exec::simd, t, none, specdec::strict);
  std::map<specdec::request_handle, std::vector<token_id>> committed;
  for (std::uint32_t id = 0; id < 8; ++id) {
    specdec::request_options o;
    o.prompt = {static_cast<token_id>(id % vocab)};
    o.request_id = id;
    o.gamma = 1 + id % 3;
    o.max_new_tokens = 12;
    o.drafter = tree_stage(pick::top);
    o.acceptance = specdec::tree_acceptance{specdec::greedy};
    committed[decoder.add(o)] = o.prompt;
  }
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      auto& c = committed[e.request];
      c.insert(c.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished == specdec::finish_reason::none) {
        // The target holds every committed token but the last (pending), each row fresh.
        REQUIRE(t.length(e.request) + 1 == c.size());
        REQUIRE(t.consistent(e.request));
      }
    }
  for (const auto& [h, c] : committed) {
    REQUIRE(c.size() == 13);
    for (std::size_t i = 1; i < c.size(); ++i) {
      const auto p = tables().p_row(static_cast<std::size_t>(c[i - 1]));
      REQUIRE(c[i] == static_cast<token_id>(std::max_element(p.begin(), p.end()) - p.begin()));
    }
  }
}

TEST_CASE("lossless tree rules on the step decoder keep the target's law; top-k candidates under the ratio rule do not",
          "[decode][tree][statistical]") {
  const auto target_only = sample_tree_law(specdec::target_only, pick::top, 11);
  INFO("target-only, top-2 candidates: " << target_only);
  CHECK(target_only.p_value > specdec_test::gof_alpha);
  const auto mss = sample_tree_law(specdec::strict, pick::iid, 12);
  INFO("multi-step sampling, i.i.d. candidates: " << mss);
  CHECK(mss.p_value > specdec_test::gof_alpha);
  const auto kseq = sample_tree_law(specdec::k_seq, pick::iid, 13);
  INFO("K-SEQ, i.i.d. candidates: " << kseq);
  CHECK(kseq.p_value > specdec_test::gof_alpha);
  const auto rrs = sample_tree_law(specdec::recursive_rejection, pick::without_replacement, 14);
  INFO("recursive rejection, without replacement: " << rrs);
  CHECK(rrs.p_value > specdec_test::gof_alpha);
  const auto wrong = sample_tree_law(specdec::strict, pick::top, 15);
  INFO("negative control, multi-step sampling on top-2 candidates: " << wrong);
  CHECK(wrong.p_value < specdec_test::gof_alpha);
}

TEST_CASE("block verification on the step decoder keeps the target's law", "[decode][block][statistical]") {
  fixture f;
  specdec::kv_cached_model<decltype(f.target)> t(f.target);
  specdec::kv_cached_model<decltype(f.draft)> q(f.draft);
  specdec::batch_decoder decoder(specdec::exec::simd, t, q, specdec::block);
  const auto law = specdec_test::target_sequence_distribution(tables(), 1, horizon);
  const auto c = specdec_test::count_sequences(decoder, vocab, horizon, law.size(), 21, [](specdec::request_options&) {});
  const auto gof = specdec_test::chi_squared_gof(c.counts, law);
  INFO("block verification: " << gof);
  CHECK(gof.p_value > specdec_test::gof_alpha);
}

// The law of the first three tokens of generations of 12 tokens: long drafts (block verification's
// choice of prefix reads every later position) are verified, only the first three tokens are counted.
template <class Decoder, class Configure>
specdec_test::gof_result first_tokens_law(Decoder& decoder, std::uint64_t seed, Configure configure) {
  const auto law = specdec_test::target_sequence_distribution(tables(), 1, horizon);
  const auto c = specdec_test::count_sequences(decoder, vocab, horizon, law.size(), seed, [&](specdec::request_options& o) {
    o.max_new_tokens = 12;
    configure(o);
  });
  return specdec_test::chi_squared_gof(c.counts, law);
}

TEST_CASE("block verification of long drafts and deep trees keeps the target's law", "[decode][block][tree][statistical]") {
  fixture f;
  specdec::kv_cached_model<decltype(f.target)> t(f.target);
  specdec::kv_cached_model<decltype(f.draft)> q(f.draft);
  specdec::batch_decoder blocks(specdec::exec::simd, t, q, specdec::block);
  const auto block8 = first_tokens_law(blocks, 31, [](specdec::request_options& o) { o.gamma = 8; });
  INFO("block verification, gamma 8: " << block8);
  CHECK(block8.p_value > specdec_test::gof_alpha);
  specdec::no_sequence_model none(vocab);
  specdec::batch_decoder trees(specdec::exec::simd, t, none, specdec::strict);
  const auto stage = tree_stage(pick::iid);
  const auto deep = first_tokens_law(trees, 32, [&](specdec::request_options& o) {
    o.gamma = 6;
    o.drafter = stage;
    o.acceptance = specdec::tree_acceptance{specdec::strict};
  });
  INFO("multi-step sampling on trees of depth 6: " << deep);
  CHECK(deep.p_value > specdec_test::gof_alpha);
}

TEST_CASE("a tree request needs a tree stage whose tree is well formed", "[decode][tree]") {
  fixture f;
  specdec::kv_cached_model<decltype(f.target)> t(f.target);
  specdec::no_sequence_model none(vocab);
  specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::strict);
  specdec::request_options o;
  o.prompt = {1};
  o.acceptance = specdec::tree_acceptance{specdec::target_only};
  REQUIRE_THROWS_AS(decoder.add(o), specdec::error);  // no drafter stage
  o.drafter = [](std::span<const token_id>, std::size_t, const specdec::random::request_stream&, specdec::stage_draft& out) {
    out.tokens = {1, 2};
    out.parents = {0, 2};  // node 2's parent is itself
  };
  const auto bad = decoder.add(o);
  const auto events = decoder.step();  // a malformed tree ends its request alone, with stage_error
  REQUIRE(events.size() == 1);
  CHECK(events.front().request == bad);
  CHECK(events.front().finished == specdec::finish_reason::error);
  CHECK(specdec::has_flag(events.front().status, specdec::verify_status::stage_error));
  CHECK(events.front().tokens.empty());
  CHECK(decoder.active() == 0);
}
