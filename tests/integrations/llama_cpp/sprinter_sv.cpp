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
// - Theorem A.4 (same setting, eta_fp 0 and 0.5): the first drafted token is kept with probability
//   1 - (1 - eta_fp) TV(p, q), p and q the two models' top-8 rows after the prompt (a z-test); the other
//   rate's closed form must be rejected.
// - SV (exact mode, the batch scheduler) with an estimator profiled on the pair: under greedy decoding
//   its tokens are llama.cpp's greedy decoding of the target whatever lengths it verifies.
// - SV's law: sampled (temperature 1, top-k 8; the draft with noise 0.5, so that many drafts are
//   rejected and the estimator's lengths vary) with the strict rule, the first two tokens pass a
//   chi-squared test against the target's law; negative control: the same SV with the lossy lenient
//   rule (l = 0.2, seed 004; it accepts the far draft's tokens far more often) fails it.
// SPECDEC_TEST_LABELS: llama_cpp statistical
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "integrations/llama_cpp/gated.hpp"
#include "integrations/llama_cpp/models.hpp"
#include "integrations/llama_cpp/two_token_law.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/theory/sprinter.hpp"
#include "support/chi_squared.hpp"
#include "support/sample_scale.hpp"

namespace t = specdec_test::llama;
using specdec::token_id;

namespace {

using t::greedy_warp;
using t::view;
const specdec::warp_params top8{.temperature = 1.0, .top_k = 8};

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

// SPRINTER request i: two tokens after "Once upon a time" (top-8 target), runs of up to 20.
specdec::request_options sprinter_request(std::uint32_t i) {
  specdec::request_options r;
  r.prompt = t::lc::tokenize(t::model("target"), "Once upon a time");
  r.seed = 20261129;
  r.request_id = i;
  r.gamma = 20;
  r.max_new_tokens = 2;
  r.target_params = top8;
  r.acceptance = specdec::last_token;
  return r;
}

// Decodes SPRINTER `requests` with the oracle verifier at false-positive rate eta (eta_tp 1, lambda 1),
// the drafts of the noisy draft model (top 8); `first_drafts`, when given, receives each request's first
// drafted token.
std::vector<std::vector<token_id>> sprinter_decode(double eta, std::vector<specdec::request_options> requests,
                                                   specdec::sprinter_stats& stats,
                                                   std::vector<token_id>* first_drafts = nullptr) {
  t::sprinter_stages<specdec::oracle_features<view>, specdec::oracle_noise_verifier> s{
      .gate =
          [eta](const view& target) {
            return std::pair{specdec::oracle_features<view>(target, top8), specdec::oracle_noise_verifier(1.0, eta, 1.0)};
          },
      .warp = top8,
      .gating = {.tau = 0.5, .max_run = 20}};
  if (first_drafts != nullptr) first_drafts->assign(requests.size(), specdec::no_token);
  const t::stage_factory make = [&s, first_drafts](const view& draft, const view& target, std::size_t i) {
    specdec::draft_stage inner = s.factory()(draft, target, i);
    if (first_drafts == nullptr) return inner;
    return specdec::draft_stage([inner, first_drafts, i](std::span<const token_id> context, std::size_t gamma,
                                                         const specdec::random::request_stream& stream,
                                                         specdec::stage_draft& out) {
      inner(context, gamma, stream, out);
      if ((*first_drafts)[i] == specdec::no_token && !out.tokens.empty()) (*first_drafts)[i] = out.tokens.front();
    });
  };
  auto tokens = t::decode_stages(t::model("target"), t::model("draft-noise-0.5"), std::move(requests), make);
  stats.verifier_calls += s.stats.verifier_calls;
  stats.verifier_accepted += s.stats.verifier_accepted;
  return tokens;
}

// The first two tokens of `samples` SPRINTER requests with the oracle verifier at false-positive rate eta.
t::two_token_cells<std::uint64_t> sprinter_first_two(double eta, std::size_t samples, specdec::sprinter_stats& stats) {
  return t::count_first_two(samples, 64, sprinter_request, [&](std::vector<specdec::request_options> requests) {
    return sprinter_decode(eta, std::move(requests), stats);
  });
}

// Of `samples` SPRINTER requests at false-positive rate eta, how many kept their first drafted token.
std::size_t sprinter_first_kept(double eta, std::size_t samples) {
  std::size_t kept = 0;
  specdec::sprinter_stats stats;
  for (std::size_t first = 0; first < samples; first += 64) {
    std::vector<specdec::request_options> requests;
    for (std::size_t i = first; i < std::min(samples, first + 64); ++i)
      requests.push_back(sprinter_request(static_cast<std::uint32_t>(i)));
    std::vector<token_id> drafted;
    const auto tokens = sprinter_decode(eta, std::move(requests), stats, &drafted);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      REQUIRE(drafted[i] != specdec::no_token);
      REQUIRE(!tokens[i].empty());
      // A token the verifier keeps, or the target's check min(1, p/q) accepts, is emitted as drafted; a
      // rejected one is replaced by a sample of norm(max(0, p - q)), which has no mass there.
      if (tokens[i].front() == drafted[i]) ++kept;
    }
  }
  return kept;
}

