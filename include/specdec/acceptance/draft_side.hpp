//! \file acceptance/draft_side.hpp
//! \brief `draft_side`: what `verify_from_logits` is given of the draft's q, the warped row each
//! drafted token was sampled from.
//!
//! A rejection rule reads q at two places: q(x_i) at every tested position (one scalar) and the whole
//! row q_i at the stopping position (the residual max(0, p - q)). A drafter already computed q_i when it
//! sampled x_i, so it can hand over what it has instead of letting the verifier warp every draft row
//! again:
//! - `rows = logits` (the default): `batch.draft_rows` are the draft's logits, warped with `params`
//!   where they are read;
//! - `rows = probabilities`: `batch.draft_rows` are q itself (a decode loop that kept the rows it
//!   sampled from); no draft row is warped;
//! - `q_at_drafts` (with either): q_i(x_i) of every draft row, as vLLM's `draft_probs` gathers them;
//!   then a draft row is read only where a residual (or a q(x) = 0 check) needs it, and with logits
//!   rows at most one draft row per request is warped.
//! Tokens are those of the default for the same streams whenever the values given are the ones the
//! warp gives (`specdec::warp_logits` on the same policy). Giving q(x) that were not the sampled law's
//! breaks exactness, as any wrong q does (docs/design.md, 'Drafting').
#pragma once

#include <span>

#include "specdec/distributions/warp.hpp"

namespace specdec {

//! What `batch.draft_rows` of a `verify_from_logits` call hold.
enum class draft_rows_kind : unsigned char {
  logits,        //!< the draft's logits, warped with `draft_side::params` where they are read
  probabilities  //!< the warped q rows themselves
};

//! The draft side of `verify_from_logits` (see the file comment).
template <class T>
struct draft_side {
  //! What `batch.draft_rows` hold: the draft's logits (the default) or the warped q rows.
  draft_rows_kind rows = draft_rows_kind::logits;
  //! With logits rows: one per request, or empty for the target's parameters. Unused otherwise.
  std::span<const warp_params> params{};
  //! Empty, or q_i(x_i) for every draft row of the batch (same order as `batch.draft_tokens`).
  std::span<const T> q_at_drafts{};
};

}  // namespace specdec
