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
#include <specdec/decode/mtad.hpp>
#include <specdec/decode/sv.hpp>
#include <specdec/estimate/acceptance_estimator.hpp>
#include <specdec/models/corpus.hpp>
#include <specdec/models/ngram.hpp>
#include <specdec/specdec.hpp>
#if __has_include(<Eigen/Dense>)  // SPRINTER's learned verifier needs specdec::learn (Eigen)
#include <specdec/decode/sprinter.hpp>
#include <specdec/learn/generate.hpp>
#include <specdec/learn/train.hpp>
#define SPECDEC_DEMO_SPRINTER 1
#else
#define SPECDEC_DEMO_SPRINTER 0
#endif

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
    if (arg == "--corpus")
      a.corpus.emplace_back(value());
    else if (arg == "--tokens")
      a.tokens = std::stoul(value());
    else if (arg == "--gamma")
      a.gamma = std::stoul(value());
    else if (arg == "--lenience")
      a.lenience = std::stod(value());
    else if (arg == "--seed")
      a.seed = std::stoull(value());
    else if (arg == "--smoke")
      a.tokens = 12;
    else
      throw specdec::error("specdec_demo: unknown argument " + std::string(arg));
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
  const specdec::cost_model cost{.t_draft = 0.05, .t_target_base = 1.0, .t_target_per_token = 0.01};
  std::printf("cost model: t_draft = %.2f, t_target(k) = %.2f + %.2f k; gamma = %zu, lenience l = %.2f, seed = %llu\n\n",
              cost.t_draft, cost.t_target_base, cost.t_target_per_token, args.gamma, args.lenience,
              static_cast<unsigned long long>(args.seed));

  const std::vector<std::string> prompts{"this license", "you may", "the software is provided",
                                         "permission is hereby granted to"};
  std::vector<row> rows{{"target-only", {}, 0, {}},  {"strict SD", {}, 0, {}},  {"block SD", {}, 0, {}},
                        {"EAGLE-2 tree", {}, 0, {}}, {"lenient SD", {}, 0, {}}, {"greedy SD", {}, 0, {}},
                        {"SV exact", {}, 0, {}},     {"SV paper", {}, 0, {}},   {"MTAD t=0.1", {}, 0, {}},
                        {"MTAD t=0.9", {}, 0, {}}};
  const specdec::warp_params sampled{}, greedy_params{.temperature = 0.0};
  // EAGLE-2's dynamic tree (depth 7 expansions of the top 10 nodes, 60 nodes kept) from the 2-gram
  // draft, verified node by node with the target-only rule (lossless for any candidate choice).
  specdec::dynamic_tree_drafter eagle(models.draft, specdec::dynamic_tree_params{.warp = sampled});

  // Speculative Verification (seed 001): a 3-gram companion on the same text and vocabulary, and
  // P(accept | S, A) profiled with SD on other prompts (SV section 7.4), adaptive 10x10 bins.
  const specdec::ngram_model companion(3, vocab, texts);
  std::vector<std::vector<specdec::token_id>> profile_prompts;
  for (const char* p :
       {"the licensor", "each contributor", "this program is free software", "you must give", "the source code"}) {
    std::vector<specdec::token_id> ids{specdec::vocabulary::bos};
    const auto encoded = vocab.encode(p);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    profile_prompts.push_back(std::move(ids));
  }
  specdec::decode_options profile_options = options;
  profile_options.seed = args.seed + 1;
  const specdec::sv_profile_options profile{.gamma = args.gamma, .tokens_per_prompt = 200};
  const auto sv_samples = specdec::profile_sv_indicators(specdec::exec::seq, models.target, models.draft, sampled, companion,
                                                         profile, profile_prompts, profile_options);
  const auto estimator =
      specdec::estimate::acceptance_estimator::fit(sv_samples, specdec::estimate::binning::adaptive(sv_samples, 10, 10));
  specdec::sv_options sv{.gamma_max = args.gamma, .t_companion = cost.t_draft};
  const specdec::sv_step_latency sv_latency{cost, sv.gamma_max, sv.t_companion};
  const specdec::lenient_rule lenient(args.lenience);

#if SPECDEC_DEMO_SPRINTER
  // SPRINTER (seed 000): a linear verifier (one layer + sigmoid, Adam on BCE, early stopping) on the
  // draft row's documented features, trained on corpus prefixes of the four categories of section 3.2
  // with labels 1[q(x) <= 1.2 p(x)]; tau = 0.5, runs capped at 20 tokens, a verifier call costs 0.002.
  std::vector<std::vector<specdec::token_id>> documents;
  for (const auto& text : texts)
    for (const auto paragraph : specdec::split_paragraphs(text))
      if (auto doc = vocab.encode(paragraph); !doc.empty()) documents.push_back(std::move(doc));
  specdec::draft_row_features features;
  specdec::learn::generation_options generation;
  generation.examples = args.tokens <= 12 ? 2000 : 12000;  // fewer under --smoke
  generation.seed = args.seed;
  const specdec::learn::linear_verifier verifier =
      specdec::learn::train_linear_verifier(
          specdec::learn::generate_verifier_data(models.target, models.draft, features, documents, generation),
          specdec::learn::train_options{.seed = args.seed})
          .verifier;
  const specdec::gating_params gating{.tau = 0.5, .max_run = 20};
  const specdec::sprinter_options sprinter_costs{.t_verifier = 0.002};
  rows.push_back({"SPRINTER", {}, 0, {}});
