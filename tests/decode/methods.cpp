// Every method as stages on the one step decoder (decode/batch_decoder.hpp): SD with chain drafting,
// SD with a Drafter stage, MTAD (beam stage + joint rule), SPRINTER (verifier-gated stage + last-token
// rule), SV (verified-length stage), the joint rule on chain drafts, and requests with rules of their
// own (lenient at two lenience values, sample-and-match), mixed in one batch of 64 on
// KV-cached models with requests joining over several steps and one cancelled. Each request's tokens
// equal its single-request run (decode, decode_mtad, decode_sprinter, decode_sv over recomputing
// adapters); both models' caches equal a fresh evaluation after every step; stages that misbehave
// get an error or end their request alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/decode/mtad.hpp"
#include "specdec/decode/sprinter.hpp"
#include "specdec/decode/sv.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/models/kv_cache.hpp"
#include "support/kv_checks.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;
constexpr std::size_t V = 6;

enum class method { sd, sd_stage, mtad, sprinter, sv, joint_chain, lenient, sample_match };
constexpr int method_count = 8;

struct models_t {
  decltype(specdec::make_model(V, specdec_test::wave_logits(0.0))) target =
      specdec::make_model(V, specdec_test::wave_logits(0.0));
  decltype(target) draft = specdec::make_model(V, specdec_test::wave_logits(0.8));
  decltype(target) companion = specdec::make_model(V, specdec_test::wave_logits(0.2));
};
const models_t& models() {
  static const models_t m;
  return m;
}
using model_t = decltype(models_t::target);

const specdec::estimate::acceptance_estimator& estimator() {
  static const auto e = [] {
    std::vector<std::vector<token_id>> prompts{{0, 1}, {2, 3}, {4, 5}};
    specdec::sv_profile_options p;
    p.gamma = 4;
    p.tokens_per_prompt = 300;
    const auto& m = models();
    const auto samples = specdec::profile_sv_indicators(specdec::exec::seq, m.target, m.draft, specdec::warp_params{},
                                                        m.companion, p, prompts, specdec::decode_options{});
    return specdec::estimate::acceptance_estimator::fit(samples, specdec::estimate::binning::uniform(4, 4));
  }();
  return e;
}

constexpr auto sv_latency = [](int k) { return 1.0 + 0.3 * k; };
const specdec::sv_options sv_opts{.gamma_max = 4};
const specdec::gating_params gating{.tau = 0.5, .max_run = 5};
constexpr double mtad_tau = 0.2;

// The pieces every request of a method shares (drafters are used one call at a time).
struct pieces {
  specdec::chain_drafter<model_t> chain{models().draft, specdec::warp_params{.temperature = 1.1}};
  specdec::beam_drafter<model_t> beam{
      models().draft, specdec::beam_params{.width = 3, .mode = specdec::beam_mode::sample_without_replacement, .warp = {}}};
  specdec::verifier_gated_drafter<model_t, specdec::oracle_features<model_t>, specdec::oracle_noise_verifier> gated{
      models().draft, specdec::warp_params{}, specdec::oracle_features<model_t>(models().target),
      specdec::oracle_noise_verifier(0.9, 0.3), gating};
};

method method_of(std::uint32_t id) { return static_cast<method>(id % method_count); }
// Two lenience values in one batch: two rule classes of one rule type.
specdec::lenient_rule lenient_of(std::uint32_t id) { return specdec::lenient_rule(id % 16 < 8 ? 0.5 : 0.8); }

specdec::request_options request_for(std::uint32_t id, pieces& p) {
  specdec::request_options o;
  o.prompt = {static_cast<token_id>(id % V), static_cast<token_id>((id * 5 + 2) % V)};
  o.seed = 77 + id;
  o.request_id = id;
  o.max_new_tokens = 12 + id % 9;
  o.gamma = id % 5;
  o.draft_params.temperature = 1.1;
  if (id % 7 == 3) o.stop_tokens = {2};
  switch (method_of(id)) {
    case method::sd: break;
    case method::sd_stage: o.drafter = specdec::drafter_stage(p.chain); break;
    case method::mtad:
      o.drafter = specdec::beam_stage(p.beam);
      o.acceptance = specdec::mtad_rule(mtad_tau);
      break;
    case method::sprinter:
      o.drafter = specdec::gated_stage(p.gated);
      o.gamma = std::numeric_limits<std::size_t>::max();
      o.acceptance = specdec::last_token;
      break;
    case method::sv: o.gamma = sv_opts.gamma_max; break;
    case method::joint_chain:
      o.gamma = 1 + id % 4;
      o.acceptance = specdec::mtad_rule(mtad_tau);
      break;
    case method::lenient: o.acceptance = lenient_of(id); break;
    case method::sample_match: o.acceptance = specdec::sample_and_match; break;
  }
  return o;
}

