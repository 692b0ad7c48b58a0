// SPECDEC_TEST_LABELS: statistical
// The conformance kit passes specdec's own verifiers: every check of the chain kit on strict, block,
// sample-and-match and greedy verification and on the lenient rule (against its stated law), and every
// check of the tree kit on strict (SpecInfer multi-step sampling), recursive rejection, the target-only
// rule and greedy, on exec::seq and, when the simd backend is compiled in, exec::simd. These are the
// kit's positive controls: a false failure here is a bug in the kit (or in specdec).
//
// Sample sizes go through specdec_test::scaled_sample_count, so the sanitizer build runs fewer law
// requests; impossible_tokens runs 2^22 trials for strict only (its full 2^27 dominates a run's time and
// is exercised against a broken verifier in broken_verifiers.cpp).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/specdec_verifiers.hpp"
#include "specdec/exec/policy.hpp"
#include "support/sample_scale.hpp"

namespace {

namespace sc = specdec::conformance;

sc::kit_options fast_options(bool reads_draft_probs = true, std::uint64_t impossible_token_trials = 0) {
  sc::kit_options o;
  o.law_requests = specdec_test::scaled_sample_count(100000);
  o.reads_draft_probs = reads_draft_probs;
  o.impossible_token_trials = impossible_token_trials;
  return o;
}

constexpr std::uint64_t strict_impossible_trials = std::uint64_t{1} << 22;

// Runs the chain kit on `rule` under each compiled-in host policy.
template <class Rule>
void chain_rule_passes(const std::string& name, const Rule& rule, const sc::guarantee& g, const sc::kit_options& o) {
  {
    const auto report = sc::check_chain_verifier(name + " (seq)", sc::specdec_chain_verifier(specdec::exec::seq, rule), g, o);
    INFO(sc::to_text(report));
    REQUIRE(report.passed());
  }
#if SPECDEC_ENABLE_SIMD
  {
    const auto report = sc::check_chain_verifier(name + " (simd)", sc::specdec_chain_verifier(specdec::exec::simd, rule), g, o);
    INFO(sc::to_text(report));
    REQUIRE(report.passed());
  }
#endif
}

template <class Rule>
void tree_rule_passes(const std::string& name, const Rule& rule, const sc::guarantee& g, const sc::kit_options& o) {
  {
    const auto report = sc::check_tree_verifier(name + " (seq)", sc::specdec_tree_verifier(specdec::exec::seq, rule), g, o);
    INFO(sc::to_text(report));
    REQUIRE(report.passed());
  }
#if SPECDEC_ENABLE_SIMD
  {
    const auto report = sc::check_tree_verifier(name + " (simd)", sc::specdec_tree_verifier(specdec::exec::simd, rule), g, o);
    INFO(sc::to_text(report));
    REQUIRE(report.passed());
  }
#endif
}

}  // namespace

TEST_CASE("the chain kit passes specdec's strict rule", "[conformance][chain]") {
  chain_rule_passes("strict", specdec::strict, sc::guarantee::lossless(), fast_options(true, strict_impossible_trials));
}

TEST_CASE("the chain kit passes specdec's block verification", "[conformance][chain]") {
  chain_rule_passes("block", specdec::block, sc::guarantee::lossless(), fast_options());
}

TEST_CASE("the chain kit passes specdec's sample-and-match", "[conformance][chain]") {
  chain_rule_passes("sample_and_match", specdec::sample_and_match, sc::guarantee::lossless(), fast_options(false));
}

TEST_CASE("the chain kit passes specdec's greedy rule", "[conformance][chain]") {
  chain_rule_passes("greedy", specdec::greedy, sc::guarantee::greedy(), fast_options(false));
}

TEST_CASE("the chain kit passes the lenient rule against its stated law", "[conformance][chain]") {
  const specdec::lenient_rule rule(0.5);
  chain_rule_passes("lenient", rule, sc::guarantee::of_rule(rule, "lenient l=0.5"), fast_options());
}