// The first two tokens of `samples` SV requests (the prompt "Once upon a time", top-8 on both
// models) verified by `acceptance` (empty: strict), every SV length chosen counted in `sv`.
t::two_token_cells<std::uint64_t> sv_first_two(specdec::request_acceptance acceptance, std::size_t samples,
                                               specdec::sv_stats& sv) {
  const std::vector<token_id> prompt = t::lc::tokenize(t::model("target"), "Once upon a time");
  static const auto estimator =
      t::profile_sv_pair(t::model("target"), t::model("draft-noise-0.5"), t::model("draft-layers2"), {prompt}, 4, 64);
  const auto request = [&](std::uint32_t i) {
    specdec::request_options r;
    r.prompt = prompt;
    r.seed = 20261130;
    r.request_id = i;
    r.max_new_tokens = 3;  // the first round drafts 2, of which SV may verify fewer
    r.target_params = r.draft_params = top8;
    r.acceptance = acceptance;
    return r;
  };
  const auto decode = [&](std::vector<specdec::request_options> requests) {
    return t::sv_decode(t::model("target"), t::model("draft-noise-0.5"), t::model("draft-layers2"), estimator,
                        std::move(requests), 4, sv);
  };
  return t::count_first_two(samples, 64, request, decode);
}

}  // namespace

