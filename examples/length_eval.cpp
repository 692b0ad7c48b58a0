// Every draft-length rule of length/ on the same work, against the best fixed gamma found by search.
//
// Part 1, models on the step decoder (strict rule), continuous batching at B = 1 and B = 32 for a fixed
// number of steps: a target and a draft Markov model over V = 16, half of the requests drafted at
// temperature 1 and half at 8 (the draft fits some requests far better than others); and the n-gram
// pair of the demo (a 4-gram target and a 2-gram draft trained on the bundled corpus). A step costs
// L(K) = 1 + s K for verifying K drafted tokens in all plus t_d per batched draft forward (the longest
// draft of the step, wasted forwards included); goodput = emitted tokens / simulated time. Columns:
// tokens per target call, draft forwards that produced no accepted token, goodput, and goodput over the
// best fixed gamma's.
// Part 2, a simulated profile: acceptance of draft j is an independent coin alpha_j; the oracle's rate
// (length/oracle.hpp) against the length policies that see only past rounds.
// With --csv FILE, also every rule against its parameter (thresholds, h, maximum length), one row per
// (pair, batch, rule, parameter); `specdec-sim length-sweep --from FILE --plot FILE.png` draws it.
//   specdec_length_eval [--smoke] [--csv FILE]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/length/confidence.hpp>
#include <specdec/length/cumulative_acceptance.hpp>
#include <specdec/length/dynamic_goodput.hpp>
#include <specdec/length/entropy.hpp>
#include <specdec/length/heuristic.hpp>
#include <specdec/length/oracle.hpp>
#include <specdec/length/p_min.hpp>
#include <specdec/learn/acceptance_head.hpp>
#include <specdec/length/sv_batch.hpp>
#include <specdec/models/corpus.hpp>
#include <specdec/models/ngram.hpp>
#include <specdec/simulate/lengths.hpp>

#include "markov_models.hpp"

