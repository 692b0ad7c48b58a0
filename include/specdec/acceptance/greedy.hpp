//! \file acceptance/greedy.hpp
//! \brief Greedy verification: accept the draft token x iff x == argmax p (lowest id on ties);
//! at the first mismatch emit argmax p; after gamma matches the bonus is argmax of the last row.
//! **Guarantee:** the output equals greedy (temperature 0) decoding of the target, token for token.
//! Does not read q and draws no random numbers.
#pragma once

#include "specdec/acceptance/concepts.hpp"

namespace specdec {

//! The greedy verification rule: accept x iff x == argmax p (see the file comment).
struct greedy_rule {
  //! Decided by argmax p, without q or random numbers (rule_family::greedy).
  static constexpr rule_family family = rule_family::greedy;
  //! On a tree: descend into the child equal to argmax p.
  static constexpr tree_method method = tree_method::greedy;
};

//! The greedy rule, as a value to pass to `verify` or `verify_tree`.
inline constexpr greedy_rule greedy{};

}  // namespace specdec