TEST_CASE("SPRINTER on llama.cpp: a verifier that accepts nothing gives greedy target decoding", "[llama_cpp][sprinter]") {
  constexpr std::size_t n = 48;
  const auto& target = t::model("target");
  specdec::decode_stats stats;
  auto never = t::constant_gate(0.0, 20);
  const auto got = t::decode_stages(t::model("target"), t::model("draft-layers2"), greedy_requests(n, specdec::last_token, 20),
                                    never.factory(), &stats);
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
  auto always = t::constant_gate(1.0, 4);
  const auto loose = t::decode_stages(t::model("target"), t::model("draft-layers2"), greedy_requests(n, specdec::last_token, 20),
                                      always.factory(), &loose_stats);
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

TEST_CASE("SPRINTER on llama.cpp: Theorem A.4's acceptance rate 1 - (1 - eta_fp) TV(p, q) of the first draft",
          "[llama_cpp][sprinter][statistical]") {
  const std::size_t samples = static_cast<std::size_t>(specdec_test::scaled_sample_count(1000, 500));
  const std::vector<token_id> prompt = t::lc::tokenize(t::model("target"), "Once upon a time");
  const auto p = warped(t::fresh_logits(t::model("target"), prompt));
  const auto q = warped(t::fresh_logits(t::model("draft-noise-0.5"), prompt));
  const double tv = specdec::total_variation(std::span<const double>(p), std::span<const double>(q));
  REQUIRE(tv > 0.1);  // a draft far enough from the target for the rates to differ
  const auto z = [samples](std::size_t kept, double beta) {
    return (static_cast<double>(kept) / static_cast<double>(samples) - beta) /
           std::sqrt(beta * (1.0 - beta) / static_cast<double>(samples));
  };
  for (const double eta : {0.0, 0.5}) {
    const std::size_t kept = sprinter_first_kept(eta, samples);
    const double beta = specdec::theory::sprinter::acceptance_rate(eta, tv);
    INFO("eta_fp " << eta << ": kept " << kept << " of " << samples << ", theory " << beta << " (TV " << tv << ")");
    CHECK(std::abs(z(kept, beta)) < 5.0);
    // Negative control: the other false-positive rate's closed form must be rejected.
    const double other = specdec::theory::sprinter::acceptance_rate(0.5 - eta, tv);
    CHECK(std::abs(z(kept, other)) > 5.0);
  }
}

TEST_CASE("SV on llama.cpp: profiled on the pair, greedy SV gives greedy target decoding", "[llama_cpp][sv]") {
  constexpr std::size_t n = 48;
  const auto& target_model = t::model("target");
  std::vector<std::vector<token_id>> prompts;
  for (const auto& text : t::prompts()) prompts.push_back(t::lc::tokenize(target_model, text));
  specdec::sv_stats sv;
  const auto got = t::greedy_sv(target_model, t::model("draft-layers1"), t::model("draft-layers2"), prompts, n, 5, 32, sv);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("prompt " << i);
    CHECK(got[i] == t::llama_greedy(target_model, prompts[i], n));
  }
  INFO("mean verified length " << sv.mean_verified_length() << " of " << sv.drafted << " drafted, " << sv.dropped << " dropped");
  CHECK(sv.companion_calls > 0);
  CHECK(sv.dropped > 0);  // SV verified fewer than it drafted in some rounds
  CHECK(sv.drafted > sv.dropped);
}

TEST_CASE("SV on llama.cpp: the law of the first two tokens is the target's", "[llama_cpp][sv][statistical]") {
  const std::size_t samples = static_cast<std::size_t>(specdec_test::scaled_sample_count(2000, 1000));
  const std::vector<token_id> prompt = t::lc::tokenize(t::model("target"), "Once upon a time");
  specdec::sv_stats sv;
  const auto seen = sv_first_two({}, samples, sv);
  const auto exact = t::two_token_gof(seen, mixture_law(prompt, 0.0));
  INFO("strict SV against the target's law: " << exact);
  CHECK(exact.impossible == 0);
  CHECK(exact.p_value > specdec_test::gof_alpha);
  INFO("mean verified length " << sv.mean_verified_length() << " of " << sv.drafted << " drafted, " << sv.dropped << " dropped");
  CHECK(sv.companion_calls > 0);
  CHECK(sv.dropped > 0);  // SV verified fewer than drafted in some rounds: its lengths are exercised
  CHECK(sv.drafted > sv.dropped);

  // Negative control: lenient acceptance (lossy) through the same SV machinery: where SV verifies the
  // first drafts, the first tokens follow the lenient law.
  constexpr double l = 0.2;
  specdec::sv_stats lenient_sv;
  const auto loose = sv_first_two(specdec::lenient_rule(l), samples, lenient_sv);
  const auto control = t::two_token_gof(loose, mixture_law(prompt, 0.0));
  INFO("negative control, lenient l = 0.2 against the target's law: " << control);
  CHECK(control.p_value < specdec_test::gof_alpha);
  INFO("lenient SV verified " << lenient_sv.drafted - lenient_sv.dropped << " of " << lenient_sv.drafted << " drafts");
  CHECK(lenient_sv.drafted > lenient_sv.dropped);
}
