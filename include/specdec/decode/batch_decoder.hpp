//! \file decode/batch_decoder.hpp
//! \brief The step decoder, the library's one generation loop: speculative decoding of many requests
//! at once on a target and a draft `SequenceModel` (model/sequence.hpp), one round per `step()`, the
//! way an engine's scheduler runs it. Every method is a choice of stages per request (docs/design.md,
//! docs/engine.md):
//!
//! | stage | choices |
//! |---|---|
//! | draft length (before drafting) | `gamma`; a `LengthPolicy` or `LengthController` (`length_stage`, length/); a batch stage (SV's scheduler, vLLM's dynamic goodput: length/sv_batch.hpp, length/dynamic_goodput.hpp) |
//! | drafting | batched chain drafting on the draft model (default); a `draft_stage` (draft/stage.hpp): any `Drafter`, model-free drafters (draft/prompt_lookup.hpp, draft/suffix_drafter.hpp), beams (MTAD), verifier-gated runs (SPRINTER), trees (draft/tree.hpp) |
//! | draft stop (after each draft) | none; a `DraftStopRule` (`stop_stage`: confidence, p_min, entropy, cumulative acceptance; length/concepts.hpp) |
//! | verified length (after drafting) | all drafts (default); a `verify_length_stage` (SV's goodput-optimal lengths from a companion, decode/sv.hpp; llama.cpp's n_min) |
//! | verification | a `verification_stage` per request (decode/verification_stage.hpp): the decoder's chain `Rule` or any chain rule (block verification, typical acceptance and a user's own rule included); `tree_acceptance` (a tree rule on a tree drafter stage's drafts, acceptance/tree.hpp); `mtad_rule` (joint likelihood, acceptance/mtad.hpp); `bild_rule` (BiLD's rollback, acceptance/bild.hpp); `last_token` (SPRINTER, acceptance/last_token.hpp); a stage of the user's own |
//!
//! A step, for every running request, each phase one call on the request's verification stage
//! (decode/verification_stage.hpp, whose file comment tables what each kind answers): choose its
//! draft length (`draft_length`: at most the tokens it may still emit, minus one for the correction
//! or bonus token of chain and joint rules); draft (chain drafting: one batched draft forward per
//! drafted position, each row warped with the request's draft parameters and sampled through the
//! policy (sampling/with_policy.hpp); a drafter stage: one call per request on its whole context,
//! its output checked by `check_draft`); choose how many drafts the target verifies (the
//! verified-length stage, for stages whose traits allow it); one batched target forward of what each
//! stage asks (`scoring`: pending tokens and drafts, rows, tree-shaped or not); verification, one
//! `verify` call per group of requests whose stages are `same_group` and that draft the same way
//! (chain rules with equal parameters: one batched `verify_from_logits` through the execution policy,
//! on the target's logits, warped only where read, and the q rows the drafts were sampled from,
//! handed over as probabilities, acceptance/draft_side.hpp); then commit the emitted tokens and roll
//! both models back past the rejected drafts (a tree-shaped scoring: the target keeps the accepted
//! path, `TreeSequenceModel::commit_tree`).
//! Faults stay with their request: a model's unusable row or a drafter stage's `numerical_error`
//! ends it with `invalid_row`; a drafter stage's `specdec::error` (a tokenizer that cannot encode the
//! request's text, draft/tli.hpp), an output its verification stage cannot verify (`check_draft`), or
//! a `specdec::error` or `numerical_error` from its verification or from the verified-length stage,
//! ends it with `stage_error` (a group call that throws is retried
//! request by request); `add()` refuses what the request's stage cannot serve, with the reason.
//! Randomness: request r's round k uses `request_stream{seed, request_id, k}` (draft position j:
//! purpose draft; accept tests and residuals as in `verify`; the target's own samples keyed by output
//! position for chain rules, `request_options::sample_keys`), so a request's tokens depend only on its
//! own options, never on the batch it runs in.
//! Model state: after a step each model holds a request's prompt and committed tokens except the last
//! one or few, which are "pending" and go in front of the next step's append (the target's state ends
//! before the correction or bonus token, the draft's before the tokens it never appended). A request
//! that drafts through a stage never touches the draft model.
//! Buffers are members, reused step after step: a warm step of chain-drafted, chain-verified requests
//! allocates nothing (bench/decode_step.cpp counts it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/decode/verification_stage.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/errors.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/length/fixed.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/with_policy.hpp"

