//! \file length/round_labels.hpp
//! \brief What the target did to each draft of a request, learned one round later from its counters:
//! the drafts before the first rejection were accepted (label 1), the first rejected one was not
//! (label 0), later drafts were never judged (no label). Draft stop rules that learn from outcomes use
//! it (`confidence_stop`'s ROC refit, learn/acceptance_head.hpp's data collection); it reads only
//! `draft_view`s, so it works on whatever drafts the rule sees, one request per labeller.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! Keeps a payload per draft of the current round; at the first draft of the next round, hands each
//! labelled draft of the previous round to `emit(payload, accepted)`.
template <class Payload>
class round_labeler {
 public:
  //! Keeps `payload` for draft v.position; at a round's first draft, first hands each judged draft of the previous round (the
  //! accepted ones and the first rejected one) to `emit(payload, accepted)`.
  template <class Emit>
  void observe(const draft_view& v, Payload payload, Emit&& emit) {
    if (v.position == 0) {
      const decode_stats& s = *v.stats;
      if (!round_.empty() && s.iterations == round_index_ + 1) {
        const std::size_t accepted = s.accepted - accepted_before_, verified = s.drafted - drafted_before_;
        for (std::size_t j = 0; j < round_.size() && j <= accepted && j < verified; ++j) emit(std::move(round_[j]), j < accepted);
      }
      round_.clear();
      round_index_ = s.iterations;
      accepted_before_ = s.accepted;
      drafted_before_ = s.drafted;
    }
    round_.push_back(std::move(payload));
  }

 private:
  std::vector<Payload> round_;
  std::size_t round_index_ = 0, accepted_before_ = 0, drafted_before_ = 0;
};

}  // namespace specdec
