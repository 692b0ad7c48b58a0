//! \file conformance/options.hpp
//! \brief What a conformance run checks and how hard: sample sizes, the false-failure level, and what
//! the verifier under test declares about itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "specdec/conformance/interface.hpp"

namespace specdec::conformance {

//! The options of a kit run: its statistical level, its sizes, and what the verifier claims to do.
struct kit_options {
  //! The false-failure level of each statistical check: a correct verifier fails one with
  //! probability at most alpha.
  double alpha = 1e-6;
  //! Seeds everything the kit draws (models, drafts, request seeds). A report names it; the same seed
  //! and verifier reproduce the same run.
  std::uint64_t seed = 20261125;
  //! Requests per exact-law configuration (each one emits `horizon` tokens over several steps).
  std::size_t law_requests = 100000;
  //! Requests per verifier call in the exact-law and impossible-token checks.
  std::size_t batch_size = 2000;
  //! Pairs per independence variant.
  std::size_t independence_pairs = 20000;
  //! Trials of the impossible-token check: single-draft requests whose draft the target never
  //! emits. 2^27 catches a uniform of 24-bit resolution that can be exactly 0 (expected 8 events)
  //! with probability 1 - e^-8. 0 skips the check.
  std::uint64_t impossible_token_trials = std::uint64_t{1} << 27;
  //! The verifier draws its coins from (seed, request id, step) alone: enables the determinism,
  //! batch-invariance and independence checks.
  bool seeded = true;
  //! The verifier reads the draft rows q (strict, block verification). When false (greedy,
  //! sample-and-match), bad draft rows need not be reported.
  bool reads_draft_probs = true;
  //! Trees: how the kit draws siblings, i.e. which drafting the tree verifier's guarantee assumes.
  sibling_sampling tree_sampling = sibling_sampling::independent;
  //! Run only the checks whose name starts with one of these (empty: all).
  std::vector<std::string> only;
  //! Progress lines (one per check) when set.
  std::ostream* progress = nullptr;

  //! Whether the check `check_name` is run: `only` is empty, or one of its entries is a prefix of it.
  bool wants(const std::string& check_name) const {
    if (only.empty()) return true;
    for (const auto& prefix : only)
      if (check_name.compare(0, prefix.size(), prefix) == 0) return true;
    return false;
  }
};

}  // namespace specdec::conformance