namespace specdec {

//! How the decoder addresses the target's own samples (sample-and-match's, hence target-only
//! decoding's) of a chain-verified request (random/stream.hpp, docs/reference/sampling-contract.md).
enum class target_sample_keys : std::uint8_t {
  //! By the output position each sample decides (the default): with the same seed, decoding with any
  //! drafter (or none) emits the same tokens, up to the target's own numerics.
  output_position,
  //! By the round and the position in it (the addressing before output keys existed): the tokens
  //! depend on where the rounds fell, so on the drafter.
  round,
};

//! A request of the step decoder.
struct request_options {
  std::vector<token_id> prompt;  //!< not empty (a BOS token starts an unconditional generation)
  std::uint64_t seed = 0;        //!< with `request_id`, names the request's random streams
  std::uint32_t request_id = 0;  //!< with `seed`, names the request's random streams
  warp_params target_params{};   //!< how the target's rows are warped before verification
  warp_params draft_params{};    //!< how the draft's rows are warped before drafting from them
  std::size_t gamma = 4;         //!< drafts per round (fewer near max_new_tokens)
  //! The draft-length stage: when set, the round's draft length is `length(stats)` (the request's
  //! counters so far) instead of `gamma`; `length_stage(policy)` wraps any `LengthPolicy`.
  std::function<std::size_t(const decode_stats&)> length{};
  //! The draft stop stage: when set, consulted after each drafted token (`stop_stage(rule)` wraps any
  //! `DraftStopRule`); a drafter stage's drafts are cut where it says, a batched chain draft stops there.
  std::function<draft_decision(const draft_view&)> stop{};
  std::size_t max_new_tokens = 64;    //!< 0: the request finishes at the next step with no token
  std::vector<token_id> stop_tokens;  //!< generation ends after emitting one of them
  draft_stage drafter{};              //!< empty: chain drafting on the decoder's draft model
  //! How the target judges the drafts: a verification stage (decode/verification_stage.hpp: a chain
  //! rule, a user's own included; `tree_acceptance`; `mtad_rule`; `bild_rule`; `last_token`; a stage of
  //! the user's own), or none: the decoder's own chain rule.
  request_acceptance acceptance{};
  //! How the target's own samples are addressed (chain and tree verification; the joint and last-token
  //! rules keep round keys).
  target_sample_keys sample_keys = target_sample_keys::output_position;

  //! Sets the drafter stage and the acceptance together: a drafter stage whose output is part of its
  //! type (every library factory's), and an acceptance whose stage verifies it (`verifies_output`), or
  //! the call does not compile. (Set one by one, a mismatch is refused by `add()`.)
  template <draft_output Output, StageAcceptance A>
  request_options& set_stages(draft_stage_of<Output> drafter_stage, A acceptance_value) {
    static_assert(verifies_output<A, Output>,
                  "specdec::request_options::set_stages: the acceptance's verification stage cannot verify what the "
                  "drafter stage writes (see verifies_output)");
    drafter = std::move(drafter_stage);
    acceptance = std::move(acceptance_value);
    return *this;
  }
};

//! A `LengthPolicy` or a `LengthController` as a request's length stage (`request_options::length`);
//! the policy is copied, and a controller is told each round's outcome (drafted and accepted, from the
//! request's counters) before it chooses the next length.
// clang-format off
template <class L>
  requires LengthPolicy<L> || LengthController<L>
std::function<std::size_t(const decode_stats&)> length_stage(L policy) {
  return [policy = std::move(policy), seen = decode_stats{}](const decode_stats& s) mutable {
    if constexpr (LengthController<L>) {
      if (s.iterations > seen.iterations) policy.record(round_record{s.drafted - seen.drafted, s.accepted - seen.accepted});
      seen.iterations = s.iterations;
      seen.drafted = s.drafted;
      seen.accepted = s.accepted;
    }
    return static_cast<std::size_t>(policy.next_length(s));
  };
}
// clang-format on

//! A `DraftStopRule` as a request's draft stop stage (`request_options::stop`); the rule is copied.
template <DraftStopRule S>
std::function<draft_decision(const draft_view&)> stop_stage(S rule) {
  return [rule = std::move(rule)](const draft_view& v) mutable { return rule.decide(v); };
}

//! What a verified-length stage sees of a drafted request (requests whose stage allows it: chain and
//! joint rules).
struct drafted_request {
  request_handle request = 0;           //!< the request
  const decode_stats* stats = nullptr;  //!< its counters before this round
  std::span<const token_id> context;    //!< prompt and emitted tokens
  std::span<const token_id> drafts;     //!< this round's drafts
  std::span<const float> q_rows;        //!< their q rows [drafts][V] (probabilities); empty for beam drafts
  random::request_stream stream;        //!< this round's stream
};

//! A stage that chooses, after drafting, how many of each request's drafts the target verifies
//! (a prefix; the rest are dropped): `lengths` comes in holding every request's draft count and the
//! stage may lower any of them. Whether the output stays lossless depends on what the choice looks at
//! (decode/sv.hpp: a choice about draft j that does not depend on x_j itself keeps it exact).
using verify_length_stage = std::function<void(std::span<const drafted_request>, std::span<std::size_t>)>;

//! How a step's drafter-stage calls run: `runner(calls)` must call each of `calls` once (each drafts
//! one request and touches only that request) and return when all have returned. The default calls
//! them in order; `gathered_sequence_model::run` (model/gathered_sequence_model.hpp) runs them on
//! threads and merges their draft forwards into one per round.
using stage_runner = std::function<void(std::span<const std::function<void()>>)>;

//! Why a request finished.
enum class finish_reason : std::uint8_t {
  none,        //!< still running
  length,      //!< max_new_tokens emitted
  stop_token,  //!< a stop token emitted (it is the last token)
  cancelled,   //!< `cancel`
  error,       //!< a model returned an unusable row for this request, or its drafter stage threw
               //!< `numerical_error` (`status` has `invalid_row`): the target's row ends the round at
               //!< that row; the draft model's ends drafting, the round's drafts so far are verified and
               //!< their tokens emitted, then the request ends. Or its drafter stage threw
               //!< `specdec::error`, or its verification or the verified-length stage threw for it
               //!< (`stage_error`): the round emits nothing for it
};

//! Where the last step's time went (seconds, steady clock): the draft model's forwards, sampling the
//! drafts (warping each draft row), the drafter stages (their models and sampling), the target's
//! forward, verification (host warps of stage-drafted and joint requests included), and the whole
//! step; the rest of the step is the decoder's own bookkeeping.
struct step_timing {
  double draft_forward = 0.0, draft_sampling = 0.0, draft_stages = 0.0, target_forward = 0.0, verification = 0.0, total = 0.0;
  //! \var draft_forward
  //! The draft model's forwards.
  //! \var draft_sampling
  //! Sampling the drafts (warping each draft row).
  //! \var draft_stages
  //! The drafter stages: their models and sampling.
  //! \var target_forward
  //! The target's forward.
  //! \var verification
  //! Verification, host warps of stage-drafted and joint requests included.
  //! \var total
  //! The whole step.

