//! \file draft/chain.hpp
//! \brief Chain drafting: the draft model proposes gamma tokens one after another, each sampled from
//! its warped next-token distribution q, and hands back the rows q it actually sampled from
//! (the verifier needs exactly those: peers.md §2.3).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec {

//! What a drafter wrote: `tokens.size()` drafts and their q rows ([n][V], float).
struct draft_block {
  std::vector<token_id> tokens;  //!< the drafted tokens
  std::vector<float> q_rows;     //!< [n][V], the warped rows the tokens were sampled from
};

//! Proposes up to gamma tokens after a context; returns the number of draft-model calls made.
template <class D>
concept Drafter = requires(D& d, std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream,
                           draft_block& out) {
  { d.draft(context, gamma, stream, out) } -> std::convertible_to<std::size_t>;
};

//! Drafts autoregressively from a Model with fixed warp parameters (T = 0 drafts greedily: q is one-hot).
template <Model DraftModel>
class chain_drafter {
 public:
  //! \throws specdec::error on invalid warp parameters.
  chain_drafter(const DraftModel& model, warp_params params) : model_(&model), params_(params) { validate(params); }

  //! V, the draft model's vocabulary size.
  std::size_t vocab_size() const { return model_->vocab_size(); }
  //! The warp applied to every draft row.
  const warp_params& params() const noexcept { return params_; }

  //! Drafts gamma tokens after `context`. Draw j uses stream position j, purpose draft.
  //! \throws specdec::numerical_error when the draft model returns a row without usable mass.
  std::size_t draft(std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream,
                    draft_block& out) {
    const std::size_t V = model_->vocab_size();
    out.tokens.clear();
    out.q_rows.resize(gamma * V);
    context_.assign(context.begin(), context.end());
    logits_.resize(V);
    for (std::size_t j = 0; j < gamma; ++j) {
      model_->next_logits(std::span<const token_id>(context_), std::span<float>(logits_));
      const std::span<float> q(out.q_rows.data() + j * V, V);
      if (warp_logits(std::span<const float>(logits_), q, params_) != row_status::ok)
        throw numerical_error("specdec::chain_drafter::draft: the draft model returned a row without usable mass");
      const auto x = sample_categorical(std::span<const float>(q),
                                        stream.open(static_cast<std::uint32_t>(j), random::purpose::draft).uniform());
      out.tokens.push_back(x.token);
      context_.push_back(x.token);
    }
    return gamma;
  }

 private:
  const DraftModel* model_;
  warp_params params_;
  std::vector<token_id> context_;
  std::vector<float> logits_;
};

}  // namespace specdec
