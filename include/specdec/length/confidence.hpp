//! \file length/confidence.hpp
//! \brief transformers' `assistant_confidence_threshold` (ConfidenceCriteria in
//! src/transformers/generation/stopping_criteria.py; docs/lengths.md): drafting stops after a token whose draft
//! probability q_j(x_j) is below the threshold (the token is kept). With `refit`, the threshold is re-chosen
//! after every round from all (q_j(x_j), accepted?) pairs seen so far as the one minimising fpr + 3 fnr (false
//! positives cost 1, false negatives 3; transformers re-fits from sklearn's ROC curve), once there are more
//! than 5 samples of both classes. A verified draft counts as accepted or rejected; drafts after a rejection
//! are not labelled. Exact with strict verification: the stop after x_j depends on x_{<=j}.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/length/round_labels.hpp"

namespace specdec {

//! The threshold t minimising fpr(t) + w fnr(t) when a sample is predicted positive iff its score >= t:
//! fpr = P(score >= t | negative), fnr = P(score < t | positive). Candidates: every distinct score and
//! +inf (nothing positive); ties go to the highest threshold. \pre both classes present.
//! \throws specdec::error otherwise.
inline double weighted_roc_threshold(std::span<const std::pair<double, bool>> samples, double fn_weight) {
  std::size_t pos = 0, neg = 0;
  for (const auto& [s, label] : samples) (label ? pos : neg) += 1;
  SPECDEC_EXPECTS(pos > 0 && neg > 0, "specdec::weighted_roc_threshold: needs both classes");
  std::vector<std::pair<double, bool>> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  double best_t = std::numeric_limits<double>::infinity();
  double best = fn_weight;  // t = +inf: fpr 0, fnr 1
  std::size_t tp = 0, fp = 0;
  for (std::size_t i = 0; i < sorted.size();) {
    const double t = sorted[i].first;
    for (; i < sorted.size() && sorted[i].first == t; ++i) (sorted[i].second ? tp : fp) += 1;
    const double cost = double(fp) / double(neg) + fn_weight * (1.0 - double(tp) / double(pos));
    if (cost < best) {
      best = cost;
      best_t = t;
    }
  }
  return best_t;
}

//! Stop after a draft with q_j(x_j) < threshold (transformers' default 0.4), optionally re-fitted.
class confidence_stop {
 public:
  //! \throws specdec::error unless threshold is in [0, 1].
  explicit confidence_stop(double threshold = 0.4, bool refit = false) : threshold_(threshold), refit_(refit) {
    SPECDEC_EXPECTS(threshold >= 0.0 && threshold <= 1.0, "specdec::confidence_stop: the threshold must be in [0, 1]");
  }
  //! Stops after x_j when q_j(x_j) < the threshold; with refitting, first adds last round's judged drafts to the samples and
  //! re-fits the threshold (false negatives cost 3, see the file comment) once both classes hold more than 5.
  draft_decision decide(const draft_view& v) {
    if (refit_) {
      const std::size_t before = samples_.size();
      labels_.observe(v, v.token_probability(), [this](double q, bool accepted) {
        samples_.emplace_back(q, accepted);
        positives_ += accepted;
      });
      if (samples_.size() > before && positives_ > 5 && samples_.size() - positives_ > 5)
        threshold_ = std::min(1.0, weighted_roc_threshold(samples_, 3.0));
    }
    return v.token_probability() < threshold_ ? draft_decision::stop : draft_decision::next;
  }
  //! The current threshold.
  double threshold() const noexcept { return threshold_; }
  //! The (q_j(x_j), accepted) samples collected for refitting.
  std::span<const std::pair<double, bool>> samples() const noexcept { return samples_; }

 private:
  double threshold_;
  bool refit_;
  round_labeler<double> labels_;
  std::vector<std::pair<double, bool>> samples_;
  std::size_t positives_ = 0;
};

}  // namespace specdec
