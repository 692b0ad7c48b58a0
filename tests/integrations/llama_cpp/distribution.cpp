// Strict speculative decoding through llama.cpp preserves the target's distribution: a chi-squared
// test of the first two generated tokens against their exact law, computed from the target's own
// rows, with a negative control (lenient verification, l = 0.3) that must fail.
//
// Power: both models sample at temperature 1 with top-k 8, so the first two tokens take at most 64
// values and every cell is well filled; the draft is the target with noise of half its weights' size
// (acceptance about 0.15 per token in the CLI's measurement), so the lenient rule's acceptance of
// tokens the target does not want moves the law far from the target's (TV about 0.3 here).
// SPECDEC_TEST_LABELS: llama_cpp statistical
#include <map>
#include <utility>

#include "integrations/llama_cpp/models.hpp"
#include "support/chi_squared.hpp"
#include "support/sample_scale.hpp"

namespace t = specdec_test::llama;
using specdec::token_id;

namespace {

const specdec::warp_params top8{.temperature = 1.0, .top_k = 8};

std::vector<double> warped(std::span<const float> logits) {
  std::vector<double> p(logits.size());
  specdec::warp_logits(logits, std::span<double>(p), top8);
  return p;
}

// The exact law of the first two tokens after `prompt`: (x1, x2) -> probability.
std::map<std::pair<token_id, token_id>, double> exact_law(const t::lc::model& m, const std::vector<token_id>& prompt) {
  std::map<std::pair<token_id, token_id>, double> law;
  const auto p1 = warped(t::fresh_logits(m, prompt));
  for (std::size_t x1 = 0; x1 < p1.size(); ++x1) {
    if (p1[x1] == 0.0) continue;
    std::vector<token_id> context = prompt;
    context.push_back(static_cast<token_id>(x1));
    const auto p2 = warped(t::fresh_logits(m, context));
    for (std::size_t x2 = 0; x2 < p2.size(); ++x2)
      if (p2[x2] > 0.0) law[{static_cast<token_id>(x1), static_cast<token_id>(x2)}] = p1[x1] * p2[x2];
  }
  return law;
}

template <class Acceptance>
specdec::stats::gof_result first_two_tokens(Acceptance acceptance, std::size_t samples) {
  const auto& target = t::model("target");
  const auto& draft = t::model("draft-noise-0.5");
  const std::vector<token_id> prompt = t::lc::tokenize(target, "Once upon a time");
  const auto law = exact_law(target, prompt);
  std::map<std::pair<token_id, token_id>, std::uint64_t> seen;
  const std::size_t chunk = 128;  // requests per context
  for (std::size_t first = 0; first < samples; first += chunk) {
    std::vector<specdec::request_options> requests;
    for (std::size_t i = first; i < std::min(samples, first + chunk); ++i) {
      specdec::request_options r;
      r.prompt = prompt;
      r.seed = 20261125;
      r.request_id = static_cast<std::uint32_t>(i);
      r.gamma = 2;
      r.max_new_tokens = 3;  // a round of two drafts: the second token is a draft's or the bonus
      r.target_params = r.draft_params = top8;
      r.acceptance = acceptance;
      requests.push_back(std::move(r));
    }
    for (const auto& tokens : t::decode_all(target, draft, std::move(requests))) {
      REQUIRE(tokens.size() >= 2);
      ++seen[{tokens[0], tokens[1]}];
    }
  }
  std::vector<std::uint64_t> observed;
  std::vector<double> expected;
  for (const auto& [cell, p] : law) {
    observed.push_back(seen.contains(cell) ? seen[cell] : 0);
    expected.push_back(p);
  }
  std::uint64_t outside = 0;
  for (const auto& [cell, n] : seen)
    if (!law.contains(cell)) outside += n;
  observed.push_back(outside);  // a cell of probability 0: any count in it fails the test
  expected.push_back(0.0);
  return specdec::stats::chi_squared_gof(observed, expected);
}

}  // namespace

TEST_CASE("strict SD through llama.cpp samples the target's law of the first two tokens", "[llama_cpp]") {
  const std::size_t samples = static_cast<std::size_t>(specdec_test::scaled_sample_count(2000, 1000));
  const auto strict = first_two_tokens(specdec::request_acceptance{specdec::strict}, samples);
  INFO("strict: " << strict);
  CHECK(strict.impossible == 0);
  CHECK(strict.p_value > specdec_test::gof_alpha);

  const auto lenient = first_two_tokens(specdec::request_acceptance{specdec::lenient_rule(0.3)}, samples);
  INFO("negative control, lenient l = 0.3: " << lenient);
  CHECK(lenient.p_value < specdec_test::gof_alpha);
}
