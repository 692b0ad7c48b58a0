//! \file decode/batch_decoder.hpp
//! \brief The step decoder: speculative decoding of many requests at once on two `SequenceModel`s
//! (model/sequence.hpp), one round per `step()`, the way an engine's scheduler runs it.
//!
//! A step, for every active request: choose its draft length (its gamma, at most the tokens it may
//! still emit minus one); draft chain-wise, one batched draft forward per drafted position (all
//! requests together; each row warped with the request's draft parameters and sampled); one batched
//! target forward of every request's pending tokens and drafts; one batched `verify_from_logits`
//! through the execution policy, which warps only the rows it reads with each request's parameters
//! (the draft rows as they were warped to sample, so q is the distribution actually sampled); then
//! commit the emitted tokens and roll both models back past the rejected drafts.
//! Randomness: request r's round k uses `request_stream{seed, request_id, k}` with the purposes of
//! `decode` (draft position j: purpose draft; accept tests and residuals as in `verify`), so a
//! request's tokens depend only on its own options, never on the batch it runs in, and equal
//! `decode(policy, target, draft, draft_params, gamma, rule, prompt, options)` token for token.
//! Model state: after a step each model holds a request's prompt and committed tokens except the last
//! one or few, which are "pending" and go in front of the next step's append (the target's state
//! ends before the correction or bonus token, the draft's before the tokens it never appended).
//! Buffers are members, reused step after step.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/stats.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/errors.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/length/fixed.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! A request of the step decoder.
struct request_options {
  std::vector<token_id> prompt;            //!< not empty
  std::uint64_t seed = 0;
  std::uint32_t request_id = 0;            //!< with `seed`, names the request's random streams
  warp_params target_params{};             //!< how the target's rows are warped before verification
  warp_params draft_params{};              //!< how the draft's rows are warped before drafting from them
  std::size_t gamma = 4;                   //!< drafts per round (fewer near max_new_tokens)
  //! The verification-length stage: when set, the round's draft length is `length(stats)` (the
  //! request's counters so far) instead of `gamma`; `length_stage(policy)` wraps any `LengthPolicy`.
  std::function<std::size_t(const decode_stats&)> length{};
  std::size_t max_new_tokens = 64;         //!< 0: the request finishes at the next step with no token
  std::vector<token_id> stop_tokens;       //!< generation ends after emitting one of them
};

//! A `LengthPolicy` as a request's length stage (`request_options::length`); the policy is copied.
template <LengthPolicy L>
std::function<std::size_t(const decode_stats&)> length_stage(L policy) {
  return [policy = std::move(policy)](const decode_stats& s) { return static_cast<std::size_t>(policy.next_length(s)); };
}

//! What a batch length stage sees of a running request: its counters so far and the longest draft
//! its own length stage allows this round.
struct length_request {
  const decode_stats* stats = nullptr;
  std::size_t max_length = 0;
};

//! A stage that chooses every request's draft length of a round together (SV's batch scheduler,
//! length/sv_batch.hpp): `lengths` comes in holding each request's `max_length` and the stage may
//! lower any of them. A choice that depends only on the counters (what the requests did before this
//! round), not on this round's drafts, keeps a lossless rule lossless: the round's length is fixed
//! before anything of the round is drawn.
using batch_length_stage = std::function<void(std::span<const length_request>, std::span<std::size_t>)>;

//! Why a request finished.
enum class finish_reason : std::uint8_t {
  none,        //!< still running
  length,      //!< max_new_tokens emitted
  stop_token,  //!< a stop token emitted (it is the last token)
  cancelled,   //!< `cancel`
  error,       //!< a model returned an unusable row for this request (`status` has `invalid_row`): the
               //!< target's ends the round at that row; the draft's ends drafting, the round's drafts
               //!< so far are verified and their tokens emitted, then the request ends
};

//! Handle of a request (also the sequence id of both models).
using request_handle = sequence_id;

