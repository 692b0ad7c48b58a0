//! \file decode/batch_decoder.hpp
//! \brief The step decoder, the library's one generation loop: speculative decoding of many requests
//! at once on a target and a draft `SequenceModel` (model/sequence.hpp), one round per `step()`, the
//! way an engine's scheduler runs it. Every method is a choice of stages per request (DESIGN.md §5):
//!
//! | stage | choices |
//! |---|---|
//! | draft length (before drafting) | `gamma`; a `LengthPolicy` or `LengthController` (`length_stage`, length/); a batch stage (SV's scheduler, vLLM's dynamic goodput: length/sv_batch.hpp, length/dynamic_goodput.hpp) |
//! | drafting | batched chain drafting on the draft model (default); a `draft_stage` (draft/stage.hpp): any `Drafter`, beams (MTAD), verifier-gated runs (SPRINTER) |
//! | draft stop (after each draft) | none; a `DraftStopRule` (`stop_stage`: confidence, p_min, entropy, cumulative acceptance; length/concepts.hpp) |
//! | verified length (after drafting) | all drafts (default); a `verify_length_stage` (SV's goodput-optimal lengths from a companion, decode/sv.hpp; llama.cpp's n_min) |
//! | acceptance | the decoder's chain `Rule` or a chain rule per request (block verification and typical acceptance included); `tree_acceptance` (a tree rule on a tree drafter stage's drafts, acceptance/tree.hpp); `mtad_rule` (joint likelihood, acceptance/mtad.hpp); `bild_rule` (BiLD's rollback, acceptance/bild.hpp); `last_token` (SPRINTER, acceptance/last_token.hpp) |
//!
//! A step, for every running request: choose its draft length (at most the tokens it may still emit,
//! minus one for the correction or bonus token of chain and joint rules); draft (chain drafting: one
//! batched draft forward per drafted position, each row warped with the request's draft parameters
//! and sampled through the policy (sampling/with_policy.hpp); a drafter stage: one call per request on its whole context); choose how many drafts
//! the target verifies; one batched target forward of every request's pending tokens and verified
//! drafts; verification, grouped by kind of request: one batched `verify_from_logits` through the execution
//! policy per group of chain requests (chain-drafted, then stage-drafted), on the target's logits (it
//! warps only the target rows it reads) and the q rows the drafts were sampled from, handed over as
//! probabilities (acceptance/draft_side.hpp), `verify_tree_from_logits` per tree request (the target scores every node of a request's
//! tree in one tree-shaped append), `mtad_verify` and `check_last_token` per request; then commit the
//! emitted tokens and roll both models back past the rejected drafts (a tree: the target keeps the
//! accepted path, `TreeSequenceModel::commit_tree`).
//! Randomness: request r's round k uses `request_stream{seed, request_id, k}` (draft position j:
//! purpose draft; accept tests and residuals as in `verify`), so a request's tokens depend only on its
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
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "specdec/acceptance/bild.hpp"
#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/last_token.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/mtad.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/decode/cost_model.hpp"
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

//! A request's acceptance stage: a chain rule (`chain_acceptance`, the decoder's `Rule`, or a rule of
//! the request's own), MTAD's joint rule, BiLD's rollback rule, or SPRINTER's last-token check (which needs a drafter stage
//! that marks the verifier's tokens). Requests with equal chain rules are verified in one call.
struct chain_acceptance {};

//! Tree verification (acceptance/tree.hpp) of the tree a request's drafter stage writes
//! (`stage_draft::parents`), with one of the tree rules; the candidates must have been drawn as the
//! rule assumes (acceptance/multi_candidate.hpp).
struct tree_acceptance {
  std::variant<target_only_rule, strict_rule, recursive_rejection_rule, k_seq_rule, greedy_rule, sample_and_match_rule,
               typical_rule>
      //! The tree rule applied at every node.
      rule{};
};

//! How the target judges a request's drafts (`request_options::acceptance`): `chain_acceptance` (the decoder's rule), a chain
//! rule of the request's own, tree verification, MTAD's joint rule, BiLD's rollback rule or SPRINTER's last-token check.
using request_acceptance = std::variant<chain_acceptance, strict_rule, lenient_rule, greedy_rule, sample_and_match_rule,
                                        block_rule, typical_rule, tree_acceptance, mtad_rule, bild_rule, last_token_rule>;

namespace detail {
inline bool same_typical(const typical_rule& a, const typical_rule& b) noexcept {
  return a.epsilon == b.epsilon && a.delta == b.delta && a.log_offset == b.log_offset && a.correction == b.correction;
}
}  // namespace detail