  //! The step's time not spent in the parts above: total minus their sum.
  double bookkeeping() const noexcept {
    return total - draft_forward - draft_sampling - draft_stages - target_forward - verification;
  }
};

//! What a step did for one request. The spans stay valid until the next step.
struct step_event {
  request_handle request = 0;                    //!< the request
  std::span<const token_id> tokens;              //!< emitted this step
  finish_reason finished = finish_reason::none;  //!< why the request finished, or `none`
  verify_status status = verify_status::ok;      //!< the flags of this step's verification
  std::size_t drafted = 0;                       //!< tokens drafted this round
  std::size_t verified = 0;                      //!< drafts judged: by the target (chain, joint), or the whole run (last_token)
  std::span<const token_id> drafts;              //!< the drafts sent to the target (chain, joint: the verified ones)
  std::span<const float> target_logits;          //!< the target's rows for this request ([rows][V]; empty: no target call)
  std::size_t draft_steps = 0;       //!< draft steps this round, wasted ones included (the simulated clock's draft charge)
  std::size_t target_positions = 0;  //!< positions the target scored for it this round (0: no target call)
};

//! The step decoder over a target and a draft `SequenceModel` sharing one vocabulary
//! (`no_sequence_model` is the draft model of a decoder whose requests all draft through stages). It
//! keeps no clock: simulated time is an observer of its step events (decode/cost_model.hpp:
//! `simulated_clock`).
template <exec::ExecutionPolicy Policy, SequenceModel Target, SequenceModel Draft>
class batch_decoder {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda,
                "specdec::batch_decoder: the rows live in host memory; use exec::seq or exec::simd (a cuda "
                "decoder would need device buffers, not written yet)");
  static_assert(std::is_constructible_v<host_policy, Policy>,
                "specdec::batch_decoder: verification stages run on exec::seq or exec::simd (host_policy)");

 public:
  //! A decoder whose requests that set no `request_options::acceptance` are verified by
  //! `default_acceptance` (a chain rule, or any other `StageAcceptance`).
  //! \throws specdec::error when the models' vocabularies differ.
  template <StageAcceptance A>
  batch_decoder(Policy policy, Target& target, Draft& draft, A default_acceptance)
      : policy_(policy),
        target_(&target),
        draft_(&draft),
        default_stage_(make_verification_stage(std::move(default_acceptance))),
        vocab_(target.vocab_size()) {
    buffers_.vocab = vocab_;
    SPECDEC_EXPECTS(draft.vocab_size() == vocab_, "specdec::batch_decoder: the target and draft vocabularies differ");
  }

