//! \file length/heuristic.hpp
//! \brief transformers' "heuristic" draft-length schedule (AssistedCandidateGenerator.
//! update_candidate_strategy in src/transformers/generation/candidate_generator.py; docs/lengths.md): after a round whose
//! drafts were all accepted the length grows by 2, after any other round it shrinks by 1 (to at least
//! 1), kept within [min, max] here. A `LengthController`: the length is fixed before each round, so
//! strict verification stays exact.
#pragma once

#include <algorithm>
#include <cstddef>

#include "specdec/contracts.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! The heuristic schedule, starting at `initial` (transformers' older default num_assistant_tokens = 5).
class heuristic_length {
 public:
  //! \throws specdec::error unless 1 <= min <= initial <= max.
  explicit heuristic_length(std::size_t initial = 5, std::size_t min = 1, std::size_t max = 64)
      : n_(initial), min_(min), max_(max) {
    SPECDEC_EXPECTS(min >= 1 && min <= initial && initial <= max, "specdec::heuristic_length: needs 1 <= min <= initial <= max");
  }
  //! The next round's length: the current one.
  std::size_t next_length(const decode_stats&) const noexcept { return n_; }
  //! +2 after a round that drafted and had every draft accepted, -1 after a round with a rejection; a
  //! round without drafts (cut by the budget) changes nothing.
  void record(const round_record& r) noexcept {
    if (r.drafted == 0) return;
    n_ = r.accepted == r.drafted ? std::min(n_ + 2, max_) : std::max(n_ - 1, min_);
  }
  //! The current length.
  std::size_t current() const noexcept { return n_; }

 private:
  std::size_t n_, min_, max_;
};

}  // namespace specdec
