// Verification stages of the step decoder (decode/verification_stage.hpp): a chain rule defined here
// set per request gives the tokens of the library's rule it copies, on every host policy; a stage of
// the user's own wrapping one is called once per group per step; add() refuses what a stage cannot
// serve, with the reason, also a drafter stage whose declared output it cannot verify; a value type of the user's own maps to its stage through
// `verification_stage_for`; a last-token request whose length stage says 0 drafts a run of one; a
// stage (or the verified-length stage) that throws for one request ends that request alone, with
// `stage_error`, and the others' tokens are those of their runs alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/draft/model_free.hpp"
#include "specdec/draft/prompt_lookup.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/model/adapters.hpp"
#include "support/numbered_request.hpp"
#include "support/wave_models.hpp"
#include "support/host_policies.hpp"

namespace {
using specdec::token_id;
using Catch::Matchers::Contains;
constexpr std::size_t V = 6;

using specdec_test::host_policies;

// A chain rule of the user's own: strict speculative sampling's test, restated.
struct my_strict {
  static constexpr specdec::rule_family family = specdec::rule_family::rejection;
  bool accepts(double p, double q, double u) const noexcept { return u * q < p; }
  double accepted_mass(double p, double q) const noexcept { return q < p ? q : p; }
};

// A parameterised one (lenient speculative sampling, restated); equal lenience: one verify call.
struct my_lenient {
  static constexpr specdec::rule_family family = specdec::rule_family::rejection;
  double l = 1.0;
  bool accepts(double p, double q, double u) const noexcept { return u * q * l < p; }
  double accepted_mass(double p, double q) const noexcept { return q * l < p ? q : p / l; }
  bool operator==(const my_lenient&) const = default;
};

// An acceptance value of the user's own, mapped to a stage by specialising `verification_stage_for`.
struct recorded_strict {};

// A stage of the user's own: forwards to an inner stage and records every verify call's group size,
// or throws for one request (as a rule that cannot judge it would).
class recording_stage final : public specdec::verification_stage {
 public:
  explicit recording_stage(specdec::request_acceptance inner, specdec::request_handle throw_for = 0)
      : inner_(std::move(inner)), throw_for_(throw_for) {}
  explicit recording_stage(recorded_strict /*unused*/) : inner_(specdec::strict), throw_for_(0) {}
  specdec::stage_traits traits() const override { return inner_.stage()->traits(); }
  bool check_draft(const specdec::stage_request& r, specdec::verification_buffers& b) const override {
    return inner_.stage()->check_draft(r, b);
  }
  void verify(const specdec::host_policy& policy, std::span<specdec::stage_request* const> group,
              specdec::verification_buffers& b) const override {
    groups.push_back(group.size());
    for (const specdec::stage_request* r : group)
      if (r->handle == throw_for_) throw specdec::error("recording_stage: cannot judge this request");
    inner_.stage()->verify(policy, group, b);
  }
  mutable std::vector<std::size_t> groups;  // the group size of every verify call

 private:
  specdec::request_acceptance inner_;
  specdec::request_handle throw_for_;
};

}  // namespace

template <>
struct specdec::verification_stage_for<recorded_strict> {
  using type = recording_stage;
};

