// The end-to-end demo (./scripts/demo.sh): a low-order n-gram model drafts for a high-order one,
// both trained at run time on a text corpus; target-only decoding and three speculative methods
// run side by side on the same prompts, with their counters, simulated speedup and wall time.
//
// Usage: specdec_demo [--corpus FILE]... [--tokens N] [--gamma G] [--lenience L] [--seed S] [--smoke]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/decode/decode.hpp>
#include <specdec/models/corpus.hpp>
#include <specdec/models/ngram.hpp>
#include <specdec/specdec.hpp>

namespace {

struct demo_args {
  std::vector<std::filesystem::path> corpus;
  std::size_t tokens = 60;
  std::size_t gamma = 4;
  double lenience = 0.5;
  std::uint64_t seed = 2026;
};

demo_args parse(int argc, char** argv) {
  demo_args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw specdec::error("specdec_demo: " + std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--corpus") a.corpus.emplace_back(value());
    else if (arg == "--tokens") a.tokens = std::stoul(value());
    else if (arg == "--gamma") a.gamma = std::stoul(value());
    else if (arg == "--lenience") a.lenience = std::stod(value());
    else if (arg == "--seed") a.seed = std::stoull(value());
    else if (arg == "--smoke") a.tokens = 12;
    else throw specdec::error("specdec_demo: unknown argument " + std::string(arg));
  }
  return a;
}

// One table row: a method's totals over every prompt.
struct row {
  std::string method;
  specdec::decode_stats total;
  double target_only_time = 0.0;  // simulated time target-only decoding needs for the same tokens
  std::string sample;
};

// The tokenizer decodes </s> as a line break; keep each sample on one table line.
std::string one_line(std::string text) {
  std::string out;
  for (const char c : text) out += c == '\n' ? std::string(" </s> ") : std::string(1, c);
  return out;
}

void add(row& r, const specdec::decode_result& d, const specdec::cost_model& cost) {
  r.total.merge(d.stats);
  r.target_only_time += static_cast<double>(d.stats.emitted) * cost.target_time(1);
}

}  // namespace

int main(int argc, char** argv) try {
  const demo_args args = parse(argc, argv);
  const auto paths = args.corpus.empty() ? specdec::default_corpus_paths() : args.corpus;
  const auto texts = specdec::load_text_files(paths);

  const auto t0 = std::chrono::steady_clock::now();
  const specdec::ngram_pair models = specdec::make_ngram_pair(texts, /*target_order=*/4, /*draft_order=*/2);
  const double train_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto& vocab = models.target.vocab();
  std::printf("corpus: %zu files, vocabulary V = %zu words; trained a 4-gram target and a 2-gram draft "
              "(interpolated modified Kneser-Ney) in %.0f ms\n",
              paths.size(), vocab.size(), train_ms);

  // The simulated cost model: a draft call costs 5% of a target call, and each extra position the
  // target scores adds 1% (a memory-bound target); Leviathan's c = 0.05.
  specdec::decode_options options;
  options.max_new_tokens = args.tokens;
  options.cost = specdec::cost_model{.t_draft = 0.05, .t_target_base = 1.0, .t_target_per_token = 0.01};
  std::printf("cost model: t_draft = %.2f, t_target(k) = %.2f + %.2f k; gamma = %zu, lenience l = %.2f, seed = %llu\n\n",
              options.cost.t_draft, options.cost.t_target_base, options.cost.t_target_per_token, args.gamma, args.lenience,
              static_cast<unsigned long long>(args.seed));

  const std::vector<std::string> prompts{"this license", "you may", "the software is provided", "permission is hereby granted to"};
  std::vector<row> rows{{"target-only", {}, 0, {}}, {"strict SD", {}, 0, {}}, {"lenient SD", {}, 0, {}},
                        {"greedy SD", {}, 0, {}}};
  const specdec::warp_params sampled{}, greedy_params{.temperature = 0.0};
  const specdec::lenient_rule lenient(args.lenience);

  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<specdec::token_id> prompt{specdec::vocabulary::bos};
    const auto encoded = vocab.encode(prompts[i]);
    prompt.insert(prompt.end(), encoded.begin(), encoded.end());
    options.seed = args.seed;
    options.request_id = static_cast<std::uint32_t>(i);

    options.target_params = sampled;
    const auto target_only = specdec::decode_target_only(models.target, prompt, options);
    const auto strict = specdec::decode(specdec::exec::seq, models.target, models.draft, sampled, args.gamma, specdec::strict, prompt, options);
    const auto len = specdec::decode(specdec::exec::seq, models.target, models.draft, sampled, args.gamma, lenient, prompt, options);
    options.target_params = greedy_params;
    const auto greedy = specdec::decode(specdec::exec::seq, models.target, models.draft, greedy_params, args.gamma, specdec::greedy, prompt, options);

    const specdec::decode_result* results[] = {&target_only, &strict, &len, &greedy};
    for (std::size_t m = 0; m < rows.size(); ++m) {
      add(rows[m], *results[m], options.cost);
      if (i == 0) rows[m].sample = prompts[i] + " | " + one_line(vocab.decode(results[m]->tokens));
    }
  }

  std::printf("%-12s %7s %13s %23s %16s %28s %9s\n", "method", "tokens", "target_calls", "tokens_per_target_call",
              "acceptance_rate", "simulated_speedup_vs_target", "wall_ms");
  for (const row& r : rows) {
    const auto& t = r.total;
    const double speedup = t.simulated_time > 0 ? r.target_only_time / t.simulated_time : 0.0;
    char acceptance[32] = "-";
    if (t.drafted) std::snprintf(acceptance, sizeof acceptance, "%.3f", t.acceptance_rate());
    std::printf("%-12s %7zu %13zu %23.3f %16s %28.3f %9.2f\n", r.method.c_str(), t.emitted, t.target_calls,
                t.tokens_per_target_call(), acceptance, speedup, t.wall_seconds * 1e3);
  }
  std::printf("\nOne continuation per method (first prompt; '|' marks where generation starts):\n");
  for (const row& r : rows) std::printf("  %-12s %s\n", r.method.c_str(), r.sample.c_str());
  std::printf("\nstrict SD and target-only sample the same distribution (lossless); lenient SD with l < 1 is lossy;\n"
              "greedy SD reproduces the target's greedy decoding token for token.\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "specdec_demo: %s\n", e.what());
  return 1;
}
