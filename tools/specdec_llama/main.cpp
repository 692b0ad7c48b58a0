// specdec-llama: speculative decoding of GGUF models through llama.cpp, driven by specdec's step
// decoder (decode/batch_decoder.hpp) over two llama_cpp::sequence_model adapters
// (integrations/llama_cpp/). Every prompt is one request, and all requests share one target and one
// draft context, one sequence each. docs/llama-cpp.md describes the options and the output.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/integrations/llama_cpp.hpp>

namespace {

namespace lc = specdec::llama_cpp;
using specdec::token_id;

constexpr const char* usage = R"(usage: specdec-llama --target T.gguf --draft D.gguf [options]

Speculative decoding through llama.cpp: the draft proposes, the target verifies with specdec's rules.
Each --prompt (or each line of --prompts-file) is one request; all run as sequences of one context.

  --target FILE          the target model (GGUF)
  --draft FILE           the draft model (GGUF, the target's vocabulary)
  --prompt TEXT          a prompt (repeatable; default "Once upon a time")
  --prompts-file FILE    one prompt per line
  --repeat N             run every prompt N times (request ids differ, so do the samples) [1]
  --method sd            speculative decoding with chain drafts (the methods of the step decoder
                         that draft on the draft model)
  --rule R               strict | greedy | sample-and-match | lenient=L | block [strict]
  --gamma N              drafts per round; 0 decodes the target alone [4]
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
  std::string rule = "strict", policy = "simd";
  specdec::warp_params warp{};
  bool draft_greedy = false, stop_at_eos = false, quiet = false;
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
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (i + 1 >= argc) fail("unknown option or missing value: " + std::string(a) + " (--help lists the options)");
    const char* v = argv[++i];
    if (a == "--target")
      o.target = v;
    else if (a == "--draft")
      o.draft = v;
    else if (a == "--prompt")
      o.prompts.emplace_back(v);
    else if (a == "--prompts-file") {
      std::ifstream in(v);
      if (!in) fail(std::string("cannot open ") + v);
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) o.prompts.push_back(line);
    } else if (a == "--repeat")
      o.repeat = count(a, v);
    else if (a == "--method") {
      if (std::string_view(v) != "sd") fail(std::string("unknown --method ") + v + " (this tool runs: sd)");
    } else if (a == "--rule")
      o.rule = v;
    else if (a == "--gamma")
      o.gamma = count(a, v);
    else if (a == "--tokens")
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
  if (o.target.empty() || o.draft.empty()) fail("--target and --draft are required (--help lists the options)");
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

template <class Policy>
int run(Policy policy, const options& o) {
  lc::quiet_logs();
  const lc::model target_model(o.target), draft_model(o.draft);
  lc::check_same_vocabulary(target_model, draft_model);

  std::vector<std::vector<token_id>> prompts;
  for (std::size_t r = 0; r < o.repeat; ++r)
    for (const std::string& p : o.prompts) prompts.push_back(lc::tokenize(target_model, p));
  std::size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (longest + o.tokens + o.gamma + 1 > o.ctx)
    fail("a prompt of " + std::to_string(longest) + " tokens plus " + std::to_string(o.tokens) + " new ones and " +
         std::to_string(o.gamma + 1) + " drafted does not fit --ctx " + std::to_string(o.ctx));
  const auto sequences = static_cast<std::uint32_t>(prompts.size());
  lc::context target_ctx(target_model, {.context_per_sequence = o.ctx, .sequences = sequences, .threads = o.threads});
  lc::context draft_ctx(draft_model, {.context_per_sequence = o.ctx, .sequences = sequences, .threads = o.threads});
  lc::sequence_model target(target_ctx), draft(draft_ctx);

  specdec::batch_decoder decoder(policy, target, draft, specdec::strict);
  std::vector<token_id> eog;
  if (o.stop_at_eos)
    for (token_id t = 0; t < static_cast<token_id>(target_model.vocab_size()); ++t)
      if (llama_vocab_is_eog(target_model.vocab(), t)) eog.push_back(t);
  std::vector<specdec::request_handle> handles;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    specdec::request_options r;
    r.prompt = prompts[i];
    r.seed = o.seed;
    r.request_id = static_cast<std::uint32_t>(i);
    r.target_params = o.warp;
    r.draft_params = o.warp;
    if (o.draft_greedy) r.draft_params = specdec::warp_params{.temperature = 0.0};
    r.gamma = o.gamma;
    r.max_new_tokens = o.tokens;
    r.stop_tokens = eog;
    r.acceptance = acceptance_of(o.rule);
    handles.push_back(decoder.add(std::move(r)));
  }

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto last_progress = start;
  specdec::decode_stats total;
  std::size_t emitted = 0;
  std::vector<std::string> texts(prompts.size());
  while (decoder.active() > 0) {
    for (const specdec::step_event& e : decoder.step()) {
      emitted += e.tokens.size();
      if (e.finished == specdec::finish_reason::none) continue;
      total.merge(decoder.stats(e.request));
      const auto t = decoder.tokens(e.request);
      texts[e.request - handles.front()] = lc::detokenize(target_model, {t.begin(), t.end()});
      if (e.finished == specdec::finish_reason::error)
        std::fprintf(stderr, "request %llu: a model returned an unusable row\n", static_cast<unsigned long long>(e.request));
    }
    const auto now = clock::now();
    if (!o.quiet && now - last_progress > std::chrono::seconds(1)) {
      last_progress = now;
      std::fprintf(stderr, "\r%zu / %zu tokens, %.1f tokens/s", emitted, prompts.size() * o.tokens,
                   double(emitted) / std::chrono::duration<double>(now - start).count());
    }
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (!o.quiet) {
    std::fputs("\r", stderr);
    for (std::size_t i = 0; i < texts.size(); ++i)
      std::printf("--- request %zu\n%s%s\n", i, o.prompts[i % o.prompts.size()].c_str(), texts[i].c_str());
  }
  std::printf("requests %zu, tokens %zu, seconds %.4f, tokens/s %.2f\n", prompts.size(), emitted, seconds,
              double(emitted) / seconds);
  std::printf("target forwards %zu (llama_decode %zu), positions %zu; draft forwards %zu (llama_decode %zu), positions %zu\n",
              target.stats().calls, target.engine_stats().decode_calls, target.stats().appended_positions, draft.stats().calls,
              draft.engine_stats().decode_calls, draft.stats().appended_positions);
  std::printf("drafted %zu, accepted %zu, acceptance %.4f, tokens per target round %.3f\n", total.drafted, total.accepted,
              total.acceptance_rate(), total.tokens_per_target_call());
  return 0;
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