  //! Adds a request; it runs from the next `step()`.
  //! \throws specdec::error on an empty prompt, a token or stop token outside the vocabulary, invalid
  //!         warp parameters, or a request its verification stage cannot serve (`verification_stage::admit`:
  //!         e.g. the last-token rule without a drafter stage or with gamma 0, a tree without a tree
  //!         drafter stage or a `TreeSequenceModel` target).
  request_handle add(request_options options) {  // NOLINT(performance-unnecessary-value-param): moved into the request
    SPECDEC_EXPECTS(!options.prompt.empty(), "specdec::batch_decoder::add: the prompt is empty");
    for ([[maybe_unused]] const token_id t : options.prompt)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "specdec::batch_decoder::add: a prompt token is outside the vocabulary");
    for ([[maybe_unused]] const token_id t : options.stop_tokens)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "specdec::batch_decoder::add: a stop token is outside the vocabulary");
    validate(options.target_params);
    validate(options.draft_params);
    request r;
    r.stage = options.acceptance.stage() != nullptr ? options.acceptance.stage() : default_stage_.get();
    r.traits = r.stage->traits();
    r.stage->admit({.drafter_stage = static_cast<bool>(options.drafter),
                    .drafter_output = options.drafter.output(),
                    .tree_target = takes_tree_appends(*target_),
                    .length_stage = static_cast<bool>(options.length),
                    .gamma = options.gamma});
    r.handle = next_handle_++;
    r.staged = static_cast<bool>(options.drafter);
    r.target_params = options.target_params;
    r.prompt_size = options.prompt.size();
    r.context = options.prompt;
    r.context.reserve(options.prompt.size() + std::min<std::size_t>(options.max_new_tokens, 4096));
    r.pending_target = options.prompt;
    r.pending_draft = options.prompt;
    // At most gamma + 1 tokens are pending after a round (fewer allocations in the first steps).
    r.pending_draft.reserve(std::max(options.prompt.size(), std::min<std::size_t>(options.gamma, 64) + 1));
    r.emitted.reserve(std::min<std::size_t>(options.gamma, 64) + 1);
    r.options = std::move(options);
    requests_.push_back(std::move(r));
    return requests_.back().handle;
  }

  //! Cancels a request: its sequences are released now, and the next step reports it finished
  //! (`cancelled`) with no tokens. \throws specdec::error for an unknown or finished request.
  void cancel(request_handle h) {
    request& r = find(h);
    SPECDEC_EXPECTS(r.finished == finish_reason::none, "specdec::batch_decoder::cancel: the request has finished");
    release(r, finish_reason::cancelled);
  }

  //! Runs one round for every running request and reports what each emitted; finished requests are
  //! reported once, then dropped (`tokens(h)` and `stats(h)` stay readable until the next step).
  std::span<const step_event> step();

  //! Running requests (added, not yet reported finished).
  std::size_t active() const noexcept { return requests_.size(); }
  //! Every token request h emitted so far. \throws specdec::error for an unknown request.
  std::span<const token_id> tokens(request_handle h) const {
    const request& r = find(h);
    return std::span<const token_id>(r.context).subspan(r.prompt_size);
  }
  //! Request h's counters. \throws specdec::error for an unknown request.
  const decode_stats& stats(request_handle h) const { return find(h).stats; }
  //! Where the last step's time went.
  const step_timing& last_step_timing() const noexcept { return timing_; }
  //! Sets (or, with an empty function, removes) the batch length stage, run every step after each
  //! request's own length stage, before drafting.
  void set_batch_length_stage(batch_length_stage stage) { batch_length_ = std::move(stage); }
  //! Sets (or removes) the verified-length stage, run every step after drafting.
  void set_verify_length_stage(verify_length_stage stage) { verify_length_ = std::move(stage); }
  //! Sets (or, with an empty function, removes) the runner of the drafter stages' calls (`stage_runner`);
  //! it is used when two or more requests draft through stages in a step.
  void set_stage_runner(stage_runner runner) { stage_runner_ = std::move(runner); }

 private:
  // A request: what its verification stage sees of the round (`stage_request`), and the decoder's own.
  struct request : stage_request {
    request_options options;
    const verification_stage* stage = nullptr;  // options.acceptance's, or the decoder's default
    stage_traits traits;                        // stage->traits()
    std::size_t rule_class = 0;                 // this step: requests of one class share their stage's verify call
    bool faulted = false;                       // a stage threw for it this round: no scoring, no verification
    std::size_t prompt_size = 0;
    std::vector<token_id> context;         // prompt, then every emitted token
    std::vector<token_id> pending_target;  // committed, not yet in the target's state
    std::vector<token_id> pending_draft;   // committed, not yet in the draft's state
    decode_stats stats;
    finish_reason finished = finish_reason::none;
    verify_status status = verify_status::ok;
    // This round (the rest is in stage_request).
    std::size_t draft_forwards = 0;   // rows the draft model computed for it (chain drafting)
    bool pending_in_draft = false;    // this round appended pending_draft to the draft model
    std::size_t drafts_in_draft = 0;  // drafts this round appended to the draft model
    std::size_t first_emitted = 0;    // output index of this step's first token
    bool tree_append = false;         // the target scored a tree (target_scoring::tree)
    std::size_t draft_steps = 0;      // step_event::draft_steps

    std::span<const token_id> output() const { return std::span<const token_id>(context).subspan(prompt_size); }
    std::size_t output_size() const noexcept { return context.size() - prompt_size; }
  };

  request& find(request_handle h) {
    for (auto& r : requests_)
      if (r.handle == h) return r;
    for (auto& r : reported_)
      if (r.handle == h) return r;
    throw error("specdec::batch_decoder: unknown request");
  }
  const request& find(request_handle h) const { return const_cast<batch_decoder*>(this)->find(h); }

  void release(request& r, finish_reason why) {
    r.finished = why;
    target_->release(r.handle);
    draft_->release(r.handle);
  }

  random::request_stream stream_of(const request& r) const {
    random::request_stream s{r.options.seed, r.options.request_id, static_cast<std::uint32_t>(r.stats.iterations)};
    if (r.traits.output_keys && r.options.sample_keys == target_sample_keys::output_position)
      s.output_position = static_cast<std::uint32_t>(r.output_size());  // this round's first output position
    return s;
  }
  std::span<const float> target_logits(const request& r) const {
    return std::span<const float>(target_logits_).subspan(r.target_row * vocab_, r.target_rows * vocab_);
  }
  // A stage threw for r this round: r emits nothing more and ends with `stage_error`.
  static void fault(request& r) {
    r.faulted = true;
    r.emitted.clear();
    r.tree_kept.clear();
    r.target_kept = r.accepted = r.judged = 0;
    r.round_status |= verify_status::stage_error;
  }

  using clock = std::chrono::steady_clock;
  static double seconds(clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

  void choose_lengths();
  void draft_with_stages();
  void assign_slots();
  void draft_round(std::size_t j);
  void apply_stop(request& r, std::size_t j);
  void choose_verified();
  void score();
  void verify();
  void verify_group(typename std::vector<request*>::iterator first, typename std::vector<request*>::iterator last);
  void commit(request& r);

  Policy policy_;
  Target* target_;
  Draft* draft_;
  std::shared_ptr<const verification_stage> default_stage_;  // for requests that set no acceptance
  std::size_t vocab_;
  request_handle next_handle_ = 1;
  std::vector<request> requests_;  // running
  std::vector<request> reported_;  // finished, reported by the last step
  batch_length_stage batch_length_;
  verify_length_stage verify_length_;
  stage_runner stage_runner_;
  std::vector<std::function<void()>> stage_calls_;

  // Per-step buffers (reused).
  std::vector<request*> running_;  // in stage order, drafting, then rule class (stable)
  std::vector<const verification_stage*> rule_classes_;
  std::vector<stage_request*> group_;
  std::vector<sequence_append> appends_;
  std::vector<token_id> drafts_, appended_;
  std::vector<float> logits_, q_probs_, target_logits_;
  verification_buffers buffers_;
  step_timing timing_;
  std::vector<length_request> length_requests_;
  std::vector<drafted_request> drafted_requests_;
  std::vector<std::size_t> lengths_;
  std::vector<std::size_t> appended_offset_;
  std::vector<std::int32_t> append_parents_;  // tree-shaped appends' parents
  std::vector<step_event> events_;
};