//! Where the last step's time went (seconds, steady clock): the models' forwards, sampling the drafts
//! (warping each draft row), the verification call, and the whole step; the rest of the step is the
//! decoder's own bookkeeping.
struct step_timing {
  double draft_forward = 0.0, draft_sampling = 0.0, target_forward = 0.0, verification = 0.0, total = 0.0;
  double bookkeeping() const noexcept { return total - draft_forward - draft_sampling - target_forward - verification; }
};

//! What a step did for one request.
struct step_event {
  request_handle request = 0;
  std::span<const token_id> tokens;        //!< emitted this step (valid until the next step)
  finish_reason finished = finish_reason::none;
  verify_status status = verify_status::ok;
};

//! The step decoder over a target and a draft `SequenceModel` sharing one vocabulary, with chain
//! drafting and the acceptance rule `Rule` for every request.
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
  //! \throws specdec::error on an empty prompt, a token or stop token outside the vocabulary, or
  //!         invalid warp parameters.
  request_handle add(request_options options) {
    SPECDEC_EXPECTS(!options.prompt.empty(), "specdec::batch_decoder::add: the prompt is empty");
    for ([[maybe_unused]] const token_id t : options.prompt)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "specdec::batch_decoder::add: a prompt token is outside the vocabulary");
    for ([[maybe_unused]] const token_id t : options.stop_tokens)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "specdec::batch_decoder::add: a stop token is outside the vocabulary");
    validate(options.target_params);
    validate(options.draft_params);
    request r;
    r.handle = next_handle_++;
    r.pending_target = options.prompt;
    r.pending_draft = options.prompt;
    // At most gamma + 1 tokens are pending after a round (fewer allocations in the first steps).
    r.pending_draft.reserve(std::max(options.prompt.size(), options.gamma + 1));
    r.output.reserve(std::min<std::size_t>(options.max_new_tokens, 4096));
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
  std::span<const token_id> tokens(request_handle h) const { return find(h).output; }
  //! Request h's counters. \throws specdec::error for an unknown request.
  const decode_stats& stats(request_handle h) const { return find(h).stats; }
  //! Where the last step's time went.
  const step_timing& last_step_timing() const noexcept { return timing_; }
  //! Sets (or, with an empty function, removes) the batch length stage, run every step after each
  //! request's own length stage.
  void set_batch_length_stage(batch_length_stage stage) { batch_length_ = std::move(stage); }

 private:
  struct request {
    request_handle handle = 0;
    request_options options;
    std::vector<token_id> output;          // emitted tokens
    std::vector<token_id> pending_target;  // committed, not yet in the target's state
    std::vector<token_id> pending_draft;   // committed, not yet in the draft's state
    decode_stats stats;
    finish_reason finished = finish_reason::none;
    verify_status status = verify_status::ok;
    std::size_t gamma = 0;                 // this round's draft length
    bool pending_in_draft = false;         // this round appended pending_draft to the draft model
    bool draft_failed = false;             // the draft model returned a row without usable mass
    std::size_t drafts_in_draft = 0;       // drafts this round appended to the draft model
    std::size_t first_emitted = 0;         // output index of this step's first token
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
    return {r.options.seed, r.options.request_id, static_cast<std::uint32_t>(r.stats.iterations)};
  }

  using clock = std::chrono::steady_clock;
  static double seconds(clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

  void draft_round(std::size_t j);
  void score();
  void commit(request& r, std::size_t b);

  Policy policy_;
  Target* target_;
  Draft* draft_;
  Rule rule_;
  cost_model cost_;
  std::size_t vocab_;
  request_handle next_handle_ = 1;
  std::vector<request> requests_;  // running
  std::vector<request> reported_;  // finished, reported by the last step

  // Per-step buffers (reused).
  std::vector<request*> running_;
  std::vector<sequence_append> appends_;
  std::vector<std::int32_t> num_drafts_;
  std::vector<token_id> drafts_, appended_;
  std::vector<float> logits_, q_logits_, q_row_, target_logits_;
  std::vector<warp_params> target_params_, draft_params_;
  step_timing timing_;
  batch_length_stage batch_length_;
  std::vector<length_request> length_requests_;
  std::vector<std::size_t> lengths_;
  std::vector<random::request_stream> streams_;
  std::vector<token_id> out_tokens_;
  std::vector<std::int32_t> out_accepted_;
  std::vector<verify_status> out_status_;
  std::vector<std::size_t> draft_offset_, appended_offset_;
  chain_batch<float> batch_;
  std::vector<step_event> events_;
};

