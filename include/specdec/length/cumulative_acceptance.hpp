//! \file length/cumulative_acceptance.hpp
//! \brief SpecDec++'s stop rule (Huang, Guo and Wang, arXiv 2405.19715;
//! docs/lengths.md): a predictor estimates the acceptance probability of each draft
//! token, the product c_j = prod_{i<=j} a_i is the chance that no draft so far is rejected, and drafting
//! stops after x_j once 1 - c_j > h (the probability of at least one rejection exceeds h), but not
//! before `min_drafts` tokens. SpecDec++ trains an acceptance head on the draft model's hidden state;
//! here the predictor is any callable of the `draft_view` (e.g. q_j(x_j), or a model trained with
//! learn/ on draft features). The stop after x_j depends on x_{<=j}: strict verification stays exact.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "specdec/contracts.hpp"
#include "specdec/length/concepts.hpp"

namespace specdec {

//! Stop after x_j when 1 - prod_{i<=j} predict(view_i) > h (predictions clamped to [0, 1]).
template <class Predictor>
class cumulative_acceptance_stop {
 public:
  //! \throws specdec::error unless h is in [0, 1].
  explicit cumulative_acceptance_stop(Predictor predict, double h = 0.3, std::size_t min_drafts = 2)
      : predict_(std::move(predict)), h_(h), min_(min_drafts) {
    SPECDEC_EXPECTS(h >= 0.0 && h <= 1.0, "specdec::cumulative_acceptance_stop: h must be in [0, 1]");
  }
  //! Multiplies the running product by predict(v) (NaN counts as 0); stops when 1 - product > h, once min_drafts drafts are made.
  draft_decision decide(const draft_view& v) {
    if (v.position == 0) product_ = 1.0;
    const double a = static_cast<double>(predict_(v));
    product_ *= std::isnan(a) ? 0.0 : std::clamp(a, 0.0, 1.0);
    return v.position + 1 >= min_ && 1.0 - product_ > h_ ? draft_decision::stop : draft_decision::next;
  }

 private:
  Predictor predict_;
  double h_;
  std::size_t min_;
  double product_ = 1.0;
};

}  // namespace specdec
