//! \file decode/verification_stage.hpp
//! \brief The verification stage of the step decoder (decode/batch_decoder.hpp): what one kind of
//! verification needs from the loop and does, as one small type-erased interface held per request
//! (`request_options::acceptance`). Each phase of a step makes one call on a request's stage instead
//! of switching on kinds:
//!
//! | phase of a step | call | chain rule | joint (MTAD), BiLD | last token (SPRINTER) | tree |
//! |---|---|---|---|---|---|
//! | `add()` | `admit` | no tree drafter; no joint log q for a rule reading q | no tree drafter | a drafter stage marking runs; gamma > 0 | a tree drafter stage; a `TreeSequenceModel` target |
//! | grouping | `traits().order`, `same_group` | 0; equal rule and parameters | 1; equal parameters | 2 | 3 |
//! | draft length | `draft_length` | remaining - 1 | remaining - 1 | at least 1, at most remaining | remaining - 1 |
//! | drafter stage's output | `check_draft` | chain, q rows unless the rule reads none | chain, q rows or joint log q | a marked run with q rows | a tree (parents) |
//! | verified length | `traits().verified_length` | yes | yes | no | no |
//! | target scoring | `scoring` | n + 1 rows after the pending tokens | n + 1 | 0, or 1 after the kept run | nodes + 1, tree-shaped |
//! | verification | `verify` (a group) | one batched `verify_from_logits` | per request (`mtad_verify`, `bild_verify`) | `check_last_token` | `verify_tree_from_logits` |
//! | commit | `target_scoring::tree` | rollback count | rollback count | rollback count | the accepted path (`commit_tree`) |
//!
//! Requests whose stages are `same_group` (and that draft the same way) are verified in one `verify`
//! call: chain rules with equal parameters share one batched `verify_from_logits` on the policy,
//! the decoder's performance path. A stage's traits also say whether its verification reads the
//! drafts' q rows (a model-free drafter stage writes none for a rule that does not) and whether the
//! target's own samples are keyed by output position (chain rules, `request_options::sample_keys`)
//! or by the round (the others).
//!
//! A `request_acceptance` converts from any type that `verification_stage_for` maps to a stage: an
//! `AcceptanceRule` (a chain rule, a user's own included: `chain_stage`), `tree_acceptance`,
//! `mtad_rule`, `bild_rule`, `last_token`, any class derived from `verification_stage` (a user's own
//! kind of verification), or a type of the user's own for which `verification_stage_for` is
//! specialised; empty (`chain_acceptance`) means the decoder's own chain rule. Stateless rules share one stage object; requests group by value.
//! Adding a per-request chain rule touches no decoder code (give it `operator==` so that requests
//! with equal parameters share a call); a new kind of verification is one class deriving from
//! `verification_stage`.
//!
//! Faults: `admit` throws `specdec::error` with the reason the stage cannot serve a request; a
//! drafter stage's output that contradicts `check_draft` (a bug in the drafter) ends that request
//! alone; a `specdec::error` or `specdec::numerical_error` thrown by `verify` (or by the
//! verified-length stage) ends only the requests it concerns, with `finish_reason::error` and
//! `verify_status::stage_error` (a group call that throws is retried request by request to find them).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "specdec/acceptance/bild.hpp"
#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/draft_side.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/last_token.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/mtad.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! Handle of a request of the step decoder (also the sequence id of both models).
using request_handle = sequence_id;

//! The execution policies a verification stage runs on: the step decoder's rows live in host memory.
#if SPECDEC_ENABLE_SIMD
using host_policy = std::variant<exec::sequenced_policy, exec::simd_policy<>>;
#else
using host_policy = std::variant<exec::sequenced_policy>;
#endif

//! What a stage is, for the decoder's bookkeeping (see the file comment's table).
struct stage_traits {
  //! Where its requests go in a step (target batch and verification order): chain 0, joint and BiLD
  //! 1, last token 2, trees 3; a user's stage may pick any.
  int order = 0;
  bool reads_q_rows = true;     //!< verification reads the drafts' q rows (else a drafter stage may write none)
  bool output_keys = true;      //!< the target's own samples are keyed by output position (else by the round)
  bool verified_length = true;  //!< the verified-length stage may shorten its drafts
};

//! What `add()` tells a stage about a request, for it to refuse what it cannot serve.
struct stage_admission {
  bool drafter_stage = false;                               //!< the request drafts through a drafter stage (else chain drafting)
  draft_output drafter_output = draft_output::unspecified;  //!< what its drafter stage writes (`draft_stage::output`)
  bool tree_target = false;   //!< the decoder's target takes tree-shaped appends (`TreeSequenceModel`)
  bool length_stage = false;  //!< a length stage chooses the draft length (else `gamma`)
  std::size_t gamma = 0;      //!< `request_options::gamma`
};

