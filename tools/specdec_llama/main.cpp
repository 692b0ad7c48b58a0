// specdec-llama: speculative decoding of GGUF models through llama.cpp, driven by specdec's step
// decoder (decode/batch_decoder.hpp) over llama_cpp::sequence_model adapters
// (integrations/llama_cpp/): a draft model (--method sd) or a model-free drafter (n-gram prompt lookup,
// suffix trees) proposes, the target verifies. Every prompt is one request, and all requests share
// one target (and draft) context, one sequence each. docs/llama-cpp.md describes the options and the
// output.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/draft/model_free.hpp>
#include <specdec/draft/prompt_lookup.hpp>
#include <specdec/draft/suffix_drafter.hpp>
#include <specdec/length/heuristic.hpp>
#include <specdec/integrations/llama_cpp.hpp>

#include "cross_vocab.hpp"

namespace {

namespace lc = specdec::llama_cpp;
using specdec::token_id;

constexpr const char* usage = R"(usage: specdec-llama --target T.gguf [--draft D.gguf] [options]

Speculative decoding through llama.cpp: a draft model or a model-free drafter proposes, the target
verifies with specdec's rules. Each --prompt (or each line of --prompts-file) is one request; all run
as sequences of one context.

  --target FILE          the target model (GGUF)
  --draft FILE           the draft model (GGUF, the target's vocabulary; --method sd only)
  --cross-vocab M        a draft of another vocabulary (--method sd): tli (its row restricted to
                         the shared tokens, renormalised; any --rule) or slem (its text re-tokenized,
                         verified by exact match: --rule greedy or sample-and-match)
  --vocab-report         print how much the target's and the draft's vocabularies share
  --prompt TEXT          a prompt (repeatable; default "Once upon a time")
  --prompts-file FILE    one prompt per line ("\n" in a line is a line break)
  --sequential           run the requests one after another (one sequence at a time), not as one batch
  --repeat N             run every prompt N times (request ids differ, so do the samples) [1]
  --method M             sd: chain drafts from --draft [sd]
                         ngram: n-gram prompt lookup over the request's prompt and output
                         suffix: a suffix tree over the request's prompt and output, and a cache
                           of earlier requests' outputs (chain drafts)
                         none: the target alone
  --ngram-min N          shortest n-gram looked up [1]   --ngram-max N  longest, tried first [3]
  --suffix-depth N       suffix tree depth [24]  --suffix-min-prob P  min path probability [0.1]
  --rule R               strict | greedy | sample-and-match | lenient=L | block [strict]
  --gamma N              drafts per round (most); 0 decodes the target alone [4]
  --length fixed|heuristic  the draft length: gamma every round, or transformers' heuristic schedule
                         (+2 after a round with every draft accepted, -1 after a rejection, within
                         [1, gamma], from min(4, gamma)) [fixed]
  --tokens N             tokens to generate per request [64]
  --temperature T        [1]   --top-k K [0: off]   --top-p P [1: off]   --min-p P [0: off]
                         the target's sampling; the draft samples with the same unless
  --draft-greedy         the draft proposes its argmax (as llama.cpp's speculative example does)
  --seed S               [20261125]
  --ctx N                KV positions per sequence [2048]
  --threads N            llama.cpp threads [all]
  --policy seq|simd      specdec's backend for sampling and verification [simd when built]
  --stop-at-eos          end a request at the vocabulary's end-of-generation tokens
  --quiet                print only the summary (no text, no progress line)
  --help
)";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "specdec-llama: %s\n", message.c_str());
  std::exit(2);
}

struct options {
  std::string target, draft;
  std::vector<std::string> prompts;
  std::size_t repeat = 1, gamma = 4, tokens = 64;
  std::string rule = "strict", policy = "simd", method = "sd", length = "fixed", cross_vocab;
  std::size_t ngram_min = 1, ngram_max = 3, suffix_depth = 24;
  double suffix_min_prob = 0.1;
  specdec::warp_params warp{};
  bool draft_greedy = false, stop_at_eos = false, quiet = false, sequential = false, vocab_report = false;
  std::uint64_t seed = 20261125;
  std::uint32_t ctx = 2048;
  int threads = 0;
};

double number(std::string_view flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0') fail(std::string(flag) + " needs a number, not '" + text + "'");
  return v;
}

std::size_t count(std::string_view flag, const char* text) {
  const double v = number(flag, text);
  if (v < 0 || v != static_cast<double>(static_cast<std::size_t>(v))) fail(std::string(flag) + " needs a whole number >= 0");
  return static_cast<std::size_t>(v);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (a == "--draft-greedy") {
      o.draft_greedy = true;
      continue;
    }
    if (a == "--stop-at-eos") {
      o.stop_at_eos = true;
      continue;
    }
    if (a == "--vocab-report") {
      o.vocab_report = true;
      continue;
    }
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (a == "--sequential") {
      o.sequential = true;
      continue;
    }
    if (i + 1 >= argc) fail("unknown option or missing value: " + std::string(a) + " (--help lists the options)");
    const char* v = argv[++i];
    if (a == "--target")
      o.target = v;
    else if (a == "--draft")
      o.draft = v;
    else if (a == "--cross-vocab")
      o.cross_vocab = v;
    else if (a == "--prompt")
      o.prompts.emplace_back(v);
    else if (a == "--prompts-file") {
      std::ifstream in(v);
      if (!in) fail(std::string("cannot open ") + v);
      for (std::string line; std::getline(in, line);) {
        std::string prompt;  // "\n" (backslash, n) becomes a line break
        for (std::size_t i = 0; i < line.size(); ++i) {
          const bool escape = line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n';
          prompt.push_back(escape ? '\n' : line[i]);
          i += escape ? 1 : 0;
        }
        if (!prompt.empty()) o.prompts.push_back(prompt);
      }
    } else if (a == "--repeat")
      o.repeat = count(a, v);
    else if (a == "--method") {
      o.method = v;
      if (o.method != "sd" && o.method != "ngram" && o.method != "suffix" && o.method != "none")
        fail("unknown --method " + o.method + " (sd, ngram, suffix, none)");
    } else if (a == "--ngram-min")
      o.ngram_min = count(a, v);
    else if (a == "--ngram-max")
      o.ngram_max = count(a, v);
    else if (a == "--suffix-depth")
      o.suffix_depth = count(a, v);
    else if (a == "--suffix-min-prob")
      o.suffix_min_prob = number(a, v);
    else if (a == "--rule")
      o.rule = v;
    else if (a == "--gamma")
      o.gamma = count(a, v);
    else if (a == "--length") {
      o.length = v;
      if (o.length != "fixed" && o.length != "heuristic") fail("unknown --length " + o.length + " (fixed, heuristic)");
    } else if (a == "--tokens")
      o.tokens = count(a, v);
    else if (a == "--temperature")
      o.warp.temperature = number(a, v);
    else if (a == "--top-k")
      o.warp.top_k = static_cast<int>(count(a, v));
    else if (a == "--top-p")
      o.warp.top_p = number(a, v);
    else if (a == "--min-p")
      o.warp.min_p = number(a, v);
    else if (a == "--seed")
      o.seed = count(a, v);
    else if (a == "--ctx")
      o.ctx = static_cast<std::uint32_t>(count(a, v));
    else if (a == "--threads")
      o.threads = static_cast<int>(count(a, v));
    else if (a == "--policy")
      o.policy = v;
    else
      fail("unknown option " + std::string(a) + " (--help lists the options)");
  }
  if (o.target.empty()) fail("--target is required (--help lists the options)");
  if (o.method == "sd" && o.draft.empty()) fail("--method sd needs --draft (or choose --method ngram, suffix or none)");
  if (o.method != "sd" && !o.draft.empty()) fail("--draft is used by --method sd only");
  if (!o.cross_vocab.empty() && o.cross_vocab != "tli" && o.cross_vocab != "slem") fail("--cross-vocab is tli or slem");
  if ((!o.cross_vocab.empty() || o.vocab_report) && (o.method != "sd" || o.draft.empty()))
    fail("--cross-vocab and --vocab-report need --draft (--method sd)");
  if (o.method == "none") o.gamma = 0;
  if (o.prompts.empty()) o.prompts.emplace_back("Once upon a time");
  if (o.repeat == 0) fail("--repeat must be at least 1");
  return o;
}