//! The decoder of a policy, two models and a default acceptance.
template <class Policy, class Target, class Draft, class A>
batch_decoder(Policy, Target&, Draft&, A) -> batch_decoder<Policy, Target, Draft>;

// ---- a step ---------------------------------------------------------------------------------------

template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
std::span<const step_event> batch_decoder<P, T, D>::step() {
  const auto start = clock::now();
  timing_ = {};
  reported_.clear();
  events_.clear();
  running_.clear();
  // Requests cancelled or with nothing to emit finish without a round.
  for (auto& r : requests_) {
    r.first_emitted = r.output_size();
    r.pending_in_draft = r.draft_failed = r.faulted = r.tree_append = false;
    r.drafts_in_draft = r.drafted = r.draft_forwards = r.verified = r.target_rows = r.target_drafts = r.drafts_at = r.judged =
        r.target_row = r.draft_steps = 0;
    r.round_status = verify_status::ok;
    r.emitted.clear();
    if (r.finished == finish_reason::none && r.options.max_new_tokens == 0) release(r, finish_reason::length);
    if (r.finished == finish_reason::none) running_.push_back(&r);
  }
  // Grouped by stage order and drafting, then by stage: each group is one verify call.
  rule_classes_.clear();
  for (request* r : running_) {
    const auto same = [&](const verification_stage* c) { return c == r->stage || c->same_group(*r->stage); };
    r->rule_class =
        static_cast<std::size_t>(std::find_if(rule_classes_.begin(), rule_classes_.end(), same) - rule_classes_.begin());
    if (r->rule_class == rule_classes_.size()) rule_classes_.push_back(r->stage);
  }
  // std::sort with the request's position as the last key: the order of a stable sort, without the
  // buffer std::stable_sort allocates.
  std::sort(running_.begin(), running_.end(), [](const request* a, const request* b) {
    if (a->traits.order != b->traits.order) return a->traits.order < b->traits.order;
    if (a->staged != b->staged) return b->staged;
    return a->rule_class != b->rule_class ? a->rule_class < b->rule_class : a < b;
  });

  if (!running_.empty()) {
    choose_lengths();
    draft_with_stages();
    assign_slots();
    std::size_t widest = 0;
    for (const request* r : running_)
      if (!r->staged) widest = std::max(widest, r->gamma);
    for (std::size_t j = 0; j < widest; ++j) draft_round(j);
    choose_verified();
    score();
    const auto t0 = clock::now();
    verify();
    timing_.verification = seconds(t0, clock::now());
    for (request* r : running_) commit(*r);
  }

  // Events of every request; the finished ones move to reported_ (a move keeps a vector's buffer, so
  // the events' spans stay valid).
  for (auto& r : requests_) {
    events_.push_back({r.handle, r.output().subspan(r.first_emitted), r.finished, r.status, r.drafted, r.judged,
                       std::span<const token_id>(drafts_).subspan(r.drafts_at, r.target_drafts), target_logits(r), r.draft_steps,
                       r.target_rows > 0 ? r.target_drafts + 1 : 0});
    if (r.finished != finish_reason::none) reported_.push_back(std::move(r));
  }
  std::erase_if(requests_, [](const request& r) { return r.finished != finish_reason::none; });
  timing_.total = seconds(start, clock::now());
  return events_;
}