namespace {
static_assert(specdec::StageAcceptance<recorded_strict>);
static_assert(!specdec::StageAcceptance<int>);

const auto& target_model() { return specdec_test::wave_target<V>(); }
const auto& draft_model() { return specdec_test::wave_draft<V>(); }
using model_t = std::decay_t<decltype(target_model())>;

specdec::request_options request(std::uint32_t id, specdec::request_acceptance acceptance) {
  specdec::request_options o = specdec_test::numbered_request<V>(id, 91, 1 + id % 5, 20 + id % 7);
  o.target_params.temperature = 0.8 + 0.1 * (id % 3);
  o.draft_params.temperature = 1.1;
  o.acceptance = std::move(acceptance);
  return o;
}

// Every request's tokens and last event, run together on one decoder (with an optional verified-length stage).
struct outcome {
  std::vector<std::vector<token_id>> tokens;
  std::vector<specdec::step_event> last;
};
template <class Policy>
outcome run(Policy policy, const std::vector<specdec::request_options>& requests, specdec::verify_length_stage lengths = {}) {
  specdec::recomputing_sequence_model<model_t> t(target_model());
  specdec::recomputing_sequence_model<model_t> q(draft_model());
  specdec::batch_decoder decoder(policy, t, q, specdec::strict);
  decoder.set_verify_length_stage(std::move(lengths));
  std::map<specdec::request_handle, std::size_t> index;
  for (std::size_t i = 0; i < requests.size(); ++i) index[decoder.add(requests[i])] = i;
  outcome out{std::vector<std::vector<token_id>>(requests.size()), std::vector<specdec::step_event>(requests.size())};
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      const std::size_t i = index.at(e.request);
      out.tokens[i].insert(out.tokens[i].end(), e.tokens.begin(), e.tokens.end());
      out.last[i] = e;
      out.last[i].tokens = {};
    }
  return out;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("a chain rule of the user's own, set per request, gives the tokens of the rule it restates",
                        "[decode][verification_stage]", host_policies) {
  const TestType policy{};
  std::vector<specdec::request_options> mine, library;
  for (std::uint32_t id = 0; id < 24; ++id) {
    const double l = id % 2 == 0 ? 0.5 : 0.8;
    mine.push_back(
        request(id, id % 3 == 0 ? specdec::request_acceptance{my_strict{}} : specdec::request_acceptance{my_lenient{l}}));
    library.push_back(request(
        id, id % 3 == 0 ? specdec::request_acceptance{specdec::strict} : specdec::request_acceptance{specdec::lenient_rule(l)}));
  }
  const auto a = run(policy, mine), b = run(policy, library);
  CHECK(a.tokens == b.tokens);
  for (std::size_t i = 0; i < mine.size(); ++i) CHECK(a.tokens[i].size() == mine[i].max_new_tokens);
  // Grouping: equal parameters (==) share a stage group, a stateless rule shares one stage object.
  CHECK(specdec::same_rule(my_lenient{0.5}, my_lenient{0.5}));
  CHECK_FALSE(specdec::same_rule(my_lenient{0.5}, my_lenient{0.8}));
  CHECK(specdec::request_acceptance{my_strict{}}.stage() == specdec::request_acceptance{my_strict{}}.stage());
  CHECK_FALSE(specdec::same_rule(my_strict{}, specdec::strict));
  CHECK(specdec::same_rule(specdec::request_acceptance{}, specdec::chain_acceptance{}));
}

TEST_CASE("a stage of the user's own is called once per group and step", "[decode][verification_stage]") {
  const auto stage = std::make_shared<const recording_stage>(specdec::strict);
  std::vector<specdec::request_options> wrapped, plain;
  for (std::uint32_t id = 0; id < 3; ++id) {
    wrapped.push_back(request(id, stage));
    wrapped.back().max_new_tokens = 16;
    plain.push_back(request(id, specdec::strict));
    plain.back().max_new_tokens = 16;
  }
  const auto a = run(specdec::exec::seq, wrapped), b = run(specdec::exec::seq, plain);
  CHECK(a.tokens == b.tokens);
  REQUIRE(!stage->groups.empty());
  CHECK(stage->groups.front() == 3);  // the three requests, one call
  for (const std::size_t g : stage->groups) CHECK(g <= 3);
}

TEST_CASE("a value type of the user's own becomes an acceptance by specialising verification_stage_for",
          "[decode][verification_stage]") {
  const specdec::request_acceptance a{recorded_strict{}};
  const auto* stage = dynamic_cast<const recording_stage*>(a.stage());
  REQUIRE(stage != nullptr);
  CHECK(specdec::request_acceptance{recorded_strict{}}.stage() == a.stage());  // stateless: one shared stage
  std::vector<specdec::request_options> mine, plain;
  for (std::uint32_t id = 0; id < 3; ++id) {
    mine.push_back(request(id, recorded_strict{}));
    plain.push_back(request(id, specdec::strict));
  }
  const auto before = stage->groups.size();
  CHECK(run(specdec::exec::seq, mine).tokens == run(specdec::exec::seq, plain).tokens);
  CHECK(stage->groups.size() > before);  // the user's stage verified them
}

TEST_CASE("add() refuses what a stage cannot serve, with the reason", "[decode][verification_stage][bad_input]") {
  specdec::recomputing_sequence_model<model_t> t(target_model());
  specdec::recomputing_sequence_model<model_t> q(draft_model());
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  const specdec::draft_stage any_stage = [](std::span<const token_id>, std::size_t, const specdec::random::request_stream&,
                                            specdec::stage_draft&) {};
  auto o = request(0, specdec::last_token);
  CHECK_THROWS_WITH(decoder.add(o), Contains("drafter stage"));
  o.drafter = any_stage;
  o.gamma = 0;  // a SPRINTER run drafts at least one token: refused, not a stalled batch
  CHECK_THROWS_WITH(decoder.add(o), Contains("gamma must be > 0"));
  auto tree = request(1, specdec::tree_acceptance{specdec::strict});
  CHECK_THROWS_WITH(decoder.add(tree), Contains("tree drafter stage"));
  CHECK(decoder.active() == 0);
  tree.drafter = any_stage;  // the recomputing adapter takes tree-shaped appends
  CHECK_NOTHROW(decoder.add(tree));
  CHECK(decoder.active() == 1);
}

TEST_CASE("add() refuses a drafter stage whose declared output the verification stage cannot verify",
          "[decode][verification_stage][bad_input]") {
  specdec::recomputing_sequence_model<model_t> t(target_model());
  specdec::recomputing_sequence_model<model_t> q(draft_model());
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  const auto with = [](specdec::request_options o, specdec::draft_stage d) {
    o.drafter = std::move(d);
    return o;
  };
  const auto chain = specdec::prompt_lookup_stage({});
  const auto tree = specdec::suffix_stage({.tree = true});
  const specdec::draft_stage joint(
      specdec::draft_output::joint,
      [](std::span<const token_id>, std::size_t, const specdec::random::request_stream&, specdec::stage_draft&) {});
  CHECK(chain.output() == specdec::draft_output::chain);
  CHECK(tree.output() == specdec::draft_output::tree);
  CHECK(specdec::suffix_stage({}).output() == specdec::draft_output::chain);
  CHECK(specdec::with_one_hot_q(tree, V).output() == specdec::draft_output::tree);
  CHECK_THROWS_WITH(decoder.add(with(request(0, specdec::strict), tree)), Contains("a token tree") && Contains("a chain rule"));
  CHECK_THROWS_WITH(decoder.add(with(request(1, specdec::strict), joint)), Contains("joint log q") && Contains("a chain rule"));
  CHECK_THROWS_WITH(decoder.add(with(request(2, specdec::last_token), chain)),
                    Contains("a chain,") && Contains("last-token rule"));
  CHECK_THROWS_WITH(decoder.add(with(request(3, specdec::tree_acceptance{specdec::target_only}), chain)),
                    Contains("tree verification"));
  CHECK_THROWS_WITH(decoder.add(with(request(4, specdec::mtad_rule(0.5)), tree)), Contains("the joint rule"));
  CHECK(decoder.active() == 0);
  // What each can verify is admitted: a chain rule that reads no q takes joint log q's chain.
  CHECK_NOTHROW(decoder.add(with(request(5, specdec::greedy), joint)));
  CHECK_NOTHROW(decoder.add(with(request(6, specdec::strict), chain)));
  CHECK_NOTHROW(decoder.add(with(request(7, specdec::tree_acceptance{specdec::target_only}), tree)));
  CHECK(decoder.active() == 3);
}

// What each library stage verifies, known at compile time (`verifies_output`, which `set_stages` requires).
using specdec::draft_output;
using specdec::verifies_output;
static_assert(verifies_output<specdec::strict_rule, draft_output::chain>);
static_assert(verifies_output<specdec::strict_rule, draft_output::marked_run>);
static_assert(!verifies_output<specdec::strict_rule, draft_output::tree>);
static_assert(!verifies_output<specdec::strict_rule, draft_output::joint>);  // strict reads the q rows joint log q lacks
static_assert(verifies_output<specdec::greedy_rule, draft_output::joint>);   // greedy reads none
static_assert(verifies_output<specdec::mtad_rule, draft_output::joint>);
static_assert(!verifies_output<specdec::mtad_rule, draft_output::tree>);
static_assert(verifies_output<specdec::last_token_rule, draft_output::marked_run>);
static_assert(!verifies_output<specdec::last_token_rule, draft_output::chain>);
static_assert(verifies_output<specdec::tree_acceptance, draft_output::tree>);
static_assert(!verifies_output<specdec::tree_acceptance, draft_output::chain>);
static_assert(verifies_output<recorded_strict, draft_output::tree>);  // a user's stage that does not say: add() checks
// The library's factories carry their output in their type.
static_assert(std::is_same_v<decltype(specdec::prompt_lookup_stage({})), specdec::draft_stage_of<draft_output::chain>>);
static_assert(std::is_same_v<decltype(specdec::suffix_tree_stage({})), specdec::draft_stage_of<draft_output::tree>>);
static_assert(std::is_same_v<decltype(specdec::with_one_hot_q(specdec::suffix_chain_stage({}), V)),
                             specdec::draft_stage_of<draft_output::chain>>);

TEST_CASE("set_stages pairs a typed drafter stage with an acceptance that verifies it; the stage keeps its output",
          "[decode][verification_stage]") {
  specdec::recomputing_sequence_model<model_t> t(target_model());
  specdec::recomputing_sequence_model<model_t> q(draft_model());
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  auto o = request(0, specdec::chain_acceptance{});
  o.set_stages(specdec::suffix_tree_stage({}), specdec::tree_acceptance{specdec::target_only});
  CHECK(o.drafter.output() == draft_output::tree);  // converted to draft_stage, not wrapped as an undeclared callable
  REQUIRE(o.acceptance.stage() != nullptr);
  CHECK(dynamic_cast<const specdec::tree_stage<specdec::tree_acceptance>*>(o.acceptance.stage()) != nullptr);
  CHECK_NOTHROW(decoder.add(o));
  // Set one by one, the same mismatch set_stages refuses to compile is refused by add().
  auto p = request(1, specdec::strict);
  p.drafter = specdec::suffix_tree_stage({});
  CHECK_THROWS_WITH(decoder.add(p), Contains("a token tree") && Contains("a chain rule"));
  const specdec::draft_stage copied = specdec::prompt_lookup_stage({});
  CHECK(copied.output() == draft_output::chain);
}

TEST_CASE("a last-token request whose length stage says 0 drafts a run of one; the batch runs on",
          "[decode][verification_stage][sprinter]") {
  specdec::recomputing_sequence_model<model_t> t(target_model());
  specdec::recomputing_sequence_model<model_t> q(draft_model());
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  // A run of gamma tokens, every one but the checked last kept (a verifier that accepts all).
  auto run_stage = request(0, specdec::last_token);
  run_stage.drafter = [](std::span<const token_id>, std::size_t gamma, const specdec::random::request_stream&,
                         specdec::stage_draft& out) {
    out.tokens.assign(gamma, 1);
    out.q_rows.assign(gamma * V, 1.0f / static_cast<float>(V));
    out.kept = gamma - 1;
  };
  run_stage.length = [](const specdec::decode_stats&) { return std::size_t{0}; };
  const auto sprinter = decoder.add(run_stage);
  const auto healthy = decoder.add(request(1, specdec::strict));
  std::map<specdec::request_handle, specdec::step_event> last;
  std::map<specdec::request_handle, std::size_t> emitted;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      last[e.request] = e;
      emitted[e.request] += e.tokens.size();
      if (e.request == sprinter && e.finished == specdec::finish_reason::none) CHECK(e.drafted == 1);
    }
  CHECK(last[sprinter].finished == specdec::finish_reason::length);
  CHECK(emitted[sprinter] == run_stage.max_new_tokens);
  CHECK(last[healthy].finished == specdec::finish_reason::length);
}