namespace {

using specdec::token_id;
constexpr std::size_t V = 16, max_gamma = 8;
constexpr double slope = 0.01, t_draft = 0.05;

double verify_latency(std::size_t K) { return 1.0 + slope * double(K); }

using specdec_examples::markov_logits;

// How a rule configures a request, and the decoder's batch stage, if any.
struct rule {
  std::string name;
  std::function<void(specdec::request_options&)> configure;
  std::function<specdec::batch_length_stage(std::size_t batch)> batch_stage{};
};

struct outcome {
  std::size_t tokens = 0, target_calls = 0, wasted = 0;
  double time = 0.0;
  double goodput() const { return time > 0 ? double(tokens) / time : 0.0; }
};

// Continuous batching of `batch` requests on the pair for `steps` steps; request i starts from prompt
// i % prompts.size() and, with `mixed`, drafts at temperature 1 or 8 (alternately), else at 1.
template <class M>
outcome run(const rule& r, std::size_t batch, std::size_t steps, const M& target, const M& draft,
            const std::vector<std::vector<token_id>>& prompts, bool mixed, std::uint64_t seed = 11) {
  specdec::kv_cached_model<M> t(target);
  specdec::kv_cached_model<M> q(draft);
  specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
  if (r.batch_stage) decoder.set_batch_length_stage(r.batch_stage(batch));
  std::uint32_t next = 0;
  const auto add = [&] {
    specdec::request_options o;
    o.prompt = prompts[next % prompts.size()];
    o.seed = seed;
    o.request_id = next;
    o.gamma = max_gamma;
    o.max_new_tokens = 100;
    o.draft_params.temperature = mixed && next % 2 == 1 ? 8.0 : 1.0;
    r.configure(o);
    ++next;
    decoder.add(std::move(o));
  };
  for (std::size_t b = 0; b < batch; ++b) add();
  outcome out;
  std::map<specdec::request_handle, specdec::decode_stats> before;
  for (std::size_t step = 0; step < steps; ++step) {
    std::size_t verified = 0, forwards = 0, finished = 0;
    for (const auto& e : decoder.step()) {
      const specdec::decode_stats& s = decoder.stats(e.request);
      specdec::decode_stats& b = before[e.request];
      const std::size_t calls = s.draft_calls - b.draft_calls, accepted = s.accepted - b.accepted;
      forwards = std::max(forwards, calls);
      out.wasted += calls - std::min(calls, accepted);
      out.target_calls += s.target_calls - b.target_calls;
      verified += e.verified;
      out.tokens += e.tokens.size();
      b = s;
      finished += e.finished != specdec::finish_reason::none;
    }
    out.time += verify_latency(verified) + t_draft * double(forwards);
    for (std::size_t i = 0; i < finished; ++i) add();
  }
  return out;
}

struct sv_latency {
  double operator()(int k) const { return verify_latency(static_cast<std::size_t>(k)); }
};

// SpecDec++'s acceptance head for a pair, trained on 100 steps of 32 requests drafting 8 tokens (a seed
// the comparison does not use).
template <class M>
specdec::learn::acceptance_head train_head(const M& target, const M& draft, const std::vector<std::vector<token_id>>& prompts,
                                           bool mixed, std::size_t steps) {
  specdec::learn::verifier_dataset data;
  std::deque<specdec::learn::acceptance_recorder> recorders;
  const rule recording{"recording", [&](specdec::request_options& o) {
                         auto& r = recorders.emplace_back(data);
                         o.stop = [&r](const specdec::draft_view& v) { return r.decide(v); };
                       }};
  run(recording, 32, steps, target, draft, prompts, mixed, 12);
  return specdec::learn::train_acceptance_head(data, {.seed = 1});
}

std::vector<rule> rules(const specdec::learn::acceptance_head& head) {
  const auto fixed = [](std::size_t g) { return [g](specdec::request_options& o) { o.gamma = g; }; };
  std::vector<rule> r;
  for (std::size_t g = 0; g <= max_gamma; ++g) r.push_back({"fixed gamma = " + std::to_string(g), fixed(g)});
  r.push_back({"heuristic (transformers)",
               [](auto& o) { o.length = specdec::length_stage(specdec::heuristic_length(5, 1, max_gamma)); }});
  r.push_back({"confidence 0.4 (transformers)", [](auto& o) { o.stop = specdec::stop_stage(specdec::confidence_stop(0.4)); }});
  r.push_back({"confidence, ROC refit", [](auto& o) { o.stop = specdec::stop_stage(specdec::confidence_stop(0.4, true)); }});
  r.push_back({"p_min 0.75 (llama.cpp)", [](auto& o) { o.stop = specdec::stop_stage(specdec::p_min_stop{0.75}); }});
  r.push_back({"p_min 0.2", [](auto& o) { o.stop = specdec::stop_stage(specdec::p_min_stop{0.2}); }});
  r.push_back({"entropy (AdaEDL form)", [](auto& o) { o.stop = specdec::stop_stage(specdec::entropy_stop{0.1, 0.5}); }});
  r.push_back({"cumulative q(x), h = 0.7", [](auto& o) {
                 const auto predict = [](const specdec::draft_view& v) { return v.token_probability(); };
                 o.stop = specdec::stop_stage(specdec::cumulative_acceptance_stop(predict, 0.7, 1));
               }});
  r.push_back({"SpecDec++ trained head, h = 0.3",
               [head](auto& o) { o.stop = specdec::stop_stage(specdec::cumulative_acceptance_stop(head, 0.3, 1)); }});
  r.push_back({"dynamic goodput (vLLM)", [](auto&) {},
               [](std::size_t batch) -> specdec::batch_length_stage {
                 std::vector<double> row;
                 for (std::size_t k = 0; k <= max_gamma; ++k) row.push_back(verify_latency(batch * k) + t_draft * double(k));
                 return specdec::dynamic_goodput_length(specdec::step_latency_table({double(batch)}, {row}), 10);
               }});
  r.push_back({"SV batch scheduler", [](auto&) {},
               [](std::size_t) -> specdec::batch_length_stage {
                 return specdec::sv_batch_length<sv_latency>{{}, t_draft};
               }});
  return r;
}

void simulated_profile(std::size_t rounds) {
  const std::vector<double> alpha{0.95, 0.85, 0.7, 0.6, 0.45, 0.3, 0.2, 0.1};
  const auto latency = [](int k) { return verify_latency(static_cast<std::size_t>(k)); };
  const specdec::oracle_length oracle(alpha, t_draft, latency);
  std::printf("\nsimulated profile alpha = 0.95 0.85 0.7 0.6 0.45 0.3 0.2 0.1, round cost k t_d + L(k):\n");
  std::printf("  %-28s %10s\n", "policy", "tokens/time");
  std::printf("  %-28s %10.4f  (k = %zu)\n", "oracle, expected", oracle.rate(), oracle.next_length({}));
  for (std::size_t k = 0; k <= alpha.size(); ++k)
    std::printf("  %-28s %10.4f\n", ("fixed gamma = " + std::to_string(k)).c_str(),
                specdec::expected_round_tokens(alpha, k) / (double(k) * t_draft + latency(int(k))));
  const auto none = [](const specdec::round_record&) {};
  std::printf(
      "  %-28s %10.4f\n", "oracle, simulated",
      specdec::simulate::length_policy_rate(
          alpha, t_draft, latency, rounds, 5, [&](const specdec::decode_stats& s) { return oracle.next_length(s); }, none));
  specdec::heuristic_length heuristic(5, 1, max_gamma);
  std::printf("  %-28s %10.4f\n", "heuristic (transformers)",
              specdec::simulate::length_policy_rate(
                  alpha, t_draft, latency, rounds, 5, [&](const specdec::decode_stats& s) { return heuristic.next_length(s); },
                  [&](const specdec::round_record& r) { heuristic.record(r); }));
  std::vector<double> row;
  for (std::size_t k = 0; k <= max_gamma; ++k) row.push_back(latency(int(k)) + t_draft * double(k));
  specdec::dynamic_goodput_length dynamic(specdec::step_latency_table({1.0}, {row}), 10);
  std::printf("  %-28s %10.4f\n", "dynamic goodput (vLLM)",
              specdec::simulate::length_policy_rate(alpha, t_draft, latency, rounds, 5,
                                                    specdec::simulate::single_request_choice(dynamic, max_gamma), none));
}


// One point of a parameter sweep: the rule family, its parameter value, and the rule.
struct sweep_point {
  std::string family;
  double parameter;
  rule r;
};

// Each rule against its parameter (for `--csv`): the heuristic's maximum, the thresholds of the stop
// rules, and the cumulative rules' h. Fixed gamma comes from the main table.
std::vector<sweep_point> sweeps(const specdec::learn::acceptance_head& head) {
  std::vector<sweep_point> out;
  for (const std::size_t m : {1u, 2u, 4u, 6u, 8u})
    out.push_back({"heuristic (max length)", double(m), {"", [m](auto& o) {
                                                           o.length = specdec::length_stage(
                                                               specdec::heuristic_length(std::min<std::size_t>(5, m), 1, m));
                                                         }}});
  for (const double t : {0.05, 0.1, 0.2, 0.3, 0.4, 0.6})
    out.push_back(
        {"confidence (threshold)", t, {"", [t](auto& o) { o.stop = specdec::stop_stage(specdec::confidence_stop(t)); }}});
  for (const double p : {0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75})
    out.push_back({"p_min", p, {"", [p](auto& o) { o.stop = specdec::stop_stage(specdec::p_min_stop{p}); }}});
  for (const double e : {0.3, 0.4, 0.45, 0.5, 0.55, 0.6})
    out.push_back({"entropy epsilon (lambda 0.1)", e, {"", [e](auto& o) {
                                                         o.stop = specdec::stop_stage(specdec::entropy_stop{0.1, e});
                                                       }}});
  for (const double h : {0.1, 0.3, 0.5, 0.7, 0.9, 0.97}) {
    out.push_back({"cumulative q(x) (h)", h, {"", [h](auto& o) {
                                                const auto predict = [](const specdec::draft_view& v) {
                                                  return v.token_probability();
                                                };
                                                o.stop = specdec::stop_stage(specdec::cumulative_acceptance_stop(predict, h, 1));
                                              }}});
    out.push_back({"SpecDec++ trained head (h)",
                   h,
                   {"", [h, head](auto& o) { o.stop = specdec::stop_stage(specdec::cumulative_acceptance_stop(head, h, 1)); }}});
  }
  return out;
}

// Every rule at B = 1 and 32 on one pair; goodput also relative to the best fixed gamma's. With `csv`,
// also the sweeps, one row per (pair, batch, family, parameter).
template <class M>
void compare(const char* title, const char* pair, const M& target, const M& draft,
             const std::vector<std::vector<token_id>>& prompts, bool mixed, std::size_t steps, std::FILE* csv) {
  std::printf("\n%s\n", title);
  const auto head = train_head(target, draft, prompts, mixed, steps / 4);
  for (const std::size_t batch : {std::size_t{1}, std::size_t{32}}) {
    const auto all = rules(head);
    std::vector<outcome> results;
    double best_fixed = 0.0;
    for (const auto& r : all) {
      results.push_back(run(r, batch, steps, target, draft, prompts, mixed));
      if (r.name.rfind("fixed", 0) == 0) best_fixed = std::max(best_fixed, results.back().goodput());
    }
    std::printf("\nB = %zu\n  %-34s %12s %14s %9s %11s\n", batch, "rule", "tokens/call", "wasted drafts", "goodput",
                "/ best fixed");
    for (std::size_t i = 0; i < all.size(); ++i) {
      const outcome& o = results[i];
      std::printf("  %-34s %12.3f %14zu %9.3f %11.3f\n", all[i].name.c_str(),
                  o.target_calls ? double(o.tokens) / double(o.target_calls) : 0.0, o.wasted, o.goodput(),
                  best_fixed > 0 ? o.goodput() / best_fixed : 0.0);
    }
    if (csv == nullptr) continue;
    for (std::size_t g = 0; g <= max_gamma; ++g)
      std::fprintf(csv, "%s,%zu,fixed gamma,%zu,%.6f,%.6f\n", pair, batch, g, results[g].goodput(),
                   results[g].goodput() / best_fixed);
    for (const auto& point : sweeps(head)) {
      const outcome o = run(point.r, batch, steps, target, draft, prompts, mixed);
      std::fprintf(csv, "%s,%zu,%s,%g,%.6f,%.6f\n", pair, batch, point.family.c_str(), point.parameter, o.goodput(),
                   o.goodput() / best_fixed);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  std::FILE* csv = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
    } else if (std::strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
      csv = std::fopen(argv[++i], "w");
      if (csv == nullptr) {
        std::fprintf(stderr, "specdec_length_eval: cannot write %s\n", argv[i]);
        return 1;
      }
      std::fprintf(csv, "pair,batch,family,parameter,goodput,goodput_over_best_fixed\n");
    } else {
      std::fprintf(stderr, "usage: specdec_length_eval [--smoke] [--csv FILE]\n");
      return 2;
    }
  }
  const std::size_t steps = smoke ? 30 : 400;
  std::printf("draft-length rules on the step decoder: L(K) = 1 + %.2f K, t_d = %.2f, %zu steps\n", slope, t_draft, steps);
  {
    const auto target = specdec::make_model(V, markov_logits(2.0, 0.0));
    const auto draft = specdec::make_model(V, markov_logits(2.0, 0.3));
    std::vector<std::vector<token_id>> prompts;
    for (token_id a = 0; a < static_cast<token_id>(V); ++a) prompts.push_back({a});
    compare("Markov pair, V = 16, half of the requests drafted at temperature 8", "markov", target, draft, prompts, true, steps,
            csv);
  }
  {
    const auto texts = specdec::load_text_files(specdec::default_corpus_paths());
    const specdec::ngram_pair models = specdec::make_ngram_pair(texts, 4, 2);
    std::vector<std::vector<token_id>> prompts;
    for (const char* p : {"the", "in the", "it was", "and then", "we", "a"}) prompts.push_back(models.target.vocab().encode(p));
    char title[160];
    std::snprintf(title, sizeof title, "n-gram pair (4-gram target, 2-gram draft, V = %zu words)", models.target.vocab().size());
    compare(title, "ngram", models.target, models.draft, prompts, false, smoke ? 10 : 200, csv);
  }
  simulated_profile(smoke ? 20000 : 400000);
  if (csv != nullptr) std::fclose(csv);
  return 0;
}
