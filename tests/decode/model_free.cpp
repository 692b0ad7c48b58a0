// Model-free drafting on the step decoder: n-gram prompt lookup's semantics on scripted histories and
// its bad options; the target's exact sequence law with the lookup's drafts under sample-and-match and
// strict with a one-hot q (chi-squared), with a negative control that must fail (a q that is not the
// law the drafts came from); and output invariance: with the target's samples keyed by output position,
// decoding with any drafter (random, adversarial, empty, prompt lookup, a cache shared by requests)
// gives target-only decoding's tokens, alone and in mixed batches, on seq and simd; the round-keyed
// variant differs (control); a suffix tree verified with a target sample per path instead of per node
// (REST's defect) fails the law test (control).
// SPECDEC_TEST_LABELS: statistical
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/draft/model_free.hpp"
#include "specdec/draft/prompt_lookup.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/models/kv_cache.hpp"
#include "support/chi_squared.hpp"
#include "support/sequence_counts.hpp"
#include "support/sequence_enumeration.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;

std::vector<token_id> lookup(std::vector<token_id> context, std::size_t min_n, std::size_t max_n, std::size_t k,
                             std::size_t limit = 64) {
  std::vector<token_id> out;
  specdec::prompt_lookup(std::span<const token_id>(context), {.min_n = min_n, .max_n = max_n, .k = k}, limit, out);
  return out;
}
}  // namespace

TEST_CASE("prompt lookup: the continuation of the most recent earlier match of the longest n-gram", "[draft][prompt_lookup]") {
  // [4,2,3] never occurred before; [2,3] did, at 1, followed by [4,2,3] (k 4 is more than follows).
  CHECK(lookup({1, 2, 3, 4, 2, 3}, 2, 3, 4) == std::vector<token_id>{4, 2, 3});
  CHECK(lookup({1, 2, 3, 4, 2, 3}, 2, 3, 2) == std::vector<token_id>{4, 2});  // k cuts
  CHECK(lookup({1, 2, 3, 4, 2, 3}, 2, 3, 4, 1) == std::vector<token_id>{4});  // the round's length cuts
  CHECK(lookup({1, 2, 3, 4, 2, 3}, 3, 3, 4).empty());                         // no earlier [4,2,3]
  CHECK(lookup({5, 6, 7}, 1, 3, 4).empty());                                  // no match at all
  CHECK(lookup({5}, 1, 3, 4).empty());                                        // nothing earlier
  CHECK(lookup({}, 1, 3, 4).empty());
  // Ties: the most recent occurrence wins ([9] followed by 1 at 0, by 2 at 2).
  CHECK(lookup({9, 1, 9, 2, 9}, 1, 1, 1) == std::vector<token_id>{2});
  // The longest n first: [1,9] occurred at 0 (then 7); [9] alone last occurred at 3 (then 8).
  CHECK(lookup({1, 9, 7, 9, 8, 1, 9}, 1, 2, 1) == std::vector<token_id>{7});
  CHECK(lookup({1, 9, 7, 9, 8, 1, 9}, 1, 1, 1) == std::vector<token_id>{8});
  // A continuation may run into the matched tail itself (periodic text).
  CHECK(lookup({3, 4, 3, 4}, 2, 2, 8) == std::vector<token_id>{3, 4});
  CHECK(lookup({1, 2, 3}, 1, 3, 4, 0).empty());  // a round of length 0
}

TEST_CASE("prompt lookup: bad options name the parameter", "[draft][prompt_lookup][bad_input]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(specdec::prompt_lookup_stage({.min_n = 0}), Contains("min_n"));
  CHECK_THROWS_WITH(specdec::prompt_lookup_stage({.min_n = 3, .max_n = 2}), Contains("max_n"));
  CHECK_THROWS_WITH(specdec::prompt_lookup_stage({.k = 0}), Contains("k must"));
  // One-hot rows over a vocabulary that does not hold a draft: refused, never an out-of-range write.
  specdec::stage_draft out;
  const std::vector<token_id> drafts{7};
  CHECK_THROWS_WITH(specdec::write_model_free_chain(drafts, 4, out), Contains("outside the vocabulary"));
}

