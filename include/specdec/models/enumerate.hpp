//! \file models/enumerate.hpp
//! \brief Exact enumeration of every continuation of a given length, with its probability.
//!
//! Statistical tests of lossless acceptance rules compare sampled outputs with the exact output
//! distribution (docs/design.md, 'Tests'); on a small vocabulary that distribution is enumerable.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"

namespace specdec {

//! A token sequence together with its probability under a model.
struct weighted_sequence {
  std::vector<token_id> tokens;  //!< the continuation, oldest first
  double probability = 0.0;      //!< its probability given the context
};

//! Enumerates all `V^horizon` continuations of `context` of length `horizon`, in lexicographic order
//! (first token most significant), each with its probability
//! `prod_i p(x_i | context, x_1..x_{i-1})` computed in double by `specdec::next_probs` (exact for a
//! `ProbabilityModel`; a double softmax of the logits otherwise). Zero-probability sequences are included,
//! so the result always has `V^horizon` entries and its probabilities sum to 1 (within rounding).
//! Calls the model once per prefix (`(V^horizon - 1) / (V - 1)` times).
//! \pre `V^horizon <= max_sequences`.
//! \throws specdec::error when the enumeration would be larger than `max_sequences`, or what the model throws.
template <Model M>
std::vector<weighted_sequence> enumerate_sequences(const M& model, std::span<const token_id> context, std::size_t horizon,
                                                   [[maybe_unused]] std::size_t max_sequences = std::size_t{1} << 20) {
  const std::size_t vocab = static_cast<std::size_t>(model.vocab_size());
  [[maybe_unused]] std::size_t total = 1;
  for (std::size_t i = 0; i < horizon; ++i) {
    SPECDEC_EXPECTS(total <= max_sequences / vocab, "V^horizon exceeds max_sequences");
    total *= vocab;
  }
  std::vector<weighted_sequence> level{weighted_sequence{{}, 1.0}};
  std::vector<token_id> full(context.begin(), context.end());
  std::vector<double> probs(vocab);
  for (std::size_t depth = 0; depth < horizon; ++depth) {
    std::vector<weighted_sequence> next;
    next.reserve(level.size() * vocab);
    for (const weighted_sequence& prefix : level) {
      full.resize(context.size() + prefix.tokens.size());
      std::copy(prefix.tokens.begin(), prefix.tokens.end(), full.begin() + static_cast<std::ptrdiff_t>(context.size()));
      specdec::next_probs(model, std::span<const token_id>(full), std::span<double>(probs));
      for (std::size_t t = 0; t < vocab; ++t) {
        weighted_sequence s{prefix.tokens, prefix.probability * probs[t]};
        s.tokens.push_back(static_cast<token_id>(t));
        next.push_back(std::move(s));
      }
    }
    level = std::move(next);
  }
  return level;
}

}  // namespace specdec
