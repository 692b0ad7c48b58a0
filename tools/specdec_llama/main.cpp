// specdec-llama: speculative decoding of GGUF models through llama.cpp, driven by specdec's step
// decoder (decode/batch_decoder.hpp) over llama_cpp::sequence_model adapters
// (integrations/llama_cpp/): a draft model (chains, token trees, MTAD's beams, SPRINTER's verifier-gated
// runs, SV's chains with verified lengths) or a model-free drafter (n-gram prompt lookup, suffix trees)
// proposes, the target verifies. Every prompt is one request, and
// all requests share one target (and draft) context, one sequence each (trees: one sequence id per
// root-to-leaf path as well). docs/llama-cpp.md describes the options and the output.
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
#include <specdec/draft/beam.hpp>
#include <specdec/draft/tree.hpp>
#include <specdec/draft/verifier_gated.hpp>
#include <specdec/acceptance/last_token.hpp>
#include <specdec/model/gathered_sequence_model.hpp>
#include <specdec/model/prefix_cached_model.hpp>
#include <specdec/length/heuristic.hpp>
#include <specdec/integrations/llama_cpp.hpp>

#include "cross_vocab.hpp"
#include "sprinter_sv.hpp"

namespace {

namespace lc = specdec::llama_cpp;
using specdec::token_id;

constexpr const char* usage = R"(usage: specdec-llama --target T.gguf [--draft D.gguf] [options]

Speculative decoding through llama.cpp: a draft model or a model-free drafter proposes, the target
verifies with specdec's rules. Each --prompt (or each line of --prompts-file) is one request; all run
as sequences of one context.