// ---- a step ---------------------------------------------------------------------------------------

//! Drafted position j of every running request with gamma > j: one batched draft forward (pending
//! tokens, or the previous draft), then each request's q row warped and sampled at stream position j.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::draft_round(std::size_t j) {
  appends_.clear();
  for (request* r : running_)
    if (r->gamma > j) {
      const std::size_t b = static_cast<std::size_t>(r - requests_.data());
      const std::span<const token_id> tokens =
          j == 0 ? std::span<const token_id>(r->pending_draft) : std::span<const token_id>(drafts_).subspan(draft_offset_[b] + j - 1, 1);
      appends_.push_back({r->handle, tokens, 1});
      r->pending_in_draft = true;
      r->drafts_in_draft = j;
    }
  if (appends_.empty()) return;
  logits_.resize(appends_.size() * vocab_);
  auto t0 = clock::now();
  draft_->forward(std::span<const sequence_append>(appends_), std::span<float>(logits_));
  auto t1 = clock::now();
  timing_.draft_forward += seconds(t0, t1);
  std::size_t row = 0;
  q_row_.resize(vocab_);
  for (request* r : running_) {
    if (r->gamma <= j) continue;
    const std::size_t b = static_cast<std::size_t>(r - requests_.data());
    const std::span<const float> logits(logits_.data() + row++ * vocab_, vocab_);
    if (warp_logits(logits, std::span<float>(q_row_), r->options.draft_params) != row_status::ok) {
      // No usable draft row: the request drafts no further; the round verifies the drafts it has,
      // then the request ends with `error` and `invalid_row` (the draft model is broken for it).
      r->gamma = j;
      r->draft_failed = true;
      continue;
    }
    std::copy(logits.begin(), logits.end(), q_logits_.begin() + static_cast<std::ptrdiff_t>((draft_offset_[b] + j) * vocab_));
    const auto x = sample_categorical(std::span<const float>(q_row_), stream_of(*r).open(static_cast<std::uint32_t>(j), random::purpose::draft).uniform());
    drafts_[draft_offset_[b] + j] = x.token;
  }
  timing_.draft_sampling += seconds(t1, clock::now());
}

//! One batched target forward of every running request's pending tokens and drafts, asking for the
//! gamma + 1 rows verification reads (logits; `verify_from_logits` warps the rows it reads, and
//! reports a row without usable mass as `invalid_row` for that request alone).
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::score() {
  appends_.clear();
  appended_.clear();
  for (request* r : running_) {
    const std::size_t b = static_cast<std::size_t>(r - requests_.data());
    appended_offset_[b] = appended_.size();
    appended_.insert(appended_.end(), r->pending_target.begin(), r->pending_target.end());
    appended_.insert(appended_.end(), drafts_.begin() + static_cast<std::ptrdiff_t>(draft_offset_[b]),
                     drafts_.begin() + static_cast<std::ptrdiff_t>(draft_offset_[b] + r->gamma));
  }
  std::size_t rows = 0;
  for (request* r : running_) {
    const std::size_t b = static_cast<std::size_t>(r - requests_.data());
    const std::size_t n = r->pending_target.size() + r->gamma;
    appends_.push_back({r->handle, std::span<const token_id>(appended_).subspan(appended_offset_[b], n), r->gamma + 1});
    rows += r->gamma + 1;
  }
  target_logits_.resize(rows * vocab_);
  const auto t0 = clock::now();
  target_->forward(std::span<const sequence_append>(appends_), std::span<float>(target_logits_));
  timing_.target_forward += seconds(t0, clock::now());
}

