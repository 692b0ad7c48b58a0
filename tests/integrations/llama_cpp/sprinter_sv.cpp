// SPRINTER and SV on llama.cpp: the stages of decode/sprinter.hpp and decode/sv.hpp on the step
// decoder, with the draft (and SV's companion) read through prefix_cached_model lanes of llama.cpp
// contexts and the target a llama.cpp sequence model.
//
// - SPRINTER (seed 000, Algorithm 2) with a verifier that accepts nothing sends every draft to the
//   target's check min(1, p/q): under greedy decoding it is llama.cpp's greedy decoding of the target,
//   one token per target call. Negative control: a verifier that accepts everything (runs of 4, the
//   fourth a forced check) emits the draft's tokens unchecked, and they differ.
// - SPRINTER's law (Theorem 3.1): with the i.i.d. oracle verifier (eta_tp = 1, false-positive rate
//   eta_fp, lambda = 1) every token follows (1 - eta_fp) p + eta_fp q given its prefix. The first two
//   tokens (temperature 1, top-k 8 on both models; the draft with noise 0.5, far from the target) pass
//   a chi-squared test against the target's law at eta_fp = 0 and against the product of the
//   mixtures at eta_fp = 0.5; the eta_fp = 0.5 samples against the target's law must fail.
// - SV (exact mode, the batch scheduler) with an estimator profiled on the pair: under greedy decoding
//   its tokens are llama.cpp's greedy decoding of the target whatever lengths it verifies.
// SPECDEC_TEST_LABELS: llama_cpp statistical
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "integrations/llama_cpp/models.hpp"
#include "integrations/llama_cpp/two_token_law.hpp"
#include "specdec/acceptance/last_token.hpp"
#include "specdec/decode/sv.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"
#include "specdec/estimate/binning.hpp"
#include "specdec/model/prefix_cached_model.hpp"
#include "support/chi_squared.hpp"
#include "support/sample_scale.hpp"

namespace t = specdec_test::llama;
using specdec::token_id;

namespace {

using view = specdec::prefix_cached_model<t::lc::sequence_model>;
// Request i's drafter stage over its draft lane (and, for the oracle, its target lane).
using stage_factory = std::function<specdec::draft_stage(const view& draft, const view& target, std::size_t i)>;

const specdec::warp_params greedy_warp{.temperature = 0.0};
const specdec::warp_params top8{.temperature = 1.0, .top_k = 8};

// Decodes `requests` on one target context (a sequence each) with the drafter stages `make` gives,
// each over a lane of the draft's context and a lane of a second target context; returns each
// request's tokens and adds its decode_stats to `stats`.
std::vector<std::vector<token_id>> decode_stages(const t::lc::model& draft_model, std::vector<specdec::request_options> requests,
                                                 const stage_factory& make, specdec::decode_stats* stats = nullptr) {
  const auto n = static_cast<std::uint32_t>(requests.size());
  const t::lc::context_options params{.context_per_sequence = 128, .sequences = n, .threads = 1};
  t::lc::context target_ctx(t::model("target"), params), draft_ctx(draft_model, params), oracle_ctx(t::model("target"), params);
  t::lc::sequence_model target(target_ctx), draft(draft_ctx), oracle(oracle_ctx);
  specdec::no_sequence_model none(target.vocab_size());
  specdec::batch_decoder decoder(specdec::exec::seq, target, none, specdec::strict);
  std::vector<std::unique_ptr<view>> lanes;
  std::vector<specdec::request_handle> handles;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    lanes.push_back(std::make_unique<view>(draft, 1, i));
    lanes.push_back(std::make_unique<view>(oracle, 1, i));
    requests[i].drafter = make(*lanes[2 * i], *lanes[2 * i + 1], i);
    handles.push_back(decoder.add(std::move(requests[i])));
  }
  return t::run_to_end(decoder, handles, stats);
}

// SPRINTER's stages: a verifier-gated drafter per request over its draft lane, warped with `warp`,
// features and verifier from `gate(target lane)`; the drafters live in `keep`.
template <class Features, class V>
struct sprinter_stages {
  using drafter = specdec::verifier_gated_drafter<view, Features, V>;
  std::function<std::pair<Features, V>(const view& target)> gate;
  specdec::warp_params warp;
  specdec::gating_params gating;
  specdec::sprinter_stats stats{};
  std::vector<std::unique_ptr<drafter>> keep{};

  stage_factory factory() {
    return [this](const view& draft, const view& target, std::size_t) {
      auto [features, verifier] = gate(target);
      keep.push_back(std::make_unique<drafter>(draft, warp, std::move(features), std::move(verifier), gating));
      return specdec::gated_stage(*keep.back(), &stats);
    };
  }
};

std::vector<specdec::request_options> greedy_requests(std::size_t n, specdec::request_acceptance acceptance, std::size_t gamma) {
  std::vector<specdec::request_options> requests;
  for (const auto& text : t::prompts()) {
    specdec::request_options r;
    r.prompt = t::lc::tokenize(t::model("target"), text);
    r.max_new_tokens = n;
    r.gamma = gamma;
    r.target_params = r.draft_params = greedy_warp;
    r.acceptance = acceptance;
    requests.push_back(std::move(r));
  }
  return requests;
}

