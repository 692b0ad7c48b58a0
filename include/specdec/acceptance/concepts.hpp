//! \file acceptance/concepts.hpp
//! \brief What an acceptance rule is. Every rule plugs into the same `verify` entry point and
//! the same outputs; its `family` tells the verifier which scalar test and which correction it needs,
//! and its `method`, when it has one, how it verifies a token tree. A rule declares both on itself.
#pragma once

#include <concepts>

#include "specdec/config.hpp"

namespace specdec {

//! How a rule decides and what it emits when it rejects.
enum class rule_family {
  rejection,         //!< accept x with a probability from p(x), q(x); on rejection sample norm(max(0, p - a))
  greedy,            //!< accept x iff x == argmax p; on rejection emit argmax p
  sample_and_match,  //!< the target samples y ~ p; accept x iff x == y; on rejection emit y
  block,             //!< block verification (acceptance/block.hpp): the whole chain is decided jointly
  typical,           //!< typical acceptance (acceptance/typical.hpp, lossy): accept x iff p(x) > a threshold from H(p)
};

//! How a rule decides a node's children on a token tree (acceptance/multi_candidate.hpp's table): a
//! rule that verifies trees names its method as `static constexpr tree_method method` (`tree_method_of`).
enum class tree_method : unsigned char {
  multi_step,           //!< `strict` on a tree (SpecInfer's multi-step sampling)
  recursive_rejection,  //!< `recursive_rejection`
  k_seq,                //!< `k_seq`
  target_only,          //!< `target_only`
  greedy,               //!< `greedy`
  sample_and_match,     //!< `sample_and_match`
  typical,              //!< `typical_rule` (lossy, acceptance/typical.hpp)
};

//! A rejection-family rule: a test on the two scalars p(x), q(x) and a uniform u, and the mass
//! a(v) = q(v) * P(accept v) that the test already emits for token v, from which the residual
//! norm(max(0, p - a)) follows.
template <class R>
concept RejectionRule = requires(const R& r, double p, double q, double u) {
  { r.accepts(p, q, u) } -> std::same_as<bool>;
  { r.accepted_mass(p, q) } -> std::convertible_to<double>;
};

//! Any rule `specdec::verify` accepts.
// clang-format off
template <class R>
concept AcceptanceRule = requires {
  { R::family } -> std::convertible_to<rule_family>;
} && (R::family != rule_family::rejection || RejectionRule<R>);
// clang-format on

//! Whether the rule reads the draft distribution q (greedy, sample-and-match and typical do not).
template <AcceptanceRule R>
inline constexpr bool reads_draft_distribution = R::family == rule_family::rejection || R::family == rule_family::block;

}  // namespace specdec
