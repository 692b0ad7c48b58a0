// MTAD evaluation (seed 003, section 5): multi-token assisted decoding against strict speculative
// decoding and target-only sampling on the n-gram pair (a 2-gram draft for a 4-gram target, trained on
// the license texts under /usr/share/common-licenses or on --corpus files).
//
// Every method warps p and q alike with the paper's defaults (appendix F: top-20, then top-p 0.9) and
// samples; the simulated clock is the demo's cost model (t_draft = 0.05, t_target(k) = 1 + 0.01 k).
// Per method, pooled over prompts x seeds: tokens per iteration (block efficiency, Table 5), simulated
// speedup over target-only decoding (MTAD's W beams of a step charged as one batched draft call, and,
// as a pessimistic column, one call per beam), and the perplexity of the output under the unwarped
// target (eq. (1)): exp(-(sum of log p) / (number of tokens)).
// The ablation over W and tau (Table 7, Figure 3) is written as CSV with --csv FILE.
//
// Usage: specdec_mtad_eval [--corpus FILE]... [--tokens N] [--seeds K] [--gamma G] [--widths 2,4,8]
//                          [--taus 0.1,0.5,0.9] [--modes without,search] [--seed S] [--csv FILE] [--smoke]
// Beam modes: without = beam sampling without replacement (Gumbel-top-k; eq. (2)), sample = with
// replacement, search = deterministic beam search (the arg-max beams Lemma 3.4 assumes).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/decode/decode.hpp>
#include <specdec/decode/likelihood.hpp>
#include <specdec/decode/mtad.hpp>
#include <specdec/models/corpus.hpp>
#include <specdec/models/ngram.hpp>
#include <specdec/specdec.hpp>

namespace {

struct eval_args {
  std::vector<std::filesystem::path> corpus;
  std::size_t tokens = 128;  // the paper generates at most 128 tokens per input
  std::size_t seeds = 4;
  std::size_t prompts = 8;
  std::size_t gamma = 4;  // Table 15
  std::vector<std::size_t> widths{2, 4, 8};
  std::vector<double> taus{0.1, 0.5, 0.9};
  std::vector<specdec::beam_mode> modes{specdec::beam_mode::sample_without_replacement, specdec::beam_mode::search};
  std::uint64_t seed = 2026;
  std::string csv;
};

template <class T>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    std::stringstream v(item);
    T x{};
    if (!(v >> x)) throw specdec::error("specdec_mtad_eval: bad list item '" + item + "'");
    out.push_back(x);
  }
  return out;
}

eval_args parse(int argc, char** argv) {
  eval_args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw specdec::error("specdec_mtad_eval: " + std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--corpus")
      a.corpus.emplace_back(value());
    else if (arg == "--tokens")
      a.tokens = std::stoul(value());
    else if (arg == "--seeds")
      a.seeds = std::stoul(value());
    else if (arg == "--gamma")
      a.gamma = std::stoul(value());
    else if (arg == "--widths")
      a.widths = parse_list<std::size_t>(value());
    else if (arg == "--taus")
      a.taus = parse_list<double>(value());
    else if (arg == "--seed")
      a.seed = std::stoull(value());
    else if (arg == "--csv")
      a.csv = value();
    else if (arg == "--modes") {
      a.modes.clear();
      for (const std::string& m : parse_list<std::string>(value())) {
        if (m == "sample")
          a.modes.push_back(specdec::beam_mode::sample);
        else if (m == "without")
          a.modes.push_back(specdec::beam_mode::sample_without_replacement);
        else if (m == "search")
          a.modes.push_back(specdec::beam_mode::search);
        else
          throw specdec::error("specdec_mtad_eval: --modes takes sample, without and search");
      }
    } else if (arg == "--smoke") {
      a.tokens = 16;
      a.seeds = 1;
      a.prompts = 2;
    } else
      throw specdec::error("specdec_mtad_eval: unknown argument " + std::string(arg));
  }
  return a;
}

const char* mode_name(specdec::beam_mode m) {
  switch (m) {
    case specdec::beam_mode::search: return "search";
    case specdec::beam_mode::sample: return "sample";
    case specdec::beam_mode::sample_without_replacement: return "without";
  }
  return "?";
}