//! Whether two requests' acceptance stages are the same rule with the same parameters.
inline bool same_rule(const request_acceptance& a, const request_acceptance& b) noexcept {
  if (a.index() != b.index()) return false;
  if (const auto* t = std::get_if<typical_rule>(&a)) return detail::same_typical(*t, *std::get_if<typical_rule>(&b));
  if (const auto* t = std::get_if<tree_acceptance>(&a)) {
    const auto& u = *std::get_if<tree_acceptance>(&b);
    if (t->rule.index() != u.rule.index()) return false;
    const auto* x = std::get_if<typical_rule>(&t->rule);
    return x == nullptr || detail::same_typical(*x, *std::get_if<typical_rule>(&u.rule));
  }
  if (const auto* l = std::get_if<lenient_rule>(&a)) return l->lenience() == std::get_if<lenient_rule>(&b)->lenience();
  if (const auto* m = std::get_if<mtad_rule>(&a)) return m->tau() == std::get_if<mtad_rule>(&b)->tau();
  if (const auto* d = std::get_if<bild_rule>(&a))
    return d->rollback_threshold() == std::get_if<bild_rule>(&b)->rollback_threshold();
  return true;
}

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
  request_acceptance acceptance{};    //!< how the target judges the drafts
  //! How the target's own samples are addressed (chain verification; trees are keyed by the round).
  target_sample_keys sample_keys = target_sample_keys::output_position;
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

//! Handle of a request (also the sequence id of both models).
using request_handle = sequence_id;

//! What a verified-length stage sees of a drafted request (chain and per-request host rules only).
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

//! Why a request finished.
enum class finish_reason : std::uint8_t {
  none,        //!< still running
  length,      //!< max_new_tokens emitted
  stop_token,  //!< a stop token emitted (it is the last token)
  cancelled,   //!< `cancel`
  error,       //!< a model returned an unusable row for this request, or its drafter stage threw
               //!< `numerical_error` (`status` has `invalid_row`): the target's row ends the round at
               //!< that row; the draft model's ends drafting, the round's drafts so far are verified and
               //!< their tokens emitted, then the request ends
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
};

//! The step decoder over a target and a draft `SequenceModel` sharing one vocabulary. `Rule` is the
//! chain rule of requests with `chain_acceptance`, the default (`no_sequence_model` is the draft model of a decoder
//! whose requests all draft through stages).
template <exec::ExecutionPolicy Policy, SequenceModel Target, SequenceModel Draft, AcceptanceRule Rule>
class batch_decoder {
  static_assert(exec::backend_of<Policy> != exec::backend::cuda,
                "specdec::batch_decoder: the rows live in host memory; use exec::seq or exec::simd (a cuda "
                "decoder would need device buffers, not written yet)");

 public:
  //! \throws specdec::error when the models' vocabularies differ or the cost model is invalid.
  batch_decoder(Policy policy, Target& target, Draft& draft, Rule rule, cost_model cost = {})
      : policy_(policy), target_(&target), draft_(&draft), rule_(rule), cost_(cost), vocab_(target.vocab_size()) {
    SPECDEC_EXPECTS(draft.vocab_size() == vocab_, "specdec::batch_decoder: the target and draft vocabularies differ");
    validate(cost_);
  }