//! What a stage asks of the target for one request this round: the request's pending tokens then
//! its first `drafts` drafts are appended, and the logits of the last `rows` positions come back.
struct target_scoring {
  std::size_t drafts = 0;  //!< drafts appended after the pending tokens
  std::size_t rows = 0;    //!< rows wanted (0: no target call for the request)
  //! A tree-shaped append (parents from the drafter stage's `stage_draft::parents`); the target then
  //! keeps the accepted path (`TreeSequenceModel::commit_tree`) instead of rolling back.
  bool tree = false;
};

//! One request's round as a verification stage sees it: the decoder fills the first part, the stage
//! writes the outcome.
struct stage_request {
  request_handle handle = 0;  //!< the request
  std::size_t gamma = 0;      //!< the draft length allowed this round
  std::size_t drafted = 0;    //!< tokens drafted
  std::size_t verified = 0;   //!< drafts the verified-length stage left (all, unless it lowered them)
  bool staged = false;        //!< drafted by a drafter stage (its output in `block`), else by chain drafting
  bool draft_failed = false;  //!< the draft model or the drafter stage failed
  //! Offset of its drafts in the round's draft slots (rows of V in the q slots).
  std::size_t slot = 0;
  //! Where its verified drafts (and their q rows) are now: `slot`, or where a stage packed them.
  std::size_t drafts_at = 0;
  std::size_t target_row = 0;     //!< its first row of the round's target logits
  std::size_t target_rows = 0;    //!< rows the target computed for it (`target_scoring::rows`)
  std::size_t target_drafts = 0;  //!< drafts appended to the target (`target_scoring::drafts`)
  stage_draft block;              //!< what its drafter stage wrote (empty for chain drafting)
  warp_params target_params{};    //!< how its target rows are warped
  random::request_stream stream;  //!< this round's stream

  // The outcome, written by `verification_stage::verify`.
  std::vector<token_id> emitted;                   //!< the tokens verification emitted
  std::size_t target_kept = 0;                     //!< appended drafts the target keeps
  std::size_t accepted = 0;                        //!< drafts kept (decode_stats::accepted)
  std::size_t judged = 0;                          //!< drafts judged (decode_stats::drafted)
  verify_status round_status = verify_status::ok;  //!< the flags of the round's verification
  std::vector<std::int32_t> tree_kept;             //!< a tree: offsets of the accepted path's nodes among the appended ones
};

//! The round's buffers a stage verifies from, and scratch reused step after step (a warm step of
//! chain requests allocates nothing).
struct verification_buffers {
  std::size_t vocab = 0;                 //!< V
  std::span<token_id> drafts;            //!< every request's draft slots
  std::span<float> q_rows;               //!< their q rows [slots][V] (empty when no request has any)
  std::span<const float> target_logits;  //!< every request's target rows [rows][V]

  // Scratch, reused step after step (left out of the API reference).
  //! \cond specdec_scratch
  std::vector<float> p_probs, tree_q;
  std::vector<double> log_q;
  std::vector<std::int32_t> num_drafts, out_accepted, out_path, tree_parents, depth;
  std::vector<token_id> out_tokens, tree_tokens;
  std::vector<verify_status> out_status;
  std::vector<random::request_stream> streams;
  std::vector<warp_params> target_params;
  chain_batch<float> chain;
  tree_batch<float> tree;
  //! \endcond