specdec::request_acceptance acceptance_of(const std::string& rule) {
  if (rule == "strict") return specdec::strict;
  if (rule == "greedy") return specdec::greedy;
  if (rule == "sample-and-match") return specdec::sample_and_match;
  if (rule == "block") return specdec::block;
  if (rule.starts_with("lenient=")) return specdec::lenient_rule(number("--rule lenient=", rule.c_str() + 8));
  fail("unknown --rule " + rule + " (strict, greedy, sample-and-match, lenient=L, block)");
}

// The request's drafter stage for --method (sd drafts on the draft model: no stage). Rules that read q
// get one-hot rows for a model-free draft (draft/model_free.hpp).
specdec::draft_stage drafter_of(const options& o, std::size_t vocab, const std::shared_ptr<specdec::suffix_cache>& cache) {
  specdec::draft_stage stage;
  if (o.method == "ngram")
    stage = specdec::prompt_lookup_stage({.min_n = o.ngram_min, .max_n = o.ngram_max, .k = std::max<std::size_t>(o.gamma, 1)});
  else if (o.method == "suffix")
    stage = specdec::suffix_stage(
        {.max_depth = o.suffix_depth, .max_spec = std::max<std::size_t>(o.gamma, 1), .min_probability = o.suffix_min_prob},
        cache);
  if (!stage) return stage;
  const bool reads_q = o.rule == "strict" || o.rule == "block" || o.rule.starts_with("lenient=");
  return reads_q ? specdec::with_one_hot_q(std::move(stage), vocab) : stage;
}