  //! Adds a request; it runs from the next `step()`.
  //! \throws specdec::error on an empty prompt, a token or stop token outside the vocabulary, invalid
  //!         warp parameters, or the last-token rule without a drafter stage.
  request_handle add(request_options options) {  // NOLINT(performance-unnecessary-value-param): moved into the request
    SPECDEC_EXPECTS(!options.prompt.empty(), "specdec::batch_decoder::add: the prompt is empty");
    for ([[maybe_unused]] const token_id t : options.prompt)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "specdec::batch_decoder::add: a prompt token is outside the vocabulary");
    for ([[maybe_unused]] const token_id t : options.stop_tokens)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "specdec::batch_decoder::add: a stop token is outside the vocabulary");
    validate(options.target_params);
    validate(options.draft_params);
    request r;
    r.group = std::holds_alternative<last_token_rule>(options.acceptance)   ? verify_group::last_token
              : std::holds_alternative<tree_acceptance>(options.acceptance) ? verify_group::tree
              : std::holds_alternative<mtad_rule>(options.acceptance) || std::holds_alternative<bild_rule>(options.acceptance)
                  ? verify_group::host
              : options.drafter ? verify_group::stage_chain
                                : verify_group::chain;
    SPECDEC_EXPECTS(r.group != verify_group::last_token || options.drafter,
                    "specdec::batch_decoder::add: the last-token rule needs a drafter stage that marks the verifier's tokens");
    SPECDEC_EXPECTS(r.group != verify_group::tree || options.drafter,
                    "specdec::batch_decoder::add: tree verification needs a tree drafter stage (draft/tree.hpp)");
    SPECDEC_EXPECTS(
        r.group != verify_group::tree || TreeSequenceModel<Target>,
        "specdec::batch_decoder::add: tree verification needs a target that takes tree-shaped appends (TreeSequenceModel)");
    r.handle = next_handle_++;
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

 private:
  // Verification groups, in the order of the target forward and of the draft slots.
  enum class verify_group : std::uint8_t { chain, stage_chain, host, last_token, tree };

  struct request {
    request_handle handle = 0;
    request_options options;
    verify_group group = verify_group::chain;
    std::size_t rule_class = 0;  // this step: requests of one class share their rule
    std::size_t prompt_size = 0;
    std::vector<token_id> context;         // prompt, then every emitted token
    std::vector<token_id> pending_target;  // committed, not yet in the target's state
    std::vector<token_id> pending_draft;   // committed, not yet in the draft's state
    decode_stats stats;
    finish_reason finished = finish_reason::none;
    verify_status status = verify_status::ok;
    // This round.
    std::size_t gamma = 0;                                           // the draft length allowed
    std::size_t drafted = 0;                                         // tokens drafted
    std::size_t draft_forwards = 0;                                  // rows the draft model computed for it (chain drafting)
    std::size_t verified = 0;                                        // drafts sent to the target (chain, joint)
    bool pending_in_draft = false;                                   // this round appended pending_draft to the draft model
    bool draft_failed = false;                                       // the draft model or the drafter stage failed
    std::size_t drafts_in_draft = 0;                                 // drafts this round appended to the draft model
    std::size_t first_emitted = 0;                                   // output index of this step's first token
    std::size_t slot = 0;                                            // offset of its drafts in drafts_ (rows of V in q_probs_)
    std::size_t drafts_at = 0;                                       // offset of its verified drafts in drafts_ (slot, or packed)
    std::size_t target_row = 0, target_rows = 0, target_drafts = 0;  // its rows of target_logits_; drafts appended
    stage_draft block;                                               // what its drafter stage wrote
    std::vector<std::int32_t> tree_kept;  // a tree: offsets of the accepted path's nodes among the appended nodes
    // This round's outcome.
    std::vector<token_id> emitted;  // the tokens verification emitted
    std::size_t target_kept = 0;    // appended drafts the target keeps
    std::size_t accepted = 0;       // drafts kept (decode_stats::accepted)
    std::size_t judged = 0;         // drafts judged (decode_stats::drafted)
    verify_status round_status = verify_status::ok;

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
    const bool chain = r.group == verify_group::chain || r.group == verify_group::stage_chain;
    if (chain && r.options.sample_keys == target_sample_keys::output_position)
      s.output_position = static_cast<std::uint32_t>(r.output_size());  // this round's first output position
    return s;
  }
  // Whether r's chain rule reads the drafts' q rows (a model-free drafter stage writes none for a rule
  // that does not: greedy, sample-and-match, typical).
  bool reads_q_rows(const request& r) const {
    return std::visit(
        [](const auto& a) {
          using A = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<A, chain_acceptance>)
            return reads_draft_distribution<Rule>;
          else if constexpr (AcceptanceRule<A>)
            return reads_draft_distribution<A>;
          else
            return true;
        },
        r.options.acceptance);
  }
  std::span<const float> q_probs(const request& r) const {
    if (r.options.drafter && r.block.q_rows.empty()) return {};  // a model-free stage's drafts
    return std::span<const float>(q_probs_).subspan(r.slot * vocab_, r.drafted * vocab_);
  }
  std::span<const float> target_logits(const request& r) const {
    return std::span<const float>(target_logits_).subspan(r.target_row * vocab_, r.target_rows * vocab_);
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
  void verify_chains(verify_group g);
  template <AcceptanceRule Chain>
  void verify_chain_range(typename std::vector<request*>::iterator first, typename std::vector<request*>::iterator last,
                          const Chain& rule);
  void verify_on_host(request& r);
  void verify_last_token(request& r);
  template <TreeRule Tree>
  void verify_tree_request(request& r, const Tree& rule);
  void verify_trees();
  void check_tree_draft(const request& r) const;
  void take_chain_row(request& r, std::size_t k, std::size_t stride);
  void commit(request& r);
  // Warps `rows` target rows of r into p_probs_ (a row without usable mass is filled with NaN, which
  // verification reports as `invalid_row`).
  std::span<const float> warp_target_rows(const request& r, std::size_t first, std::size_t rows, std::size_t at);

  Policy policy_;
  Target* target_;
  Draft* draft_;
  Rule rule_;
  cost_model cost_;
  std::size_t vocab_;
  request_handle next_handle_ = 1;
  std::vector<request> requests_;  // running
  std::vector<request> reported_;  // finished, reported by the last step
  batch_length_stage batch_length_;
  verify_length_stage verify_length_;

  // Per-step buffers (reused).
  std::vector<request*> running_;  // in verify_group order, then rule class (stable)
  std::vector<request_acceptance> rule_classes_;
  std::vector<sequence_append> appends_;
  std::vector<std::int32_t> num_drafts_;
  std::vector<token_id> drafts_, appended_;
  std::vector<float> logits_, q_probs_, target_logits_, p_probs_;
  std::vector<warp_params> target_params_;
  std::vector<double> log_q_;
  step_timing timing_;
  std::vector<length_request> length_requests_;
  std::vector<drafted_request> drafted_requests_;
  std::vector<std::size_t> lengths_;
  std::vector<random::request_stream> streams_;
  std::vector<token_id> out_tokens_;
  std::vector<std::int32_t> out_accepted_;
  std::vector<verify_status> out_status_;
  std::vector<std::size_t> appended_offset_;
  chain_batch<float> batch_;
  // Tree requests: their appends' parents, and the batch of one request's tree verification.
  std::vector<std::int32_t> append_parents_, tree_parents_, out_path_;
  std::vector<token_id> tree_tokens_;
  std::vector<float> tree_q_;
  tree_batch<float> tree_batch_;
  mutable std::vector<std::int32_t> depth_;  // check_tree_draft's scratch
  std::vector<step_event> events_;
};

