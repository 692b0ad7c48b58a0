// Trees and blocks against chains at equal verification budget: P positions scored per target call.
//
// For each budget P, on two pairs (a Markov pair over V = 16, and the demo's n-gram pair: a 4-gram
// target and a 2-gram draft trained on the bundled corpus), at temperature 1 and at temperature 0:
//   chain         strict verification of gamma = P - 1 chain drafts (temperature 0: greedy)
//   block         block verification of the same chains (temperature 1 only)
//   EAGLE-2       EAGLE-2's dynamic tree of P - 1 nodes (top-k 10, depth min(7, P - 2) expansions) grown
//                 from the draft at temperature 1, target-only rule (temperature 0: greedy)
//   two chains    a static tree of two i.i.d.-drafted branches of (P - 1) / 2 nodes each, SpecInfer's
//                 multi-step rule (temperature 1 only)
// Columns: tokens per target call, and the simulated speedup over target-only decoding with the cost
// model t_target(k) = 1 + 0.01 k for k scored positions and t_draft = 0.05 per batched draft call (a
// tree's depth or frontier is one batched call).
//   specdec_tree_eval [--smoke] [--tokens N]
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/decode/tree.hpp>
#include <specdec/models/corpus.hpp>
#include <specdec/models/ngram.hpp>

#include "markov_models.hpp"

namespace {

using specdec::token_id;

struct totals {
  std::size_t tokens = 0, target_calls = 0;
  double time = 0.0, target_only_time = 0.0;
  void add(const specdec::decode_result& r, const specdec::cost_model& cost) {
    tokens += r.stats.emitted;
    target_calls += r.stats.target_calls;
    time += r.stats.simulated_time;
    target_only_time += static_cast<double>(r.stats.emitted) * cost.target_time(1);
  }
};

template <class M>
void evaluate(const char* pair, const M& target, const M& draft, const std::vector<std::vector<token_id>>& prompts,
              std::size_t tokens, const std::vector<std::size_t>& budgets) {
  specdec::decode_options options;
  options.max_new_tokens = tokens;
  const specdec::cost_model cost{.t_draft = 0.05, .t_target_base = 1.0, .t_target_per_token = 0.01};
  for (const double temperature : {1.0, 0.0}) {
    const specdec::warp_params warp{.temperature = temperature};
    options.target_params = warp;
    for (const std::size_t P : budgets) {
      const std::size_t gamma = P - 1;
      totals chain, block, eagle, two;
      // The tree is grown from the draft's own probabilities (temperature 1) also when the target is greedy.
      specdec::dynamic_tree_drafter eagle_drafter(
          draft, specdec::dynamic_tree_params{.depth = std::min<std::size_t>(7, P - 2), .top_k = 10, .total_tokens = gamma});
      std::vector<std::size_t> two_branching(gamma / 2, 1);
      two_branching[0] = 2;
      specdec::static_tree_drafter two_chains(draft, specdec::tree_shape::full(two_branching), warp, specdec::tree_sampling::iid);
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        options.seed = 7;
        options.request_id = static_cast<std::uint32_t>(i);
        if (temperature > 0.0) {
          chain.add(specdec::decode(specdec::exec::simd, target, draft, warp, gamma, specdec::strict, prompts[i], options, cost),
                    cost);
          block.add(specdec::decode(specdec::exec::simd, target, draft, warp, gamma, specdec::block, prompts[i], options, cost),
                    cost);
          eagle.add(specdec::decode_tree(specdec::exec::simd, target, eagle_drafter, gamma, specdec::target_only, prompts[i],
                                         options, cost),
                    cost);
          two.add(
              specdec::decode_tree(specdec::exec::simd, target, two_chains, gamma, specdec::strict, prompts[i], options, cost),
              cost);
        } else {
          chain.add(specdec::decode(specdec::exec::simd, target, draft, warp, gamma, specdec::greedy, prompts[i], options, cost),
                    cost);
          eagle.add(
              specdec::decode_tree(specdec::exec::simd, target, eagle_drafter, gamma, specdec::greedy, prompts[i], options, cost),
              cost);
        }
      }
      const auto print = [&](const char* method, const totals& t) {
        if (t.tokens == 0) return;
        std::printf("| %s | %.0f | %zu | %s | %.3f | %.3f |\n", pair, temperature, P, method,
                    static_cast<double>(t.tokens) / static_cast<double>(t.target_calls), t.target_only_time / t.time);
      };
      print("chain", chain);
      print("block", block);
      print("EAGLE-2 tree", eagle);
      print("two chains (multi-step)", two);
    }
  }
}

}  // namespace

int main(int argc, char** argv) try {
  bool smoke = false;
  std::size_t tokens = 120;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0)
      smoke = true;
    else if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc)
      tokens = std::stoul(argv[++i]);
    else
      throw specdec::error(std::string("specdec_tree_eval: unknown argument ") + argv[i]);
  }
  if (smoke) tokens = 12;
  const std::vector<std::size_t> budgets = smoke ? std::vector<std::size_t>{5} : std::vector<std::size_t>{4, 8, 16, 32, 61};
  std::printf("| pair | temperature | positions per target call | method | tokens per target call | simulated speedup |\n");
  std::printf("|---|---|---|---|---|---|\n");

  constexpr std::size_t V = 16;
  const auto target = specdec::make_model(V, specdec_examples::markov_logits(2.0, 0.0));
  const auto draft = specdec::make_model(V, specdec_examples::markov_logits(2.0, 0.3));
  std::vector<std::vector<token_id>> markov_prompts;
  for (token_id t = 0; t < (smoke ? 2 : 8); ++t) markov_prompts.push_back({t});
  evaluate("Markov V=16", target, draft, markov_prompts, tokens, budgets);

  const auto texts = specdec::load_text_files(specdec::default_corpus_paths());
  const specdec::ngram_pair models = specdec::make_ngram_pair(texts, 4, 2);
  std::vector<std::vector<token_id>> ngram_prompts;
  for (const char* p : {"this license", "you may", "the software is provided", "permission is hereby granted to"}) {
    std::vector<token_id> ids{specdec::vocabulary::bos};
    const auto encoded = models.target.vocab().encode(p);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    ngram_prompts.push_back(std::move(ids));
    if (smoke) break;
  }
  evaluate("n-gram 4/2", models.target, models.draft, ngram_prompts, tokens, budgets);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "specdec_tree_eval: %s\n", e.what());
  return 1;
}
