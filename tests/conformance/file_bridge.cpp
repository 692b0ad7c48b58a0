// conformance/file_bridge.hpp: the kit run through files gives the same report as the kit run in
// process, for chains and trees, whether the answers come while the bridge waits (serve) or one
// replay at a time (step), with or without the input arrays pruned; changed options, malformed answers and a verifier that raises are told
// apart. The answerer is specdec's own verifier, reading the call's inputs back from the files.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "specdec/conformance/file_bridge.hpp"
#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/logits.hpp"
#include "specdec/conformance/specdec_verifiers.hpp"
#include "specdec/errors.hpp"
#include "specdec/exec/policy.hpp"

namespace {

namespace sc = specdec::conformance;
namespace fs = std::filesystem;

sc::kit_options small_options() {
  sc::kit_options o;
  o.law_requests = 3000;
  o.batch_size = 1000;
  o.independence_pairs = 1000;
  o.impossible_token_trials = 65536;
  return o;
}

// A fresh directory under the system's temporary directory, removed at the end of the scope.
struct scratch {
  fs::path dir;
  explicit scratch(const std::string& name) : dir(fs::temp_directory_path() / ("specdec_file_bridge_" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Answers a chain call with specdec's strict verifier, from the files alone.
void answer_chain(const fs::path& call_dir) {
  static const auto verify = sc::specdec_chain_verifier(specdec::exec::seq, specdec::strict);
  const auto verdicts = verify(sc::read_chain_inputs(call_dir / "inputs"));
  sc::write_verdicts(call_dir / "outputs", verdicts);
}

void answer_tree(const fs::path& call_dir) {
  static const auto verify = sc::specdec_tree_verifier(specdec::exec::seq, specdec::strict);
  const auto verdicts = verify(sc::read_tree_inputs(call_dir / "inputs"));
  sc::write_verdicts(call_dir / "outputs", verdicts);
}

}  // namespace

TEST_CASE("file bridge: a chain run through files is the run in process (serve)", "[conformance][file_bridge]") {
  const scratch s("chain_serve");
  const auto o = small_options();
  const auto direct = sc::check_chain_verifier("strict", sc::specdec_chain_verifier(specdec::exec::seq, specdec::strict),
                                               sc::guarantee::lossless(), o);
  sc::file_bridge bridge(s.dir);
  bridge.set_waiter([](const fs::path& call_dir) {
    answer_chain(call_dir);
    return true;
  });
  const auto bridged = sc::check_chain_verifier("strict", bridge.chain(), sc::guarantee::lossless(), o);
  CHECK(bridged.passed());
  CHECK(sc::to_json(bridged) == sc::to_json(direct));
  CHECK(fs::exists(bridge.call_dir(bridge.calls() - 1) / "outputs" / "tokens.npy"));

  // Replayed from the answers on disk alone: the same report, no call unanswered.
  sc::file_bridge replay(s.dir);
  const auto again = sc::check_chain_verifier("strict", replay.chain(), sc::guarantee::lossless(), o);
  CHECK(replay.calls() == bridge.calls());
  CHECK(sc::to_json(again) == sc::to_json(direct));

  // Other options: the first call whose inputs differ stops the run with an error.
  auto changed = o;
  changed.seed += 1;
  sc::file_bridge other(s.dir);
  CHECK_THROWS_AS(sc::check_chain_verifier("strict", other.chain(), sc::guarantee::lossless(), changed), sc::stop_run);
  CHECK_THAT(other.error(), Catch::Contains("not the ones stored"));
  CHECK(other.pending().empty());
}

TEST_CASE("file bridge: a tree run through files is the run in process", "[conformance][file_bridge]") {
  for (const auto sampling : {sc::sibling_sampling::independent, sc::sibling_sampling::without_replacement}) {
    const scratch s(sampling == sc::sibling_sampling::independent ? "tree_independent" : "tree_without_replacement");
    auto o = small_options();
    o.tree_sampling = sampling;
    const auto direct = sc::check_tree_verifier("tree strict", sc::specdec_tree_verifier(specdec::exec::seq, specdec::strict),
                                                sc::guarantee::lossless(), o);
    sc::file_bridge bridge(s.dir);
    bridge.set_waiter([](const fs::path& call_dir) {
      answer_tree(call_dir);
      return true;
    });
    const auto bridged = sc::check_tree_verifier("tree strict", bridge.tree(), sc::guarantee::lossless(), o);
    CHECK(sc::to_json(bridged) == sc::to_json(direct));
  }
}

TEST_CASE("file bridge: a run from logits through files is the run in process", "[conformance][file_bridge][logits]") {
  const scratch s("chain_logits");
  const auto o = small_options();
  const auto verify = sc::specdec_chain_logits_verifier(specdec::exec::seq, specdec::strict);
  const auto direct = sc::check_chain_logits_verifier("strict", verify, sc::guarantee::lossless(), o);
  sc::file_bridge bridge(s.dir);
  bridge.set_waiter([&](const fs::path& call_dir) {
    try {
      sc::write_verdicts(call_dir / "outputs", verify(sc::read_chain_logit_inputs(call_dir / "inputs")));
    } catch (const specdec::error& e) {  // invalid warping parameters: the verifier raises
      fs::create_directories(call_dir / "outputs");
      std::ofstream(call_dir / "outputs" / "error.txt") << e.what();
    }
    return true;
  });
  const auto bridged = sc::check_chain_logits_verifier("strict", bridge.chain_logits(), sc::guarantee::lossless(), o);
  CHECK(bridged.passed());
  CHECK(sc::to_json(bridged) == sc::to_json(direct));
  // The warping columns are float64 files with one entry per request.
  const auto first = bridge.call_dir(0) / "inputs";
  const auto temperature = sc::npy::load(first / "target_temperature.npy");
  CHECK(temperature.type == sc::npy::dtype::f8);
  CHECK(temperature.shape.at(0) == sc::read_chain_inputs(first).batch_size());
}

TEST_CASE("file bridge: one replay per answer (step)", "[conformance][file_bridge]") {
  const scratch s("chain_step");
  auto o = small_options();
  o.only = {"exact_law/v4", "determinism", "bad_input/target_row_all_nan", "bad_input/empty_chain"};
  const auto direct = sc::check_chain_verifier("strict", sc::specdec_chain_verifier(specdec::exec::seq, specdec::strict),
                                               sc::guarantee::lossless(), o);
  std::size_t steps = 0;
  sc::report bridged;
  for (bool done = false; !done; ++steps) {
    REQUIRE(steps < 200);
    sc::file_bridge bridge(s.dir);
    bridge.set_prune_inputs(true);
    try {
      bridged = sc::check_chain_verifier("strict", bridge.chain(), sc::guarantee::lossless(), o);
      done = true;
    } catch (const sc::stop_run&) {
      REQUIRE(bridge.error().empty());
      REQUIRE(bridge.pending() == bridge.call_dir(bridge.calls() - 1));
      REQUIRE(fs::exists(bridge.pending() / "inputs" / "meta.json"));
      answer_chain(bridge.pending());
    }
  }
  CHECK(steps > 5);
  CHECK(sc::to_json(bridged) == sc::to_json(direct));
  // Pruned: the answered calls keep meta.json alone of their inputs, which is enough to replay.
  std::size_t inputs_left = 0;
  for (const auto& entry : fs::directory_iterator(s.dir / "call_000000" / "inputs"))
    inputs_left += entry.path().extension() == ".npy";
  CHECK(inputs_left == 0);
  sc::file_bridge replay(s.dir);
  CHECK(sc::to_json(sc::check_chain_verifier("strict", replay.chain(), sc::guarantee::lossless(), o)) == sc::to_json(direct));
}

TEST_CASE("file bridge: malformed answers stop the run; error.txt is the verifier raising", "[conformance][file_bridge]") {
  const scratch s("answers");
  auto o = small_options();
  o.only = {"bad_input/target_row_all_nan"};  // calls: the case alone, three healthy requests, the four together
  const auto run = [&] {
    sc::file_bridge bridge(s.dir);
    try {
      return std::string(sc::check_chain_verifier("x", bridge.chain(), sc::guarantee::lossless(), o).passed() ? "passed"
                                                                                                              : "failed");
    } catch (const sc::stop_run&) {
      return bridge.error().empty() ? "pending " + bridge.pending().filename().string() : "error " + bridge.error();
    }
  };
  CHECK(run() == "pending call_000000");
  CHECK(run() == "pending call_000000");  // the inputs are written once and checked again
  const fs::path outputs = s.dir / "call_000000" / "outputs";

  const std::vector<float> wrong_dtype(2, 0.0f);
  sc::npy::save<float>(outputs / "tokens.npy", wrong_dtype, {1, 2});
  CHECK_THAT(run(), Catch::Contains("error") && Catch::Contains("tokens.npy") && Catch::Contains("int32 or int64"));
  const std::vector<std::int32_t> wrong_rows(4, 0);
  sc::npy::save<std::int32_t>(outputs / "tokens.npy", wrong_rows, {2, 2});
  CHECK_THAT(run(), Catch::Contains("shape [2, 2] where [1, W]"));
  const std::vector<std::int64_t> too_large{std::int64_t{1} << 40};
  sc::npy::save<std::int64_t>(outputs / "tokens.npy", too_large, {1, 1});
  CHECK_THAT(run(), Catch::Contains("not a token id"));
  fs::remove(outputs / "tokens.npy");

  // The verifier raised on the bad request: reporting it that way passes the case alone.
  sc::npy::write_file(outputs / "error.txt", "ValueError: NaN in the target rows\n");
  CHECK(run() == "pending call_000001");
  answer_chain(s.dir / "call_000001");  // three healthy requests alone
  CHECK(run() == "pending call_000002");
  // Then it reports the bad request beside the three healthy ones (int64 tokens, uint8 flags, -1 padding).
  const fs::path third = s.dir / "call_000002" / "outputs";
  const auto in = sc::read_chain_inputs(s.dir / "call_000002" / "inputs");
  REQUIRE(in.batch_size() == 4);
  const auto verdicts = sc::specdec_chain_verifier(specdec::exec::seq, specdec::strict)(in);
  std::vector<std::int64_t> tokens(std::size_t{4} * 5, -1);
  std::vector<std::uint8_t> reported(4, 0);
  for (std::size_t b = 0; b < 4; ++b) {
    for (std::size_t i = 0; i < verdicts[b].tokens.size(); ++i) tokens[b * 5 + i] = verdicts[b].tokens[i];
    reported[b] = verdicts[b].reported ? 1 : 0;
  }
  REQUIRE(reported[0] == 1);
  sc::npy::save<std::uint8_t>(third / "reported.npy", reported, {4});
  sc::npy::save<std::int64_t>(third / "tokens.npy", tokens, {4, 5});
  CHECK(run() == "passed");
  // A healthy request reported instead: the kit fails the case (the bridge passes the answer on).
  reported[1] = 1;
  sc::npy::save<std::uint8_t>(third / "reported.npy", reported, {4});
  CHECK(run() == "failed");
}