// ---- a step ---------------------------------------------------------------------------------------

template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
std::span<const step_event> batch_decoder<P, T, D, R>::step() {
  const auto start = clock::now();
  timing_ = {};
  reported_.clear();
  events_.clear();
  running_.clear();
  // Requests cancelled or with nothing to emit finish without a round.
  for (auto& r : requests_) {
    r.first_emitted = r.output_size();
    r.pending_in_draft = r.draft_failed = false;
    r.drafts_in_draft = r.drafted = r.draft_forwards = r.verified = r.target_rows = r.target_drafts = r.drafts_at = r.judged =
        r.target_row = 0;
    r.emitted.clear();
    if (r.finished == finish_reason::none && r.options.max_new_tokens == 0) release(r, finish_reason::length);
    if (r.finished == finish_reason::none) running_.push_back(&r);
  }
  // Grouped by kind of verification, then by rule: each chain group of one rule is one verify call.
  rule_classes_.clear();
  for (request* r : running_) {
    const auto same = [&](const request_acceptance& c) { return same_rule(c, r->options.acceptance); };
    r->rule_class =
        static_cast<std::size_t>(std::find_if(rule_classes_.begin(), rule_classes_.end(), same) - rule_classes_.begin());
    if (r->rule_class == rule_classes_.size()) rule_classes_.push_back(r->options.acceptance);
  }
  // std::sort with the request's position as the last key: the order of a stable sort, without the
  // buffer std::stable_sort allocates.
  std::sort(running_.begin(), running_.end(), [](const request* a, const request* b) {
    if (a->group != b->group) return a->group < b->group;
    return a->rule_class != b->rule_class ? a->rule_class < b->rule_class : a < b;
  });

  if (!running_.empty()) {
    choose_lengths();
    draft_with_stages();
    assign_slots();
    std::size_t widest = 0;
    for (const request* r : running_)
      if (!r->options.drafter) widest = std::max(widest, r->gamma);
    for (std::size_t j = 0; j < widest; ++j) draft_round(j);
    choose_verified();
    score();
    const auto t0 = clock::now();
    verify_chains(verify_group::chain);
    verify_chains(verify_group::stage_chain);
    verify_trees();
    for (request* r : running_)
      if (r->group == verify_group::host)
        verify_on_host(*r);
      else if (r->group == verify_group::last_token)
        verify_last_token(*r);
    timing_.verification = seconds(t0, clock::now());
    for (request* r : running_) commit(*r);
  }

  // Events of every request; the finished ones move to reported_ (a move keeps a vector's buffer, so
  // the events' spans stay valid).
  for (auto& r : requests_) {
    events_.push_back({r.handle, r.output().subspan(r.first_emitted), r.finished, r.status, r.drafted, r.judged,
                       std::span<const token_id>(drafts_).subspan(r.drafts_at, r.target_drafts), target_logits(r)});
    if (r.finished != finish_reason::none) reported_.push_back(std::move(r));
  }
  std::erase_if(requests_, [](const request& r) { return r.finished != finish_reason::none; });
  timing_.total = seconds(start, clock::now());
  return events_;
}

//! Each request's draft length: its stage (or gamma), capped by the tokens it may still emit (minus
//! one for a chain or joint rule's correction or bonus), then the batch stage.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::choose_lengths() {
  for (request* r : running_) {
    const std::size_t remaining = r->options.max_new_tokens - r->output_size();
    const std::size_t cap = r->group == verify_group::last_token ? remaining : remaining - 1;
    r->gamma = std::min(r->options.length ? r->options.length(r->stats) : r->options.gamma, cap);
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
    r.gamma = std::min(r.gamma, lengths_[k]);
    if (r.group == verify_group::last_token) r.gamma = std::max<std::size_t>(r.gamma, 1);  // a run drafts at least one token
  }
}