template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
std::span<const step_event> batch_decoder<P, T, D, R>::step() {
  const auto start = clock::now();
  timing_ = {};
  reported_.clear();
  events_.clear();
  running_.clear();
  // Requests cancelled or with nothing to emit finish without a round.
  for (auto& r : requests_) {
    r.first_emitted = r.output.size();
    r.pending_in_draft = false;
    r.drafts_in_draft = 0;
    if (r.finished == finish_reason::none && r.options.max_new_tokens == 0) release(r, finish_reason::length);
    if (r.finished == finish_reason::none) running_.push_back(&r);
  }
  const std::size_t B = requests_.size();
  draft_offset_.assign(B, 0);
  appended_offset_.assign(B, 0);
  for (request* r : running_) {
    const std::size_t remaining = r->options.max_new_tokens - r->output.size();
    r->gamma = std::min(r->options.length ? r->options.length(r->stats) : r->options.gamma, remaining - 1);
  }
  if (batch_length_ && !running_.empty()) {
    length_requests_.clear();
    lengths_.clear();
    for (request* r : running_) {
      length_requests_.push_back({&r->stats, r->gamma});
      lengths_.push_back(r->gamma);
    }
    batch_length_(std::span<const length_request>(length_requests_), std::span<std::size_t>(lengths_));
    for (std::size_t k = 0; k < running_.size(); ++k) running_[k]->gamma = std::min(running_[k]->gamma, lengths_[k]);
  }
  std::size_t total = 0, widest = 0;
  for (request* r : running_) {
    const std::size_t b = static_cast<std::size_t>(r - requests_.data());
    draft_offset_[b] = total;
    total += r->gamma;
    widest = std::max(widest, r->gamma);
  }
  drafts_.resize(total);
  q_logits_.resize(total * vocab_);
  for (std::size_t j = 0; j < widest; ++j) draft_round(j);

  if (!running_.empty()) {
    score();
    // The drafts of each request, packed (draft_round may have shortened some).
    num_drafts_.clear();
    streams_.clear();
    target_params_.clear();
    draft_params_.clear();
    std::size_t at = 0;
    for (request* r : running_) {
      const std::size_t b = static_cast<std::size_t>(r - requests_.data());
      if (at != draft_offset_[b]) {  // only after a request drafted fewer than it was allotted
        std::copy_n(drafts_.begin() + static_cast<std::ptrdiff_t>(draft_offset_[b]), r->gamma, drafts_.begin() + static_cast<std::ptrdiff_t>(at));
        std::copy_n(q_logits_.begin() + static_cast<std::ptrdiff_t>(draft_offset_[b] * vocab_), r->gamma * vocab_,
                    q_logits_.begin() + static_cast<std::ptrdiff_t>(at * vocab_));
      }
      at += r->gamma;
      num_drafts_.push_back(static_cast<std::int32_t>(r->gamma));
      streams_.push_back(stream_of(*r));
      target_params_.push_back(r->options.target_params);
      draft_params_.push_back(r->options.draft_params);
    }
    batch_.layout.assign_packed(num_drafts_);
    batch_.vocab_size = vocab_;
    batch_.draft_tokens = std::span<const token_id>(drafts_).first(at);
    batch_.draft_rows = std::span<const float>(q_logits_).first(at * vocab_);
    batch_.target_rows = std::span<const float>(target_logits_);
    const std::size_t stride = batch_.layout.max_drafts() + 1;
    out_tokens_.resize(running_.size() * stride);
    out_accepted_.resize(running_.size());
    out_status_.resize(running_.size());
    const auto t0 = clock::now();
    verify_from_logits(policy_, rule_, batch_, std::span<const warp_params>(target_params_),
                       std::span<const warp_params>(draft_params_), std::span<const random::request_stream>(streams_),
                       chain_outputs{out_tokens_, out_accepted_, out_status_});
    timing_.verification = seconds(t0, clock::now());
    for (std::size_t k = 0; k < running_.size(); ++k) commit(*running_[k], k);
  }

  // Events of every request; the finished ones move to reported_ (a move keeps a vector's buffer, so
  // the events' spans stay valid).
  for (auto& r : requests_) {
    events_.push_back({r.handle, std::span<const token_id>(r.output).subspan(r.first_emitted), r.finished, r.status});
    if (r.finished != finish_reason::none) reported_.push_back(std::move(r));
  }
  std::erase_if(requests_, [](const request& r) { return r.finished != finish_reason::none; });
  timing_.total = seconds(start, clock::now());
  return events_;
}