  //! r's target rows.
  std::span<const float> target_rows_of(const stage_request& r) const {
    return target_logits.subspan(r.target_row * vocab, r.target_rows * vocab);
  }
  //! r's drafts (`count` of them, from `drafts_at`).
  std::span<const token_id> drafts_of(const stage_request& r, std::size_t count) const {
    return std::span<const token_id>(drafts).subspan(r.drafts_at, count);
  }
  //! r's q rows (one per draft from `drafts_at`), or empty when its drafter stage wrote none.
  std::span<const float> q_rows_of(const stage_request& r) const {
    if (r.staged && r.block.q_rows.empty()) return {};  // a model-free stage's drafts
    return std::span<const float>(q_rows).subspan(r.drafts_at * vocab, r.drafted * vocab);
  }
  //! Warps r's first `rows` target rows into `p_probs` (a row without usable mass is filled with NaN,
  //! which verification reports as `invalid_row`).
  std::span<const float> warp_target_rows(const stage_request& r, std::size_t rows) {
    p_probs.resize(rows * vocab);
    for (std::size_t i = 0; i < rows; ++i) {
      const auto logits = target_rows_of(r).subspan(i * vocab, vocab);
      const std::span<float> p(p_probs.data() + i * vocab, vocab);
      if (warp_logits(logits, p, r.target_params) != row_status::ok)
        std::fill(p.begin(), p.end(), std::numeric_limits<float>::quiet_NaN());
    }
    return std::span<const float>(p_probs);
  }
  //! Takes row k of a chain or tree verification's outputs (stride entries per row) as r's outcome.
  void take_row(stage_request& r, std::size_t k, std::size_t stride) const {
    const auto a = static_cast<std::size_t>(out_accepted[k]);
    const token_id* row = out_tokens.data() + k * stride;
    r.round_status = out_status[k];
    r.emitted.assign(row, row + a + (is_valid(r.round_status) ? 1 : 0));
    r.target_kept = r.accepted = a;
    r.judged = r.verified;
  }
};

//! A kind of verification (see the file comment): the calls each phase of a step makes on a
//! request's stage. Stages are shared between requests (and decoders) and called on const objects:
//! per-round state lives in the `stage_request` and the `verification_buffers`.
class verification_stage {
 public:
  verification_stage() = default;                                      //!< A stage without state.
  verification_stage(const verification_stage&) = default;             //!< Copies a stage.
  verification_stage(verification_stage&&) = default;                  //!< Moves a stage.
  verification_stage& operator=(const verification_stage&) = default;  //!< Copies a stage.
  verification_stage& operator=(verification_stage&&) = default;       //!< Moves a stage.
  virtual ~verification_stage() = default;                             //!< Destroys a stage.

  //! What the stage is (constant).
  virtual stage_traits traits() const = 0;
  //! At `add()`: \throws specdec::error with the reason when the stage cannot serve the request.
  virtual void admit(const stage_admission& /*request*/) const {}
  //! Whether requests of this stage and of `other` are verified in one `verify` call (same kind,
  //! equal parameters). By default only requests sharing the stage object are.
  virtual bool same_group(const verification_stage& other) const { return &other == this; }
  //! The round's draft length from the length the request's stages want and the tokens it may still
  //! emit (>= 1). By default one is left for the correction or bonus token.
  virtual std::size_t draft_length(std::size_t wanted, std::size_t remaining) const { return std::min(wanted, remaining - 1); }
  //! Checks a drafter stage's output (`r.block`) against the request (`r.gamma`: the allowed length);
  //! returns whether the request's draft stop stage may cut it. \throws specdec::error when the output
  //! cannot be verified (a bug in the drafter stage). By default: a chain of at most gamma tokens with
  //! a q row each (none when `traits().reads_q_rows` is false).
  virtual bool check_draft(const stage_request& r, verification_buffers& b) const;
  //! What the target scores for the request. By default the verified drafts and one row more than
  //! their count: a row per draft and the bonus row.
  virtual target_scoring scoring(const stage_request& r) const { return {r.verified, r.verified + 1, false}; }
  //! Verifies a group of requests (their stages `same_group`, all drafted the same way), writing each
  //! one's outcome. \throws specdec::error or specdec::numerical_error for a request it cannot verify.
  virtual void verify(const host_policy& policy, std::span<stage_request* const> group, verification_buffers& b) const = 0;
};

namespace detail {
//! The chain check of a drafter stage's output; `log_q`: joint log q may stand for the q rows.
inline void check_chain_draft(const stage_request& r, std::size_t vocab, bool reads_q, bool log_q) {
  const stage_draft& b = r.block;
  const std::size_t n = b.tokens.size();
  SPECDEC_EXPECTS(n <= r.gamma, "specdec::batch_decoder: a drafter stage drafted more tokens than allowed");
  SPECDEC_EXPECTS(
      b.q_rows.size() == n * vocab || (b.q_rows.empty() && log_q && b.log_q.size() == n) || (b.q_rows.empty() && !reads_q),
      "specdec::batch_decoder: a drafter stage must write a q row per token (or, for the joint rule, log q; "
      "none for a chain rule that does not read q)");
}

//! At `add()`: refuses a drafter stage that declares an output `verifies` rejects, naming both.
template <class Verifies>
void admit_drafter_output(const stage_admission& a, Verifies verifies, const char* stage) {
  if (!a.drafter_stage || a.drafter_output == draft_output::unspecified || verifies(a.drafter_output)) return;
  throw error(std::string("specdec::batch_decoder::add: the drafter stage writes ") + std::string(name_of(a.drafter_output)) +
              ", which " + stage + " cannot verify");
}

//! Whether two rules (or tree rules, or parameters of a stage) are equal: by `==` when they have it,
//! else only when stateless.
template <class R>
bool same_params(const R& a, const R& b) noexcept {
  if constexpr (std::equality_comparable<R>)
    return a == b;
  else
    return std::is_empty_v<R>;
}

//! Whether `other` is a stage of type S with equal parameters (`same_params` of `params()`).
template <class S>
bool same_stage(const S& self, const verification_stage& other) {
  return typeid(other) == typeid(S) && same_params(self.params(), static_cast<const S&>(other).params());
}
}  // namespace detail