namespace {
constexpr std::size_t vocab = 4;
constexpr int horizon = 3;
// A prompt that ends in token 1 (the Markov law below starts from it) and holds repeats, so that the
// lookup drafts in most rounds.
const std::vector<token_id> markov_prompt{2, 1, 3, 1, 0, 2, 1};

// A stage that drafts the lookup's tokens but hands the rule a uniform q: not the law the drafts came
// from (the negative control of the exact-law test).
specdec::draft_stage uniform_q_lookup() {
  auto inner = specdec::prompt_lookup_stage({.min_n = 1, .max_n = 2, .k = 4});
  return [inner](std::span<const token_id> c, std::size_t gamma, const specdec::random::request_stream& s,
                 specdec::stage_draft& out) mutable {
    inner(c, gamma, s, out);
    out.q_rows.assign(out.tokens.size() * vocab, 1.0f / static_cast<float>(vocab));
  };
}

// The suffix tree's chain, handed over with its frequencies as q: q(x_j) = count(x_j's node) /
// count(its parent), the rest spread evenly. The drafts are the tree's most frequent continuation, a
// function of the context, so that q is not their law (the negative control of the suffix tests).
specdec::draft_stage suffix_frequencies_as_q() {
  const specdec::suffix_options o{.max_depth = 8, .max_spec = 4, .factor = 2.0};
  return [o, tree = specdec::suffix_tree(o.max_depth), draft = specdec::suffix_draft{}, work = specdec::suffix_workspace{}](
             std::span<const token_id> c, std::size_t gamma, const specdec::random::request_stream&,
             specdec::stage_draft& out) mutable {
    specdec::index_context(tree, c);
    specdec::suffix_speculate(tree, c, gamma, o, draft, work);
    specdec::write_model_free_chain(std::span<const token_id>(draft.tokens), 0, out);
    out.q_rows.assign(out.tokens.size() * vocab, 0.0f);
    for (std::size_t j = 0; j < out.tokens.size(); ++j) {
      const double conditional = draft.probabilities[j] / (j == 0 ? 1.0 : draft.probabilities[j - 1]);
      for (std::size_t v = 0; v < vocab; ++v)
        out.q_rows[j * vocab + v] = static_cast<token_id>(v) == out.tokens[j]
                                        ? static_cast<float>(conditional)
                                        : static_cast<float>((1.0 - conditional) / (vocab - 1));
    }
  };
}

// REST's defect as a verification stage: every root-to-leaf path of the tree draws its own target
// samples (sample-and-match along the path, coins addressed by path and depth) and the path that
// matched longest wins. Each path alone is exact; taking the best of several is not (it favours
// tokens that many paths draft), so this must fail the law test where per-node sampling (the tree
// walk of acceptance/tree.hpp, one target sample per node) passes.
class per_path_sampling final : public specdec::verification_stage {
 public:
  specdec::stage_traits traits() const override {
    return {.order = 3, .reads_q_rows = false, .output_keys = false, .verified_length = false};
  }
  specdec::target_scoring scoring(const specdec::stage_request& r) const override { return {r.drafted, r.drafted + 1, true}; }
  bool check_draft(const specdec::stage_request& r, specdec::verification_buffers&) const override {
    REQUIRE(r.block.parents.size() == r.block.tokens.size());
    return false;
  }
  void verify(const specdec::host_policy&, std::span<specdec::stage_request* const> group,
              specdec::verification_buffers& b) const override {
    for (specdec::stage_request* r : group) verify_one(*r, b);
  }