// Decodes every prompt on one decoder and prints the texts and the summary: prompt processing (the
// first step, which appends every prompt) apart from generation (every later step), as llama.cpp's
// tools report them.
template <class Policy, class Draft>
int decode_all(Policy policy, const options& o, const lc::model& target_model, lc::sequence_model& target, Draft& draft,
               const std::vector<std::vector<token_id>>& prompts,
               const std::function<specdec::draft_stage(std::size_t)>& cross_vocab = {}) {
  specdec::batch_decoder decoder(policy, target, draft, specdec::strict);
  std::vector<token_id> eog;
  if (o.stop_at_eos)
    for (token_id t = 0; t < static_cast<token_id>(target_model.vocab_size()); ++t)
      if (llama_vocab_is_eog(target_model.vocab(), t)) eog.push_back(t);
  const auto cache = std::make_shared<specdec::suffix_cache>(std::size_t{1} << 20, o.suffix_depth);  // at most 2^20 tokens
  std::size_t prompt_tokens = 0;
  const auto add = [&](std::size_t i) {
    specdec::request_options r;
    r.prompt = prompts[i];
    prompt_tokens += prompts[i].size();
    r.seed = o.seed;
    r.request_id = static_cast<std::uint32_t>(i);
    r.target_params = o.warp;
    r.draft_params = o.warp;
    if (o.draft_greedy) r.draft_params = specdec::warp_params{.temperature = 0.0};
    r.gamma = o.gamma;
    r.max_new_tokens = o.tokens;
    r.stop_tokens = eog;
    r.acceptance = acceptance_of(o.rule);
    r.drafter = cross_vocab ? cross_vocab(i) : drafter_of(o, target_model.vocab_size(), cache);
    if (o.length == "heuristic" && o.gamma > 0)
      r.length = specdec::length_stage(specdec::heuristic_length(std::min<std::size_t>(4, o.gamma), 1, o.gamma));
    return decoder.add(std::move(r));
  };

  // Prompt processing: the first step of each batch (it appends the prompts); generation: the rest.
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto last_progress = start;
  double prompt_seconds = 0.0;
  specdec::decode_stats total;
  std::size_t emitted = 0, generated = 0;
  specdec::step_timing parts{};
  std::vector<std::string> texts(prompts.size());
  std::vector<std::size_t> prompt_of;  // prompt_of[handle - first handle]
  const std::size_t batches = o.sequential ? prompts.size() : 1;
  for (std::size_t batch = 0; batch < batches; ++batch) {
    for (std::size_t i = o.sequential ? batch : 0; i < (o.sequential ? batch + 1 : prompts.size()); ++i) {
      add(i);  // handles are 1, 2, ... in the order of the prompts
      prompt_of.push_back(i);
    }
    for (bool first_step = true; decoder.active() > 0; first_step = false) {
      const auto step_start = clock::now();
      std::size_t step_tokens = 0;
      for (const specdec::step_event& e : decoder.step()) {
        step_tokens += e.tokens.size();
        if (e.finished == specdec::finish_reason::none) continue;
        total.merge(decoder.stats(e.request));
        const auto t = decoder.tokens(e.request);
        texts[prompt_of[e.request - 1]] = lc::detokenize(target_model, {t.begin(), t.end()});
        if (o.method == "suffix") cache->insert(t);  // later requests draft from this output too
        if (e.finished == specdec::finish_reason::error)
          std::fprintf(stderr, "request %llu: a model returned an unusable row\n", static_cast<unsigned long long>(e.request));
      }
      const auto now = clock::now();
      emitted += step_tokens;
      if (first_step) {
        prompt_seconds += std::chrono::duration<double>(now - step_start).count();
      } else {
        generated += step_tokens;
        const auto& t = decoder.last_step_timing();
        parts.target_forward += t.target_forward;
        parts.draft_forward += t.draft_forward + t.draft_sampling;
        parts.draft_stages += t.draft_stages;
        parts.verification += t.verification;
        parts.total += t.total;
      }
      if (!o.quiet && now - last_progress > std::chrono::seconds(1)) {
        last_progress = now;
        std::fprintf(stderr, "\r%zu / %zu tokens, %.1f tokens/s", emitted, prompts.size() * o.tokens,
                     double(emitted) / std::chrono::duration<double>(now - start).count());
      }
    }
  }
  const auto end = clock::now();
  const double seconds = std::chrono::duration<double>(end - start).count();
  const double generation_seconds = parts.total;
  if (!o.quiet) {
    std::fputs("\r", stderr);
    for (std::size_t i = 0; i < texts.size(); ++i)
      std::printf("--- request %zu\n%s%s\n", i, o.prompts[i % o.prompts.size()].c_str(), texts[i].c_str());
  }
  std::printf("method %s, rule %s, requests %zu, tokens %zu, seconds %.4f, tokens/s %.2f\n", o.method.c_str(), o.rule.c_str(),
              prompts.size(), emitted, seconds, double(emitted) / seconds);
  std::printf("prompt: %zu tokens in first steps, %.4f s (%.2f tokens/s); generation: %zu tokens in %.4f s, %.2f tokens/s\n",
              prompt_tokens, prompt_seconds, double(prompt_tokens) / prompt_seconds, generated, generation_seconds,
              generation_seconds > 0 ? double(generated) / generation_seconds : 0.0);
  std::printf("generation time: target forward %.4f s, drafting %.4f s, verification %.4f s, bookkeeping %.4f s\n",
              parts.target_forward, parts.draft_forward + parts.draft_stages, parts.verification, parts.bookkeeping());
  if constexpr (std::is_same_v<Draft, lc::sequence_model>)
    std::printf("target forwards %zu (llama_decode %zu), positions %zu; draft forwards %zu (llama_decode %zu), positions %zu\n",
                target.stats().calls, target.engine_stats().decode_calls, target.stats().appended_positions, draft.stats().calls,
                draft.engine_stats().decode_calls, draft.stats().appended_positions);
  else
    std::printf("target forwards %zu (llama_decode %zu), positions %zu; no draft model\n", target.stats().calls,
                target.engine_stats().decode_calls, target.stats().appended_positions);
  std::printf("drafted %zu, accepted %zu, acceptance %.4f, tokens per target round %.3f\n", total.drafted, total.accepted,
              total.acceptance_rate(), total.tokens_per_target_call());
  return 0;
}