//! The drafter stages, one call per request on its whole context. A stage's `numerical_error` ends its
//! request (after a round with no drafts); a block that contradicts its request is a bug: it throws.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::draft_with_stages() {
  const auto t0 = clock::now();
  for (request* r : running_) {
    if (!r->options.drafter) continue;
    stage_draft& b = r->block;
    b.clear();
    if (r->gamma > 0) {
      try {
        r->options.drafter(std::span<const token_id>(r->context), r->gamma, stream_of(*r), b);
      } catch (const numerical_error&) {
        b.clear();
        r->draft_failed = true;
      }
    }
    const std::size_t n = b.tokens.size();
    if (r->group == verify_group::tree) {  // gamma bounds a tree's depth
      check_tree_draft(*r);
      r->drafted = n;
      continue;
    }
    SPECDEC_EXPECTS(n <= r->gamma, "specdec::batch_decoder: a drafter stage drafted more tokens than allowed");
    SPECDEC_EXPECTS(b.q_rows.size() == n * vocab_ ||
                        (b.q_rows.empty() && r->group == verify_group::host && b.log_q.size() == n) ||
                        (b.q_rows.empty() && r->group == verify_group::stage_chain && !reads_q_rows(*r)),
                    "specdec::batch_decoder: a drafter stage must write a q row per token (or, for the joint rule, log q; "
                    "none for a chain rule that does not read q)");
    SPECDEC_EXPECTS(
        r->group != verify_group::last_token || r->draft_failed || (n > 0 && b.kept + (b.check_last ? 1 : 0) == n),
        "specdec::batch_decoder: a last-token drafter stage must draft a run whose tokens but the checked last are kept");
    r->drafted = n;
    if (r->options.stop && !b.q_rows.empty() && r->group != verify_group::last_token) {
      r->gamma = n;
      for (std::size_t j = 0; j < n && r->drafted == n && r->gamma == n; ++j) apply_stop(*r, j);
      b.tokens.resize(r->drafted);
      b.q_rows.resize(r->drafted * vocab_);
      b.log_q.resize(std::min(b.log_q.size(), r->drafted));
    }
  }
  timing_.draft_stages = seconds(t0, clock::now());
}

//! Draft slots, grouped as the requests are: chain drafting reserves gamma, a stage what it drafted.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::assign_slots() {
  std::size_t total = 0;
  bool q_rows = false;  // whether any request has q rows (model-free stages write none)
  for (request* r : running_) {
    r->slot = r->drafts_at = total;
    total += r->options.drafter ? r->drafted : r->gamma;
    q_rows = q_rows || !r->options.drafter || !r->block.q_rows.empty();
  }
  drafts_.resize(total);
  // Never shrunk: growing again would zero the rows anew (megabytes per round at V = 262144).
  if (q_rows && q_probs_.size() < total * vocab_) q_probs_.resize(total * vocab_);
  for (request* r : running_) {
    if (!r->options.drafter) continue;
    std::copy(r->block.tokens.begin(), r->block.tokens.end(), drafts_.begin() + static_cast<std::ptrdiff_t>(r->slot));
    if (r->group != verify_group::tree)  // a tree's q rows (one per node) stay in its block
      std::copy(r->block.q_rows.begin(), r->block.q_rows.end(), q_probs_.begin() + static_cast<std::ptrdiff_t>(r->slot * vocab_));
  }
}

//! Drafted position j of every chain-drafting request with gamma > j: one batched draft forward
//! (pending tokens, or the previous draft), then each request's row warped into its q slot and sampled
//! at stream position j.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::draft_round(std::size_t j) {
  appends_.clear();
  for (request* r : running_)
    if (!r->options.drafter && r->gamma > j) {
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
    if (r->options.drafter || r->gamma <= j) continue;
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
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::apply_stop(request& r, std::size_t j) {
  const bool staged = static_cast<bool>(r.options.drafter);
  const std::span<const token_id> drafts =
      staged ? std::span<const token_id>(r.block.tokens).first(j + 1) : std::span<const token_id>(drafts_).subspan(r.slot, j + 1);
  const std::span<const float> q = staged ? std::span<const float>(r.block.q_rows).first((j + 1) * vocab_)
                                          : std::span<const float>(q_probs_).subspan(r.slot * vocab_, (j + 1) * vocab_);
  switch (r.options.stop(draft_view{j, drafts, q, vocab_, &r.stats})) {
    case draft_decision::next: break;
    case draft_decision::stop: r.gamma = r.drafted = j + 1; break;
    case draft_decision::drop: r.gamma = r.drafted = j; break;
  }
}

//! How many drafts each chain or joint request sends to the target: all, or what the verified-length
//! stage chooses.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::choose_verified() {
  for (request* r : running_) r->verified = r->group == verify_group::last_token ? 0 : r->drafted;
  if (!verify_length_) return;
  drafted_requests_.clear();
  lengths_.clear();
  const auto chosen = [](const request* r) { return r->group != verify_group::last_token && r->group != verify_group::tree; };
  for (request* r : running_) {
    if (!chosen(r)) continue;
    const bool has_q = !r->options.drafter || !r->block.q_rows.empty();
    drafted_requests_.push_back({r->handle, &r->stats, std::span<const token_id>(r->context),
                                 std::span<const token_id>(drafts_).subspan(r->slot, r->drafted),
                                 has_q ? q_probs(*r) : std::span<const float>{}, stream_of(*r)});
    lengths_.push_back(r->drafted);
  }
  verify_length_(std::span<const drafted_request>(drafted_requests_), std::span<std::size_t>(lengths_));
  std::size_t k = 0;
  for (request* r : running_)
    if (chosen(r)) r->verified = std::min(r->drafted, lengths_[k++]);
}