// A verifier of draft_row_features that returns `score` whatever it reads.
auto constant_verifier(double score) {
  return specdec::make_verifier(specdec::draft_row_features::size, [score](std::span<const float>) { return score; });
}

// Greedy SPRINTER stages whose verifier scores every draft `score`, runs of at most `max_run`.
sprinter_stages<specdec::draft_row_features, decltype(constant_verifier(0.0))> constant_gate(double score, std::size_t max_run) {
  return {.gate =
              [score](const view&) {
                return std::pair{specdec::draft_row_features{}, constant_verifier(score)};
              },
          .warp = greedy_warp,
          .gating = {.tau = 0.5, .max_run = max_run}};
}

std::vector<double> warped(std::span<const float> logits) {
  std::vector<double> p(logits.size());
  specdec::warp_logits(logits, std::span<double>(p), top8);
  return p;
}

// The law of the first two tokens after `prompt` when each follows (1 - eta) p + eta q given its
// prefix (Theorem 3.1), p the target's and q the draft's top-8 rows.
t::two_token_cells<double> mixture_law(const std::vector<token_id>& prompt, double eta) {
  return t::two_token_law(prompt, [eta](const std::vector<token_id>& context) {
    const auto p = warped(t::fresh_logits(t::model("target"), context));
    const auto q = warped(t::fresh_logits(t::model("draft-noise-0.5"), context));
    std::vector<double> m(p.size());
    for (std::size_t v = 0; v < p.size(); ++v) m[v] = (1.0 - eta) * p[v] + eta * q[v];
    return m;
  });
}

// The first two tokens of `samples` SPRINTER requests with the oracle verifier at false-positive rate eta.
t::two_token_cells<std::uint64_t> sprinter_first_two(double eta, std::size_t samples, specdec::sprinter_stats& stats) {
  const std::vector<token_id> prompt = t::lc::tokenize(t::model("target"), "Once upon a time");
  const auto request = [&](std::uint32_t i) {
    specdec::request_options r;
    r.prompt = prompt;
    r.seed = 20261129;
    r.request_id = i;
    r.gamma = 20;
    r.max_new_tokens = 2;
    r.target_params = top8;
    r.acceptance = specdec::last_token;
    return r;
  };
  const auto decode = [&](std::vector<specdec::request_options> requests) {
    sprinter_stages<specdec::oracle_features<view>, specdec::oracle_noise_verifier> s{
        .gate =
            [eta](const view& target) {
              return std::pair{specdec::oracle_features<view>(target, top8), specdec::oracle_noise_verifier(1.0, eta, 1.0)};
            },
        .warp = top8,
        .gating = {.tau = 0.5, .max_run = 20}};
    auto tokens = decode_stages(t::model("draft-noise-0.5"), std::move(requests), s.factory());
    stats.verifier_calls += s.stats.verifier_calls;
    stats.verifier_accepted += s.stats.verifier_accepted;
    return tokens;
  };
  return t::count_first_two(samples, 64, request, decode);
}

}  // namespace

TEST_CASE("SPRINTER on llama.cpp: a verifier that accepts nothing gives greedy target decoding", "[llama_cpp][sprinter]") {
  constexpr std::size_t n = 48;
  const auto& target = t::model("target");
  specdec::decode_stats stats;
  auto never = constant_gate(0.0, 20);
  const auto got = decode_stages(t::model("draft-layers2"), greedy_requests(n, specdec::last_token, 20), never.factory(), &stats);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("prompt " << i);
    CHECK(got[i] == t::llama_greedy(target, t::lc::tokenize(target, t::prompts()[i]), n));
  }
  // Every draft went to the target: one token per target call, each checked draft kept or corrected.
  CHECK(never.stats.verifier_accepted == 0);
  CHECK(never.stats.verifier_calls == 3 * n);
  CHECK(stats.target_calls == 3 * n);
  CHECK(stats.accepted > 0);              // the draft (the target's first two layers) is often right
  CHECK(stats.accepted < stats.drafted);  // and sometimes corrected by the target's check

  // Negative control: a verifier that accepts everything (runs of 4, the fourth a forced check) keeps
  // the draft's tokens unchecked, and they are not the target's.
  specdec::decode_stats loose_stats;
  auto always = constant_gate(1.0, 4);
  const auto loose =
      decode_stages(t::model("draft-layers2"), greedy_requests(n, specdec::last_token, 20), always.factory(), &loose_stats);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < loose.size(); ++i)
    differ += loose[i] != t::llama_greedy(target, t::lc::tokenize(target, t::prompts()[i]), n);
  CHECK(differ > 0);
  CHECK(always.stats.forced_checks > 0);
  CHECK(always.stats.verifier_accepted == 3 * always.stats.forced_checks);  // every full run: 3 accepted, then the check
  CHECK(loose_stats.target_calls < stats.target_calls);
}

