// gathered_sequence_model: the drafter stages of a batch (EAGLE-2 dynamic trees, static trees, MTAD's
// beams, SPRINTER's verifier-gated runs, each request through prefix_cached_model lanes of its own) run
// as the step decoder's stage
// runner on one shared draft engine. Every request emits exactly the tokens it emits when the stages
// run one after another on the same engine, and each draft level of the batch is one forward of the
// engine (control: without the runner, one forward per request and level). A specdec::error thrown by
// a merged round ends the requests of that round (stage_error), the others run on; an engine_error
// leaves step() as it does without the runner; forwards outside run() pass straight through.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "specdec/acceptance/last_token.hpp"
#include "specdec/acceptance/mtad.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/draft/beam.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/draft/tree_shape.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/gathered_sequence_model.hpp"
#include "specdec/model/prefix_cached_model.hpp"
#include "specdec/model/sequence.hpp"
#include "support/numbered_request.hpp"
#include "support/wave_models.hpp"

namespace {
using specdec::token_id;
constexpr std::size_t V = 6;
constexpr std::size_t lanes = 4;  // each request's lanes: its beams or its tree's widest frontier

using model_t = decltype(specdec::make_model(V, specdec_test::wave_logits(0.0)));
using engine_t = specdec::recomputing_sequence_model<model_t>;
using gathered_t = specdec::gathered_sequence_model<engine_t>;
using view_t = specdec::prefix_cached_model<gathered_t>;

const model_t& target_model() { return specdec_test::wave_target<V>(); }
const model_t& draft_model() { return specdec_test::wave_draft<V>(); }

// A draft engine (what llama.cpp's draft context is to specdec-llama), shared by every request's
// lanes through one gathered_sequence_model; `fail_at` makes its n-th forward throw (0: never) a
// specdec::error, or an engine_error when `engine_failure`.
struct engine_with_failures : engine_t {
  using engine_t::engine_t;
  std::size_t forwards = 0, fail_at = 0;
  bool engine_failure = false;
  std::vector<std::vector<specdec::sequence_id>> batches;  // each forward's appends' sequences, in order
  void forward(std::span<const specdec::sequence_append> a, std::span<float> logits) {
    batches.emplace_back();
    for (const auto& x : a) batches.back().push_back(x.sequence);
    if (++forwards == fail_at) {
      if (engine_failure) throw specdec::engine_error("the draft engine failed");
      throw specdec::error("a row the draft cannot give");
    }
    engine_t::forward(a, logits);
  }
};

struct batch_run {
  std::vector<std::vector<token_id>> tokens;
  std::vector<specdec::finish_reason> finished;
  std::size_t engine_forwards = 0, steps = 0, max_level_calls = 0;
  std::vector<std::vector<specdec::sequence_id>> batches;
  specdec::gather_stats gathered;
  specdec::sprinter_stats sprinter[2];  // requests 3 and 7
};

// Eight requests, drafting through stages on views of one gathered engine: dynamic trees, static trees,
// MTAD's beams and SPRINTER's runs (ids 3 and 7; a verifier that keeps drafting while q(x) >= 0.3, runs
// of at most 4); run with or without the gathered runner.
// The gathered model seen through a delay of 0-300 us before each forward (when `on`), so that the
// calls reach each round in an order of the threads' timing.
template <class G>
struct jittered {
  G* model;
  bool on = false;
  std::size_t vocab_size() const { return model->vocab_size(); }
  std::size_t length(specdec::sequence_id s) const { return model->length(s); }
  void rollback(specdec::sequence_id s, std::size_t n) { model->rollback(s, n); }
  void release(specdec::sequence_id s) { model->release(s); }
  void forward(std::span<const specdec::sequence_append> a, std::span<float> logits) {
    if (on) {
      thread_local std::mt19937 rng(std::random_device{}());
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    }
    model->forward(a, logits);
  }
};

batch_run run_batch(bool gathered_runner, std::size_t fail_at = 0, bool engine_failure = false, bool jitter = false) {
  batch_run out;
  specdec::recomputing_sequence_model target(target_model()), draft(draft_model());
  engine_with_failures engine(draft_model());
  engine.fail_at = fail_at;
  engine.engine_failure = engine_failure;
  specdec::gathered_sequence_model<engine_with_failures> shared(engine);
  jittered<decltype(shared)> delayed{&shared, jitter};
  using view = specdec::prefix_cached_model<jittered<decltype(shared)>>;
  std::vector<std::unique_ptr<view>> views;
  std::vector<std::shared_ptr<void>> drafters;
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
  if (gathered_runner) decoder.set_stage_runner([&](std::span<const std::function<void()>> calls) { shared.run(calls); });
  std::vector<specdec::request_handle> handles;
  for (std::uint32_t id = 0; id < 8; ++id) {
    views.push_back(std::make_unique<view>(delayed, lanes, 100 + id * lanes));
    specdec::request_options o = specdec_test::numbered_request<V>(id, 31, 1 + id % 4, 10 + id % 7);
    if (id % 4 == 3) {
      const auto verifier = specdec::make_verifier(specdec::draft_row_features::size,
                                                   [](std::span<const float> f) { return static_cast<double>(f[0]); });
      auto d = std::make_shared<specdec::verifier_gated_drafter<view, specdec::draft_row_features, decltype(verifier)>>(
          *views.back(), specdec::warp_params{}, specdec::draft_row_features{}, verifier,
          specdec::gating_params{.tau = 0.3, .max_run = 4});
      o.set_stages(specdec::gated_stage(*d, &out.sprinter[id / 4]), specdec::last_token);
      o.gamma = 4;
      drafters.push_back(d);
    } else if (id % 3 == 0) {
      auto d = std::make_shared<specdec::dynamic_tree_drafter<view>>(
          *views.back(), specdec::dynamic_tree_params{.depth = 2 + id % 2, .top_k = 2, .total_tokens = 5});
      o.set_stages(specdec::tree_drafter_stage(*d), specdec::tree_acceptance{specdec::sample_and_match});
      drafters.push_back(d);
    } else if (id % 3 == 1) {
      auto d = std::make_shared<specdec::static_tree_drafter<view>>(*views.back(), specdec::tree_shape::full({2, 2}),
                                                                    specdec::warp_params{}, specdec::tree_sampling::iid);
      o.set_stages(specdec::tree_drafter_stage(*d), specdec::tree_acceptance{specdec::strict});
      drafters.push_back(d);
    } else {
      auto d = std::make_shared<specdec::beam_drafter<view>>(*views.back(), specdec::beam_params{.width = 3});
      o.drafter = specdec::beam_stage(*d);
      o.acceptance = specdec::mtad_rule(0.3);
      drafters.push_back(d);
    }
    handles.push_back(decoder.add(std::move(o)));
  }
  out.tokens.resize(handles.size());
  out.finished.resize(handles.size(), specdec::finish_reason::none);
  while (decoder.active() > 0) {
    const std::size_t before = engine.forwards;
    for (const specdec::step_event& e : decoder.step()) {
      auto& t = out.tokens[e.request - handles.front()];
      t.insert(t.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished != specdec::finish_reason::none) out.finished[e.request - handles.front()] = e.finished;
    }
    out.max_level_calls = std::max(out.max_level_calls, engine.forwards - before);
    ++out.steps;
  }
  out.engine_forwards = engine.forwards;
  out.batches = engine.batches;
  out.gathered = shared.stats();
  return out;
}

}  // namespace