//! One batched target forward: chain and joint requests append their pending tokens and verified drafts
//! and ask for verified + 1 rows; a last-token request whose run needs a check appends its pending
//! tokens and the drafts its verifier kept and asks for the last row.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::score() {
  appends_.clear();
  appended_.clear();
  append_parents_.clear();
  appended_offset_.resize(running_.size());
  std::size_t rows = 0;
  for (std::size_t k = 0; k < running_.size(); ++k) {
    request& r = *running_[k];
    if (r.group == verify_group::last_token) {
      const bool check = !r.draft_failed && r.block.check_last;
      r.target_drafts = check ? r.drafted - 1 : 0;
      r.target_rows = check ? 1 : 0;
    } else {
      r.target_drafts = r.verified;
      r.target_rows = r.verified + 1;
    }
    r.target_row = rows;
    rows += r.target_rows;
    appended_offset_[k] = appended_.size();
    if (r.target_rows == 0) continue;
    appended_.insert(appended_.end(), r.pending_target.begin(), r.pending_target.end());
    appended_.insert(appended_.end(), drafts_.begin() + static_cast<std::ptrdiff_t>(r.slot),
                     drafts_.begin() + static_cast<std::ptrdiff_t>(r.slot + r.target_drafts));
    if (r.group == verify_group::tree) {
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
    const auto parents = r.group == verify_group::tree
                             ? std::span<const std::int32_t>(append_parents_).subspan(appended_offset_[k], n)
                             : std::span<const std::int32_t>{};
    appends_.push_back({r.handle, std::span<const token_id>(appended_).subspan(appended_offset_[k], n), r.target_rows, parents});
  }
  target_logits_.resize(rows * vocab_);
  if (appends_.empty()) return;
  const auto t0 = clock::now();
  target_->forward(std::span<const sequence_append>(appends_), std::span<float>(target_logits_));
  timing_.target_forward += seconds(t0, clock::now());
}

template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
std::span<const float> batch_decoder<P, T, D, R>::warp_target_rows(const request& r, std::size_t first, std::size_t rows,
                                                                   std::size_t at) {
  for (std::size_t i = 0; i < rows; ++i) {
    const auto logits = target_logits(r).subspan((first + i) * vocab_, vocab_);
    const std::span<float> p(p_probs_.data() + (at + i) * vocab_, vocab_);
    if (warp_logits(logits, p, r.options.target_params) != row_status::ok)
      std::fill(p.begin(), p.end(), std::numeric_limits<float>::quiet_NaN());
  }
  return std::span<const float>(p_probs_).subspan(at * vocab_, rows * vocab_);
}

//! The chain verification of a group, one call per rule: `verify_from_logits` on the target's logits
//! and the q rows the drafts were sampled from (acceptance/draft_side.hpp: chain drafting warped them
//! with `warp_logits` on the policy, as the verifier would, and a stage hands them over), so no draft
//! row is warped again and a target row only where it is read. The drafts of each call are packed in
//! place first (a request may verify fewer than its slot holds).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::verify_chains(verify_group g) {
  auto first = std::find_if(running_.begin(), running_.end(), [&](const request* r) { return r->group == g; });
  while (first != running_.end() && (*first)->group == g) {
    const std::size_t c = (*first)->rule_class;
    const auto last = std::find_if(first, running_.end(), [&](const request* r) { return r->group != g || r->rule_class != c; });
    std::visit(
        [&](const auto& rule) {
          using A = std::decay_t<decltype(rule)>;
          if constexpr (std::is_same_v<A, chain_acceptance>)
            verify_chain_range(first, last, rule_);
          else if constexpr (AcceptanceRule<A>)
            verify_chain_range(first, last, rule);
        },
        (*first)->options.acceptance);
    first = last;
  }
}