 private:
  static void verify_one(specdec::stage_request& r, specdec::verification_buffers& b) {
    const std::size_t n = r.drafted, V = b.vocab;
    const auto p = b.warp_target_rows(r, n + 1);  // row u: node u (0 the root, node i + 1 is draft i)
    const auto parent = [&](std::size_t u) { return static_cast<std::size_t>(r.block.parents[u - 1]); };
    std::vector<bool> leaf(n + 1, true);
    for (std::size_t u = 1; u <= n; ++u) leaf[parent(u)] = false;
    std::vector<std::size_t> best_path;
    std::vector<token_id> best_tokens;
    std::uint32_t path_index = 0;
    for (std::size_t end = 0; end <= n; ++end) {
      if (!leaf[end]) continue;
      std::vector<std::size_t> path;  // root first
      for (std::size_t u = end; u != 0; u = parent(u)) path.push_back(u);
      path.push_back(0);
      std::reverse(path.begin(), path.end());
      std::vector<token_id> tokens;
      std::size_t kept = 0;
      for (std::size_t depth = 0;; ++depth) {
        auto coin = r.stream.open(path_index * 64 + static_cast<std::uint32_t>(depth), specdec::random::purpose::target_sample);
        const token_id x = inverse_cdf(p.subspan(path[depth] * V, V), coin.uniform());
        tokens.push_back(x);
        if (depth + 1 == path.size() || r.block.tokens[path[depth + 1] - 1] != x) break;
        ++kept;
      }
      if (best_tokens.empty() || kept + 1 > best_tokens.size()) {
        best_tokens = tokens;
        best_path.assign(path.begin() + 1, path.begin() + 1 + static_cast<std::ptrdiff_t>(kept));
      }
      ++path_index;
    }
    r.emitted = best_tokens;
    r.accepted = r.target_kept = best_path.size();
    r.judged = n;
    r.round_status = specdec::verify_status::ok;
    r.tree_kept.clear();
    for (const std::size_t u : best_path) r.tree_kept.push_back(static_cast<std::int32_t>(u - 1));
  }
  static token_id inverse_cdf(std::span<const float> row, double u) {
    double cumulative = 0;
    for (std::size_t v = 0; v < row.size(); ++v)
      if (u < (cumulative += row[v])) return static_cast<token_id>(v);
    return static_cast<token_id>(row.size() - 1);
  }
};
}  // namespace

