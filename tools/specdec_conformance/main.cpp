// specdec-conformance: the conformance kit (docs/conformance.md) for verifiers outside C++. The kit's
// calls and the verifier's answers are exchanged as NumPy .npy files, one directory per call
// (include/specdec/conformance/file_bridge.hpp), so that a PyTorch or NumPy sampler can be checked
// without bindings; examples/conformance_numpy.py is such a verifier and the driver loop.
//
//   specdec-conformance step  --dir D [options]   run the kit as far as the answers in D go
//   specdec-conformance serve --dir D [options]   run the kit once, waiting for each answer
//
// Exit status: 0 the verifier passed, 1 it failed a check, 2 a usage error or a problem with the
// files (malformed answer, inputs that changed), 3 a call awaits an answer (step; serve when stdin
// closes first).
#include <cstdint>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/conformance/file_bridge.hpp"
#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/logits.hpp"
#include "specdec/conformance/stop_run.hpp"

namespace {

namespace sc = specdec::conformance;

constexpr std::uint64_t bridge_impossible_trials = std::uint64_t{1} << 20;

void print_help(std::ostream& out) {
  const sc::kit_options d;
  out << "usage: specdec-conformance step  --dir D [options]\n"
         "       specdec-conformance serve --dir D [options]\n"
         "\n"
         "Runs specdec's conformance kit on a verifier that lives in another process (e.g. a Python\n"
         "sampler): each verifier call is a directory D/call_<k> (k in 6 digits) whose inputs/ holds\n"
         "the batch as .npy arrays and a meta.json; the verifier answers by writing outputs/tokens.npy\n"
         "(int32 or int64 [B, W]: accepted drafts then one correction or bonus token, padded with -1;\n"
         "write it last), optionally outputs/reported.npy (bool or uint8 [B]: input flagged as unusable),\n"
         "or outputs/error.txt (the call raised: every request counts as reported).\n"
         "include/specdec/conformance/file_bridge.hpp lists the arrays; examples/conformance_numpy.py is\n"
         "a complete verifier and driver.\n"
         "\n"
         "The kit is deterministic for a given --seed, so every run replays it from the start: calls\n"
         "answered in D return their answers (after checking that their inputs are unchanged), and the\n"
         "first unanswered call writes its inputs.\n"
         "  step   ends there: prints 'answer D/call_<k>' as the last line of stdout and exits 3; run it\n"
         "         again once the call is answered. Every step replays all calls before it.\n"
         "  serve  prints 'answer D/call_<k>' and waits for a line on stdin (e.g. 'done') before it reads\n"
         "         the answer, then goes on; one process for the whole run (stdin closed: exit 3).\n"
         "When the kit completes, both write D/report.json and D/report.txt, print the text report and\n"
         "exit 0 (passed) or 1 (failed). Exit 2: a usage error, a malformed answer, or inputs that differ\n"
         "from those stored in D (other options than D was started with: use a new --dir).\n"
         "\n"
         "options:\n"
         "  --dir D                   the run's directory (created if missing)                [required]\n"
         "  --form chain|logits|tree  what the verifier checks: chains from probabilities,  [chain]\n"
         "                            chains from logits and warping parameters, or trees\n"
         "  --claim lossless|greedy   the guarantee checked; the kit's stated (lossy) laws need a C++\n"
         "                            emission_law and are available from C++ only            [lossless]\n"
         "  --name TEXT               the verifier's name in the report\n"
         "  --seed N                  the kit's seed (the run is deterministic given it)      ["
      << d.seed
      << "]\n"
         "  --law-requests N          requests per exact-law configuration                    ["
      << d.law_requests
      << "]\n"
         "  --batch-size N            requests per call (exact laws, independence)            ["
      << d.batch_size
      << "]\n"
         "  --independence-pairs N    request pairs per independence check                    ["
      << d.independence_pairs
      << "]\n"
         "  --impossible-trials N     trials of the impossible-token check (0 skips it)       [2^20]\n"
         "                            (the C++ kit's default is 2^27, which catches a bug that fires\n"
         "                            once in 2^24 coins with probability 1 - e^-8; through files that\n"
         "                            is 2048 calls of 65536 requests (about 10 GB of inputs), so the\n"
         "                            bridge defaults to 2^20: 16 calls, which catch such a bug with\n"
         "                            probability 1 - e^(-1/16), about 6%; raise it when the verifier\n"
         "                            is fast)\n"
         "  --not-seeded              the verifier does not draw its coins from (seed, request id, step)\n"
         "                            alone: skips determinism, batch invariance and independence\n"
         "  --ignores-draft-probs     the verifier never reads q (greedy, sample-and-match): bad draft\n"
         "                            rows need not be reported\n"
         "  --sibling-sampling independent|without_replacement\n"
         "                            trees: how the kit draws siblings                       [independent]\n"
         "  --only PREFIX             run only the checks whose name starts with PREFIX (repeatable)\n"
         "  --prune-inputs            delete each call's input arrays once its answer is read (keeps\n"
         "                            inputs/meta.json, all a replay needs): a run at the defaults leaves\n"
         "                            about 200 MB of files in D without it, mostly inputs\n"
         "  --help                    this text\n";
}

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct cli {
  std::string mode;
  std::filesystem::path dir;
  std::string form = "chain";
  std::string claim = "lossless";
  std::string name;
  bool prune_inputs = false;
  sc::kit_options options;
};

std::uint64_t parse_count(std::string_view option, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw usage_error(std::string(option) + ": '" + text + "' is not a non-negative integer");
  try {
    return std::stoull(text);
  } catch (const std::out_of_range&) {
    throw usage_error(std::string(option) + ": '" + text + "' is too large");
  }
}

//! Parses the arguments; returns false when --help was asked for.
bool parse(const std::vector<std::string>& args, cli& c) {
  c.options.impossible_token_trials = bridge_impossible_trials;
  bool have_dir = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    bool has_value = false;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw usage_error(arg + " needs a value");
      return args[++i];
    };
    const auto no_value = [&] {
      if (has_value) throw usage_error(arg + " takes no value");
    };
    if (arg == "--help" || arg == "-h") return false;
    if (i == 0 && arg.rfind("--", 0) != 0) {
      if (arg != "step" && arg != "serve") throw usage_error("unknown command '" + arg + "' (step or serve)");
      c.mode = arg;
    } else if (arg == "--dir") {
      c.dir = next();
      have_dir = true;
    } else if (arg == "--form") {
      c.form = next();
      if (c.form != "chain" && c.form != "logits" && c.form != "tree")
        throw usage_error("--form: chain, logits or tree, not '" + c.form + "'");
    } else if (arg == "--claim") {
      c.claim = next();
      if (c.claim == "stated_law" || c.claim == "stated")
        throw usage_error(
            "--claim: a stated (lossy) law is a C++ emission_law; check such a verifier from C++ (docs/conformance.md)");
      if (c.claim != "lossless" && c.claim != "greedy") throw usage_error("--claim: lossless or greedy, not '" + c.claim + "'");
    } else if (arg == "--name") {
      c.name = next();
    } else if (arg == "--seed") {
      c.options.seed = parse_count(arg, next());
    } else if (arg == "--law-requests") {
      c.options.law_requests = static_cast<std::size_t>(parse_count(arg, next()));
    } else if (arg == "--batch-size") {
      c.options.batch_size = static_cast<std::size_t>(parse_count(arg, next()));
      if (c.options.batch_size == 0) throw usage_error("--batch-size must be positive");
    } else if (arg == "--independence-pairs") {
      c.options.independence_pairs = static_cast<std::size_t>(parse_count(arg, next()));
    } else if (arg == "--impossible-trials") {
      c.options.impossible_token_trials = parse_count(arg, next());
    } else if (arg == "--prune-inputs") {
      no_value();
      c.prune_inputs = true;
    } else if (arg == "--not-seeded") {
      no_value();
      c.options.seeded = false;
    } else if (arg == "--ignores-draft-probs") {
      no_value();
      c.options.reads_draft_probs = false;
    } else if (arg == "--sibling-sampling") {
      const std::string s = next();
      if (s == "independent")
        c.options.tree_sampling = sc::sibling_sampling::independent;
      else if (s == "without_replacement")
        c.options.tree_sampling = sc::sibling_sampling::without_replacement;
      else
        throw usage_error("--sibling-sampling: independent or without_replacement, not '" + s + "'");
    } else if (arg == "--only") {
      c.options.only.push_back(next());
    } else {
      throw usage_error("unknown option '" + arg + "'");
    }
  }
  if (c.mode.empty()) throw usage_error("a command is needed: step or serve");
  if (!have_dir || c.dir.empty()) throw usage_error("--dir D is required");
  return true;
}