// One method's totals over every prompt and seed.
struct row {
  std::string method;
  std::size_t width = 0;  // 0: not MTAD
  double tau = 0.0;
  specdec::beam_mode mode{};
  specdec::decode_stats total;
  double target_only_time = 0.0;  // simulated time of target-only decoding for the same tokens
  double per_beam_time = 0.0;     // MTAD: simulated time with one draft call per beam evaluation
  double log_likelihood = 0.0;    // sum of log p(token) under the unwarped target

  void add(const specdec::decode_result& d, double log_lik, const specdec::cost_model& cost) {
    total.merge(d.stats);
    target_only_time += static_cast<double>(d.stats.emitted) * cost.target_time(1);
    log_likelihood += log_lik;
  }
  double speedup() const { return total.simulated_time > 0 ? target_only_time / total.simulated_time : 0.0; }
  double speedup_per_beam() const { return per_beam_time > 0 ? target_only_time / per_beam_time : 0.0; }
  double perplexity() const { return total.emitted ? std::exp(-log_likelihood / static_cast<double>(total.emitted)) : 0.0; }
};

double sum_of(const std::vector<double>& v) {
  double s = 0.0;
  for (const double x : v) s += x;
  return s;
}

}  // namespace

int main(int argc, char** argv) try {
  const eval_args args = parse(argc, argv);
  const auto texts = args.corpus.empty() ? specdec::load_default_corpus() : specdec::load_text_files(args.corpus);
  const specdec::ngram_pair models = specdec::make_ngram_pair(texts, /*target_order=*/4, /*draft_order=*/2);
  const auto& vocab = models.target.vocab();

  specdec::decode_options options;
  options.max_new_tokens = args.tokens;
  options.target_params = specdec::mtad_default_warp;
  const specdec::cost_model cost{.t_draft = 0.05, .t_target_base = 1.0, .t_target_per_token = 0.01};
  std::printf("n-gram pair: 4-gram target, 2-gram draft, V = %zu; warping top-%d then top-p %.2f on p and q; cost model: "
              "t_draft = %.2f, t_target(k) = %.2f + %.2f k\n",
              vocab.size(), options.target_params.top_k, options.target_params.top_p, cost.t_draft, cost.t_target_base,
              cost.t_target_per_token);
  std::printf("%zu prompts x %zu seeds x %zu tokens; gamma = %zu; MTAD beams: without = sampled without replacement, "
              "search = deterministic; perplexity under the unwarped target\n\n",
              args.prompts, args.seeds, args.tokens, args.gamma);

  const std::vector<std::string> all_prompts{
      "this license", "you may",           "the software is provided", "permission is hereby granted to",
      "the licensor", "if you distribute", "each contributor",         "in no event shall"};
  std::vector<row> rows(2);
  rows[0].method = "target-only";
  rows[1].method = "strict SD";
  for (const specdec::beam_mode mode : args.modes)
    for (const std::size_t w : args.widths)
      for (const double tau : args.taus) {
        char name[64];
        std::snprintf(name, sizeof name, "MTAD %s W=%zu tau=%.2f", mode_name(mode), w, tau);
        rows.emplace_back();
        rows.back().method = name;
        rows.back().width = w;
        rows.back().tau = tau;
        rows.back().mode = mode;
      }

  for (std::size_t p = 0; p < std::min(args.prompts, all_prompts.size()); ++p) {
    std::vector<specdec::token_id> prompt{specdec::vocabulary::bos};
    const auto encoded = vocab.encode(all_prompts[p]);
    prompt.insert(prompt.end(), encoded.begin(), encoded.end());
    for (std::size_t k = 0; k < args.seeds; ++k) {
      options.seed = args.seed + k;
      options.request_id = static_cast<std::uint32_t>(p);
      const auto quality = [&](const std::vector<specdec::token_id>& tokens) {
        return tokens.empty() ? 0.0 : sum_of(specdec::token_log_likelihoods(models.target, prompt, tokens));
      };
      const auto target_only = specdec::decode_target_only(models.target, prompt, options, cost);
      rows[0].add(target_only, quality(target_only.tokens), cost);
      const auto sd = specdec::decode(specdec::exec::seq, models.target, models.draft, options.target_params, args.gamma,
                                      specdec::strict, prompt, options, cost);
      rows[1].add(sd, quality(sd.tokens), cost);
      for (std::size_t m = 2; m < rows.size(); ++m) {
        const specdec::mtad_options mtad{.gamma = args.gamma, .width = rows[m].width, .mode = rows[m].mode, .tau = rows[m].tau};
        const auto r = specdec::decode_mtad(specdec::exec::seq, models.target, models.draft, mtad, prompt, options, cost);
        rows[m].add(r, r.log_likelihood, cost);
        // The same run charged one draft call per beam evaluation instead of one per step.
        rows[m].per_beam_time +=
            r.stats.simulated_time + static_cast<double>(r.stats.draft_calls - r.stats.drafted) * cost.t_draft;
      }
    }
  }

  std::printf("%-27s %7s %11s %21s %16s %28s %19s %11s %9s\n", "method", "tokens", "iterations", "tokens_per_iteration",
              "acceptance_rate", "simulated_speedup_vs_target", "speedup_per_beam", "perplexity", "wall_ms");
  for (const row& r : rows) {
    const auto& t = r.total;
    char acceptance[32] = "-", per_beam[32] = "-";
    if (t.drafted) std::snprintf(acceptance, sizeof acceptance, "%.3f", t.acceptance_rate());
    if (r.width) std::snprintf(per_beam, sizeof per_beam, "%.3f", r.speedup_per_beam());
    std::printf("%-27s %7zu %11zu %21.3f %16s %28.3f %19s %11.3f %9.2f\n", r.method.c_str(), t.emitted, t.iterations,
                t.tokens_per_target_call(), acceptance, r.speedup(), per_beam, r.perplexity(), t.wall_seconds * 1e3);
  }

  // MTAD against strict SD: the paper reports 21.2% lower perplexity and 1.42x the speed (section 5.1).
  const row& sd = rows[1];
  std::printf("\nMTAD vs strict SD (perplexity change, speed ratio from the simulated clock):\n");
  for (std::size_t m = 2; m < rows.size(); ++m)
    std::printf("  %-27s perplexity %+6.1f%%   speed %.2fx (per-beam charging %.2fx)\n", rows[m].method.c_str(),
                100.0 * (rows[m].perplexity() / sd.perplexity() - 1.0), rows[m].speedup() / sd.speedup(),
                rows[m].speedup_per_beam() / sd.speedup());
  std::printf("  (paper, Llama-2/OPT 13B with 68M/125M drafts: -21.2%% perplexity, 1.42x speed)\n");

  if (!args.csv.empty()) {
    std::ofstream out(args.csv);
    if (!out) throw specdec::error("specdec_mtad_eval: cannot write " + args.csv);
    out << "method,width,tau,gamma,mode,tokens,iterations,tokens_per_iteration,acceptance_rate,simulated_speedup,"
           "simulated_speedup_per_beam,perplexity,log_likelihood_per_token,wall_ms\n";
    for (const row& r : rows) {
      const auto& t = r.total;
      out << (r.width ? "mtad" : r.method == "strict SD" ? "strict_sd" : "target_only") << ',';
      if (r.width)
        out << r.width << ',' << r.tau << ',';
      else
        out << ",,";
      out << (r.method == "target-only" ? 0 : args.gamma) << ',' << (r.width ? mode_name(r.mode) : "") << ',' << t.emitted << ','
          << t.iterations << ',' << t.tokens_per_target_call() << ',' << t.acceptance_rate() << ',' << r.speedup() << ','
          << (r.width ? r.speedup_per_beam() : r.speedup()) << ',' << r.perplexity() << ','
          << (t.emitted ? r.log_likelihood / static_cast<double>(t.emitted) : 0.0) << ',' << t.wall_seconds * 1e3 << '\n';
    }
    std::printf("\nwrote the W x tau ablation to %s\n", args.csv.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "specdec_mtad_eval: %s\n", e.what());
  return 1;
}