inline bool verification_stage::check_draft(const stage_request& r, verification_buffers& b) const {
  detail::check_chain_draft(r, b.vocab, traits().reads_q_rows, false);
  return true;
}

//! A chain rule (any `AcceptanceRule`, a user's own included) as a verification stage: the requests
//! of a group, drafts packed in place, are verified in one `verify_from_logits` call on the policy,
//! on the target's logits and the q rows the drafts were sampled from (acceptance/draft_side.hpp).
template <AcceptanceRule Rule>
class chain_stage final : public verification_stage {
 public:
  //! The stage of `rule`.
  explicit chain_stage(Rule rule) : rule_(std::move(rule)) {}
  //! The rule.
  const Rule& params() const noexcept { return rule_; }
  stage_traits traits() const override { return {.order = 0, .reads_q_rows = reads_draft_distribution<Rule>}; }
  //! Whether it verifies what a drafter stage declaring `o` writes: not a tree, nor joint log q in
  //! place of the q rows the rule reads.
  static constexpr bool verifies(draft_output o) noexcept {
    return o != draft_output::tree && (o != draft_output::joint || !reads_draft_distribution<Rule>);
  }
  void admit(const stage_admission& a) const override { detail::admit_drafter_output(a, verifies, "a chain rule"); }
  bool same_group(const verification_stage& other) const override { return detail::same_stage(*this, other); }
  void verify(const host_policy& policy, std::span<stage_request* const> group, verification_buffers& b) const override {
    std::visit([&](const auto& p) { verify_group(p, group, b); }, policy);
  }

 private:
  template <class Policy>
  void verify_group(const Policy& policy, std::span<stage_request* const> group, verification_buffers& b) const {
    const std::size_t V = b.vocab;
    const std::size_t begin = group.front()->drafts_at, first_row = group.front()->target_row;
    std::size_t at = begin, target_rows = 0;
    b.num_drafts.clear();
    b.streams.clear();
    b.target_params.clear();
    for (stage_request* r : group) {
      if (at != r->drafts_at) {  // only after a request drafted or verified fewer than its slot holds
        std::copy_n(b.drafts.begin() + static_cast<std::ptrdiff_t>(r->drafts_at), r->verified,
                    b.drafts.begin() + static_cast<std::ptrdiff_t>(at));
        if constexpr (reads_draft_distribution<Rule>)
          std::copy_n(b.q_rows.begin() + static_cast<std::ptrdiff_t>(r->drafts_at * V), r->verified * V,
                      b.q_rows.begin() + static_cast<std::ptrdiff_t>(at * V));
      }
      r->drafts_at = at;
      at += r->verified;
      target_rows += r->target_rows;
      b.num_drafts.push_back(static_cast<std::int32_t>(r->verified));
      b.streams.push_back(r->stream);
      b.target_params.push_back(r->target_params);
    }
    const std::size_t count = b.num_drafts.size();
    b.chain.layout.assign_packed(b.num_drafts);
    b.chain.vocab_size = V;
    b.chain.draft_tokens = std::span<const token_id>(b.drafts).subspan(begin, at - begin);
    // A rule that does not read q gets none (a model-free stage wrote none).
    b.chain.draft_rows = reads_draft_distribution<Rule> ? std::span<const float>(b.q_rows).subspan(begin * V, (at - begin) * V)
                                                        : std::span<const float>{};
    b.chain.target_rows = b.target_logits.subspan(first_row * V, target_rows * V);
    const std::size_t stride = b.chain.layout.max_drafts() + 1;
    b.out_tokens.resize(count * stride);
    b.out_accepted.resize(count);
    b.out_status.resize(count);
    const chain_outputs out{b.out_tokens, b.out_accepted, b.out_status};
    verify_from_logits(policy, rule_, b.chain, std::span<const warp_params>(b.target_params),
                       draft_side<float>{.rows = draft_rows_kind::probabilities},
                       std::span<const random::request_stream>(b.streams), out);
    for (std::size_t k = 0; k < count; ++k) b.take_row(*group[k], k, stride);
  }