TEST_CASE("the tree kit passes specdec's tree rules", "[conformance][tree]") {
  SECTION("strict (multi-step sampling), siblings drawn i.i.d.") {
    auto o = fast_options();
    o.tree_sampling = sc::sibling_sampling::independent;
    tree_rule_passes("tree strict", specdec::strict, sc::guarantee::lossless(), o);
  }
  SECTION("recursive rejection, siblings drawn without replacement") {
    auto o = fast_options();
    o.tree_sampling = sc::sibling_sampling::without_replacement;
    tree_rule_passes("tree recursive_rejection", specdec::recursive_rejection, sc::guarantee::lossless(), o);
  }
  SECTION("target-only") {
    auto o = fast_options(false);
    tree_rule_passes("tree target_only", specdec::target_only, sc::guarantee::lossless(), o);
  }
  SECTION("greedy") {
    auto o = fast_options(false);
    tree_rule_passes("tree greedy", specdec::greedy, sc::guarantee::greedy(), o);
  }
}

TEST_CASE("the kit's report names its checks and prints as JSON", "[conformance][report]") {
  const auto o = fast_options(true, 65536);
  const auto report = sc::check_chain_verifier("strict (seq)", sc::specdec_chain_verifier(specdec::exec::seq, specdec::strict),
                                               sc::guarantee::lossless(), o);
  INFO(sc::to_text(report));
  REQUIRE(report.passed());
  for (const char* name : {"exact_law/v4_gamma1to4", "exact_law/v3_far_draft_gamma2", "exact_law/v8_close_draft_gamma5",
                           "determinism", "batch_invariance", "independence/request_id", "independence/seed", "independence/step",
                           "bad_input/target_row_all_nan", "bad_input/residual_without_mass", "bad_input/vocab_one",
                           "bad_input/large_vocab_tiny_masses", "bad_input/empty_chain", "impossible_tokens"}) {
    INFO(name);
    const sc::check_result* c = report.find(name);
    REQUIRE(c != nullptr);
    CHECK(c->passed);
  }
  CHECK(report.find("no_such_check") == nullptr);
  // The exact-law figures: every request sampled, a p-value above alpha.
  const auto* law = report.find("exact_law/v4_gamma1to4");
  CHECK(law->figure("requests") == static_cast<double>(o.law_requests));
  CHECK(law->figure("p_value") >= o.alpha);

  const std::string json = sc::to_json(report);
  REQUIRE_FALSE(json.empty());
  CHECK(json.front() == '{');
  CHECK(json.find("\"passed\": true") != std::string::npos);
  CHECK(json.find("\"passed\": false") == std::string::npos);
  CHECK(json.find("\"name\": \"impossible_tokens\"") != std::string::npos);
  CHECK(json.find("\"name\": \"exact_law/v4_gamma1to4\"") != std::string::npos);
  // Balanced braces and brackets outside strings.
  int braces = 0, brackets = 0;
  bool in_string = false, escaped = false;
  for (const char ch : json) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    braces += ch == '{' ? 1 : ch == '}' ? -1 : 0;
    brackets += ch == '[' ? 1 : ch == ']' ? -1 : 0;
    REQUIRE(braces >= 0);
    REQUIRE(brackets >= 0);
  }
  CHECK_FALSE(in_string);
  CHECK(braces == 0);
  CHECK(brackets == 0);

  const std::string text = sc::to_text(report);
  CHECK(text.find("PASSED: all " + std::to_string(report.checks.size()) + " checks") != std::string::npos);
}

TEST_CASE("the tree kit's report names its checks", "[conformance][report][tree]") {
  const auto report = sc::check_tree_verifier("tree strict (seq)", sc::specdec_tree_verifier(specdec::exec::seq, specdec::strict),
                                              sc::guarantee::lossless(), fast_options());
  INFO(sc::to_text(report));
  REQUIRE(report.passed());
  for (const char* name :
       {"exact_law/v4_tree_2x2", "exact_law/v3_tree_wide_root", "exact_law/v6_tree_deep", "determinism", "batch_invariance",
        "bad_input/tree_root_row_all_nan", "bad_input/tree_node_token_equals_vocab", "bad_input/tree_vocab_one"}) {
    INFO(name);
    REQUIRE(report.find(name) != nullptr);
  }
  // Trees have no independence or impossible-token checks.
  CHECK(report.find("impossible_tokens") == nullptr);
  CHECK(report.find("independence/seed") == nullptr);
  CHECK(sc::to_json(report).find("\"passed\": true") != std::string::npos);
}
