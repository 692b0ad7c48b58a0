//! \file length/p_min.hpp
//! \brief llama.cpp's draft length (common/speculative.cpp;
//! docs/lengths.md): draft while the draft distribution's top probability is at least p_min (default 0.75),
//! at most n_max tokens (the request's gamma, default 16), and skip speculation when fewer than n_min
//! were drafted (default 0). Recent llama.cpp breaks before pushing the low-confidence token: here
//! x_j is dropped when max_v q_j(v) < p_min. The decision reads q_j, not the drawn x_j, so strict
//! verification stays exact; so does dropping a whole short draft (the target then samples the token).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "specdec/contracts.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! Drop x_j and stop when the top probability of q_j is below p_min.
struct p_min_stop {
  double p_min = 0.75;  //!< the least top probability max_v q_j(v) to keep drafting, in [0, 1]
  //! \throws specdec::error unless p_min is in [0, 1].
  draft_decision decide(const draft_view& v) const {
    SPECDEC_EXPECTS(p_min >= 0.0 && p_min <= 1.0, "specdec::p_min_stop: p_min must be in [0, 1]");
    const auto q = v.q_row();
    return static_cast<double>(*std::max_element(q.begin(), q.end())) < p_min ? draft_decision::drop : draft_decision::next;
  }
};

//! llama.cpp's n_min as a verified-length stage (`batch_decoder::set_verify_length_stage`): a request
//! that drafted fewer than n_min tokens verifies none of them.
inline auto min_drafts_lengths(std::size_t n_min) {
  return [n_min](auto requests, std::span<std::size_t> lengths) {
    for (std::size_t k = 0; k < lengths.size(); ++k)
      if (requests[k].drafts.size() < n_min) lengths[k] = 0;
  };
}

}  // namespace specdec
