//! \file learn/acceptance_head.hpp
//! \brief SpecDec++'s acceptance head (Huang, Guo and Wang, arXiv 2405.19715), trained with learn/: a
//! logistic model of P(the target accepts draft x_j) from features of the draft alone, for
//! `cumulative_acceptance_stop` (length/cumulative_acceptance.hpp). SpecDec++ reads the draft model's
//! last hidden state; a library that sees only the draft rows uses their summary instead:
//!   s_j = (q_j(x_j), max_v q_j(v), H(q_j) in nats, j).
//! Data: `acceptance_recorder`, a draft stop rule that never stops, labels every judged draft of a
//! request with what the target did to it (length/round_labels.hpp: accepted before the first
//! rejection, rejected at it); `train_acceptance_head` fits `train_linear_verifier` (Adam on the
//! cross-entropy, early stopping) to those labels.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>

#include "specdec/learn/dataset.hpp"
#include "specdec/learn/linear_verifier.hpp"
#include "specdec/learn/train.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/length/entropy.hpp"
#include "specdec/length/round_labels.hpp"

namespace specdec::learn {

//! The number of draft features.
inline constexpr std::size_t draft_feature_count = 4;
//! The features of one draft (`draft_features`).
using draft_feature_vector = std::array<float, draft_feature_count>;

//! The features of draft x_j: q_j(x_j), the top probability of q_j, its entropy, and j.
inline draft_feature_vector draft_features(const draft_view& v) {
  const auto q = v.q_row();
  return {static_cast<float>(v.token_probability()), *std::max_element(q.begin(), q.end()), static_cast<float>(entropy_nats(q)),
          static_cast<float>(v.position)};
}

//! A draft stop rule that never stops and adds each judged draft (its features, 1 = accepted) to
//! `data`, one round later. One recorder per request; `data` (feature_size = draft_feature_count) must
//! outlive it.
class acceptance_recorder {
 public:
  //! A recorder that adds the examples to `data` (whose feature_size it sets to draft_feature_count).
  explicit acceptance_recorder(verifier_dataset& data) : data_(&data) { data.feature_size = draft_feature_count; }
  //! Keeps the draft's features; at the next round's first draft, adds the judged drafts of the previous one (accepted, and the
  //! first rejected). Never stops drafting.
  draft_decision decide(const draft_view& v) {
    labels_.observe(v, draft_features(v), [this](const draft_feature_vector& s, bool accepted) {
      data_->features.insert(data_->features.end(), s.begin(), s.end());
      data_->labels.push_back(accepted ? 1 : 0);
    });
    return draft_decision::next;
  }

 private:
  verifier_dataset* data_;
  round_labeler<draft_feature_vector> labels_;
};

//! The acceptance head: P(accept x_j) = sigmoid(w . standardised s_j + b).
struct acceptance_head {
  linear_verifier model{draft_feature_count};  //!< the trained linear layer over `draft_features`
  //! P(accept x_j) = sigmoid(w . z + b) for the draft `v` looks at.
  double operator()(const draft_view& v) const {
    const draft_feature_vector s = draft_features(v);
    return model.score(std::span<const float>(s));
  }
};

//! Fits the head to recorded data. \throws specdec::error as `train_linear_verifier`.
inline acceptance_head train_acceptance_head(const verifier_dataset& data, const train_options& options = {}) {
  return {train_linear_verifier(data, options).verifier};
}

}  // namespace specdec::learn
