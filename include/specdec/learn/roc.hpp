//! \file learn/roc.hpp
//! \brief ROC curve, AUC and the operating point (eta_tp, eta_fp) of a verifier at a threshold tau
//! (seed 000: Figure 3, sections 3.1-3.2, A.10). A token is accepted when its score is >= tau
//! (Algorithm 2), so eta_tp(tau) = P(score >= tau | label 1) and eta_fp(tau) = P(score >= tau | label 0).
//!
//! The threshold choice itself (the fastest ROC point whose eta_fp d_TV(p, q) meets a bound, Theorems
//! 3.1 and 3.3) is `optimize::sprinter::choose_threshold` (optimize/threshold.hpp); the law of the
//! acceptable-run length r it needs comes from `learn::estimate_acceptable_runs` (learn/generate.hpp).
//! For Theorem 3.1's quality bound d_TV = eta_fp d_TV(p, q), eta_fp must be measured against the
//! paper's definition of acceptable, q(x) <= p(x) (lambda = 1), whatever lambda the verifier was
//! trained with: relabel held-out data with `verifier_dataset::relabel(1.0)` first.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/learn/dataset.hpp"
#include "specdec/optimize/threshold.hpp"

namespace specdec::learn {

//! A verifier's rates at one threshold {threshold, eta_tp, eta_fp}: the point type of the threshold
//! optimiser (optimize/threshold.hpp), so a `roc_curve`'s points feed
//! `optimize::sprinter::choose_threshold` directly. Here a token is accepted iff score >= threshold.
using roc_point = optimize::sprinter::roc_point;

//! A ROC curve: points from the strictest threshold (nothing accepted, (0, 0)) to the most lenient
//! (everything accepted, (1, 1)), one per distinct score, and the area under it.
struct roc_curve {
  std::vector<roc_point> points;  //!< from (0, 0) to (1, 1), one per distinct score
  double auc = 0.0;               //!< trapezoidal area; equals P(s_pos > s_neg) + P(tie) / 2
  std::size_t positives = 0;      //!< the examples labelled 1
  std::size_t negatives = 0;      //!< the examples labelled 0
};

namespace detail {
inline void expect_scores(std::span<const double> scores, std::span<const std::uint8_t> labels) {
  SPECDEC_EXPECTS(scores.size() == labels.size(), "scores and labels must have the same length");
  for (const double s : scores) SPECDEC_EXPECTS(!std::isnan(s), "a score is NaN");
  for (const auto l : labels) SPECDEC_EXPECTS(l <= 1, "labels must be 0 or 1");
}
}  // namespace detail

//! The ROC curve of `scores` against `labels`.
//! \pre equal lengths; no NaN score; labels 0 or 1; both classes present.
//! \throws specdec::error otherwise.
inline roc_curve compute_roc(std::span<const double> scores, std::span<const std::uint8_t> labels) {
  detail::expect_scores(scores, labels);
  roc_curve c;
  for (const auto l : labels) (l ? c.positives : c.negatives) += 1;
  SPECDEC_EXPECTS(c.positives > 0 && c.negatives > 0, "a ROC curve needs both positive and negative examples");
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  const double np = static_cast<double>(c.positives), nn = static_cast<double>(c.negatives);
  const double top = scores[order.front()];
  c.points.push_back({std::isfinite(top) ? std::nextafter(top, std::numeric_limits<double>::infinity())
                                         : std::numeric_limits<double>::infinity(),
                      0.0, 0.0});
  std::size_t tp = 0, fp = 0;
  for (std::size_t i = 0; i < order.size();) {
    const double s = scores[order[i]];
    for (; i < order.size() && scores[order[i]] == s; ++i) (labels[order[i]] ? tp : fp) += 1;
    const roc_point pt{s, static_cast<double>(tp) / np, static_cast<double>(fp) / nn};
    const roc_point& prev = c.points.back();
    c.auc += (pt.eta_fp - prev.eta_fp) * (pt.eta_tp + prev.eta_tp) / 2.0;
    c.points.push_back(pt);
  }
  return c;
}

//! (eta_tp, eta_fp) at threshold tau: accept iff score >= tau.
//! \pre as compute_roc; tau not NaN. \throws specdec::error otherwise.
inline roc_point rates_at(std::span<const double> scores, std::span<const std::uint8_t> labels, double tau) {
  detail::expect_scores(scores, labels);
  SPECDEC_EXPECTS(!std::isnan(tau), "tau is NaN");
  std::size_t pos = 0, neg = 0, tp = 0, fp = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const bool accept = scores[i] >= tau;
    if (labels[i]) {
      ++pos;
      tp += accept;
    } else {
      ++neg;
      fp += accept;
    }
  }
  SPECDEC_EXPECTS(pos > 0 && neg > 0, "rates need both positive and negative examples");
  return {tau, double(tp) / double(pos), double(fp) / double(neg)};
}

//! The rates of a ROC curve at threshold tau (the curve's step function: the most lenient point
//! whose threshold is >= tau). Equals `rates_at` on the data the curve was computed from.
//! \pre the curve is not empty; tau not NaN. \throws specdec::error otherwise.
inline roc_point rates_at(const roc_curve& roc, double tau) {
  SPECDEC_EXPECTS(!roc.points.empty(), "the ROC curve is empty");
  SPECDEC_EXPECTS(!std::isnan(tau), "tau is NaN");
  roc_point r = roc.points.front();
  for (const roc_point& pt : roc.points)
    if (pt.threshold >= tau) r = pt;
  return {tau, r.eta_tp, r.eta_fp};
}

//! The verifier's scores of every example of `data` (through `checked_score`).
//! \throws specdec::error on a feature-size mismatch; specdec::numerical_error on a NaN score.
template <Verifier V>
std::vector<double> score_all(const V& verifier, const verifier_dataset& data) {
  std::vector<double> s(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) s[i] = checked_score(verifier, data.row(i));
  return s;
}

}  // namespace specdec::learn