TEST_CASE(
    "model-free drafts (prompt lookup, suffix chains and trees) keep the target's sequence law; a q that is not the drafts' law fails",
    "[decode][prompt_lookup]") {
  const auto pair = specdec_test::make_markov_pair(vocab, 0x5EED5, 0.6);
  const auto target = specdec::make_model(vocab, specdec_test::table_logits(pair.target, vocab));
  const auto law = specdec_test::target_sequence_distribution(pair, 1, horizon);
  const auto sample = [&](const specdec::request_acceptance& acceptance, std::uint64_t seed, auto make_stage) {
    specdec::kv_cached_model<decltype(target)> t(target);
    specdec::no_sequence_model none(vocab);
    specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::strict);
    const auto counts =
        specdec_test::count_sequences(decoder, vocab, horizon, law.size(), seed, [&](specdec::request_options& o) {
          o.prompt = markov_prompt;
          o.drafter = make_stage();
          o.acceptance = acceptance;
        });
    INFO("drafted " << counts.drafted);
    CHECK(counts.drafted > 10000);  // the lookup drafted in most requests: the test saw its drafts
    return specdec_test::chi_squared_gof(counts.counts, law);
  };
  // Prompt lookup, and suffix-tree drafts (draft/suffix_drafter.hpp): chains under sample-and-match and
  // strict with a one-hot q, suffix trees under target-only tree verification; a q that is not the
  // drafts' law (uniform, or the suffix tree's frequencies) must fail.
  using maker = std::function<specdec::draft_stage()>;
  const maker lookup_plain = [] { return specdec::prompt_lookup_stage({.min_n = 1, .max_n = 2, .k = 4}); };
  const maker lookup_one_hot = [] {
    return specdec::prompt_lookup_stage({.min_n = 1, .max_n = 2, .k = 4, .one_hot_vocab = vocab});
  };
  const maker suffix_chain = [] { return specdec::suffix_stage({.max_depth = 8, .max_spec = 4, .factor = 2.0}); };
  const maker suffix_one_hot = [&] { return specdec::with_one_hot_q(suffix_chain(), vocab); };
  const maker suffix_tree = [] { return specdec::suffix_stage({.max_depth = 8, .max_spec = 6, .factor = 3.0, .tree = true}); };
  const maker wide_suffix_tree = [] {  // branches in most rounds
    return specdec::suffix_stage({.max_depth = 3, .max_spec = 8, .factor = 4.0, .min_probability = 0.01, .tree = true});
  };
  struct law_case {
    const char* name;
    specdec::request_acceptance acceptance;
    maker stage;
    bool exact;
  };
  const std::vector<law_case> cases{
      {"prompt lookup, sample-and-match", specdec::sample_and_match, lookup_plain, true},
      {"prompt lookup, strict with one-hot q", specdec::strict, lookup_one_hot, true},
      {"prompt lookup, strict with a uniform q (negative control)", specdec::strict, uniform_q_lookup, false},
      {"suffix chains, sample-and-match", specdec::sample_and_match, suffix_chain, true},
      {"suffix chains, strict with one-hot q", specdec::strict, suffix_one_hot, true},
      {"suffix trees, target-only tree verification", specdec::tree_acceptance{specdec::target_only}, suffix_tree, true},
      {"wide suffix trees, target-only tree verification", specdec::tree_acceptance{specdec::target_only}, wide_suffix_tree,
       true},
      {"suffix chains, strict with the frequencies as q (negative control)", specdec::strict, suffix_frequencies_as_q, false},
      {"suffix trees, a target sample per path, longest match kept (REST's defect; negative control)",
       std::make_shared<const per_path_sampling>(), wide_suffix_tree, false},
  };
  std::uint64_t seed = 20261129;
  for (const law_case& c : cases) {
    const auto result = sample(c.acceptance, seed++, c.stage);
    INFO(c.name << ": " << result);
    CHECK((result.p_value > specdec_test::gof_alpha) == c.exact);
  }
}

TEST_CASE("prompt lookup with greedy verification is greedy target decoding", "[decode][prompt_lookup]") {
  constexpr std::size_t V = 6;
  const auto target = specdec::make_model(V, specdec_test::wave_logits(0.0));
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::no_sequence_model none(V);
  specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::greedy);
  specdec::request_options o;
  o.prompt = {1, 2, 3, 1, 2};
  o.max_new_tokens = 40;
  o.gamma = 6;
  o.target_params.temperature = 0.0;
  o.drafter = specdec::prompt_lookup_stage({.min_n = 1, .max_n = 3, .k = 6});
  const auto h = decoder.add(o);
  std::size_t drafted = 0;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) drafted += e.drafted;
  std::vector<token_id> context = o.prompt, expected;
  std::vector<float> row(V);
  while (expected.size() < 40) {
    target.next_logits(std::span<const token_id>(context), std::span<float>(row));
    const auto best = static_cast<token_id>(std::max_element(row.begin(), row.end()) - row.begin());
    expected.push_back(best);
    context.push_back(best);
  }
  CHECK(drafted > 0);
  CHECK(std::vector<token_id>(decoder.tokens(h).begin(), decoder.tokens(h).end()) == expected);
}