TEST_CASE("gathered stage calls emit what the stages emit one after another, one forward per level", "[model][decode]") {
  const batch_run one_by_one = run_batch(false);
  const batch_run gathered = run_batch(true);
  for (std::size_t k = 0; k < one_by_one.tokens.size(); ++k) {
    CAPTURE(k);
    REQUIRE_FALSE(one_by_one.tokens[k].empty());
    REQUIRE(gathered.tokens[k] == one_by_one.tokens[k]);
    REQUIRE(gathered.finished[k] == one_by_one.finished[k]);
  }
  for (const auto& s : gathered.sprinter) {  // SPRINTER's runs kept tokens on the verifier's word
    REQUIRE(s.verifier_accepted > 0);
    REQUIRE(s.verifier_calls > s.verifier_accepted);
  }
  REQUIRE(one_by_one.gathered.rounds == 0);
  REQUIRE(gathered.gathered.rounds > 0);
  REQUIRE(gathered.gathered.merged_calls > gathered.gathered.rounds);  // rounds held several requests' calls
  // Merged: a step's engine forwards are its deepest request's levels (at most 4 here), not the sum over
  // requests (the control, one after another, needs several times more).
  REQUIRE(gathered.max_level_calls <= 5);
  REQUIRE(one_by_one.max_level_calls > 2 * gathered.max_level_calls);
  REQUIRE(gathered.engine_forwards * 2 < one_by_one.engine_forwards);
  // A round's appends follow the calls' order, not their threads' arrival: the same batches every
  // run, though the calls reach the rounds in another order each time (jittered below).
  for (int run = 0; run < 3; ++run) REQUIRE(run_batch(true, 0, false, true).batches == gathered.batches);
}

TEST_CASE("a merged round that throws ends its requests with stage_error; forwards outside run pass through", "[model][decode]") {
  REQUIRE_THROWS_AS(run_batch(true, 3, true), specdec::engine_error);  // out of step(), every thread joined
  const batch_run failed = run_batch(true, 3);                         // the third forward: a merged round of the first step
  std::size_t errors = 0;
  for (const auto f : failed.finished) errors += f == specdec::finish_reason::error ? 1 : 0;
  REQUIRE(errors >= 2);
  REQUIRE(errors < failed.finished.size());  // the requests not in that round run on

  engine_t engine(draft_model());
  gathered_t shared(engine);
  const view_t view(shared, 2, 0);
  std::vector<float> row(V), want(V);
  const std::vector<token_id> context{1, 2, 3};
  view.next_logits(context, row);
  draft_model().next_logits(context, want);
  REQUIRE(row == want);
  REQUIRE(shared.stats().direct_calls == 1);
  REQUIRE(shared.stats().rounds == 0);
}