TEST_CASE("SPRINTER on llama.cpp: Theorem 3.1's law of the first two tokens", "[llama_cpp][sprinter][statistical]") {
  const std::size_t samples = static_cast<std::size_t>(specdec_test::scaled_sample_count(2000, 1000));
  const std::vector<token_id> prompt = t::lc::tokenize(t::model("target"), "Once upon a time");
  const auto target_law = mixture_law(prompt, 0.0);

  specdec::sprinter_stats exact_stats;
  const auto exact = t::two_token_gof(sprinter_first_two(0.0, samples, exact_stats), target_law);
  INFO("eta_fp = 0 against the target's law: " << exact);
  CHECK(exact.impossible == 0);
  CHECK(exact.p_value > specdec_test::gof_alpha);
  CHECK(exact_stats.verifier_accepted > 0);  // the verifier kept some tokens unchecked

  specdec::sprinter_stats mixed_stats;
  const auto seen = sprinter_first_two(0.5, samples, mixed_stats);
  const auto mixed = t::two_token_gof(seen, mixture_law(prompt, 0.5));
  INFO("eta_fp = 0.5 against (1 - eta_fp) p + eta_fp q per token: " << mixed);
  CHECK(mixed.impossible == 0);
  CHECK(mixed.p_value > specdec_test::gof_alpha);

  const auto control = t::two_token_gof(seen, target_law);
  INFO("negative control, eta_fp = 0.5 against the target's law: " << control);
  CHECK(control.p_value < specdec_test::gof_alpha);
}

TEST_CASE("SV on llama.cpp: profiled on the pair, greedy SV gives greedy target decoding", "[llama_cpp][sv]") {
  constexpr std::size_t n = 48, gamma = 5;
  const auto& target_model = t::model("target");
  std::vector<std::vector<token_id>> prompts;
  for (const auto& text : t::prompts()) prompts.push_back(t::lc::tokenize(target_model, text));
  const t::lc::context_options one{.context_per_sequence = 256, .sequences = 1, .threads = 1};
  const t::lc::context_options three{.context_per_sequence = 256, .sequences = 3, .threads = 1};
  t::lc::context companion_ctx(t::model("draft-layers2"), three);
  t::lc::sequence_model companion_seq(companion_ctx);
  const view companion(companion_seq, 3);

  // The estimator, from standard SD on the pair (SV section 7.4) at temperature 1 (greedy's
  // acceptances are all 0 or 1).
  std::vector<specdec::estimate::indicator_sample> samples;
  {
    t::lc::context profile_target_ctx(target_model, one), profile_draft_ctx(t::model("draft-layers1"), one);
    t::lc::sequence_model profile_target(profile_target_ctx), profile_draft(profile_draft_ctx);
    const view target_lane(profile_target, 1), draft_lane(profile_draft, 1);
    samples = specdec::profile_sv_indicators(specdec::exec::seq, target_lane, draft_lane, {}, companion, prompts,
                                             specdec::decode_options{.seed = 7}, {.gamma = gamma, .tokens_per_prompt = 32});
  }
  REQUIRE(samples.size() >= 3 * 32);
  const auto estimator =
      specdec::estimate::acceptance_estimator::fit(samples, specdec::estimate::binning::adaptive(samples, 4, 4));
  // A target whose cost grows with the positions it scores, so that low estimates shorten the verified prefix.
  const auto latency = [](int positions) { return 1.0 + 0.5 * static_cast<double>(positions); };
  const specdec::sv_setup setup{companion, estimator, latency};

  t::lc::context target_ctx(target_model, three), draft_ctx(t::model("draft-layers1"), three);
  t::lc::sequence_model target(target_ctx), draft(draft_ctx);
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
  decoder.set_verify_length_stage(specdec::sv_batch_lengths(specdec::exec::seq, setup, {.gamma_max = gamma}));
  std::vector<specdec::request_handle> handles;
  for (const auto& p : prompts) {
    specdec::request_options r;
    r.prompt = p;
    r.max_new_tokens = n;
    r.gamma = gamma;
    r.target_params = r.draft_params = greedy_warp;
    handles.push_back(decoder.add(std::move(r)));
  }
  specdec::sv_stats sv;
  std::vector<std::vector<token_id>> got(handles.size());
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      if (!e.target_logits.empty()) sv.record(e.drafted, e.verified, e.drafted > 0);
      if (e.finished != specdec::finish_reason::none) {
        const auto tokens = decoder.tokens(e.request);
        got[e.request - handles.front()].assign(tokens.begin(), tokens.end());
      }
    }
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("prompt " << i);
    CHECK(got[i] == t::llama_greedy(target_model, prompts[i], n));
  }
  INFO("mean verified length " << sv.mean_verified_length() << " of " << sv.drafted << " drafted, " << sv.dropped << " dropped");
  CHECK(sv.companion_calls > 0);
  CHECK(sv.dropped > 0);  // SV verified fewer than it drafted in some rounds
  CHECK(sv.drafted > sv.dropped);
}