//! Requests [first, last) of one chain group and one rule, in one call.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
template <AcceptanceRule Chain>
void batch_decoder<P, T, D, R>::verify_chain_range(typename std::vector<request*>::iterator first,
                                                   typename std::vector<request*>::iterator last, const Chain& rule) {
  const std::size_t begin = (*first)->slot, first_row = (*first)->target_row;
  std::size_t at = begin, target_rows = 0;
  num_drafts_.clear();
  streams_.clear();
  target_params_.clear();
  for (auto it = first; it != last; ++it) {
    request& r = **it;
    if (at != r.slot) {  // only after a request drafted or verified fewer than its slot holds
      std::copy_n(drafts_.begin() + static_cast<std::ptrdiff_t>(r.slot), r.verified,
                  drafts_.begin() + static_cast<std::ptrdiff_t>(at));
      if constexpr (reads_draft_distribution<Chain>)
        std::copy_n(q_probs_.begin() + static_cast<std::ptrdiff_t>(r.slot * vocab_), r.verified * vocab_,
                    q_probs_.begin() + static_cast<std::ptrdiff_t>(at * vocab_));
    }
    r.drafts_at = at;
    at += r.verified;
    target_rows += r.target_rows;
    num_drafts_.push_back(static_cast<std::int32_t>(r.verified));
    streams_.push_back(stream_of(r));
    target_params_.push_back(r.options.target_params);
  }
  const std::size_t count = num_drafts_.size();
  batch_.layout.assign_packed(num_drafts_);
  batch_.vocab_size = vocab_;
  batch_.draft_tokens = std::span<const token_id>(drafts_).subspan(begin, at - begin);
  // A rule that does not read q gets none (a model-free stage wrote none).
  batch_.draft_rows = reads_draft_distribution<Chain>
                          ? std::span<const float>(q_probs_).subspan(begin * vocab_, (at - begin) * vocab_)
                          : std::span<const float>{};
  batch_.target_rows = std::span<const float>(target_logits_).subspan(first_row * vocab_, target_rows * vocab_);
  const std::size_t stride = batch_.layout.max_drafts() + 1;
  out_tokens_.resize(count * stride);
  out_accepted_.resize(count);
  out_status_.resize(count);
  const chain_outputs out{out_tokens_, out_accepted_, out_status_};
  verify_from_logits(policy_, rule, batch_, std::span<const warp_params>(target_params_),
                     draft_side<float>{.rows = draft_rows_kind::probabilities}, std::span<const random::request_stream>(streams_),
                     out);
  for (std::size_t k = 0; k < count; ++k) take_chain_row(*first[static_cast<std::ptrdiff_t>(k)], k, stride);
}

template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::take_chain_row(request& r, std::size_t k, std::size_t stride) {
  const auto a = static_cast<std::size_t>(out_accepted_[k]);
  const token_id* row = out_tokens_.data() + k * stride;
  r.round_status = out_status_[k];
  r.emitted.assign(row, row + a + (is_valid(r.round_status) ? 1 : 0));
  r.target_kept = r.accepted = a;
  r.judged = r.verified;
}

//! A rule verified per request on the host: its target rows warped, then MTAD's joint rule (with the
//! joint log q of every prefix: the beam stage's, or summed from the q rows the drafts were sampled
//! from) or BiLD's rollback rule.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::verify_on_host(request& r) {
  const std::size_t n = r.verified;
  p_probs_.resize((n + 1) * vocab_);
  const std::span<const float> p = warp_target_rows(r, 0, n + 1, 0);
  const std::span<const token_id> drafts = std::span<const token_id>(drafts_).subspan(r.slot, n);
  chain_result c;
  if (const auto* bild = std::get_if<bild_rule>(&r.options.acceptance)) {
    c = bild_verify(*bild, drafts, p, vocab_);
  } else {
    if (!r.block.log_q.empty()) {
      log_q_.assign(r.block.log_q.begin(), r.block.log_q.begin() + static_cast<std::ptrdiff_t>(n));
    } else {
      log_q_.resize(n);
      double sum = 0.0;
      for (std::size_t j = 0; j < n; ++j)
        log_q_[j] = sum += std::log(static_cast<double>(q_probs(r)[j * vocab_ + static_cast<std::size_t>(drafts[j])]));
    }
    c = mtad_verify(policy_, std::get<mtad_rule>(r.options.acceptance), drafts, std::span<const double>(log_q_), p, vocab_,
                    stream_of(r));
  }
  r.emitted.assign(c.tokens.begin(), c.tokens.end());
  r.target_kept = r.accepted = static_cast<std::size_t>(c.num_accepted);
  r.judged = n;
  r.round_status = c.status;
}

//! SPRINTER's last-token check on one request (acceptance/last_token.hpp): the verifier's tokens are
//! final; the last one is checked against the target's row when the run needs it.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::verify_last_token(request& r) {
  const std::size_t n = r.drafted;
  const std::span<const token_id> run = std::span<const token_id>(drafts_).subspan(r.slot, n);
  r.judged = n;
  r.target_kept = 0;
  r.round_status = verify_status::ok;
  if (r.target_rows == 0) {  // a failed stage (nothing drafted), or a run that ended at the budget: all kept
    r.emitted.assign(run.begin(), run.end());
    r.accepted = n;
    return;
  }
  p_probs_.resize(vocab_);
  const std::span<const float> p = warp_target_rows(r, 0, 1, 0);
  const last_token_result c = check_last_token(run[n - 1], q_probs(r).subspan((n - 1) * vocab_, vocab_), p,
                                               static_cast<std::uint32_t>(n - 1), stream_of(r));
  r.emitted.assign(run.begin(), run.end() - 1);
  if (is_valid(c.status)) r.emitted.push_back(c.token);
  r.target_kept = n - 1;
  r.accepted = n - 1 + (c.kept ? 1 : 0);
  r.round_status = c.status;
}

