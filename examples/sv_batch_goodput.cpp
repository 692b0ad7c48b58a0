// SV's batch scheduler on the step decoder, against every fixed draft length: 32 requests (half of
// them drafted at temperature 1, half at 8, so the draft fits some requests far better than others)
// decode together with continuous batching (a finished request is replaced at once), under latency
// profiles in which a batched verification costs more the more drafted tokens it verifies,
// L(K) = 1 + s K, and a batched draft forward costs t_d. Fixed gamma: every request drafts gamma
// tokens every round; SV: length/sv_batch.hpp picks every round's lengths (up to 8 each) to maximise
// the estimated batch goodput from the requests' running acceptance. Goodput: emitted tokens over
// the simulated time of the steps, L(K) + t_d * (the longest draft of the step).
//   specdec_sv_batch_goodput [--smoke]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/length/sv_batch.hpp>

#include "markov_models.hpp"

namespace {

using specdec::token_id;
constexpr std::size_t V = 16, B = 32, max_gamma = 8;

//! A regime: a batched verification of K drafted tokens costs 1 + slope K, a batched draft forward
//! t_draft (in units of a verification that verifies nothing but the requests' own positions).
struct regime {
  double slope, t_draft;
  double operator()(int k) const { return 1.0 + slope * k; }
};

using specdec_examples::markov_logits;

struct outcome {
  std::size_t tokens = 0, steps = 0;
  double time = 0.0;
};

// Continuous batching: 32 requests run at all times (a finished one is replaced by the next, whose
// draft temperature cycles through 0.2 ... 4.0), for `steps` steps; with `sv`, SV's batch scheduler
// picks every round's lengths (up to 8), else every request drafts `gamma`.
outcome run(const regime& cost, std::size_t gamma, bool sv, std::size_t steps) {
  const auto target = specdec::make_model(V, markov_logits(2.0, 0.0));
  const auto draft = specdec::make_model(V, markov_logits(2.0, 0.3));
  specdec::kv_cached_model<decltype(target)> t(target);
  specdec::kv_cached_model<decltype(draft)> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  if (sv) decoder.set_batch_length_stage(specdec::sv_batch_length<regime>{cost, cost.t_draft});
  std::uint32_t next = 0;
  const auto add = [&] {
    specdec::request_options o;
    o.prompt = {static_cast<token_id>(next % V)};
    o.seed = 11;
    o.request_id = next;
    o.gamma = sv ? max_gamma : gamma;
    o.max_new_tokens = 100;
    o.draft_params.temperature = next % 2 == 0 ? 1.0 : 8.0;  // a draft that fits half the requests
    ++next;
    decoder.add(std::move(o));
  };
  for (std::size_t b = 0; b < B; ++b) add();
  outcome r;
  std::map<specdec::request_handle, std::size_t> drafted;
  for (; r.steps < steps; ++r.steps) {
    std::size_t k = 0, longest = 0, finished = 0;
    for (const auto& e : decoder.step()) {
      const std::size_t now = decoder.stats(e.request).drafted, round = now - drafted[e.request];
      drafted[e.request] = now;
      k += round;
      longest = std::max(longest, round);
      r.tokens += e.tokens.size();
      finished += e.finished != specdec::finish_reason::none;
    }
    r.time += cost(static_cast<int>(k)) + cost.t_draft * static_cast<double>(longest);
    for (std::size_t f = 0; f < finished; ++f) add();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  const std::size_t steps = smoke ? 60 : 400;
  std::printf("goodput (emitted tokens per unit of simulated time), %zu steps of 32 requests\n", steps);
  std::printf("%-28s", "L(K) = 1 + s K, draft t_d");
  for (std::size_t gamma = 0; gamma <= max_gamma; ++gamma) std::printf("  g=%zu  ", gamma);
  std::printf("    SV   SV/best fixed\n");
  bool ok = true;
  for (const regime cost : {regime{0.03, 0.08}, regime{0.01, 0.03}, regime{0.004, 0.02}}) {
    std::printf("s = %-5g t_d = %-13g", cost.slope, cost.t_draft);
    double best = 0.0;
    for (std::size_t gamma = 0; gamma <= max_gamma; ++gamma) {
      const outcome o = run(cost, gamma, false, steps);
      best = std::max(best, double(o.tokens) / o.time);
      std::printf(" %6.2f", double(o.tokens) / o.time);
    }
    const outcome o = run(cost, 0, true, steps);
    std::printf("  %6.2f  %6.3f\n", double(o.tokens) / o.time, double(o.tokens) / o.time / best);
    ok = ok && o.tokens > 0;
  }
  return ok ? 0 : 1;
}
