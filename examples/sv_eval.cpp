// Speculative Verification (SV; Kim et al., "Speculative Verification: Exploiting Information Gain for
// Speculative Decoding") on reference models: n-gram draft (order 2), companion (order 3) and target (order 4),
// all trained at run time on the same corpus with one vocabulary.
//
//  1. Profiling (section 7.4): standard SD with gamma = 7 from held-out prompts records S, A and the
//     target's acceptance probability of every drafted token; the acceptance estimator is fitted on it.
//  2. Information gain (Table 1 style): H(X), H(X | S, A), I(X; S, A) for uniform 5x5, 10x10, 20x20 and
//     adaptive bins, plug-in and Miller-Madow; and how well P(accept | S, A) predicts held-out samples.
//  3. Batch goodput (Figure 3 style): B = 1..64 requests decoded in lockstep on a simulated accelerator
//     whose target call costs `base` up to a saturation point (in positions scored) and grows linearly
//     after; drafting and the companion cost a fixed time per batched step. Methods: target-only, SD at
//     gamma 5 and 7, and SV at gamma_max 5 and 7 in the paper's mode and in the exact (lossless) mode.
//  4. Fairness (Table 9 style): the requests with the fewest and most verified tokens at the largest batch.
//  5. The paper's rule is not lossless: the exact law of a token verified only when P(accept | S, A) > theta.
//
// Usage: specdec_sv_eval [--smoke] [--csv FILE] [--corpus FILE]... [--tokens N] [--max-batch B]
//                        [--saturation P] [--slope S] [--t-draft T] [--t-companion T] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/decode/sv.hpp>
#include <specdec/estimate/acceptance_estimator.hpp>
#include <specdec/estimate/information_gain.hpp>
#include <specdec/model/score.hpp>
#include <specdec/models/corpus.hpp>
#include <specdec/models/ngram.hpp>
#include <specdec/models/tokenizer.hpp>
#include <specdec/optimize/latency_table.hpp>

namespace {

using specdec::token_id;
namespace est = specdec::estimate;
namespace opt = specdec::optimize;

struct args_t {
  bool smoke = false;
  std::string csv;
  std::vector<std::filesystem::path> corpus;
  std::size_t tokens = 64;  // tokens generated per request
  std::size_t max_batch = 64;
  double saturation = 128.0;   // positions a target call scores before it saturates
  double slope = 1.0 / 128.0;  // latency per position beyond saturation (base = 1)
  double t_draft = 0.04;       // one batched draft step
  double t_companion = 0.06;   // one batched companion call (scores every drafted position)
  std::uint64_t seed = 2025;
};

args_t parse(int argc, char** argv) {
  args_t a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw specdec::error("specdec_sv_eval: " + std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--smoke")
      a.smoke = true;
    else if (arg == "--csv")
      a.csv = value();
    else if (arg == "--corpus")
      a.corpus.emplace_back(value());
    else if (arg == "--tokens")
      a.tokens = std::stoul(value());
    else if (arg == "--max-batch")
      a.max_batch = std::stoul(value());
    else if (arg == "--saturation")
      a.saturation = std::stod(value());
    else if (arg == "--slope")
      a.slope = std::stod(value());
    else if (arg == "--t-draft")
      a.t_draft = std::stod(value());
    else if (arg == "--t-companion")
      a.t_companion = std::stod(value());
    else if (arg == "--seed")
      a.seed = std::stoull(value());
    else
      throw specdec::error("specdec_sv_eval: unknown argument " + std::string(arg));
  }
  if (a.smoke) {
    a.tokens = std::min<std::size_t>(a.tokens, 12);
    a.max_batch = std::min<std::size_t>(a.max_batch, 4);
  }
  return a;
}

// Prompts: <s> and the first three words of every paragraph with at least four, in corpus order;
// even-numbered ones for evaluation, odd-numbered ones for profiling.
void make_prompts(const std::vector<std::string>& texts, const specdec::vocabulary& vocab,
                  std::vector<std::vector<token_id>>& eval, std::vector<std::vector<token_id>>& profile) {
  std::size_t k = 0;
  for (const auto& text : texts)
    for (const std::string_view paragraph : specdec::split_paragraphs(text)) {
      const auto ids = vocab.encode(paragraph);
      if (ids.size() < 4) continue;
      std::vector<token_id> p{specdec::vocabulary::bos, ids[0], ids[1], ids[2]};
      (k++ % 2 == 0 ? eval : profile).push_back(std::move(p));
    }
}

struct method {
  std::string name;
  std::size_t gamma;
  specdec::batch_length_rule rule;
  specdec::sv_mode mode;
  opt::token_counting counting;
};

const char* mode_name(const method& m) {
  if (m.rule == specdec::batch_length_rule::fixed) return m.gamma == 0 ? "target-only" : "sd";
  return m.mode == specdec::sv_mode::paper ? "paper" : "exact";
}
const char* counting_name(opt::token_counting c) {
  return c == opt::token_counting::accepted_drafts ? "accepted_drafts" : "with_target_token";
}

}  // namespace