  Rule rule_;
};

//! A rule verified per request on the host from its warped target rows: MTAD's joint rule (with the
//! joint log q of every prefix: the beam stage's, or summed from the q rows the drafts were sampled
//! from) or BiLD's rollback rule.
template <class Rule>
  requires std::same_as<Rule, mtad_rule> || std::same_as<Rule, bild_rule>
class joint_stage final : public verification_stage {
 public:
  //! The stage of `rule`.
  explicit joint_stage(Rule rule) : rule_(std::move(rule)) {}
  //! The rule.
  const Rule& params() const noexcept { return rule_; }
  stage_traits traits() const override { return {.order = 1, .output_keys = false}; }
  //! Whether it verifies what a drafter stage declaring `o` writes: any chain, not a tree.
  static constexpr bool verifies(draft_output o) noexcept { return o != draft_output::tree; }
  void admit(const stage_admission& a) const override { detail::admit_drafter_output(a, verifies, "the joint rule"); }
  bool same_group(const verification_stage& other) const override { return detail::same_stage(*this, other); }
  bool check_draft(const stage_request& r, verification_buffers& b) const override {
    detail::check_chain_draft(r, b.vocab, true, true);
    return true;
  }
  void verify(const host_policy& policy, std::span<stage_request* const> group, verification_buffers& b) const override {
    for (stage_request* r : group) std::visit([&](const auto& p) { verify_one(p, *r, b); }, policy);
  }

 private:
  template <class Policy>
  void verify_one([[maybe_unused]] const Policy& policy, stage_request& r, verification_buffers& b) const {
    const std::size_t n = r.verified;
    const std::span<const float> p = b.warp_target_rows(r, n + 1);
    const std::span<const token_id> drafts = b.drafts_of(r, n);
    chain_result c;
    if constexpr (std::is_same_v<Rule, bild_rule>) {
      c = bild_verify(rule_, drafts, p, b.vocab);
    } else {
      if (!r.block.log_q.empty()) {
        b.log_q.assign(r.block.log_q.begin(), r.block.log_q.begin() + static_cast<std::ptrdiff_t>(n));
      } else {
        b.log_q.resize(n);
        const std::span<const float> q = b.q_rows_of(r);
        double sum = 0.0;
        for (std::size_t j = 0; j < n; ++j)
          b.log_q[j] = sum += std::log(static_cast<double>(q[j * b.vocab + static_cast<std::size_t>(drafts[j])]));
      }
      c = mtad_verify(policy, rule_, drafts, std::span<const double>(b.log_q), p, b.vocab, r.stream);
    }
    r.emitted.assign(c.tokens.begin(), c.tokens.end());
    r.target_kept = r.accepted = static_cast<std::size_t>(c.num_accepted);
    r.judged = n;
    r.round_status = c.status;
  }

  Rule rule_;
};

//! SPRINTER's last-token check (acceptance/last_token.hpp) as a verification stage: the drafter stage
//! marks the verifier's tokens, which are final; the last one is checked against the target's row
//! when the run needs it. No bonus token: the run is at most the tokens left, and at least one.
template <class Rule = last_token_rule>
class last_token_stage final : public verification_stage {
 public:
  //! The stage.
  explicit last_token_stage(Rule rule = {}) : rule_(rule) {}
  //! The (parameterless) rule.
  const Rule& params() const noexcept { return rule_; }
  stage_traits traits() const override { return {.order = 2, .output_keys = false, .verified_length = false}; }
  bool same_group(const verification_stage& other) const override { return detail::same_stage(*this, other); }
  //! Whether it verifies what a drafter stage declaring `o` writes: a run marked by a verifier only.
  static constexpr bool verifies(draft_output o) noexcept { return o == draft_output::marked_run; }
  void admit(const stage_admission& a) const override {
    SPECDEC_EXPECTS(a.drafter_stage,
                    "specdec::batch_decoder::add: the last-token rule needs a drafter stage that marks the verifier's tokens");
    SPECDEC_EXPECTS(a.length_stage || a.gamma > 0,
                    "specdec::batch_decoder::add: the last-token rule drafts a run of at least one token: gamma must be > 0");
    detail::admit_drafter_output(a, verifies, "the last-token rule");
  }
  std::size_t draft_length(std::size_t wanted, std::size_t remaining) const override {
    return std::max<std::size_t>(std::min(wanted, remaining), 1);
  }
  bool check_draft(const stage_request& r, verification_buffers& b) const override {
    const stage_draft& d = r.block;
    const std::size_t n = d.tokens.size();
    detail::check_chain_draft(r, b.vocab, true, false);
    SPECDEC_EXPECTS(
        r.draft_failed || (n > 0 && d.kept + (d.check_last ? 1 : 0) == n),
        "specdec::batch_decoder: a last-token drafter stage must draft a run whose tokens but the checked last are kept");
    return false;  // a run is the verifier's: no draft stop stage cuts it
  }
  target_scoring scoring(const stage_request& r) const override {
    const bool check = !r.draft_failed && r.block.check_last;
    return {check ? r.drafted - 1 : 0, check ? std::size_t{1} : 0, false};
  }
  void verify(const host_policy& /*policy*/, std::span<stage_request* const> group, verification_buffers& b) const override {
    for (stage_request* r : group) verify_one(*r, b);
  }

