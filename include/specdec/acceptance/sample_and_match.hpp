//! \file acceptance/sample_and_match.hpp
//! \brief Sample-and-match (llama.cpp's server, vLLM V2 "strict", TRT-LLM without draft logits):
//! at each drafted position the target samples y ~ p; accept x iff x == y; at the first mismatch
//! emit y; after gamma matches emit the target's sample from the last row as the bonus.
//! **Guarantee:** every emitted token is a sample from p given its prefix, so the output is exactly
//! the target distribution, whatever the drafter did; it needs no q, but accepts x only with
//! probability p(x) (lower than the strict rule's min(1, p(x)/q(x)) whenever q is informative).
#pragma once

#include "specdec/acceptance/concepts.hpp"

namespace specdec {

//! The sample-and-match rule: accept x iff x == y, y ~ p (see the file comment).
struct sample_and_match_rule {
  //! Decided by the target's own sample, without q (rule_family::sample_and_match).
  static constexpr rule_family family = rule_family::sample_and_match;
  //! On a tree: descend into the child equal to the node's sample y ~ p.
  static constexpr tree_method method = tree_method::sample_and_match;
};

//! The sample-and-match rule, as a value to pass to `verify` or `verify_tree`.
inline constexpr sample_and_match_rule sample_and_match{};

}  // namespace specdec
