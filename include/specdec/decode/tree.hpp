//! \file decode/tree.hpp
//! \brief Tree speculative decoding of one request (EAGLE-style trees, SpecInfer, Medusa-style static
//! trees): a tree drafter (draft/tree.hpp) as the request's drafter stage, the target scoring every
//! node of the tree in one tree-shaped append, a tree rule (acceptance/multi_candidate.hpp) choosing
//! the accepted path. One request on the step decoder over a recomputing adapter of the target, as
//! `decode` does for chains; an engine adds `tree_acceptance` requests to its own `batch_decoder`.
//! The simulated clock charges the target t_target(nodes + 1) per round and the draft one step per
//! batched drafter call (a depth or a frontier).
#pragma once

#include <cstddef>
#include <span>

#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/decode.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/exec/dispatch.hpp"
#include "specdec/model/sequence.hpp"

namespace specdec {

//! Decodes one request with trees of depth at most `depth` from `drafter`, verified with `rule`
//! (candidates must be drawn as the rule assumes: draft/tree.hpp's table).
//! \pre target and drafter share the vocabulary. \throws specdec::error on bad options or an empty prompt
template <exec::ExecutionPolicy Policy, Model Target, TreeDrafter D, TreeRule Rule>
decode_result decode_tree(const Policy& policy, const Target& target, D& drafter, std::size_t depth, const Rule& rule,
                          std::span<const token_id> prompt, const decode_options& options, const cost_model& cost = {}) {
  SPECDEC_REQUIRE_BACKEND(Policy, "specdec::decode_tree");
  validate(options.target_params);
  recomputing_sequence_model<Target> t(target);
  no_sequence_model none(target.vocab_size());
  batch_decoder decoder(policy, t, none, strict);
  request_options o = detail::request_of(prompt, options);
  o.set_stages(tree_drafter_stage(drafter), tree_acceptance{rule});
  o.gamma = depth;
  decode_result r;
  detail::run_request(decoder, std::move(o), cost, r);
  return r;
}

}  // namespace specdec