// The request run alone, through its method's single-request function.
std::vector<token_id> alone(std::uint32_t id, pieces& p) {
  const auto& m = models();
  const specdec::request_options r = request_for(id, p);
  specdec::decode_options o;
  o.seed = r.seed;
  o.request_id = r.request_id;
  o.max_new_tokens = r.max_new_tokens;
  o.stop_tokens = r.stop_tokens;
  const std::span<const token_id> prompt(r.prompt);
  switch (method_of(id)) {
    case method::sd:
      return specdec::decode(specdec::exec::seq, m.target, m.draft, r.draft_params, r.gamma, specdec::strict, prompt, o).tokens;
    case method::sd_stage:
      return specdec::decode(specdec::exec::seq, m.target, p.chain, specdec::fixed_length{r.gamma}, specdec::strict, prompt, o)
          .tokens;
    case method::mtad:
      return specdec::decode_mtad(specdec::exec::seq, m.target, p.beam, specdec::fixed_length{r.gamma},
                                  specdec::mtad_rule(mtad_tau), prompt, o)
          .tokens;
    case method::sprinter: return specdec::decode_sprinter(m.target, p.gated, prompt, o).tokens;
    case method::sv:
      return specdec::decode_sv(specdec::exec::seq, m.target, m.draft, r.draft_params,
                                specdec::sv_setup{m.companion, estimator(), sv_latency}, sv_opts, prompt, o)
          .tokens;
    case method::joint_chain: {
      // The joint rule on chain drafts: the stage-drafted form of the same request.
      specdec::recomputing_sequence_model<model_t> t(m.target);
      specdec::no_sequence_model none(V);
      specdec::batch_decoder decoder(specdec::exec::seq, t, none, specdec::strict);
      specdec::request_options staged = r;
      staged.drafter = specdec::drafter_stage(p.chain);
      specdec::decode_result out;
      specdec::detail::run_request(decoder, staged, specdec::cost_model{}, out);
      return out.tokens;
    }
    case method::lenient:
      return specdec::decode(specdec::exec::seq, m.target, m.draft, r.draft_params, r.gamma, lenient_of(id), prompt, o).tokens;
    case method::sample_match:
      return specdec::decode(specdec::exec::seq, m.target, m.draft, r.draft_params, r.gamma, specdec::sample_and_match, prompt, o)
          .tokens;
  }
  return {};
}
}  // namespace

