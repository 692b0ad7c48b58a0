// Every tree rule (acceptance/multi_candidate.hpp), for tests that run all of them.
#pragma once

#include "specdec/acceptance/tree.hpp"

namespace specdec_test {

//! Calls fn(rule, name) for every tree rule: the lossless ones, greedy, and typical acceptance with
//! both corrections.
template <class Fn>
void for_each_tree_rule(Fn&& fn) {
  fn(specdec::strict, "strict (multi-step)");
  fn(specdec::recursive_rejection, "recursive_rejection");
  fn(specdec::k_seq, "k_seq");
  fn(specdec::target_only, "target_only");
  fn(specdec::greedy, "greedy");
  fn(specdec::sample_and_match, "sample_and_match");
  fn(specdec::typical_rule{}, "typical (argmax)");
  fn(specdec::typical_rule{0.09, 0.3, 1e-5, specdec::typical_correction::typical_sample}, "typical (typical_sample)");
}

}  // namespace specdec_test