//! Each request's draft length: its stage (or gamma), then the batch stage, each bounded by the
//! verification stage's `draft_length` (the tokens it may still emit, minus one for a chain or joint
//! rule's correction or bonus).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::choose_lengths() {
  for (request* r : running_) {
    const std::size_t remaining = r->options.max_new_tokens - r->output_size();
    r->gamma = r->stage->draft_length(r->options.length ? r->options.length(r->stats) : r->options.gamma, remaining);
  }
  if (!batch_length_) return;
  length_requests_.clear();
  lengths_.clear();
  for (request* r : running_) {
    length_requests_.push_back({&r->stats, r->gamma, r->handle});
    lengths_.push_back(r->gamma);
  }
  batch_length_(std::span<const length_request>(length_requests_), std::span<std::size_t>(lengths_));
  for (std::size_t k = 0; k < running_.size(); ++k) {
    request& r = *running_[k];
    r.gamma = r.stage->draft_length(std::min(r.gamma, lengths_[k]), r.options.max_new_tokens - r.output_size());
  }
}

//! The drafter stages, one call per request on its whole context. A stage's `numerical_error` ends its
//! request (after a round with no drafts, `invalid_row`), its `specdec::error` ends it now
//! (`stage_error`), as does an output its verification stage cannot verify (`check_draft`: a bug in the
//! drafter stage, reported on that request alone).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::draft_with_stages() {
  const auto t0 = clock::now();
  stage_calls_.clear();
  for (request* r : running_) {  // the stage calls: each touches its own request only (a runner may run them at once)
    if (!r->staged) continue;
    r->block.clear();
    if (r->gamma == 0) continue;
    stage_calls_.emplace_back([r, stream = stream_of(*r)] {
      stage_draft& b = r->block;
      try {
        r->options.drafter(std::span<const token_id>(r->context), r->gamma, stream, b);
      } catch (const numerical_error&) {
        b.clear();
        r->draft_failed = true;
      } catch (const error&) {  // e.g. its text no tokenizer of the stage can encode: this request only
        b.clear();
        fault(*r);
      }
    });
  }
  if (stage_runner_ && stage_calls_.size() > 1)
    stage_runner_(std::span<const std::function<void()>>(stage_calls_));
  else
    for (const auto& call : stage_calls_) call();
  for (request* r : running_) {
    if (!r->staged) continue;
    stage_draft& b = r->block;
    bool stoppable = false;
    if (!r->faulted) {
      try {
        stoppable = r->stage->check_draft(*r, buffers_);
      } catch (const error&) {
        b.clear();
        fault(*r);
      }
    }
    const std::size_t n = b.tokens.size();
    r->drafted = n;
    if (stoppable && r->options.stop && !b.q_rows.empty()) {
      r->gamma = n;
      for (std::size_t j = 0; j < n && r->drafted == n && r->gamma == n; ++j) apply_stop(*r, j);
      b.tokens.resize(r->drafted);
      b.q_rows.resize(r->drafted * vocab_);
      b.log_q.resize(std::min(b.log_q.size(), r->drafted));
    }
  }
  timing_.draft_stages = seconds(t0, clock::now());
}

//! Draft slots, grouped as the requests are: chain drafting reserves gamma, a stage what it drafted
//! (its q rows go to the slots when it wrote one per draft; a tree's, one per node, stay in its block).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::assign_slots() {
  std::size_t total = 0;
  bool q_rows = false;  // whether any request has q rows (model-free stages write none)
  for (request* r : running_) {
    r->slot = r->drafts_at = total;
    total += r->staged ? r->drafted : r->gamma;
    q_rows = q_rows || !r->staged || !r->block.q_rows.empty();
  }
  drafts_.resize(total);
  // Never shrunk: growing again would zero the rows anew (megabytes per round at V = 262144).
  if (q_rows && q_probs_.size() < total * vocab_) q_probs_.resize(total * vocab_);
  for (request* r : running_) {
    if (!r->staged) continue;
    std::copy(r->block.tokens.begin(), r->block.tokens.end(), drafts_.begin() + static_cast<std::ptrdiff_t>(r->slot));
    if (r->drafted > 0 && r->block.q_rows.size() == r->drafted * vocab_)  // none: the slots may be empty (no offset into them)
      std::copy(r->block.q_rows.begin(), r->block.q_rows.end(), q_probs_.begin() + static_cast<std::ptrdiff_t>(r->slot * vocab_));
  }
}

//! Drafted position j of every chain-drafting request with gamma > j: one batched draft forward
//! (pending tokens, or the previous draft), then each request's row warped into its q slot and sampled
//! at stream position j.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::draft_round(std::size_t j) {
  appends_.clear();
  for (request* r : running_)
    if (!r->staged && r->gamma > j) {
      const std::span<const token_id> tokens =
          j == 0 ? std::span<const token_id>(r->pending_draft) : std::span<const token_id>(drafts_).subspan(r->slot + j - 1, 1);
      appends_.push_back({r->handle, tokens, 1});
      r->pending_in_draft = true;
      r->drafts_in_draft = j;
      ++r->draft_forwards;
    }
  if (appends_.empty()) return;
  logits_.resize(appends_.size() * vocab_);
  auto t0 = clock::now();
  draft_->forward(std::span<const sequence_append>(appends_), std::span<float>(logits_));
  auto t1 = clock::now();
  timing_.draft_forward += seconds(t0, t1);
  std::size_t row = 0;
  for (request* r : running_) {
    if (r->staged || r->gamma <= j) continue;
    const std::span<const float> logits(logits_.data() + row++ * vocab_, vocab_);
    const std::span<float> q(q_probs_.data() + (r->slot + j) * vocab_, vocab_);
    if (warp_logits(policy_, logits, q, r->options.draft_params) != row_status::ok) {
      // No usable draft row: the request drafts no further; the round verifies the drafts it has,
      // then the request ends with `error` and `invalid_row` (the draft model is broken for it).
      r->gamma = j;
      r->draft_failed = true;
      continue;
    }
    const auto x = sample_categorical(policy_, std::span<const float>(q),
                                      stream_of(*r).open(static_cast<std::uint32_t>(j), random::purpose::draft).uniform());
    drafts_[r->slot + j] = x.token;
    r->drafted = j + 1;
    if (r->options.stop) apply_stop(*r, j);
  }
  timing_.draft_sampling += seconds(t1, clock::now());
}