 private:
  static void verify_one(stage_request& r, verification_buffers& b) {
    const std::size_t n = r.drafted;
    const std::span<const token_id> run = b.drafts_of(r, n);
    r.judged = n;
    r.target_kept = 0;
    r.round_status = verify_status::ok;
    if (r.target_rows == 0) {  // a failed stage (nothing drafted), or a run that ended at the budget: all kept
      r.emitted.assign(run.begin(), run.end());
      r.accepted = n;
      return;
    }
    const std::span<const float> p = b.warp_target_rows(r, 1);
    const last_token_result c = check_last_token(run[n - 1], b.q_rows_of(r).subspan((n - 1) * b.vocab, b.vocab), p,
                                                 static_cast<std::uint32_t>(n - 1), r.stream);
    r.emitted.assign(run.begin(), run.end() - 1);
    if (is_valid(c.status)) r.emitted.push_back(c.token);
    r.target_kept = n - 1;
    r.accepted = n - 1 + (c.kept ? 1 : 0);
    r.round_status = c.status;
  }

  Rule rule_;
};

//! Tree verification (acceptance/tree.hpp) of the tree a request's drafter stage writes
//! (`stage_draft::parents`), with one of the tree rules; the candidates must have been drawn as the
//! rule assumes (acceptance/multi_candidate.hpp).
struct tree_acceptance {
  std::variant<target_only_rule, strict_rule, recursive_rejection_rule, k_seq_rule, greedy_rule, sample_and_match_rule,
               typical_rule>
      //! The tree rule applied at every node.
      rule{};

  //! Whether two tree rules are the same with the same parameters.
  bool operator==(const tree_acceptance& other) const {
    return rule.index() == other.rule.index() && std::visit(
                                                     [&](const auto& a) {
                                                       using A = std::decay_t<decltype(a)>;
                                                       return detail::same_params(a, std::get<A>(other.rule));
                                                     },
                                                     rule);
  }
};