TEST_CASE("a stage that throws for one request ends it alone", "[decode][verification_stage][bad_input]") {
  std::vector<specdec::request_options> requests;
  for (std::uint32_t id = 0; id < 4; ++id) requests.push_back(request(id, specdec::strict));
  const auto alone = run(specdec::exec::seq, requests);

  SECTION("verification") {
    // Handles are given in order from 1: request 2 (handle 3) cannot be judged; it shares its group.
    const auto stage = std::make_shared<const recording_stage>(specdec::strict, 3);
    auto faulty = requests;
    for (auto& r : faulty) r.acceptance = stage;
    const auto out = run(specdec::exec::seq, faulty);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i);
      if (i == 2) {
        CHECK(out.last[i].finished == specdec::finish_reason::error);
        CHECK(specdec::has_flag(out.last[i].status, specdec::verify_status::stage_error));
        CHECK(out.tokens[i].empty());
      } else {
        CHECK(out.last[i].finished == specdec::finish_reason::length);
        CHECK(out.tokens[i] == alone.tokens[i]);
      }
    }
  }
  SECTION("verified length") {
    const specdec::verify_length_stage lengths = [](std::span<const specdec::drafted_request> drafted, std::span<std::size_t>) {
      for (const auto& d : drafted)
        if (d.request == 2 && d.stats->iterations == 3) throw specdec::numerical_error("a companion without mass");
    };
    const auto out = run(specdec::exec::seq, requests, lengths);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i);
      if (i == 1) {
        CHECK(out.last[i].finished == specdec::finish_reason::error);
        CHECK(specdec::has_flag(out.last[i].status, specdec::verify_status::stage_error));
        CHECK(out.tokens[i].size() < alone.tokens[i].size());
        CHECK(std::equal(out.tokens[i].begin(), out.tokens[i].end(), alone.tokens[i].begin()));
      } else {
        CHECK(out.tokens[i] == alone.tokens[i]);
      }
    }
  }
}