//! Tree verification, one `verify_tree_from_logits` per tree request: its tree (the stage's parents
//! and tokens, and its q rows read where the stage wrote them) with its target logits, warped only
//! where the walk reads them. The host walk goes request by request anyway; a call per request spares
//! copying every node's q row into one batch.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::verify_trees() {
  for (request* r : running_)
    if (r->group == verify_group::tree)
      std::visit([&](const auto& rule) { verify_tree_request(*r, rule); }, std::get<tree_acceptance>(r->options.acceptance).rule);
}

template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
template <TreeRule Tree>
void batch_decoder<P, T, D, R>::verify_tree_request(request& r, const Tree& rule) {
  const auto nodes = static_cast<std::int32_t>(r.drafted + 1);
  tree_parents_.assign(1, no_node);
  tree_parents_.insert(tree_parents_.end(), r.block.parents.begin(), r.block.parents.end());
  tree_tokens_.assign(1, no_token);
  tree_tokens_.insert(tree_tokens_.end(), r.block.tokens.begin(), r.block.tokens.end());
  tree_batch_.layout.assign_parents(std::span<const std::int32_t>(&nodes, 1), tree_parents_);
  tree_batch_.vocab_size = vocab_;
  tree_batch_.tokens = std::span<const token_id>(tree_tokens_);
  tree_batch_.draft_rows = std::span<const float>(r.block.q_rows);
  if constexpr (tree_reads_draft<Tree>) {
    SPECDEC_EXPECTS(r.drafted == 0 || !r.block.q_rows.empty(),
                    "specdec::batch_decoder: this tree rule reads q: the tree stage must write a q row per node");
    if (r.block.q_rows.empty()) {  // a lone root: its row is never read
      tree_q_.assign(vocab_, 0.0f);
      tree_batch_.draft_rows = std::span<const float>(tree_q_);
    }
  }
  tree_batch_.target_rows = target_logits(r);
  const random::request_stream stream = stream_of(r);
  const std::size_t width = tree_batch_.layout.max_depth() + 1;
  out_tokens_.resize(width);
  out_path_.resize(width);
  out_accepted_.resize(1);
  out_status_.resize(1);
  verify_tree_from_logits(policy_, rule, tree_batch_, std::span<const warp_params>(&r.options.target_params, 1),
                          std::span<const random::request_stream>(&stream, 1),
                          tree_outputs{out_tokens_, out_path_, out_accepted_, out_status_});
  take_chain_row(r, 0, width);
  r.judged = r.drafted;
  r.tree_kept.clear();  // node ids 1.. are appended offsets 0..
  for (std::size_t j = 1; j <= r.accepted; ++j) r.tree_kept.push_back(out_path_[j] - 1);
}

//! A tree stage's block, checked against its request: parents before children, a q row per node or
//! none, the depth within the round's length.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::check_tree_draft(const request& r) const {
  const stage_draft& b = r.block;
  const std::size_t n = b.tokens.size();
  SPECDEC_EXPECTS(b.parents.size() == n, "specdec::batch_decoder: a tree stage must write a parent per token");
  SPECDEC_EXPECTS(b.q_rows.empty() || b.q_rows.size() == (n + 1) * vocab_,
                  "specdec::batch_decoder: a tree stage writes a q row per node (the root's first) or none");
  depth_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    SPECDEC_EXPECTS(b.parents[i] >= 0 && static_cast<std::size_t>(b.parents[i]) <= i,
                    "specdec::batch_decoder: a tree stage wrote a parent that is not an earlier node");
    depth_[i + 1] = depth_[static_cast<std::size_t>(b.parents[i])] + 1;
    SPECDEC_EXPECTS(static_cast<std::size_t>(depth_[i + 1]) <= r.gamma,
                    "specdec::batch_decoder: a tree stage drafted deeper than the round's length");
  }
}

//! Request r's outcome: emitted tokens, model rollbacks, counters, finishing.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::commit(request& r) {
  const verify_status status = r.round_status | (r.draft_failed ? verify_status::invalid_row : verify_status::ok);
  const std::span<const token_id> emitted(r.emitted);
  r.first_emitted = r.output_size();
  r.status |= status;
  const bool called = r.target_rows > 0;
  // The target keeps the appended drafts that were accepted; the rest of the emitted tokens are pending.
  if (called && r.group == verify_group::tree) {
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
  } else if (!r.options.drafter) {
    r.pending_draft.insert(r.pending_draft.end(), emitted.begin(), emitted.end());
  }
  r.context.insert(r.context.end(), emitted.begin(), emitted.end());

  // Draft work done, wasted drafts included (a dropped or unusable draft row was computed).
  r.stats.draft_calls += r.options.drafter ? r.block.model_calls : r.draft_forwards;
  const std::size_t charged = r.options.drafter ? r.block.charged_steps : r.draft_forwards;
  r.stats.simulated_time += static_cast<double>(charged) * cost_.t_draft;
  if (called) {
    ++r.stats.target_calls;
    r.stats.target_positions += r.target_drafts + 1;
    r.stats.simulated_time += cost_.target_time(r.target_drafts + 1);
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