int run(const cli& c) {
  std::filesystem::create_directories(c.dir);
  sc::file_bridge bridge(c.dir);
  bridge.set_prune_inputs(c.prune_inputs);
  if (c.mode == "serve")
    bridge.set_waiter([](const std::filesystem::path& call_dir) {
      std::cout << "answer " << call_dir.string() << std::endl;
      std::string line;
      return static_cast<bool>(std::getline(std::cin, line));
    });
  const sc::guarantee g = c.claim == "greedy" ? sc::guarantee::greedy() : sc::guarantee::lossless();
  const std::string name = c.name.empty() ? "verifier answering in " + c.dir.string() : c.name;
  sc::report r;
  try {
    r = c.form == "chain"    ? sc::check_chain_verifier(name, bridge.chain(), g, c.options)
        : c.form == "logits" ? sc::check_chain_logits_verifier(name, bridge.chain_logits(), g, c.options)
                             : sc::check_tree_verifier(name, bridge.tree(), g, c.options);
  } catch (const sc::stop_run&) {
    if (!bridge.error().empty()) {
      std::cerr << "specdec-conformance: " << bridge.error() << "\n";
      return 2;
    }
    if (c.mode == "serve")
      std::cerr << "specdec-conformance: stdin closed; " << bridge.pending().string() << " awaits an answer\n";
    if (c.mode == "step") std::cout << "answer " << bridge.pending().string() << std::endl;
    return 3;
  }
  const std::string text = sc::to_text(r);
  sc::npy::write_file(c.dir / "report.json", sc::to_json(r));
  sc::npy::write_file(c.dir / "report.txt", text);
  std::cout << text << std::flush;
  return r.passed() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  cli c;
  try {
    if (!parse(args, c)) {
      print_help(std::cout);
      return 0;
    }
  } catch (const usage_error& e) {
    std::cerr << "specdec-conformance: " << e.what() << "\n(see 'specdec-conformance --help')\n";
    return 2;
  }
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::cerr << "specdec-conformance: " << e.what() << "\n";
    return 2;
  }
}
