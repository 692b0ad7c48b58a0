//! \file draft/cross_vocab.hpp
//! \brief What the cross-vocabulary drafters (draft/tli.hpp, draft/slem.hpp) share: their options, and
//! a drafter object held by a shared pointer as a drafter stage of the step decoder.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <utility>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/vocab/retokenized_context.hpp"

namespace specdec {

//! Options of a cross-vocabulary drafter.
struct cross_vocab_options {
  warp_params draft_params{};    //!< how the draft's rows are warped before drafting from them
  retokenize_options context{};  //!< the draft's view of the target's text (prefix, look-behind)
};

namespace detail {
//! The call of a drafter stage that forwards to a shared drafter. \throws specdec::error when null.
template <class D>
auto shared_call(std::shared_ptr<D> drafter) {
  SPECDEC_EXPECTS(drafter != nullptr, "specdec::shared_stage: the drafter is null");
  return [d = std::move(drafter)](std::span<const token_id> context, std::size_t gamma, const random::request_stream& stream,
                                  stage_draft& out) { (*d)(context, gamma, stream, out); };
}
}  // namespace detail

//! A drafter held by a shared pointer as a drafter stage that writes `output` (the caller may keep the
//! pointer to read the drafter's statistics). \throws specdec::error when `drafter` is null.
template <class D>
draft_stage shared_stage(std::shared_ptr<D> drafter, draft_output output = draft_output::unspecified) {
  return draft_stage(output, detail::shared_call(std::move(drafter)));
}

//! A drafter held by a shared pointer as a drafter stage whose output `Output` is part of its type.
//! \throws specdec::error when `drafter` is null.
template <draft_output Output, class D>
draft_stage_of<Output> shared_stage(std::shared_ptr<D> drafter) {
  return draft_stage_of<Output>(detail::shared_call(std::move(drafter)));
}

}  // namespace specdec