int main(int argc, char** argv) try {
  const args_t args = parse(argc, argv);
  const auto t_start = std::chrono::steady_clock::now();
  const auto paths = args.corpus.empty() ? specdec::default_corpus_paths() : args.corpus;
  const auto texts = specdec::load_text_files(paths);
  const specdec::vocabulary vocab = specdec::vocabulary::build(texts);
  const specdec::ngram_model target(4, vocab, texts), draft(2, vocab, texts), companion(3, vocab, texts);
  std::printf("corpus: %zu files, V = %zu; draft = 2-gram, companion = 3-gram, target = 4-gram (modified Kneser-Ney)\n",
              paths.size(), vocab.size());

  std::vector<std::vector<token_id>> eval_prompts, profile_prompts;
  make_prompts(texts, vocab, eval_prompts, profile_prompts);
  if (eval_prompts.size() < args.max_batch || profile_prompts.size() < 8)
    throw specdec::error("specdec_sv_eval: corpus too small");

  // ---- 1. profiling and the estimator ------------------------------------------------------------
  const specdec::warp_params sampled{};
  specdec::decode_options o;
  o.seed = args.seed;
  specdec::sv_profile_options prof;
  prof.gamma = 7;
  prof.tokens_per_prompt = args.smoke ? 16 : 48;
  const std::size_t n_profile = std::min<std::size_t>(profile_prompts.size(), args.smoke ? 12 : 160);
  const std::span<const std::vector<token_id>> fit_prompts(profile_prompts.data(), n_profile / 2);
  const std::span<const std::vector<token_id>> held_prompts(profile_prompts.data() + n_profile / 2, n_profile - n_profile / 2);
  const auto samples =
      specdec::profile_sv_indicators(specdec::exec::seq, target, draft, sampled, companion, prof, fit_prompts, o);
  o.request_id = 1u << 20;  // the held-out run uses other request ids
  const auto held = specdec::profile_sv_indicators(specdec::exec::seq, target, draft, sampled, companion, prof, held_prompts, o);
  o.request_id = 0;
  const auto estimator = est::acceptance_estimator::fit(samples, est::binning::adaptive(samples, 10, 10));
  std::printf("profiling: SD gamma = 7, %zu + %zu prompts x %zu tokens -> %zu samples (+ %zu held out); mean acceptance %.3f\n\n",
              fit_prompts.size(), held_prompts.size(), prof.tokens_per_prompt, samples.size(), held.size(), estimator.overall());

  // ---- 2. information gain (Table 1 style) -------------------------------------------------------
  std::printf("Information gain of (S, A) about X = the target's acceptance probability of a drafted token,\n"
              "X in 10 equal bins of [0, 1], entropies in bits (plug-in; Miller-Madow corrected in brackets):\n");
  std::printf("%-16s %8s %20s %20s %8s %16s\n", "binning", "cells", "H(X)", "H(X|S,A)", "I/H(X)", "I(X;S) alone");
  for (const auto& bins : {est::binning::uniform(5, 5), est::binning::uniform(10, 10), est::binning::uniform(20, 20),
                           est::binning::adaptive(samples, 10, 10), est::binning::adaptive(samples, 20, 20)}) {
    const auto p = est::information_gain(samples, bins, {10, false});
    const auto m = est::information_gain(samples, bins, {10, true});
    const auto s = est::information_gain(samples, bins, {10, true, est::conditioning::s_only});
    char hx[64], hxy[64];
    std::snprintf(hx, sizeof hx, "%.3f [%.3f]", p.h_x, m.h_x);
    std::snprintf(hxy, sizeof hxy, "%.3f [%.3f]", p.h_x_given, m.h_x_given);
    std::printf("%-16s %8zu %20s %20s %7.1f%% %16.3f\n", bins.name().c_str(), bins.cells(), hx, hxy, 100 * m.relative_gain(),
                s.gain);
  }
  {
    double mse_const = 0, mse_s = 0, mse_sa = 0;
    for (const auto& x : held) {
      mse_const += (x.x - estimator.overall()) * (x.x - estimator.overall());
      mse_s += (x.x - estimator.given_similarity(x.s)) * (x.x - estimator.given_similarity(x.s));
      mse_sa += (x.x - estimator(x.s, x.a)) * (x.x - estimator(x.s, x.a));
    }
    const double n = static_cast<double>(std::max<std::size_t>(held.size(), 1));
    std::printf("held-out mean squared error of the acceptance prediction: constant %.4f, P(accept | S) %.4f, "
                "P(accept | S, A) %.4f (adaptive 10x10)\n\n",
                mse_const / n, mse_s / n, mse_sa / n);
  }

  // ---- 3. batch goodput (Figure 3 style) ---------------------------------------------------------
  const opt::saturating_latency target_latency{1.0, args.saturation, args.slope};
  std::printf("simulated accelerator: target call = 1 up to %.0f positions, + %.4f per position after; draft step %.3f, "
              "companion call %.3f; %zu tokens per request\n",
              args.saturation, args.slope, args.t_draft, args.t_companion, args.tokens);
  using rule = specdec::batch_length_rule;
  using mode = specdec::sv_mode;
  const auto eq6 = opt::token_counting::accepted_drafts, plus_t = opt::token_counting::with_target_token;
  const std::vector<method> methods{
      {"target-only", 0, rule::fixed, mode::exact, eq6},   {"SD g=5", 5, rule::fixed, mode::exact, eq6},
      {"SD g=7", 7, rule::fixed, mode::exact, eq6},        {"SV paper 5", 5, rule::sv, mode::paper, eq6},
      {"SV paper 7", 7, rule::sv, mode::paper, eq6},       {"SV exact 5", 5, rule::sv, mode::exact, eq6},
      {"SV exact 7", 7, rule::sv, mode::exact, eq6},       {"SV paper 5 +t", 5, rule::sv, mode::paper, plus_t},
      {"SV paper 7 +t", 7, rule::sv, mode::paper, plus_t}, {"SV exact 5 +t", 5, rule::sv, mode::exact, plus_t},
      {"SV exact 7 +t", 7, rule::sv, mode::exact, plus_t},
  };
  std::vector<std::size_t> batches;
  for (std::size_t b = 1; b <= args.max_batch; b *= 2) batches.push_back(b);
  if (args.smoke) batches = {1, args.max_batch};

  std::FILE* csv = nullptr;
  if (!args.csv.empty()) {
    csv = std::fopen(args.csv.c_str(), "w");
    if (!csv) throw specdec::error("specdec_sv_eval: cannot write " + args.csv);
    std::fprintf(csv, "batch,method,gamma_max,mode,counting,tokens,rounds,simulated_time,goodput,speedup_vs_target,"
                      "speedup_vs_sd_same_gamma,acceptance_rate,mean_verified,drafted,dropped,wall_ms\n");
  }
  std::vector<std::vector<double>> goodput(batches.size(), std::vector<double>(methods.size()));
  specdec::sv_batch_result last_sv;
  o.max_new_tokens = args.tokens;
  for (std::size_t bi = 0; bi < batches.size(); ++bi) {
    const std::size_t B = batches[bi];
    const std::span<const std::vector<token_id>> prompts(eval_prompts.data(), B);
    for (std::size_t i = 0; i < methods.size(); ++i) {
      const method& m = methods[i];
      specdec::sv_batch_options b;
      b.gamma_max = m.gamma;
      b.rule = m.rule;
      b.mode = m.mode;
      b.scheduler.counting = m.counting;
      b.t_draft_step = args.t_draft;
      b.t_companion_step = args.t_companion;
      const auto r = specdec::decode_sv_batch(specdec::exec::seq, target, draft, sampled,
                                              specdec::sv_setup{companion, estimator, target_latency}, b, prompts, o);
      const double g = goodput[bi][i] = r.goodput();
      std::size_t accepted = 0, verified = 0, drafted = 0, dropped = 0, request_rounds = 0;
      for (const auto& q : r.requests) {
        request_rounds += q.stats.iterations;
        accepted += q.stats.accepted;
        verified += q.stats.drafted;
        drafted += q.sv.drafted;
        dropped += q.sv.dropped;
      }
      const double vs_sd = m.rule == rule::sv ? g / goodput[bi][m.gamma == 5 ? 1 : 2] : 0.0;
      if (csv)
        std::fprintf(csv, "%zu,%s,%zu,%s,%s,%zu,%zu,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%zu,%zu,%.3f\n", B, m.name.c_str(), m.gamma,
                     mode_name(m), counting_name(m.counting), r.emitted(), r.rounds, r.simulated_time, g, g / goodput[bi][0],
                     vs_sd, verified ? double(accepted) / double(verified) : 0.0,
                     request_rounds ? double(verified) / double(request_rounds) : 0.0, drafted, dropped, r.wall_seconds * 1e3);
      if (bi + 1 == batches.size() && m.name == "SV exact 5") last_sv = r;
    }
  }
  if (csv) {
    std::fclose(csv);
    std::printf("CSV written to %s\n", args.csv.c_str());
  }
  const auto table = [&](const char* title, const std::vector<std::size_t>& columns) {
    std::printf("\n%s\n%6s", title, "B");
    for (const auto i : columns) std::printf(" %16s", methods[i].name.c_str());
    std::printf("\n");
    for (std::size_t bi = 0; bi < batches.size(); ++bi) {
      std::printf("%6zu", batches[bi]);
      for (const auto i : columns) std::printf(" %8.2f [%4.2fx]", goodput[bi][i], goodput[bi][i] / goodput[bi][0]);
      std::printf("\n");
    }
  };
  table("goodput (tokens per unit of simulated time), [x target-only]; SV scheduled on eq. (6): accepted drafts / latency",
        {0, 1, 2, 3, 4, 5, 6});
  table("SV scheduled on (accepted drafts + the target's token per request) / latency (+t)", {0, 1, 2, 7, 8, 9, 10});
  std::printf("\nSV over SD with the same draft length (x):\n%6s %14s %14s %14s %14s %14s %14s %14s %14s\n", "B", "paper 5",
              "paper 7", "exact 5", "exact 7", "paper 5 +t", "paper 7 +t", "exact 5 +t", "exact 7 +t");
  for (std::size_t bi = 0; bi < batches.size(); ++bi) {
    std::printf("%6zu", batches[bi]);
    for (std::size_t i = 3; i < methods.size(); ++i)
      std::printf(" %14.2f", goodput[bi][i] / goodput[bi][methods[i].gamma == 5 ? 1 : 2]);
    std::printf("\n");
  }

  // ---- 4. fairness (Table 9 style) ---------------------------------------------------------------
  std::vector<std::size_t> order(last_sv.requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto mean_len = [&](std::size_t i) { return last_sv.requests[i].sv.mean_verified_length(); };
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return mean_len(x) < mean_len(y); });
  double overall = 0.0;
  for (std::size_t i = 0; i < order.size(); ++i) overall += mean_len(i) / static_cast<double>(order.size());
  std::printf(
      "\nfairness, SV exact gamma_max = 5 at B = %zu: mean verified length %.2f per round; counts of rounds verifying 0..5\n",
      last_sv.requests.size(), overall);
  const std::size_t shown = std::min<std::size_t>(5, order.size());
  for (std::size_t k = 0; k < 2 * shown && k < order.size(); ++k) {
    const std::size_t i = k < shown ? order[k] : order[order.size() - 1 - (k - shown)];
    if (k == shown && order.size() <= shown) break;
    const auto& h = last_sv.requests[i].sv.verified_length_counts;
    std::printf("  %s request %3zu: mean %.2f |", k < shown ? "bottom" : "top   ", i, mean_len(i));
    for (std::size_t n = 0; n <= 5; ++n) std::printf(" %3zu", n < h.size() ? h[n] : 0);
    std::printf("\n");
  }
  // ---- 5. is the paper's rule lossless? ------------------------------------------------------------
  // When drafted position 1 is verified iff P(accept | S_1, A_1(x)) > theta (what the paper's scheduler
  // does, theta being the goodput threshold of the moment), the token it emits has the exact law
  //   P(y) = d(y) min(p, q)(y) + r(y) sum_v d(v) (q - p)^+(v) + p(y) sum_v q(v) (1 - d(v)),
  // r = norm((p - q)^+), which differs from p. Measured on contexts of target-only generations.
  std::printf("\nThe paper's rule is not lossless: position 1 verified iff P(accept | S, A) > theta; exact law of the token it\n"
              "emits vs the target's, averaged over contexts of target-only generations (exact mode: TV = 0 by construction)\n");
  {
    const std::size_t V = vocab.size();
    std::vector<double> p(V), q(V), c(V), d(V);
    std::vector<std::vector<token_id>> contexts;
    specdec::decode_options g = o;
    g.max_new_tokens = args.smoke ? 4 : 24;
    for (std::size_t i = 0; i < std::min<std::size_t>(eval_prompts.size(), args.smoke ? 4 : 80); ++i) {
      g.request_id = static_cast<std::uint32_t>(i);
      std::vector<token_id> ctx = eval_prompts[i];
      for (const token_id t : specdec::decode_target_only(target, ctx, g).tokens) {
        contexts.push_back(ctx);
        ctx.push_back(t);
      }
    }
    for (const double theta : {0.3, 0.5, 0.7}) {
      double tv_sum = 0.0, verified = 0.0;
      for (const auto& ctx : contexts) {
        specdec::next_probs(target, ctx, std::span<double>(p));
        specdec::next_probs(draft, ctx, std::span<double>(q));
        specdec::next_probs(companion, ctx, std::span<double>(c));
        const double S = est::similarity(std::span<const double>(q), std::span<const double>(c));
        double rejected = 0.0, dropped = 0.0, residual = 0.0;
        for (std::size_t v = 0; v < V; ++v) {
          d[v] = q[v] > 0.0 && estimator(S, std::min(1.0, c[v] / q[v])) > theta ? 1.0 : 0.0;
          rejected += d[v] * std::max(0.0, q[v] - p[v]);
          dropped += q[v] * (1.0 - d[v]);
          residual += std::max(0.0, p[v] - q[v]);
          verified += q[v] * d[v];
        }
        double tv = 0.0;
        for (std::size_t v = 0; v < V; ++v) {
          const double r = residual > 0.0 ? std::max(0.0, p[v] - q[v]) / residual : p[v];
          tv += std::abs(d[v] * std::min(p[v], q[v]) + rejected * r + dropped * p[v] - p[v]);
        }
        tv_sum += 0.5 * tv;
      }
      const double n = static_cast<double>(contexts.size());
      std::printf("  theta %.1f: %zu contexts, P(position 1 verified) %.3f, mean TV(emitted law, target) %.4f\n", theta,
                  contexts.size(), verified / n, tv_sum / n);
    }
  }
  std::printf("\n'SV paper' uses P(accept | S_j, A_j) for position j as the paper does; its length decision then depends on the\n"
              "drafted token itself and the output is NOT exactly the target distribution (above; decode/sv.hpp,\n"
              "tests/decode/sv.cpp). 'SV exact' judges position j on P(accept | S_j) and is lossless.\n");
  std::printf("total %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "specdec_sv_eval: %s\n", e.what());
  return 1;
}