//! Tree verification as a verification stage: the target scores every node of a request's tree in one
//! tree-shaped append and keeps the accepted path; one `verify_tree_from_logits` per request (the
//! host walk goes request by request anyway; a call per request spares copying every node's q row
//! into one batch).
template <class Acceptance = tree_acceptance>
class tree_stage final : public verification_stage {
 public:
  //! The stage of `acceptance`'s tree rule.
  explicit tree_stage(Acceptance acceptance) : acceptance_(std::move(acceptance)) {}
  //! The tree rule.
  const Acceptance& params() const noexcept { return acceptance_; }
  stage_traits traits() const override {
    const bool reads_q =
        std::visit([](const auto& rule) { return tree_reads_draft<std::decay_t<decltype(rule)>>; }, acceptance_.rule);
    return {.order = 3, .reads_q_rows = reads_q, .output_keys = true, .verified_length = false};
  }
  bool same_group(const verification_stage& other) const override { return detail::same_stage(*this, other); }
  //! Whether it verifies what a drafter stage declaring `o` writes: a tree only.
  static constexpr bool verifies(draft_output o) noexcept { return o == draft_output::tree; }
  void admit(const stage_admission& a) const override {
    SPECDEC_EXPECTS(a.drafter_stage,
                    "specdec::batch_decoder::add: tree verification needs a tree drafter stage (draft/tree.hpp)");
    SPECDEC_EXPECTS(
        a.tree_target,
        "specdec::batch_decoder::add: tree verification needs a target that takes tree-shaped appends (TreeSequenceModel)");
    detail::admit_drafter_output(a, verifies, "tree verification");
  }
  //! A tree's block: parents before children, a q row per node or none, the depth within the round's length.
  bool check_draft(const stage_request& r, verification_buffers& buffers) const override {
    const stage_draft& b = r.block;
    const std::size_t n = b.tokens.size();
    SPECDEC_EXPECTS(b.parents.size() == n, "specdec::batch_decoder: a tree stage must write a parent per token");
    SPECDEC_EXPECTS(b.q_rows.empty() || b.q_rows.size() == (n + 1) * buffers.vocab,
                    "specdec::batch_decoder: a tree stage writes a q row per node (the root's first) or none");
    auto& depth = buffers.depth;
    depth.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      SPECDEC_EXPECTS(b.parents[i] >= 0 && static_cast<std::size_t>(b.parents[i]) <= i,
                      "specdec::batch_decoder: a tree stage wrote a parent that is not an earlier node");
      depth[i + 1] = depth[static_cast<std::size_t>(b.parents[i])] + 1;
      SPECDEC_EXPECTS(static_cast<std::size_t>(depth[i + 1]) <= r.gamma,
                      "specdec::batch_decoder: a tree stage drafted deeper than the round's length");
    }
    return false;  // gamma bounds the depth; no draft stop stage cuts a tree
  }
  target_scoring scoring(const stage_request& r) const override { return {r.drafted, r.drafted + 1, true}; }
  void verify(const host_policy& policy, std::span<stage_request* const> group, verification_buffers& b) const override {
    for (stage_request* r : group)
      std::visit([&](const auto& p, const auto& rule) { verify_one(p, rule, *r, b); }, policy, acceptance_.rule);
  }

 private:
  template <class Policy, TreeRule Tree>
  static void verify_one(const Policy& policy, const Tree& rule, stage_request& r, verification_buffers& b) {
    const auto nodes = static_cast<std::int32_t>(r.drafted + 1);
    b.tree_parents.assign(1, no_node);
    b.tree_parents.insert(b.tree_parents.end(), r.block.parents.begin(), r.block.parents.end());
    b.tree_tokens.assign(1, no_token);
    b.tree_tokens.insert(b.tree_tokens.end(), r.block.tokens.begin(), r.block.tokens.end());
    b.tree.layout.assign_parents(std::span<const std::int32_t>(&nodes, 1), b.tree_parents);
    b.tree.vocab_size = b.vocab;
    b.tree.tokens = std::span<const token_id>(b.tree_tokens);
    b.tree.draft_rows = std::span<const float>(r.block.q_rows);
    if constexpr (tree_reads_draft<Tree>) {
      SPECDEC_EXPECTS(r.drafted == 0 || !r.block.q_rows.empty(),
                      "specdec::batch_decoder: this tree rule reads q: the tree stage must write a q row per node");
      if (r.block.q_rows.empty()) {  // a lone root: its row is never read
        b.tree_q.assign(b.vocab, 0.0f);
        b.tree.draft_rows = std::span<const float>(b.tree_q);
      }
    }
    b.tree.target_rows = b.target_rows_of(r);
    const std::size_t width = b.tree.layout.max_depth() + 1;
    b.out_tokens.resize(width);
    b.out_path.resize(width);
    b.out_accepted.resize(1);
    b.out_status.resize(1);
    verify_tree_from_logits(policy, rule, b.tree, std::span<const warp_params>(&r.target_params, 1),
                            std::span<const random::request_stream>(&r.stream, 1),
                            tree_outputs{b.out_tokens, b.out_path, b.out_accepted, b.out_status});
    b.take_row(r, 0, width);
    r.tree_kept.clear();  // node ids 1.. are appended offsets 0..
    for (std::size_t j = 1; j <= r.accepted; ++j) r.tree_kept.push_back(b.out_path[j] - 1);
  }

  Acceptance acceptance_;
};

//! The decoder's own chain rule (the `Rule` it was built with): a request's acceptance when it sets
//! none.
struct chain_acceptance {};

//! The verification stage that serves an acceptance value of type `A` (`type`, a `verification_stage`
//! constructible from an `A`). The library's: a chain rule's `chain_stage`, a tree rule set's
//! `tree_stage`, MTAD's and BiLD's `joint_stage`, SPRINTER's `last_token_stage`, and a stage itself.
//! Specialising it for a type of one's own makes that type a `request_options::acceptance` value
//! without a library edit (tests/decode/verification_stage.cpp shows one).
template <class A>
struct verification_stage_for {};

//! A chain rule (a user's own included) is verified by `chain_stage`.
template <AcceptanceRule A>
  requires(!std::derived_from<A, verification_stage>)