#endif

  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<specdec::token_id> prompt{specdec::vocabulary::bos};
    const auto encoded = vocab.encode(prompts[i]);
    prompt.insert(prompt.end(), encoded.begin(), encoded.end());
    options.seed = args.seed;
    options.request_id = static_cast<std::uint32_t>(i);

    options.target_params = sampled;
    const auto target_only = specdec::decode_target_only(models.target, prompt, options, cost);
    const auto strict = specdec::decode(specdec::exec::seq, models.target, models.draft, sampled, args.gamma, specdec::strict,
                                        prompt, options, cost);
    const auto block_sd = specdec::decode(specdec::exec::seq, models.target, models.draft, sampled, args.gamma, specdec::block,
                                          prompt, options, cost);
    const auto tree = specdec::decode_tree(specdec::exec::seq, models.target, eagle, specdec::eagle2_default_depth + 1,
                                           specdec::target_only, prompt, options, cost);
    const auto len =
        specdec::decode(specdec::exec::seq, models.target, models.draft, sampled, args.gamma, lenient, prompt, options, cost);
    sv.mode = specdec::sv_mode::exact;
    const auto sv_exact = specdec::decode_sv(specdec::exec::seq, models.target, models.draft, sampled,
                                             specdec::sv_setup{companion, estimator, sv_latency}, sv, prompt, options, cost);
    sv.mode = specdec::sv_mode::paper;
    const auto sv_paper = specdec::decode_sv(specdec::exec::seq, models.target, models.draft, sampled,
                                             specdec::sv_setup{companion, estimator, sv_latency}, sv, prompt, options, cost);
    // MTAD (seed 003): 8 sampled beams (top-20, top-p 0.9 on both sides), longest prefix whose joint
    // ratio p/q passes tau, then one token from p. Lossy; the draft's W beams per step count as one call.
    const specdec::mtad_options mtad_low{.gamma = args.gamma, .width = 8, .tau = 0.1};
    const specdec::mtad_options mtad_high{.gamma = args.gamma, .width = 8, .tau = 0.9};
    const auto mtad_01 = specdec::decode_mtad(specdec::exec::seq, models.target, models.draft, mtad_low, prompt, options, cost);
    const auto mtad_09 = specdec::decode_mtad(specdec::exec::seq, models.target, models.draft, mtad_high, prompt, options, cost);
    options.target_params = greedy_params;
    const auto greedy = specdec::decode(specdec::exec::seq, models.target, models.draft, greedy_params, args.gamma,
                                        specdec::greedy, prompt, options, cost);

    std::vector<const specdec::decode_result*> results{&target_only, &strict,   &block_sd, &tree,    &len,
                                                       &greedy,      &sv_exact, &sv_paper, &mtad_01, &mtad_09};
#if SPECDEC_DEMO_SPRINTER
    options.target_params = sampled;
    const auto sprinter =
        specdec::decode_sprinter(specdec::exec::seq, models.target, models.draft, sampled, specdec::draft_row_features{},
                                 verifier, gating, sprinter_costs, prompt, options, cost);
    results.push_back(&sprinter);  // a sprinter_result is a decode_result (plus sprinter_stats)
#endif
    for (std::size_t m = 0; m < rows.size(); ++m) {
      add(rows[m], *results[m], cost);
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
  std::printf("\nstrict SD, block SD (block verification: the whole draft judged jointly, never fewer accepted tokens than\n"
              "strict on average), the EAGLE-2 tree (60 nodes scored per target call) and target-only sample the same\n"
              "distribution (lossless); lenient SD with l < 1 is lossy;\n"
              "greedy SD reproduces the target's greedy decoding token for token. SV drafts gamma tokens, asks a 3-gram\n"
              "companion how likely each is to be accepted and verifies the goodput-optimal prefix: 'SV exact' is lossless,\n"
              "'SV paper' (the paper's rule, which looks at the drafted token itself) is not; their acceptance_rate is\n"
              "accepted / verified drafts. MTAD verifies beam drafts by their joint likelihood ratio against tau (lossy;\n"
              "Thm 3.6 bounds its accepted length); its rows count the W beams of a draft step as one batched call.\n");
#if SPECDEC_DEMO_SPRINTER
  std::printf("SPRINTER (lambda 1.2, tau 0.5, runs capped at 20) keeps verifier-accepted tokens without a target check and\n"
              "has the target check only the last one: lossy, each token is (1 - eta_fp) p + eta_fp q (Theorem 3.1); its\n"
              "acceptance_rate is Theorem A.4's beta. specdec_sprinter_eval prints the ROC, threshold choice and quality.\n");
#endif
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "specdec_demo: %s\n", e.what());
  return 1;
}
