//! \file acceptance/bild.hpp
//! \brief BiLD's rollback policy (Big Little Decoder, Kim et al., NeurIPS 2023, arXiv 2302.07863): the large
//! model scores every token the small one produced since its last call; at the earliest position m where
//! -log p_L(x_m) > the rollback threshold (default 5) the output is truncated and x_m replaced by the large model's
//! argmax (no rollback when that argmax is x_m itself); when no position exceeds it, the large model appends
//! its own argmax after the run. BiLD's fallback policy (the small model hands over when its top probability is
//! below a threshold, or after n small steps) is drafting with `p_min_stop` and gamma = n on greedy drafts
//! (length/p_min.hpp).
//!
//! **Guarantee: lossy.** BiLD approximates the large model's greedy output (the official code is
//! greedy only); a threshold of 0 accepts only tokens that are the large model's argmax, so its output
//! is exactly greedy decoding of the large model (tested), and larger thresholds trade agreement for
//! longer runs. p_L is the target row warped with the request's target parameters (T = 1 by default:
//! the softmax BiLD uses).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

//! BiLD's rollback rule with its threshold on -log p_L(x).
class bild_rule {
 public:
  //! \throws specdec::error unless the threshold is >= 0 (+inf accepts every draft).
  explicit bild_rule(double rollback_threshold = 5.0) : threshold_(rollback_threshold) {
    SPECDEC_EXPECTS(rollback_threshold >= 0.0, "specdec::bild_rule: the rollback threshold must be >= 0");
  }
  //! The rollback threshold on -log p_L(x): a draft scoring above it is rolled back.
  double rollback_threshold() const noexcept { return threshold_; }

  //! Equal thresholds.
  bool operator==(const bild_rule&) const = default;

 private:
  double threshold_;
};

namespace detail {
//! The argmax of a row (lowest id on ties), or no_token when an entry is NaN, negative or infinite,
//! or no entry is > 0 (a row without mass is unusable, as for every rule: status.hpp).
template <class T>
token_id checked_argmax(std::span<const T> row) {
  std::size_t best = 0;
  for (std::size_t v = 0; v < row.size(); ++v) {
    if (!(row[v] >= T(0)) || !std::isfinite(static_cast<double>(row[v]))) return no_token;
    if (row[v] > row[best]) best = v;
  }
  return !row.empty() && row[best] > T(0) ? static_cast<token_id>(best) : no_token;
}
}  // namespace detail

//! Verifies one BiLD run: `drafts` (n tokens) against the target's probability rows [n + 1][V]. Emits
//! the drafts before the earliest rollback position and the target's argmax there, or every draft and
//! the argmax of the last row. A draft outside [0, V) refuses the request (bad_draft_token); an
//! unusable row (NaN, infinite or negative entries, or no mass) stops there with `invalid_row` and no token.
//! \pre target_probs.size() == (drafts.size() + 1) * V, V >= 1. \throws specdec::error otherwise.
template <class T>
chain_result bild_verify(const bild_rule& rule, std::span<const token_id> drafts, std::span<const T> target_probs,
                         std::size_t vocab_size) {
  const std::size_t n = drafts.size(), V = vocab_size;
  SPECDEC_EXPECTS(V >= 1 && target_probs.size() == (n + 1) * V,
                  "specdec::bild_verify: target_probs must hold (drafts + 1) rows of V");
  chain_result r;
  for (const token_id x : drafts)
    if (!in_vocabulary(x, V)) {
      r.status = verify_status::bad_draft_token;
      return r;
    }
  for (std::size_t m = 0; m <= n; ++m) {
    const auto row = target_probs.subspan(m * V, V);
    const token_id best = detail::checked_argmax(row);
    if (best == no_token) {
      r.status |= verify_status::invalid_row;
      return r;
    }
    if (m < n) {
      const double p = static_cast<double>(row[static_cast<std::size_t>(drafts[m])]);
      if (drafts[m] == best || !(-std::log(p) > rule.rollback_threshold())) {
        r.tokens.push_back(drafts[m]);
        ++r.num_accepted;
        continue;
      }
    }
    r.tokens.push_back(best);  // the rollback's replacement, or the large model's token after the run
    return r;
  }
  return r;
}

}  // namespace specdec