struct verification_stage_for<A> {
  using type = chain_stage<A>;  //!< the stage
};

//! A stage of the user's own serves itself.
template <std::derived_from<verification_stage> A>
struct verification_stage_for<A> {
  using type = A;  //!< the stage
};

//! A tree rule set is verified by `tree_stage`.
template <>
struct verification_stage_for<tree_acceptance> {
  using type = tree_stage<tree_acceptance>;  //!< the stage
};

//! MTAD's joint rule is verified by `joint_stage`.
template <>
struct verification_stage_for<mtad_rule> {
  using type = joint_stage<mtad_rule>;  //!< the stage
};

//! BiLD's rollback rule is verified by `joint_stage`.
template <>
struct verification_stage_for<bild_rule> {
  using type = joint_stage<bild_rule>;  //!< the stage
};

//! SPRINTER's last-token check is verified by `last_token_stage`.
template <>
struct verification_stage_for<last_token_rule> {
  using type = last_token_stage<last_token_rule>;  //!< the stage
};

//! What `request_acceptance` converts from: any type with a `verification_stage_for` stage (which
//! must be constructible from it; not part of the concept, so that a stage may wrap a
//! `request_acceptance` of its own).
template <class A>
concept StageAcceptance = requires {
  typename verification_stage_for<A>::type;
}
&&std::derived_from<typename verification_stage_for<A>::type, verification_stage>;

//! Whether the verification stage of acceptance values of type `A` verifies what a drafter stage
//! declaring `Output` writes: the stage's `static constexpr bool verifies(draft_output)` (every library
//! stage has one), or true for a stage that does not say (`add()` and `check_draft` check it then).
//! `request_options::set_stages` requires it, so that a mismatch is a compile error.
template <StageAcceptance A, draft_output Output>
inline constexpr bool verifies_output = [] {
  using stage = typename verification_stage_for<A>::type;
  if constexpr (requires { std::bool_constant<stage::verifies(Output)>{}; })
    return stage::verifies(Output);
  else
    return true;
}();

//! The verification stage of an acceptance value (`StageAcceptance`); stateless values share one.
template <StageAcceptance A>
std::shared_ptr<const verification_stage> make_verification_stage(A acceptance) {
  using stage = typename verification_stage_for<A>::type;
  if constexpr (std::is_empty_v<A> && std::is_default_constructible_v<A>) {
    static const std::shared_ptr<const verification_stage> shared = std::make_shared<const stage>(A{});
    return shared;
  } else {
    return std::make_shared<const stage>(std::move(acceptance));
  }
}

//! How the target judges a request's drafts (`request_options::acceptance`): a verification stage,
//! or none (`chain_acceptance`): the decoder's own chain rule. Converts from a chain rule (a user's
//! own included), `tree_acceptance`, `mtad_rule`, `bild_rule`, `last_token`, a `verification_stage`
//! of the user's own, or a shared pointer to one.
class request_acceptance {
 public:
  //! The decoder's own chain rule.
  request_acceptance() noexcept = default;
  //! The decoder's own chain rule.
  request_acceptance(chain_acceptance /*unused*/) noexcept {}  // NOLINT(google-explicit-constructor): a value of the set
  //! The stage of `acceptance` (`make_verification_stage`).
  template <StageAcceptance A>
  request_acceptance(A acceptance)  // NOLINT(google-explicit-constructor): a value of the set
      : stage_(make_verification_stage(std::move(acceptance))) {}
  //! A stage of the user's own, shared. \throws specdec::error when null.
  template <class S>
    requires std::derived_from<std::remove_cv_t<S>, verification_stage> request_acceptance(
        std::shared_ptr<S> stage)  // NOLINT(google-explicit-constructor): a value of the set
        : stage_(std::move(stage)) {
      SPECDEC_EXPECTS(stage_ != nullptr, "specdec::request_acceptance: the stage is null");
    }
    //! The stage, or nullptr for the decoder's own chain rule.
    const verification_stage* stage() const noexcept { return stage_.get(); }
    //! The stage, shared (null for the decoder's own chain rule).
    const std::shared_ptr<const verification_stage>& shared_stage() const noexcept { return stage_; }

   private:
    std::shared_ptr<const verification_stage> stage_;
};

//! Whether two requests' acceptance stages are verified together: the same rule with the same
//! parameters (`verification_stage::same_group`).
inline bool same_rule(const request_acceptance& a, const request_acceptance& b) {
  if (a.stage() == b.stage()) return true;
  return a.stage() != nullptr && b.stage() != nullptr && a.stage()->same_group(*b.stage());
}

}  // namespace specdec