namespace {
constexpr std::size_t V = 6;

// Drafters for the invariance test. Each is a draft_stage over a request's context.
specdec::draft_stage random_drafter(std::uint64_t seed) {
  return [seed](std::span<const token_id> c, std::size_t gamma, const specdec::random::request_stream& s,
                specdec::stage_draft& out) {
    out.clear();
    auto r = specdec::random::philox_stream(
        {seed, s.request, s.step, static_cast<std::uint32_t>(c.size()), specdec::random::purpose::user});
    const std::size_t n = r.next_u32() % (gamma + 1);
    for (std::size_t j = 0; j < n; ++j) out.tokens.push_back(static_cast<token_id>(r.next_u32() % V));
  };
}
// Drafts the token the target is least likely to emit, as long as it may: every draft is rejected.
template <class M>
specdec::draft_stage adversarial_drafter(const M& target) {
  return [&target](std::span<const token_id> c, std::size_t gamma, const specdec::random::request_stream&,
                   specdec::stage_draft& out) {
    out.clear();
    std::vector<token_id> ctx(c.begin(), c.end());
    std::vector<float> row(V);
    for (std::size_t j = 0; j < gamma; ++j) {
      target.next_logits(std::span<const token_id>(ctx), std::span<float>(row));
      const auto worst = static_cast<token_id>(std::min_element(row.begin(), row.end()) - row.begin());
      out.tokens.push_back(worst);
      ctx.push_back(worst);
    }
  };
}
specdec::draft_stage empty_drafter() {
  return [](std::span<const token_id>, std::size_t, const specdec::random::request_stream&, specdec::stage_draft& out) {
    out.clear();
  };
}
// A cache shared by every request: the lookup over the concatenation of every context seen so far,
// so a request's drafts depend on the others in its batch and on their order.
specdec::draft_stage shared_cache_drafter(std::shared_ptr<std::vector<token_id>> seen) {
  return [seen, found = std::vector<token_id>{}](std::span<const token_id> c, std::size_t gamma,
                                                 const specdec::random::request_stream&, specdec::stage_draft& out) mutable {
    seen->insert(seen->end(), c.begin(), c.end());
    specdec::prompt_lookup(std::span<const token_id>(*seen), {.min_n = 1, .max_n = 3, .k = 5}, gamma, found);
    specdec::write_model_free_chain(std::span<const token_id>(found), 0, out);
  };
}

template <class Policy, class Target>
std::map<std::uint32_t, std::vector<token_id>> decode_batch(Policy policy, const Target& target,
                                                            const std::vector<specdec::request_options>& requests) {
  specdec::kv_cached_model<Target> t(target);
  specdec::no_sequence_model none(V);
  specdec::batch_decoder decoder(policy, t, none, specdec::sample_and_match);
  std::map<specdec::request_handle, std::uint32_t> ids;
  for (const auto& r : requests) ids[decoder.add(r)] = r.request_id;
  std::map<std::uint32_t, std::vector<token_id>> out;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step())
      out[ids.at(e.request)].insert(out[ids.at(e.request)].end(), e.tokens.begin(), e.tokens.end());
  return out;
}
}  // namespace

namespace {
#if SPECDEC_ENABLE_SIMD
using host_policies = std::tuple<specdec::exec::sequenced_policy, specdec::exec::simd_policy<>>;
#else
using host_policies = std::tuple<specdec::exec::sequenced_policy>;
#endif
}  // namespace

