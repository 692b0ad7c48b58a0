//! \file length/oracle.hpp
//! \brief The draft length of an oracle that knows the true acceptance profile: alpha_j = P(draft j is
//! accepted | drafts before it were), independent of everything the drafter sees. A round of k drafts
//! then emits E(k) = 1 + sum_{j<k} prod_{i<=j} alpha_i tokens in expectation (Leviathan et al. eq. (1)
//! with position-dependent rates) and costs T(k) = k t_draft + L(k), L the verification latency of k
//! drafts (theory/latency_profile.hpp). The optimal-stopping programme "draft one more or stop" has
//! nothing to condition on (no observation changes the future odds), so its solution is one k for every
//! round, and by renewal-reward no policy's long-run tokens per unit time exceeds
//!   max_k E(k) / T(k),
//! the bound the other rules are compared with (tests/length/rules.cpp checks it by simulation).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec {

//! E(k): expected tokens of a round of k drafts under the profile alpha (k <= alpha.size()).
//! \throws specdec::error for k > alpha.size() or an alpha outside [0, 1].
inline double expected_round_tokens(std::span<const double> alpha, std::size_t k) {
  SPECDEC_EXPECTS(k <= alpha.size(), "specdec::expected_round_tokens: k exceeds the profile");
  double tokens = 1.0, reach = 1.0;
  for (std::size_t j = 0; j < k; ++j) {
    SPECDEC_EXPECTS(alpha[j] >= 0.0 && alpha[j] <= 1.0, "specdec::expected_round_tokens: acceptance outside [0, 1]");
    tokens += reach *= alpha[j];
  }
  return tokens;
}

//! The oracle's fixed length argmax_{k <= alpha.size()} E(k) / (k t_draft + L(k)), and that rate.
class oracle_length {
 public:
  //! \throws specdec::error on an acceptance outside [0, 1], t_draft < 0, or a bad latency profile.
  template <theory::LatencyProfile L>
  oracle_length(std::vector<double> alpha, double t_draft, const L& latency) : alpha_(std::move(alpha)) {
    SPECDEC_EXPECTS(t_draft >= 0.0, "specdec::oracle_length: t_draft must be >= 0");
    for (std::size_t k = 0; k <= alpha_.size(); ++k) {
      const double rate = expected_round_tokens(alpha_, k) / (static_cast<double>(k) * t_draft + theory::latency_at(latency, k));
      if (rate > rate_) {
        rate_ = rate;
        k_ = k;
      }
    }
  }
  //! The optimal length k* = argmax_k E(k) / T(k), the same for every round.
  std::size_t next_length(const decode_stats&) const noexcept { return k_; }
  //! Expected tokens per unit time of the best length.
  double rate() const noexcept { return rate_; }

 private:
  std::vector<double> alpha_;
  std::size_t k_ = 0;
  double rate_ = 0.0;
};

}  // namespace specdec