//! The request's draft stop stage after draft j (its drafts and q rows so far: the slot's for chain
//! drafting, the stage's block otherwise): stop after x_j, or drop it.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::apply_stop(request& r, std::size_t j) {
  const std::span<const token_id> drafts = r.staged ? std::span<const token_id>(r.block.tokens).first(j + 1)
                                                    : std::span<const token_id>(drafts_).subspan(r.slot, j + 1);
  const std::span<const float> q = r.staged ? std::span<const float>(r.block.q_rows).first((j + 1) * vocab_)
                                            : std::span<const float>(q_probs_).subspan(r.slot * vocab_, (j + 1) * vocab_);
  switch (r.options.stop(draft_view{j, drafts, q, vocab_, &r.stats})) {
    case draft_decision::next: break;
    case draft_decision::stop: r.gamma = r.drafted = j + 1; break;
    case draft_decision::drop: r.gamma = r.drafted = j; break;
  }
}

//! How many drafts each request sends to the target: all, or, for requests whose stage allows it,
//! what the verified-length stage chooses. A stage that throws is called again request by request;
//! a request it still throws for ends (`stage_error`).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::choose_verified() {
  buffers_.drafts = std::span<token_id>(drafts_);
  buffers_.q_rows = std::span<float>(q_probs_);
  for (request* r : running_) {
    r->verified = r->drafted;
    r->stream = stream_of(*r);
  }
  if (!verify_length_) return;
  drafted_requests_.clear();
  lengths_.clear();
  for (request* r : running_) {
    if (!r->traits.verified_length) continue;
    drafted_requests_.push_back({r->handle, &r->stats, std::span<const token_id>(r->context),
                                 std::span<const token_id>(drafts_).subspan(r->slot, r->drafted), buffers_.q_rows_of(*r),
                                 r->stream});
    lengths_.push_back(r->drafted);
  }
  const auto call = [&](std::span<const drafted_request> requests, std::span<std::size_t> lengths) {
    try {
      verify_length_(requests, lengths);
      return true;
    } catch (const error&) {
    } catch (const numerical_error&) {
    }
    return false;
  };
  const bool together = call(std::span<const drafted_request>(drafted_requests_), std::span<std::size_t>(lengths_));
  std::size_t k = 0;
  for (request* r : running_) {
    if (!r->traits.verified_length) continue;
    if (!together) {
      lengths_[k] = r->drafted;
      if (!call(std::span<const drafted_request>(&drafted_requests_[k], 1), std::span<std::size_t>(&lengths_[k], 1))) fault(*r);
    }
    r->verified = std::min(r->drafted, lengths_[k++]);
  }
}

//! One batched target forward of what each request's stage asks (`scoring`): its pending tokens and
//! drafts appended (tree-shaped for a tree), and the last rows.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::score() {
  appends_.clear();
  appended_.clear();
  append_parents_.clear();
  appended_offset_.resize(running_.size());
  std::size_t rows = 0;
  for (std::size_t k = 0; k < running_.size(); ++k) {
    request& r = *running_[k];
    const target_scoring s = r.faulted ? target_scoring{} : r.stage->scoring(r);
    SPECDEC_EXPECTS(!s.tree || TreeSequenceModel<T>,
                    "specdec::batch_decoder: a tree-shaped scoring needs a TreeSequenceModel target");
    r.target_drafts = s.drafts;
    r.target_rows = s.rows;
    r.tree_append = s.tree;
    r.target_row = rows;
    rows += r.target_rows;
    appended_offset_[k] = appended_.size();
    if (r.target_rows == 0) continue;
    appended_.insert(appended_.end(), r.pending_target.begin(), r.pending_target.end());
    appended_.insert(appended_.end(), drafts_.begin() + static_cast<std::ptrdiff_t>(r.slot),
                     drafts_.begin() + static_cast<std::ptrdiff_t>(r.slot + r.target_drafts));
    if (r.tree_append) {
      // The pending tokens are a chain; node k's parent p is appended token (pending - 1) + p.
      append_parents_.resize(appended_.size());
      const std::size_t at = appended_offset_[k], m = r.pending_target.size();
      for (std::size_t i = 0; i < m; ++i) append_parents_[at + i] = static_cast<std::int32_t>(i) - 1;
      for (std::size_t i = 0; i < r.target_drafts; ++i)
        append_parents_[at + m + i] = static_cast<std::int32_t>(m - 1) + r.block.parents[i];
    }
  }
  for (std::size_t k = 0; k < running_.size(); ++k) {
    const request& r = *running_[k];
    if (r.target_rows == 0) continue;
    const std::size_t n = r.pending_target.size() + r.target_drafts;
    const auto parents = r.tree_append ? std::span<const std::int32_t>(append_parents_).subspan(appended_offset_[k], n)
                                       : std::span<const std::int32_t>{};
    appends_.push_back({r.handle, std::span<const token_id>(appended_).subspan(appended_offset_[k], n), r.target_rows, parents});
  }
  target_logits_.resize(rows * vocab_);
  if (appends_.empty()) return;
  const auto t0 = clock::now();
  target_->forward(std::span<const sequence_append>(appends_), std::span<float>(target_logits_));
  timing_.target_forward += seconds(t0, clock::now());
}

