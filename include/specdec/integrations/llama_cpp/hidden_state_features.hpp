//! \file integrations/llama_cpp/hidden_state_features.hpp
//! \brief `llama_cpp::hidden_state_features`: SPRINTER's verifier features from the draft model's last
//! layer (seed 000, section 3.2: the verifier reads the draft model's hidden states), for a draft read
//! through `prefix_cached_model` lanes of a llama.cpp context made with `context_options::hidden_states`.
//!
//! s(x, prefix) = [h(prefix), draft_row_features(x, q)]: h is the draft's last-layer hidden state at the
//! prefix's last token (the state its row q was computed from), the row features say where x sits in
//! q. Under greedy drafting q is one-hot and the row features are constant; h still varies with the
//! prefix. The hidden state is the one the drafter's own call computed: `extract` finds the lane that
//! holds exactly the prefix (`prefix_cached_model::sequence_holding`), so it must follow the draft's
//! row for that prefix, as the verifier-gated drafter and learn/'s data generation call it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/integrations/llama_cpp/sequence_model.hpp"
#include "specdec/model/prefix_cached_model.hpp"

namespace specdec::llama_cpp {

//! A `FeatureExtractor` (draft/verifier.hpp): the draft's hidden state at the prefix's last token, then
//! `draft_row_features` (file comment). `Engine` is the sequence model the drafter's lanes read:
//! `sequence_model`, or a `gathered_sequence_model` of one (model/gathered_sequence_model.hpp: the
//! requests' drafter stages on threads, their forwards merged), which looks the state up under its lock.
template <class Engine>
class basic_hidden_state_features {
 public:
  //! The draft model as its drafter reads it: lanes of the engine.
  using draft_view = prefix_cached_model<Engine>;

  //! Reads the hidden states of `model` (a context made with hidden states) behind `draft`, which
  //! must both outlive the extractor. `lead`: a token the draft's contexts carry before every prefix
  //! (learn/'s documents start anywhere, after a BOS the tool puts in front), or none.
  //! \throws specdec::error when the context has no hidden states.
  basic_hidden_state_features(const draft_view& draft, const Engine& model, std::optional<token_id> lead = std::nullopt)
      : draft_(&draft), model_(&model), lead_(lead), hidden_(model.hidden_size()) {
    SPECDEC_EXPECTS(hidden_ > 0, "specdec::llama_cpp::hidden_state_features: the model has no hidden state");
  }

  //! The hidden state's width plus `draft_row_features::size`.
  std::size_t feature_size() const noexcept { return hidden_ + draft_row_features::size; }

  //! Writes s(x, prefix) for `query`. \pre out.size() == feature_size(); the draft's row after the
  //! prefix was the last thing computed on the lane that holds it. \throws specdec::error otherwise.
  void extract(const verifier_query& query, std::span<float> out) {
    SPECDEC_EXPECTS(out.size() == feature_size(),
                    "specdec::llama_cpp::hidden_state_features: out must hold feature_size() values");
    context_.clear();
    if (lead_) context_.push_back(*lead_);
    context_.insert(context_.end(), query.prefix.begin(), query.prefix.end());
    const auto sequence = draft_->sequence_holding(std::span<const token_id>(context_));
    SPECDEC_EXPECTS(sequence.has_value(),
                    "specdec::llama_cpp::hidden_state_features: no draft lane holds the prefix (ask for its row first)");
    const std::span<const float> h = model_->hidden_state(*sequence);
    std::copy(h.begin(), h.end(), out.begin());
    row_.extract(query, out.subspan(hidden_));
  }

 private:
  const draft_view* draft_;
  const Engine* model_;
  std::optional<token_id> lead_;
  std::size_t hidden_;
  draft_row_features row_;
  std::vector<token_id> context_;
};

//! The extractor on a llama.cpp sequence model's lanes.
using hidden_state_features = basic_hidden_state_features<sequence_model>;

static_assert(FeatureExtractor<hidden_state_features>);

}  // namespace specdec::llama_cpp
