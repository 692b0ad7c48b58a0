//! \file draft/stage.hpp
//! \brief A drafter stage of the step decoder (decode/batch_decoder.hpp): drafts one request's round
//! from its whole context, for drafters that are not the decoder's batched chain drafting over its
//! draft `SequenceModel` (any `Drafter`, beam drafting for MTAD, SPRINTER's verifier-gated runs).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/random/stream.hpp"

namespace specdec {

//! What a drafter stage wrote for one round. The stage fills `tokens` and either `q_rows` (the warped
//! rows the tokens were sampled from, [n][V]) or `log_q` (the joint log q of every prefix, for the
//! joint rule of MTAD), and says what drafting cost.
struct stage_draft {
  std::vector<token_id> tokens;  //!< the drafted tokens
  std::vector<float> q_rows;     //!< [tokens.size()][V], or empty when `log_q` is given
  std::vector<double> log_q;     //!< log_q[j - 1] = log q(x_{1:j}), or empty
  //! Leading tokens that are final before the target sees them (SPRINTER: those its verifier
  //! accepted); only the `last_token` rule reads it, and then `kept + 1 == tokens.size()` when
  //! `check_last`, `kept == tokens.size()` otherwise.
  std::size_t kept = 0;
  //! A tree draft (tree verification, acceptance/tree.hpp): the parent of each token, 0 = the root (the
  //! context), k = the k-th token (1-based), each before its children; `q_rows` then holds one row per
  //! node, the root's first ([tokens.size() + 1][V]), or is empty for rules that do not read q. Empty
  //! for a chain.
  std::vector<std::int32_t> parents;
  bool check_last = true;         //!< last_token rule: whether the last token goes to the target
  std::size_t model_calls = 0;    //!< draft-model evaluations (decode_stats::draft_calls)
  std::size_t charged_steps = 0;  //!< draft steps the simulated clock charges (cost_model::t_draft each)

  //! Empties the block, keeping its buffers.
  void clear() noexcept {
    tokens.clear();
    q_rows.clear();
    log_q.clear();
    kept = 0;
    parents.clear();
    check_last = true;
    model_calls = 0;
    charged_steps = 0;
  }
};

//! What a drafter stage writes each round (`draft_stage::output`): `add()` refuses a request whose
//! verification stage cannot verify it (`verification_stage::admit`), before any step.
enum class draft_output : unsigned char {
  unspecified,  //!< not declared (a callable of the user's own): checked each round by `check_draft` only
  chain,        //!< a chain, with a q row per token or none (model-free drafters)
  joint,        //!< a chain with the joint log q of its prefixes and no q rows (MTAD's beams)
  marked_run,   //!< a chain with q rows whose leading `kept` tokens are final (SPRINTER's gated drafter)
  tree,         //!< a token tree (`parents`)
};

//! The name of a drafter output, for error messages.
constexpr std::string_view name_of(draft_output o) noexcept {
  switch (o) {
    case draft_output::chain: return "a chain";
    case draft_output::joint: return "a chain with joint log q";
    case draft_output::marked_run: return "a run marked by a verifier";
    case draft_output::tree: return "a token tree";
    case draft_output::unspecified: break;
  }
  return "an undeclared draft";
}

//! The call of a drafter stage: `stage(context, gamma, stream, out)`.
using draft_function = std::function<void(std::span<const token_id> context, std::size_t gamma,
                                          const random::request_stream& stream, stage_draft& out)>;

//! A drafter stage: `stage(context, gamma, stream, out)` drafts at most gamma tokens after `context`
//! (the request's prompt and every token it emitted), drawing from `stream` (the request's round),
//! and says what it writes (`output`; the library's stages declare it, a plain callable converts with
//! `draft_output::unspecified`). A `specdec::numerical_error` it throws ends its request with
//! `invalid_row` (the drafts it wrote are dropped); a `specdec::error`, with `stage_error` (no tokens
//! that round: a tokenizer that cannot encode the request's text, draft/tli.hpp). Both leave the other
//! requests of the batch alone; any other exception leaves `step()`.
class draft_stage {
 public:
  //! No stage: the request drafts by chain drafting on the decoder's draft model.
  draft_stage() = default;
  //! A callable of the user's own, its output undeclared.
  template <class F>
    requires(!std::derived_from<std::remove_cvref_t<F>, draft_stage>)
  &&std::constructible_from<draft_function, F> draft_stage(
      F&& f)  // NOLINT(google-explicit-constructor): a plain callable is a stage
      : call_(std::forward<F>(f)) {}
  //! A callable that writes `output`.
  template <class F>
    requires std::constructible_from<draft_function, F> draft_stage(draft_output output, F&& f)
        : call_(std::forward<F>(f)), output_(output) {}

    //! Drafts one round (see the class comment).
    void operator()(std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream,
                    stage_draft& out) const {
      call_(context, gamma, stream, out);
    }
    //! Whether a stage is set.
    explicit operator bool() const noexcept { return static_cast<bool>(call_); }
    //! What it writes.
    draft_output output() const noexcept { return output_; }

   private:
    draft_function call_;
    draft_output output_ = draft_output::unspecified;
};

//! A drafter stage whose output is part of its type, so that `request_options::set_stages` refuses at
//! compile time a verification that cannot verify it (`verifies_output`). Every library factory whose
//! output does not depend on a run-time option returns one; it converts to a `draft_stage` keeping
//! `output()`, for `request_options::drafter` and the checks of `add()`.
template <draft_output Output>
  requires(Output != draft_output::unspecified)
class draft_stage_of : public draft_stage {
 public:
  static constexpr draft_output output_kind = Output;  //!< what it writes
  //! A callable that writes `Output`.
  template <class F>
    requires(!std::derived_from<std::remove_cvref_t<F>, draft_stage>)
  &&std::constructible_from<draft_function, F> explicit draft_stage_of(F&& f) : draft_stage(Output, std::forward<F>(f)) {}
};

//! Any `Drafter` (e.g. `chain_drafter`) as a drafter stage, charged one draft step per token. The
//! stage refers to `drafter`, which must outlive it.
template <Drafter D>
draft_stage_of<draft_output::chain> drafter_stage(D& drafter) {
  return draft_stage_of<draft_output::chain>(
      [d = &drafter, block = draft_block{}](std::span<const token_id> context, std::size_t gamma,
                                            const random::request_stream& stream, stage_draft& out) mutable {
        out.model_calls = static_cast<std::size_t>(d->draft(context, gamma, stream, block));
        out.tokens.swap(block.tokens);  // swaps keep both buffers: no copy, no allocation once warm
        out.q_rows.swap(block.q_rows);
        out.charged_steps = out.tokens.size();
      });
}

}  // namespace specdec