//! Request r's outcome of verification row k: emitted tokens, model rollbacks, counters, finishing.
template <exec::ExecutionPolicy P, SequenceModel T, SequenceModel D, AcceptanceRule R>
void batch_decoder<P, T, D, R>::commit(request& r, std::size_t k) {
  const std::size_t gamma = r.gamma, stride = batch_.layout.max_drafts() + 1;
  const auto a = static_cast<std::size_t>(out_accepted_[k]);
  const verify_status status = out_status_[k] | (r.draft_failed ? verify_status::invalid_row : verify_status::ok);
  const std::span<const token_id> row(out_tokens_.data() + k * stride, stride);
  r.first_emitted = r.output.size();
  r.status |= status;
  const bool valid = is_valid(out_status_[k]);  // the round's own verification
  const bool failed = !is_valid(status);         // it, or the draft model, reported an error
  // Drafts the target keeps: the accepted prefix; the correction or bonus is pending for both models.
  const std::span<const token_id> drafts(row.first(a));
  const token_id next = valid ? row[a] : no_token;
  target_->rollback(r.handle, gamma - a);
  r.pending_target.clear();
  // The draft model holds pending_draft and the first drafts_in_draft drafts when this round drafted;
  // it keeps the accepted ones, and the accepted drafts it never saw become pending.
  if (r.pending_in_draft) {
    const std::size_t kept = std::min(a, r.drafts_in_draft);
    draft_->rollback(r.handle, r.drafts_in_draft - kept);
    r.pending_draft.assign(drafts.begin() + static_cast<std::ptrdiff_t>(kept), drafts.end());
  }
  if (valid) {
    r.pending_target.push_back(next);
    r.pending_draft.push_back(next);
  }
  r.output.insert(r.output.end(), drafts.begin(), drafts.end());
  if (valid) r.output.push_back(next);

  r.stats.draft_calls += gamma;
  ++r.stats.target_calls;
  r.stats.target_positions += gamma + 1;
  r.stats.simulated_time += static_cast<double>(gamma) * cost_.t_draft + cost_.target_time(gamma + 1);
  r.stats.record_round(gamma, a);

  // Finishing, in decode's order: the length cut, then a stop token (the output ends with it), then
  // an invalid verification.
  if (r.output.size() > r.options.max_new_tokens) r.output.resize(r.options.max_new_tokens);
  finish_reason why = finish_reason::none;
  for (std::size_t i = r.first_emitted; i < r.output.size(); ++i)
    if (std::find(r.options.stop_tokens.begin(), r.options.stop_tokens.end(), r.output[i]) != r.options.stop_tokens.end()) {
      r.output.resize(i + 1);
      why = finish_reason::stop_token;
      break;
    }
  if (why == finish_reason::none && failed) why = finish_reason::error;
  if (why == finish_reason::none && r.output.size() >= r.options.max_new_tokens) why = finish_reason::length;
  r.stats.emitted = r.output.size();
  if (why != finish_reason::none) release(r, why);
}

}  // namespace specdec