//! Verification: one `verify` call per group of requests (same stage order, drafting and class:
//! contiguous in running_); a faulted request is left out.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::verify() {
  buffers_.target_logits = std::span<const float>(target_logits_);
  auto first = running_.begin();
  while (first != running_.end()) {
    const request& f = **first;
    const auto last = std::find_if(first, running_.end(), [&](const request* r) {
      return r->traits.order != f.traits.order || r->staged != f.staged || r->rule_class != f.rule_class;
    });
    verify_group(first, last);
    first = last;
  }
}

//! Requests [first, last) of one group, in one call on their stage; when it throws, request by
//! request, and a request it still throws for ends (`stage_error`).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::verify_group(typename std::vector<request*>::iterator first,
                                          typename std::vector<request*>::iterator last) {
  group_.clear();
  for (auto it = first; it != last; ++it)
    if (!(*it)->faulted) group_.push_back(*it);
  if (group_.empty()) return;
  const host_policy policy(policy_);
  const verification_stage& stage = *(*first)->stage;
  const auto call = [&](std::span<stage_request* const> group) {
    try {
      stage.verify(policy, group, buffers_);
      return true;
    } catch (const error&) {
    } catch (const numerical_error&) {
    }
    return false;
  };
  if (call(std::span<stage_request* const>(group_))) return;
  for (stage_request* r : group_)
    if (!call(std::span<stage_request* const>(&r, 1))) fault(static_cast<request&>(*r));
}

//! Request r's outcome: emitted tokens, model rollbacks, counters, finishing.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D>
void batch_decoder<P, T, D>::commit(request& r) {
  const verify_status status = r.round_status | (r.draft_failed ? verify_status::invalid_row : verify_status::ok);
  const std::span<const token_id> emitted(r.emitted);
  r.first_emitted = r.output_size();
  r.status |= status;
  const bool called = r.target_rows > 0;
  // The target keeps the appended drafts that were accepted; the rest of the emitted tokens are pending.
  if (called && r.tree_append) {
    if constexpr (TreeSequenceModel<T>)
      target_->commit_tree(r.handle, r.target_drafts, std::span<const std::int32_t>(r.tree_kept));
    r.pending_target.assign(emitted.begin() + static_cast<std::ptrdiff_t>(r.target_kept), emitted.end());
  } else if (called) {
    target_->rollback(r.handle, r.target_drafts - r.target_kept);
    r.pending_target.assign(emitted.begin() + static_cast<std::ptrdiff_t>(r.target_kept), emitted.end());
  } else {
    r.pending_target.insert(r.pending_target.end(), emitted.begin(), emitted.end());
  }
  // The draft model (chain drafting) holds pending_draft and the first drafts_in_draft drafts when this
  // round drafted; it keeps the accepted ones, and the emitted tokens it never saw become pending.
  if (r.pending_in_draft) {
    const std::size_t kept = std::min(r.target_kept, r.drafts_in_draft);
    draft_->rollback(r.handle, r.drafts_in_draft - kept);
    r.pending_draft.assign(emitted.begin() + static_cast<std::ptrdiff_t>(kept), emitted.end());
  } else if (!r.staged) {
    r.pending_draft.insert(r.pending_draft.end(), emitted.begin(), emitted.end());
  }
  r.context.insert(r.context.end(), emitted.begin(), emitted.end());

  // Draft work done, wasted drafts included (a dropped or unusable draft row was computed).
  r.stats.draft_calls += r.staged ? r.block.model_calls : r.draft_forwards;
  r.draft_steps = r.staged ? r.block.charged_steps : r.draft_forwards;
  if (called) {
    ++r.stats.target_calls;
    r.stats.target_positions += r.target_drafts + 1;
  }
  r.stats.record_round(r.judged, r.accepted);

  // Finishing, in decode's order: the length cut, then a stop token (the output ends with it), then
  // an error.
  const std::size_t limit = r.prompt_size + r.options.max_new_tokens;
  if (r.context.size() > limit) r.context.resize(limit);
  finish_reason why = finish_reason::none;
  for (std::size_t i = r.prompt_size + r.first_emitted; i < r.context.size(); ++i)
    if (std::find(r.options.stop_tokens.begin(), r.options.stop_tokens.end(), r.context[i]) != r.options.stop_tokens.end()) {
      r.context.resize(i + 1);
      why = finish_reason::stop_token;
      break;
    }
  if (why == finish_reason::none && !is_valid(status)) why = finish_reason::error;
  if (why == finish_reason::none && r.output_size() >= r.options.max_new_tokens) why = finish_reason::length;
  r.stats.emitted = r.output_size();
  if (why != finish_reason::none) release(r, why);
}

}  // namespace specdec