  --target FILE          the target model (GGUF)
  --draft FILE           the draft model (GGUF; the target's vocabulary for --method sd, tree, mtad,
                         sprinter, sv)
  --cross-vocab M        a draft of another vocabulary (--method sd): tli (its row restricted to
                         the shared tokens, renormalised; any --rule) or slem (its text re-tokenized,
                         verified by exact match: --rule greedy or sample-and-match)
  --vocab-report         print how much the target's and the draft's vocabularies share
  --prompt TEXT          a prompt (repeatable; default "Once upon a time")
  --prompts-file FILE    one prompt per line ("\n" in a line is a line break)
  --sequential           run the requests one after another (one sequence at a time), not as one batch
  --no-gather            tree, mtad, sprinter, sv: each request's draft (sv: companion) forwards on their own
                         (by default every request's draft forwards of a level or draft step go to the
                         draft model as one llama_decode, and SV's companion scores the batch in one)
  --repeat N             run every prompt N times (request ids differ, so do the samples) [1]
  --method M             sd: chain drafts from --draft [sd]
                         tree: a token tree from --draft (--tree), verified as a tree: every node
                           scored in one target call
                         mtad: MTAD's beam drafts from --draft (--beams), joint acceptance (--tau)
                         ngram: n-gram prompt lookup over the request's prompt and output
                         suffix: a suffix tree over the request's prompt and output, and a cache
                           of earlier requests' outputs (chain drafts; --suffix-tree: tree drafts)
                         sprinter: SPRINTER: --draft drafts one token at a time while a linear
                           verifier (trained first on the pair's acceptance labels) accepts it; the
                           target checks only the token it rejects (min(1, p/q)); lossy by design
                         sv: SV: --draft drafts --gamma tokens, a --companion model's indicators and an
                           acceptance estimator (profiled first on the pair) choose how many the target
                           verifies (strict rule; exact mode: lossless)
                         none: the target alone
  --ngram-min N          shortest n-gram looked up [1]   --ngram-max N  longest, tried first [3]
  --suffix-depth N       suffix tree depth [24]  --suffix-min-prob P  min path probability [0.1]
  --suffix-tree          suffix drafts as trees (best-first, --gamma nodes at most), verified as trees
  --tree dynamic|static  tree: EAGLE-2's dynamic tree (depth --gamma - 1, --tree-width children per
                         expanded node, --tree-nodes kept) or a static full tree (--tree-width
                         children per node, --gamma levels) [dynamic]
  --tree-width K         [4]   --tree-nodes N  [16]
  --beams W              mtad: beams [4]   --tau T  mtad: joint acceptance threshold [0.5]
  --max-run N            sprinter: most tokens of a run (the last one target-checked; in place of --gamma) [20]
  --verifier-tau T       sprinter: keep drafting while the verifier's score >= T [0.5]
  --lambda L             sprinter: training label, acceptable iff q(x) <= L p(x) [1.2]
  --train-verifier N     sprinter: labelled drafts the verifier is trained on, drawn after prefixes of
                         the prompts [2000]
  --verifier-features F  sprinter: what the verifier reads: row (the draft's row: q(x), its rank, the row's
                         top probabilities and entropy) or hidden (the draft's last-layer hidden state,
                         then the row's; the draft then computes its output layer for every token) [row]
  --save-verifier FILE   sprinter: write the trained verifier to FILE (learn/linear_verifier.hpp's format)
  --load-verifier FILE   sprinter: use a saved verifier instead of training one
  --companion FILE       sv: the companion model (GGUF, the target's vocabulary)
  --sv-profile-tokens N  sv: tokens of standard SD per prompt profiled before decoding [64]
  --sv-bins N            sv: adaptive bins per indicator of the acceptance estimator [5]
  --save-sv-profile FILE sv: write the profiled acceptance estimator to FILE
  --load-sv-profile FILE sv: use a saved estimator instead of profiling (latencies are measured every run)
  --rule R               chains: strict | greedy | sample-and-match | lenient=L | block [strict]
                         trees: target-only | greedy | sample-and-match [target-only]
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
  std::string target, draft, companion;
  std::vector<std::string> prompts;
  std::size_t repeat = 1, gamma = 4, tokens = 64;
  std::string rule = "strict", policy = "simd", method = "sd", length = "fixed", cross_vocab;
  std::size_t ngram_min = 1, ngram_max = 3, suffix_depth = 24, tree_width = 4, tree_nodes = 16, beams = 4;
  double suffix_min_prob = 0.1, tau = 0.5;
  std::size_t max_run = 20, train_examples = 2000, sv_profile_tokens = 64, sv_bins = 5;
  double verifier_tau = 0.5, lambda = 1.2;
  std::string sprinter_option, sv_option;        // an option of that method given (named in errors)
  std::string save_verifier, load_verifier;      // sprinter: where the trained verifier is written; a saved one to use instead
  std::string verifier_features = "row";         // sprinter: row (the draft's row) or hidden (its hidden state, then its row)
  std::string save_sv_profile, load_sv_profile;  // sv: where the profiled estimator is written; a saved one to use instead
  bool train_examples_given = false;
  bool suffix_tree = false, rule_given = false, gamma_given = false;
  std::string tree = "dynamic";
  specdec::warp_params warp{};
  bool draft_greedy = false, stop_at_eos = false, quiet = false, sequential = false, vocab_report = false;
  bool no_gather = false;  // tree, mtad, sprinter, sv: no merged draft (companion) forwards across requests
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

// Whether the requests' drafts are trees (verified with a tree rule on a context with tree paths).
bool trees(const options& o) { return o.method == "tree" || (o.method == "suffix" && o.suffix_tree); }

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
    if (a == "--no-gather") {
      o.no_gather = true;
      continue;
    }
    if (a == "--suffix-tree") {
      o.suffix_tree = true;
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
      if (o.method != "sd" && o.method != "tree" && o.method != "mtad" && o.method != "ngram" && o.method != "suffix" &&
          o.method != "sprinter" && o.method != "sv" && o.method != "none")
        fail("unknown --method " + o.method + " (sd, tree, mtad, ngram, suffix, sprinter, sv, none)");
    } else if (a == "--ngram-min")
      o.ngram_min = count(a, v);
    else if (a == "--ngram-max")
      o.ngram_max = count(a, v);
    else if (a == "--suffix-depth")
      o.suffix_depth = count(a, v);
    else if (a == "--suffix-min-prob")
      o.suffix_min_prob = number(a, v);
    else if (a == "--tree") {
      o.tree = v;
      if (o.tree != "dynamic" && o.tree != "static") fail("unknown --tree " + o.tree + " (dynamic, static)");
    } else if (a == "--tree-width")
      o.tree_width = count(a, v);
    else if (a == "--tree-nodes")
      o.tree_nodes = count(a, v);
    else if (a == "--beams")
      o.beams = count(a, v);
    else if (a == "--tau")
      o.tau = number(a, v);
    else if (a == "--max-run" || a == "--verifier-tau" || a == "--lambda" || a == "--train-verifier" || a == "--save-verifier" ||
             a == "--load-verifier" || a == "--verifier-features") {
      o.sprinter_option = a;
      if (a == "--max-run") o.max_run = count(a, v);
      if (a == "--verifier-tau") o.verifier_tau = number(a, v);
      if (a == "--lambda") o.lambda = number(a, v);
      if (a == "--train-verifier") o.train_examples = count(a, v);
      if (a == "--train-verifier") o.train_examples_given = true;
      if (a == "--save-verifier") o.save_verifier = v;
      if (a == "--load-verifier") o.load_verifier = v;
      if (a == "--verifier-features") o.verifier_features = v;
    } else if (a == "--companion" || a == "--sv-profile-tokens" || a == "--sv-bins" || a == "--save-sv-profile" ||
               a == "--load-sv-profile") {
      o.sv_option = a;
      if (a == "--companion") o.companion = v;
      if (a == "--sv-profile-tokens") o.sv_profile_tokens = count(a, v);
      if (a == "--sv-bins") o.sv_bins = count(a, v);
      if (a == "--save-sv-profile") o.save_sv_profile = v;
      if (a == "--load-sv-profile") o.load_sv_profile = v;
    } else if (a == "--rule") {
      o.rule = v;
      o.rule_given = true;
    } else if (a == "--gamma") {
      o.gamma = count(a, v);
      o.gamma_given = true;
    } else if (a == "--length") {
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
  const bool draft_model =
      o.method == "sd" || o.method == "tree" || o.method == "mtad" || o.method == "sprinter" || o.method == "sv";
  if (draft_model && o.draft.empty()) fail("--method " + o.method + " needs --draft (or choose --method ngram, suffix or none)");
  if (!draft_model && !o.draft.empty()) fail("--draft is used by --method sd, tree, mtad, sprinter and sv only");
  if (!o.sprinter_option.empty() && o.method != "sprinter") fail(o.sprinter_option + " is an option of --method sprinter");
  if (!o.sv_option.empty() && o.method != "sv") fail(o.sv_option + " is an option of --method sv");
  if ((o.method == "sprinter" || o.method == "sv") && o.length != "fixed")
    fail("--length heuristic does not apply to --method " + o.method + " (it chooses its own lengths)");
  if (o.method == "sprinter") {
#if !defined(SPECDEC_LLAMA_HAS_LEARN)
    fail("--method sprinter trains its verifier with specdec::learn, and this build has no Eigen");
#endif
    if (o.rule_given) fail("--method sprinter checks the verifier's rejected token with its own rule (min(1, p/q)); drop --rule");
    if (o.gamma_given) fail("--method sprinter drafts runs of up to --max-run tokens; give --max-run, not --gamma");
    if (o.max_run == 0) fail("--max-run must be at least 1");
    if (!(o.verifier_tau >= 0.0 && o.verifier_tau <= 1.0)) fail("--verifier-tau must be in [0, 1]");
    if (!(o.lambda >= 1.0) || o.lambda > 1e300) fail("--lambda must be finite and >= 1");
    if (o.train_examples < 8) fail("--train-verifier needs at least 8 examples");
    if (o.verifier_features != "row" && o.verifier_features != "hidden") fail("--verifier-features is row or hidden");
    if (!o.load_verifier.empty() && (o.train_examples_given || !o.save_verifier.empty()))
      fail("--load-verifier uses a saved verifier; it trains none (drop --train-verifier and --save-verifier)");
    o.rule = "last-token";
    o.gamma = o.max_run;  // a run drafts at most --max-run tokens
  }
  if (o.method == "sv") {
    if (o.companion.empty()) fail("--method sv needs --companion (a model of the target's vocabulary)");
    if (o.rule != "strict") fail("--method sv verifies with the strict rule, not --rule " + o.rule);
    if (o.gamma == 0) fail("--method sv needs --gamma >= 1");
    if (o.sv_profile_tokens == 0 || o.sv_bins == 0) fail("--sv-profile-tokens and --sv-bins must be at least 1");
    if (!o.load_sv_profile.empty() && !o.save_sv_profile.empty()) fail("--load-sv-profile profiles nothing to save");
  }
  if (o.suffix_tree && o.method != "suffix") fail("--suffix-tree is an option of --method suffix");
  if (!o.cross_vocab.empty() && o.cross_vocab != "tli" && o.cross_vocab != "slem") fail("--cross-vocab is tli or slem");
  if ((!o.cross_vocab.empty() || o.vocab_report) && (o.method != "sd" || o.draft.empty()))
    fail("--cross-vocab and --vocab-report need --draft (--method sd)");
  if (o.method == "none") o.gamma = 0;
  if (trees(o)) {
    if (!o.rule_given) o.rule = "target-only";
    if (o.rule != "target-only" && o.rule != "greedy" && o.rule != "sample-and-match")
      fail("a tree is verified with --rule target-only, greedy or sample-and-match, not " + o.rule);
    if (o.tree_width == 0 || o.tree_nodes == 0) fail("--tree-width and --tree-nodes must be at least 1");
  }
  if (o.method == "mtad" && (o.beams == 0 || !(o.tau > 0.0 && o.tau <= 1.0))) fail("--beams must be >= 1 and --tau in (0, 1]");
  if (o.prompts.empty()) o.prompts.emplace_back("Once upon a time");
  if (o.repeat == 0) fail("--repeat must be at least 1");
  return o;
}

specdec::request_acceptance acceptance_of(const options& o) {
  const std::string& rule = o.rule;
  if (o.method == "mtad") return specdec::mtad_rule(o.tau);
  if (o.method == "sprinter") return specdec::last_token;
  if (trees(o)) {
    if (rule == "greedy") return specdec::tree_acceptance{specdec::greedy};
    if (rule == "sample-and-match") return specdec::tree_acceptance{specdec::sample_and_match};
    return specdec::tree_acceptance{specdec::target_only};
  }
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
    stage = specdec::suffix_stage({.max_depth = o.suffix_depth,
                                   .max_spec = std::max<std::size_t>(o.gamma, 1),
                                   .min_probability = o.suffix_min_prob,
                                   .tree = o.suffix_tree},
                                  cache);
  if (!stage) return stage;
  const bool reads_q = o.rule == "strict" || o.rule == "block" || o.rule.starts_with("lenient=");
  return reads_q ? specdec::with_one_hot_q(std::move(stage), vocab) : stage;
}

// Drafter stages on a draft model (--method tree, mtad, sprinter). Each request (or, with --sequential, every
// request in turn) reads the draft model through a prefix_cached_model of its own lanes (sequences of
// the draft context), so a call appends only what the lane's KV cache lacks: the new tokens of the
// context, or a beam's or tree path's tokens below its branch point. The lanes sit on a
// gathered_sequence_model: with the decoder's stage runner (`runner()`), the requests' stage calls run
// on threads and every level's (or SPRINTER draft step's) forwards of the batch are one llama_decode.
class model_stages {
 public:
  using gathered = specdec::gathered_sequence_model<lc::sequence_model>;
  using gathered_view = specdec::prefix_cached_model<gathered>;

  // The lanes one request needs: its beams, its dynamic tree's frontier, a static tree's widest level,
  // SPRINTER's one chain.
  static std::size_t lanes(const options& o) {
    if (o.method == "mtad") return o.beams;
    if (o.method == "sprinter") return 1;
    if (o.tree == "dynamic") return o.tree_width;
    std::size_t widest = 1;
    for (std::size_t d = 1; d < o.gamma && widest < 16; ++d) widest *= o.tree_width;
    return std::min<std::size_t>(widest, 16);
  }

  // `verifier` gates SPRINTER's drafts (--method sprinter); it must outlive the stages.
  model_stages(const options& o, lc::sequence_model& draft, std::size_t views,
               const specdec_llama::sprinter_verifier* verifier = nullptr)
      : o_(o), verifier_(verifier), shared_(std::make_unique<gathered>(draft)) {
    for (std::size_t i = 0; i < views; ++i) {
      gathered_views_.push_back(std::make_unique<gathered_view>(*shared_, lanes(o), i * lanes(o)));
      sprinter_.push_back(std::make_unique<specdec::sprinter_stats>());  // each request's own (its calls run at once)
    }
  }

  // The decoder's stage runner: the requests' stage calls on threads, their draft forwards merged (none
  // with --no-gather, or with one view shared by every request, --sequential).
  specdec::stage_runner runner() {
    if (o_.no_gather || gathered_views_.size() < 2) return {};
    return [this](std::span<const std::function<void()>> calls) { shared_->run(calls); };
  }
  // What the merged forwards did.
  specdec::gather_stats gathering() const { return shared_->stats(); }

  // Request i's drafter stage. A tree's candidates are the top-k of the draft's unwarped row (as
  // EAGLE's are): the tree rules offered (target-only, greedy, sample-and-match) read no q, so the
  // draft's warp changes which tokens are proposed, never the output's law.
  specdec::draft_stage stage(std::size_t i) {
    const specdec::warp_params tree_warp{};
    const std::size_t k = gathered_views_.size() == 1 ? 0 : i;
    gathered_view& v = *gathered_views_[k];
    if (o_.method == "sprinter") {  // SPRINTER's drafter (seed 000, Algorithm 2), features of the draft's rows
      const auto warp = o_.draft_greedy ? specdec::warp_params{.temperature = 0.0} : o_.warp;
      const specdec::gating_params gating{.tau = o_.verifier_tau, .max_run = o_.max_run};
      if (o_.verifier_features == "hidden")  // the draft's hidden state before its row's features
        return sprinter_stage(v, warp, lc::basic_hidden_state_features<gathered>(v, *shared_), gating, *sprinter_[k]);
      return sprinter_stage(v, warp, specdec::draft_row_features{}, gating, *sprinter_[k]);
    }
    if (o_.method == "mtad")
      return specdec::beam_stage(
          keep(std::make_unique<specdec::beam_drafter<gathered_view>>(v, specdec::beam_params{.width = o_.beams})));
    if (o_.tree == "static") {
      const auto shape = specdec::tree_shape::full(std::vector<std::size_t>(std::max<std::size_t>(o_.gamma, 1), o_.tree_width));
      return specdec::tree_drafter_stage(keep(
          std::make_unique<specdec::static_tree_drafter<gathered_view>>(v, shape, tree_warp, specdec::tree_sampling::top_k)));
    }
    const specdec::dynamic_tree_params params{.depth = std::max<std::size_t>(o_.gamma, 1) - 1,
                                              .top_k = o_.tree_width,
                                              .total_tokens = o_.tree_nodes,
                                              .warp = tree_warp};
    return specdec::tree_drafter_stage(keep(std::make_unique<specdec::dynamic_tree_drafter<gathered_view>>(v, params)));
  }

  // What every view asked of the draft model.
  specdec::prefix_cache_stats stats() const {
    specdec::prefix_cache_stats total;
    const auto add = [&](const specdec::prefix_cache_stats& s) {
      total.contexts += s.contexts;
      total.forwards += s.forwards;
      total.appended_positions += s.appended_positions;
      total.reused_positions += s.reused_positions;
    };
    for (const auto& v : gathered_views_) add(v->stats());
    return total;
  }

  // SPRINTER's counters over every request's runs (request by request).
  specdec::sprinter_stats sprinter() const {
    specdec::sprinter_stats total;
    for (const auto& s : sprinter_) {
      total.verifier_calls += s->verifier_calls;
      total.verifier_accepted += s->verifier_accepted;
      total.target_checks += s->target_checks;
      total.target_kept += s->target_kept;
      total.forced_checks += s->forced_checks;
      total.budget_ends += s->budget_ends;
      total.run_lengths.insert(total.run_lengths.end(), s->run_lengths.begin(), s->run_lengths.end());
    }
    return total;
  }

 private:
  // Keeps `drafter` as long as the stages that read it; returns it.
  template <class Drafter>
  Drafter& keep(std::unique_ptr<Drafter> drafter) {
    Drafter& kept = *drafter;
    drafters_.emplace_back(std::move(drafter));
    return kept;
  }

  // SPRINTER's verifier-gated drafter on `v` with `features` (the draft's rows, or its hidden states
  // before them), counted in `stats`.
  template <class Features>
  specdec::draft_stage sprinter_stage(gathered_view& v, const specdec::warp_params& warp, Features features,
                                      const specdec::gating_params& gating, specdec::sprinter_stats& stats) {
    using gated = specdec::verifier_gated_drafter<gathered_view, Features, specdec_llama::sprinter_verifier>;
    return specdec::gated_stage(keep(std::make_unique<gated>(v, warp, std::move(features), *verifier_, gating)), &stats);
  }

  const options& o_;
  const specdec_llama::sprinter_verifier* verifier_;
  std::unique_ptr<gathered> shared_;
  std::vector<std::unique_ptr<gathered_view>> gathered_views_;      // each request's lanes
  std::vector<std::unique_ptr<specdec::sprinter_stats>> sprinter_;  // each request's SPRINTER counters
  std::vector<std::shared_ptr<void>> drafters_;  // every request's drafter (SPRINTER's, MTAD's beams, a tree's)
};

// The root-to-leaf paths a request's tree can have (one llama.cpp sequence id each while it is scored).
std::size_t tree_leaves(const options& o) {
  if (o.method == "suffix") return std::max<std::size_t>(o.gamma, 1);
  if (o.tree == "dynamic") return o.tree_nodes;
  std::size_t leaves = 1;
  for (std::size_t d = 0; d < std::max<std::size_t>(o.gamma, 1); ++d) leaves *= o.tree_width;
  return leaves;
}

// Decodes every prompt on one decoder and prints the texts and the summary: prompt processing (the
// first step, which appends every prompt) apart from generation (every later step), as llama.cpp's
// tools report them.
template <class Policy, class Draft>
int decode_all(Policy policy, const options& o, const lc::model& target_model, lc::sequence_model& target, Draft& draft,
               const std::vector<std::vector<token_id>>& prompts, model_stages* stages = nullptr,
               const std::function<specdec::draft_stage(std::size_t)>& cross_vocab = {},
               specdec::verify_length_stage verify_length = {}) {
  specdec::batch_decoder decoder(policy, target, draft, specdec::strict);
  if (stages != nullptr) decoder.set_stage_runner(stages->runner());
  const bool sv = static_cast<bool>(verify_length);
  if (sv) decoder.set_verify_length_stage(std::move(verify_length));
  specdec::sv_stats sv_counts;
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
    r.acceptance = acceptance_of(o);
    r.drafter = stages != nullptr ? stages->stage(i)
                : cross_vocab     ? cross_vocab(i)
                                  : drafter_of(o, target_model.vocab_size(), cache);
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
        if (sv && !e.target_logits.empty()) sv_counts.record(e.drafted, e.verified, e.drafted > 0);
        if (e.finished == specdec::finish_reason::none) continue;
        total.merge(decoder.stats(e.request));
        const auto t = decoder.tokens(e.request);
        texts[prompt_of[e.request - 1]] = lc::detokenize(target_model, {t.begin(), t.end()});
        if (o.method == "suffix") cache->insert(t);  // later requests draft from this output too
        if (e.finished == specdec::finish_reason::error)
          std::fprintf(stderr, "request %llu: %s\n", static_cast<unsigned long long>(e.request),
                       specdec::has_flag(e.status, specdec::verify_status::stage_error) ? "a stage failed for it (stage_error)"
                                                                                        : "a model returned an unusable row");
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
  if (trees(o))
    std::printf("trees: %.2f drafted nodes per target forward, %zu path ids free after the run\n",
                target.stats().calls > 0 ? double(total.drafted) / double(target.stats().calls) : 0.0, target.free_tree_paths());
  if (stages != nullptr) {
    const auto d = stages->stats();
    std::printf("draft model: %zu contexts in %zu forwards, %zu positions appended, %zu read from its KV cache\n", d.contexts,
                d.forwards, d.appended_positions, d.reused_positions);
    const auto g = stages->gathering();
    if (g.runs > 0)
      std::printf("draft forwards merged across requests: %zu rounds (llama_decode calls) for %zu forwards of %zu steps\n",
                  g.rounds, g.merged_calls, g.runs);
  }
  if (o.method == "sprinter" && stages != nullptr) {
    const auto& s = stages->sprinter();
    std::printf("sprinter: verifier calls %zu, accepted by the verifier %zu (rate %.3f, mean run %.3f), target calls %zu "
                "(%zu forced at --max-run, %zu runs ended at the budget unchecked), tokens per target call %.3f\n",
                s.verifier_calls, s.verifier_accepted, s.verifier_accept_rate(), s.mean_verifier_run(), total.target_calls,
                s.forced_checks, s.budget_ends, total.tokens_per_target_call());
  }
  if (sv) specdec_llama::print_sv_lengths(sv_counts);
  return 0;
}

template <class Policy>
int run(Policy policy, const options& o) {
  lc::quiet_logs();
  const lc::model target_model(o.target);
  std::optional<lc::model> draft_model;
  if (!o.draft.empty()) {
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
  lc::context_options target_params = params;
  if (trees(o)) {  // every tree of a forward needs a sequence id per root-to-leaf path
    const std::size_t paths = tree_leaves(o) * (o.sequential ? 1 : prompts.size());
    if (sequences + paths > llama_max_parallel_sequences())
      fail("the trees need " + std::to_string(paths) + " sequence ids besides the " + std::to_string(sequences) +
           " requests', more than llama.cpp's " + std::to_string(llama_max_parallel_sequences()) +
           " (fewer nodes, fewer prompts or --sequential)");
    target_params.tree_paths = static_cast<std::uint32_t>(paths);
  }
  lc::context target_ctx(target_model, target_params);
  lc::sequence_model target(target_ctx);
  if (!o.cross_vocab.empty() || o.vocab_report) {
    const bool reads_q = o.rule == "strict" || o.rule == "block" || o.rule.starts_with("lenient=");
    specdec_llama::cross_vocab_drafting cross(o.cross_vocab, target_model, *draft_model, params,
                                              o.draft_greedy ? specdec::warp_params{.temperature = 0.0} : o.warp, reads_q);
    if (o.vocab_report) specdec_llama::print_vocab_report(target_model, *draft_model, cross.map());
    if (o.cross_vocab.empty()) return 0;
    specdec::no_sequence_model none(target_model.vocab_size());
    const int status =
        decode_all(policy, o, target_model, target, none, prompts, nullptr, [&](std::size_t i) { return cross.stage(i); });
    std::printf("cross-vocab %s: draft forwards %zu (llama_decode %zu), positions %zu, rolled back %zu\n", o.cross_vocab.c_str(),
                cross.draft().stats().calls, cross.draft().engine_stats().decode_calls, cross.draft().stats().appended_positions,
                cross.draft().stats().rolled_back);
    for (const std::string& why : cross.failures()) std::fprintf(stderr, "%s\n", why.c_str());
    return cross.failures().empty() ? status : 1;
  }
  const auto draft_warp = o.draft_greedy ? specdec::warp_params{.temperature = 0.0} : o.warp;
  if (o.method == "sv") {  // chains from the draft model; SV's length stage reads the companion's lanes
    const lc::model companion_model(o.companion);
    lc::check_same_vocabulary(target_model, companion_model);
    const std::size_t views = o.sequential ? 1 : prompts.size();
    lc::context companion_ctx(
        companion_model, {.context_per_sequence = o.ctx, .sequences = static_cast<std::uint32_t>(views), .threads = o.threads});
    lc::sequence_model companion_seq(companion_ctx);
    const specdec_llama::llama_view companion(companion_seq, views);
    const auto profile = specdec_llama::profile_sv(policy, target_model, *draft_model, companion_model, companion, prompts,
                                                   {.gamma_max = o.gamma,
                                                    .tokens_per_prompt = o.sv_profile_tokens,
                                                    .bins = o.sv_bins,
                                                    .batch = views,
                                                    .draft_params = draft_warp,
                                                    .target_params = o.warp,
                                                    .seed = o.seed + 1,
                                                    .ctx = o.ctx,
                                                    .threads = o.threads,
                                                    .load_estimator = o.load_sv_profile,
                                                    .save_estimator = o.save_sv_profile});
    lc::context draft_ctx(*draft_model, params);
    lc::sequence_model draft(draft_ctx);
    const auto before = companion.stats();
    const std::size_t decodes_before = companion_seq.engine_stats().decode_calls;
    // The companion scores every request's drafts of a round in one forward (score_batch), or with
    // --no-gather each request's on its own.
    const auto decode_with = [&](const auto& scorer) {
      auto lengths = specdec::sv_batch_lengths(
          policy, specdec::sv_setup{scorer, profile.estimator, profile.target_latency},
          {.gamma_max = o.gamma, .t_draft_step = profile.t_draft_step, .t_companion_step = profile.t_companion_step});
      return decode_all(policy, o, target_model, target, draft, prompts, nullptr, {}, std::move(lengths));
    };
    const int status = o.no_gather ? decode_with(specdec_llama::per_request_scoring<specdec_llama::llama_view>{&companion})
                                   : decode_with(companion);
    const std::size_t contexts = companion.stats().contexts - before.contexts,
                      forwards = companion.stats().forwards - before.forwards;
    std::printf(
        "sv companion: %zu contexts in %zu forwards (%.2f contexts per forward, llama_decode %zu), %zu positions appended\n",
        contexts, forwards, forwards > 0 ? double(contexts) / double(forwards) : 0.0,
        companion_seq.engine_stats().decode_calls - decodes_before,
        companion.stats().appended_positions - before.appended_positions);
    return status;
  }
  std::optional<specdec_llama::sprinter_verifier> verifier;
#if defined(SPECDEC_LLAMA_HAS_LEARN)
  if (o.method == "sprinter")  // trained on the pair's own acceptance labels (sprinter_sv.hpp)
  {
    const bool hidden = o.verifier_features == "hidden";
    const auto linear =
        !o.load_verifier.empty()
            ? specdec_llama::load_sprinter_verifier(o.load_verifier, specdec_llama::sprinter_feature_size(*draft_model, hidden))
            : specdec_llama::train_sprinter_verifier(target_model, *draft_model, prompts,
                                                     {.examples = o.train_examples,
                                                      .lambda = o.lambda,
                                                      .tau = o.verifier_tau,
                                                      .draft_params = draft_warp,
                                                      .target_params = o.warp,
                                                      .seed = o.seed,
                                                      .ctx = o.ctx,
                                                      .threads = o.threads,
                                                      .hidden_states = hidden});
    if (!o.save_verifier.empty()) {
      linear.save(std::filesystem::path(o.save_verifier));
      std::printf("sprinter verifier: saved to %s\n", o.save_verifier.c_str());
    }
    verifier = specdec_llama::as_sprinter_verifier(linear);
  }
#endif
  if (draft_model && o.method != "sd") {  // stages on the draft model, through prefix_cached_model lanes
    const std::size_t views = o.sequential ? 1 : prompts.size();
    const std::size_t lanes = model_stages::lanes(o) * views;
    if (lanes > llama_max_parallel_sequences())
      fail("the draft model needs " + std::to_string(lanes) + " sequences (" + std::to_string(model_stages::lanes(o)) +
           " per request), more than llama.cpp's " + std::to_string(llama_max_parallel_sequences()) +
           " (--sequential shares them)");
    lc::context draft_ctx(*draft_model, {.context_per_sequence = o.ctx,
                                         .sequences = static_cast<std::uint32_t>(lanes),
                                         .threads = o.threads,
                                         .hidden_states = o.method == "sprinter" && o.verifier_features == "hidden"});
    lc::sequence_model draft(draft_ctx);
    model_stages stages(o, draft, views, verifier ? &*verifier : nullptr);
    specdec::no_sequence_model none(target_model.vocab_size());
    return decode_all(policy, o, target_model, target, none, prompts, &stages);
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