TEMPLATE_LIST_TEST_CASE("position-keyed target samples: any drafter gives target-only decoding's tokens", "[decode][invariance]",
                        host_policies) {
  const TestType policy{};
  const auto target = specdec::make_model(V, specdec_test::wave_logits(0.0));
  constexpr std::uint32_t requests = 24;
  constexpr std::size_t tokens = 48;
  const auto request = [&](std::uint32_t id, specdec::draft_stage stage, specdec::target_sample_keys keys) {
    specdec::request_options o;
    o.prompt = {static_cast<token_id>(id % V), static_cast<token_id>((id * 5 + 2) % V), 1, 2};
    o.seed = 77 + id % 3;
    o.request_id = id;
    o.gamma = 1 + id % 6;
    o.max_new_tokens = tokens;
    o.target_params.temperature = 0.7 + 0.1 * (id % 4);
    o.drafter = std::move(stage);
    o.sample_keys = keys;
    return o;
  };
  // Target-only decoding, one request at a time.
  std::map<std::uint32_t, std::vector<token_id>> expected;
  for (std::uint32_t id = 0; id < requests; ++id) {
    const auto o = request(id, {}, specdec::target_sample_keys::output_position);
    specdec::decode_options d;
    d.max_new_tokens = tokens;
    d.target_params = o.target_params;
    d.seed = o.seed;
    d.request_id = id;
    expected[id] = specdec::decode_target_only(target, std::span<const token_id>(o.prompt), d).tokens;
    REQUIRE(expected[id].size() == tokens);
  }
  const auto drafter_of = [&](int kind, std::uint32_t id,
                              const std::shared_ptr<std::vector<token_id>>& shared) -> specdec::draft_stage {
    switch (kind) {
      case 0: return random_drafter(id);
      case 1: return adversarial_drafter(target);
      case 2: return empty_drafter();
      case 3: return specdec::prompt_lookup_stage({.min_n = 1, .max_n = 3, .k = 6});
      default: return shared_cache_drafter(shared);
    }
  };
  const char* names[] = {"random", "adversarial", "empty", "prompt lookup", "shared cache"};
  for (int kind = 0; kind < 5; ++kind) {
    CAPTURE(names[kind]);
    auto shared = std::make_shared<std::vector<token_id>>();
    std::vector<specdec::request_options> batch;
    for (std::uint32_t id = 0; id < requests; ++id)
      batch.push_back(request(id, drafter_of(kind, id, shared), specdec::target_sample_keys::output_position));
    CHECK(decode_batch(policy, target, batch) == expected);  // in one batch
    for (std::uint32_t id = 0; id < 3; ++id) {               // alone
      auto alone =
          decode_batch(policy, target, {request(id, drafter_of(kind, id, shared), specdec::target_sample_keys::output_position)});
      CHECK(alone.at(id) == expected.at(id));
    }
  }
  // A mixed batch: every drafter at once, and target-only requests among them.
  auto shared = std::make_shared<std::vector<token_id>>();
  std::vector<specdec::request_options> mixed;
  for (std::uint32_t id = 0; id < requests; ++id)
    mixed.push_back(request(id, id % 6 == 5 ? specdec::draft_stage{} : drafter_of(static_cast<int>(id % 5), id, shared),
                            specdec::target_sample_keys::output_position));
  for (auto& o : mixed)
    if (!o.drafter) o.gamma = 0;  // target-only requests in the batch (no draft model here)
  CHECK(decode_batch(policy, target, mixed) == expected);
  // Suffix trees verified as trees: sample-and-match's sample at each node of the walk is addressed by
  // the node's depth, the output position it decides; keyed by node index instead (round keys), they differ.
  for (const auto keys : {specdec::target_sample_keys::output_position, specdec::target_sample_keys::round}) {
    std::vector<specdec::request_options> trees;
    for (std::uint32_t id = 0; id < requests; ++id) {
      auto o = request(id, {}, keys);
      o.set_stages(specdec::suffix_tree_stage({.max_depth = 8, .min_probability = 0.01}),
                   specdec::tree_acceptance{specdec::sample_and_match});
      trees.push_back(std::move(o));
    }
    const auto got = decode_batch(policy, target, trees);
    if (keys == specdec::target_sample_keys::output_position) {
      CHECK(got == expected);
    } else {
      std::size_t differing = 0;
      for (std::uint32_t id = 0; id < requests; ++id) differing += got.at(id) != expected.at(id) ? 1 : 0;
      CHECK(differing > requests / 2);
    }
  }
  // Control: keyed by the round, drafting changes the samples (the random drafter's rounds fall elsewhere).
  std::vector<specdec::request_options> by_round;
  for (std::uint32_t id = 0; id < requests; ++id)
    by_round.push_back(request(id, random_drafter(id), specdec::target_sample_keys::round));
  const auto round_keyed = decode_batch(policy, target, by_round);
  std::size_t differing = 0;
  for (std::uint32_t id = 0; id < requests; ++id) differing += round_keyed.at(id) != expected.at(id) ? 1 : 0;
  INFO("round-keyed requests that differ from target-only decoding: " << differing << " of " << requests);
  CHECK(differing > requests / 2);
}