template <class Policy>
int run(Policy policy, const options& o) {
  lc::quiet_logs();
  const lc::model target_model(o.target);
  std::optional<lc::model> draft_model;
  if (o.method == "sd") {
    draft_model.emplace(o.draft);
    if (o.cross_vocab.empty() && !o.vocab_report) lc::check_same_vocabulary(target_model, *draft_model);
  }

  std::vector<std::vector<token_id>> prompts;
  for (std::size_t r = 0; r < o.repeat; ++r)
    for (const std::string& p : o.prompts) prompts.push_back(lc::tokenize(target_model, p));
  std::size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (longest + o.tokens + o.gamma + 1 > o.ctx)
    fail("a prompt of " + std::to_string(longest) + " tokens plus " + std::to_string(o.tokens) + " new ones and " +
         std::to_string(o.gamma + 1) + " drafted does not fit --ctx " + std::to_string(o.ctx));
  const auto sequences = static_cast<std::uint32_t>(prompts.size());
  const lc::context_options params{.context_per_sequence = o.ctx, .sequences = sequences, .threads = o.threads};
  lc::context target_ctx(target_model, params);
  lc::sequence_model target(target_ctx);
  if (!o.cross_vocab.empty() || o.vocab_report) {
    const bool reads_q = o.rule == "strict" || o.rule == "block" || o.rule.starts_with("lenient=");
    specdec_llama::cross_vocab_drafting cross(o.cross_vocab, target_model, *draft_model, params,
                                              o.draft_greedy ? specdec::warp_params{.temperature = 0.0} : o.warp, reads_q);
    if (o.vocab_report) specdec_llama::print_vocab_report(target_model, *draft_model, cross.map());
    if (o.cross_vocab.empty()) return 0;
    specdec::no_sequence_model none(target_model.vocab_size());
    const int status = decode_all(policy, o, target_model, target, none, prompts, [&](std::size_t i) { return cross.stage(i); });
    std::printf("cross-vocab %s: draft forwards %zu (llama_decode %zu), positions %zu, rolled back %zu\n", o.cross_vocab.c_str(),
                cross.draft().stats().calls, cross.draft().engine_stats().decode_calls, cross.draft().stats().appended_positions,
                cross.draft().stats().rolled_back);
    return status;
  }
  if (draft_model) {
    lc::context draft_ctx(*draft_model, params);
    lc::sequence_model draft(draft_ctx);
    return decode_all(policy, o, target_model, target, draft, prompts);
  }
  specdec::no_sequence_model none(target_model.vocab_size());
  return decode_all(policy, o, target_model, target, none, prompts);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  try {
    if (o.policy == "seq") return run(specdec::exec::seq, o);
#if SPECDEC_ENABLE_SIMD
    if (o.policy == "simd") return run(specdec::exec::simd, o);
#else
    if (o.policy == "simd") return run(specdec::exec::seq, o);  // built without xsimd: seq gives the same tokens
#endif
    fail("unknown --policy " + o.policy + " (seq, simd)");
  } catch (const std::exception& e) {
    fail(e.what());
  }
}