TEST_CASE("every method on one decoder: a mixed batch gives each request its single-request tokens", "[decode][batch][methods]") {
  const auto& m = models();
  pieces p;
  specdec::kv_cached_model<model_t> t(m.target);
  specdec::kv_cached_model<model_t> q(m.draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  // SV's verified-length stage for the SV requests only.
  std::set<specdec::request_handle> sv_requests;
  auto sv_stage =
      specdec::sv_request_lengths(specdec::exec::seq, specdec::sv_setup{m.companion, estimator(), sv_latency}, sv_opts);
  decoder.set_verify_length_stage([&](std::span<const specdec::drafted_request> requests, std::span<std::size_t> lengths) {
    for (std::size_t k = 0; k < requests.size(); ++k)
      if (sv_requests.contains(requests[k].request)) sv_stage(requests.subspan(k, 1), lengths.subspan(k, 1));
  });

  std::map<specdec::request_handle, std::uint32_t> ids;
  std::map<specdec::request_handle, std::vector<token_id>> got, committed;
  std::uint32_t next_id = 0;
  std::size_t steps = 0, checked = 0;
  specdec::request_handle cancelled = 0;
  const auto add = [&](std::uint32_t count) {
    for (std::uint32_t i = 0; i < count && next_id < 64; ++i, ++next_id) {
      const auto o = request_for(next_id, p);
      const auto h = decoder.add(o);
      ids[h] = next_id;
      committed[h] = o.prompt;
      if (method_of(next_id) == method::sv) sv_requests.insert(h);
    }
  };
  add(24);
  while (decoder.active() > 0) {
    for (const auto& e : decoder.step()) {
      got[e.request].insert(got[e.request].end(), e.tokens.begin(), e.tokens.end());
      auto& c = committed[e.request];
      c.insert(c.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished != specdec::finish_reason::none) continue;
      specdec_test::require_kv_consistent(t, q, e.request, c);
      ++checked;
    }
    ++steps;
    add(8);
    if (steps == 3) {  // request 25 (SD with a stage, gamma 0, 19 tokens) has emitted 2 tokens by now
      cancelled = std::find_if(ids.begin(), ids.end(), [](const auto& kv) { return kv.second == 25; })->first;
      decoder.cancel(cancelled);
    }
  }
  CHECK(next_id == 64);
  CHECK(checked > 100);
  std::map<method, int> compared;
  for (const auto& [h, id] : ids) {
    if (h == cancelled) continue;
    CAPTURE(id, static_cast<int>(method_of(id)));
    CHECK(got[h] == alone(id, p));
    ++compared[method_of(id)];
  }
  CHECK(compared.size() == method_count);
}

TEST_CASE("stages that misbehave: a clear error, or their request ends alone", "[decode][batch][methods][bad_input]") {
  const auto& m = models();
  pieces p;
  specdec::recomputing_sequence_model<model_t> t(m.target);
  specdec::recomputing_sequence_model<model_t> q(m.draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  pieces unused;
  // The last-token rule without a drafter stage that marks the verifier's tokens.
  auto o = request_for(3, unused);
  o.drafter = {};
  CHECK_THROWS_AS(decoder.add(o), specdec::error);

  // A stage whose drafter throws numerical_error ends its request (invalid_row) after a round with no
  // drafts; the other request runs to its end.
  auto broken = request_for(1, p);
  broken.drafter = [](std::span<const token_id>, std::size_t, const specdec::random::request_stream&, specdec::stage_draft&) {
    throw specdec::numerical_error("a broken draft model");
  };
  const auto bad = decoder.add(broken);
  const auto good = decoder.add(request_for(0, p));
  std::map<specdec::request_handle, specdec::step_event> last;
  std::map<specdec::request_handle, std::vector<token_id>> emitted;
  while (decoder.active() > 0)
    for (const auto& e : decoder.step()) {
      last[e.request] = e;
      emitted[e.request].insert(emitted[e.request].end(), e.tokens.begin(), e.tokens.end());
    }
  CHECK(last[bad].finished == specdec::finish_reason::error);
  CHECK(specdec::has_flag(last[bad].status, specdec::verify_status::invalid_row));
  CHECK(emitted[bad].size() <= 1);  // at most the target's token of the round without drafts
  CHECK(last[good].finished != specdec::finish_reason::error);
  CHECK(emitted[good].size() >= 1);

  // A stage that drafts more than it was allowed, or no q rows for a chain rule, is a bug in the stage:
  // its request ends with stage_error, and a healthy request of the same batch runs to its end.
  const auto bug_ends_only_its_request = [&](specdec::draft_stage buggy) {
    specdec::batch_decoder d(specdec::exec::seq, t, q, specdec::strict);
    auto r = request_for(1, p);
    r.gamma = 2;
    r.drafter = std::move(buggy);
    const auto bug = d.add(r);
    const auto fine = d.add(request_for(0, p));
    std::map<specdec::request_handle, specdec::step_event> end;
    std::map<specdec::request_handle, std::size_t> tokens;
    while (d.active() > 0)
      for (const auto& e : d.step()) {
        end[e.request] = e;
        tokens[e.request] += e.tokens.size();
      }
    CHECK(end[bug].finished == specdec::finish_reason::error);
    CHECK(specdec::has_flag(end[bug].status, specdec::verify_status::stage_error));
    CHECK(tokens[bug] == 0);
    CHECK(end[fine].finished != specdec::finish_reason::error);
    CHECK(tokens[fine] == request_for(0, p).max_new_tokens);
  };
  bug_ends_only_its_request(
      [](std::span<const token_id>, std::size_t gamma, const specdec::random::request_stream&, specdec::stage_draft& out) {
        out.tokens.assign(gamma + 1, 0);
        out.q_rows.assign((gamma + 1) * V, 1.0f / V);
      });
  bug_ends_only_its_request([](std::span<const token_id>, std::size_t gamma, const specdec::random::request_stream&,
                               specdec::stage_draft& out) { out.tokens.assign(gamma, 0); });
}

TEST_CASE("SPRINTER on the decoder: counters of runs, checks and budget ends add up", "[decode][methods][sprinter]") {
  pieces p;
  std::size_t runs = 0;
  for (std::uint32_t id = 3; id < 64; id += method_count) {
    const auto r = request_for(id, p);
    specdec::decode_options o;
    o.seed = r.seed;
    o.request_id = r.request_id;
    o.max_new_tokens = 40;
    const auto res = specdec::decode_sprinter(models().target, p.gated, r.prompt, o);
    const auto& s = res.stats;
    const auto& g = res.sprinter;
    CAPTURE(id);
    CHECK(res.tokens.size() == 40);
    CHECK(s.iterations == g.run_lengths.size());
    CHECK(g.target_checks + g.budget_ends == s.iterations);
    CHECK(g.target_checks == s.target_calls);
    CHECK(s.accepted == g.verifier_accepted + g.target_kept);
    CHECK(g.target_kept <= g.target_checks);
    CHECK(s.drafted == res.tokens.size());  // every drafted token is emitted or replaced by the residual
    runs += s.iterations;
  }
  CHECK(runs > 20);
}
