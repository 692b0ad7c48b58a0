//! \file model/score.hpp
//! \brief Calling a model through the best interface it offers: `score`, `score_batch`, `batch_next_logits`,
//! `next_probs`.
//!
//! Algorithms call these free functions instead of the members, so they work with any `Model`: when the
//! model offers the richer interface (`ParallelScoringModel`, `BatchedModel`, `ProbabilityModel`) it is
//! used, otherwise the functions fall back to a loop over `next_logits` (docs/design.md, 'Models',
//! "loops adapt with if constexpr to what a model offers").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/model/concepts.hpp"

namespace specdec {
namespace detail {

//! Turns a logit row into probabilities in double: `probs[i] = exp(logits[i] - max) / sum`.
//! \pre `probs.size() == logits.size()`.
//! \throws specdec::error when a logit is NaN or `+inf`, or when every logit is `-inf` (no mass).
inline void logits_to_probs(std::span<const float> logits, std::span<double> probs) {
  SPECDEC_EXPECTS(probs.size() == logits.size(), "probs and logits must have the same length");
  double max = -std::numeric_limits<double>::infinity();
  for (float l : logits) {
    SPECDEC_EXPECTS(!std::isnan(l) && l != std::numeric_limits<float>::infinity(), "a logit is NaN or +inf");
    max = std::max(max, static_cast<double>(l));
  }
  SPECDEC_EXPECTS(max > -std::numeric_limits<double>::infinity(), "every logit is -inf: the row has no mass");
  double sum = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    probs[i] = std::exp(static_cast<double>(logits[i]) - max);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
}

//! Writes `log(p)` as float logits, `-inf` where `p == 0`.
//! \pre `logits.size() == probs.size()`.
inline void probs_to_logits(std::span<const double> probs, std::span<float> logits) {
  SPECDEC_EXPECTS(probs.size() == logits.size(), "probs and logits must have the same length");
  for (std::size_t i = 0; i < probs.size(); ++i)
    logits[i] = probs[i] > 0.0 ? static_cast<float>(std::log(probs[i])) : -std::numeric_limits<float>::infinity();
}

}  // namespace detail

//! Scores `continuation` after `context`: writes `continuation.size() + 1` rows of next-token logits,
//! row `i` for the context `context + continuation[0..i)`, row-major in `rows`.
//!
//! Calls `m.score` when `M` is a `ParallelScoringModel`; otherwise calls `m.next_logits` once per row on a
//! growing copy of the context (one allocation of `context.size() + continuation.size()` ids).
//! \pre `rows.size() == (continuation.size() + 1) * m.vocab_size()`; every continuation token is in the
//!      vocabulary.
//! \throws specdec::error when a precondition fails (and whatever the model throws).
template <Model M>
void score(const M& m, std::span<const token_id> context, std::span<const token_id> continuation, std::span<float> rows) {
  const std::size_t vocab = static_cast<std::size_t>(m.vocab_size());
  SPECDEC_EXPECTS(rows.size() == (continuation.size() + 1) * vocab,
                  "rows must hold (continuation.size() + 1) * vocab_size() logits");
  for ([[maybe_unused]] token_id t : continuation)
    SPECDEC_EXPECTS(in_vocabulary(t, vocab), "a continuation token is outside the vocabulary");
  if constexpr (ParallelScoringModel<M>) {
    m.score(context, continuation, rows);
  } else {
    std::vector<token_id> grown;
    grown.reserve(context.size() + continuation.size());
    grown.assign(context.begin(), context.end());
    for (std::size_t i = 0;; ++i) {
      m.next_logits(std::span<const token_id>(grown), rows.subspan(i * vocab, vocab));
      if (i == continuation.size()) break;
      grown.push_back(continuation[i]);
    }
  }
}

//! Scores B continuations, each after its own context: for b = 0..B-1 in turn, the
//! `continuations[b].size() + 1` rows `score(m, contexts[b], continuations[b], ...)` writes, row-major
//! in `rows`.
//!
//! Calls `m.score_batch` when `M` is a `BatchScoringModel` (a KV-cached engine: one forward for the
//! batch), otherwise `score` once per b.
//! \pre `contexts.size() == continuations.size()`; `rows.size()` = sum over b of
//!      `(continuations[b].size() + 1) * m.vocab_size()`; every continuation token is in the vocabulary.
//! \throws specdec::error when a precondition fails (and whatever the model throws).
template <Model M>
void score_batch(const M& m, std::span<const std::span<const token_id>> contexts,
                 std::span<const std::span<const token_id>> continuations, std::span<float> rows) {
  const std::size_t vocab = static_cast<std::size_t>(m.vocab_size());
  SPECDEC_EXPECTS(contexts.size() == continuations.size(), "one continuation per context");
  std::size_t total = 0;
  for (const auto& k : continuations) {
    total += (k.size() + 1) * vocab;
    for ([[maybe_unused]] token_id t : k)
      SPECDEC_EXPECTS(in_vocabulary(t, vocab), "a continuation token is outside the vocabulary");
  }
  SPECDEC_EXPECTS(rows.size() == total, "rows must hold (continuation.size() + 1) * vocab_size() logits per context");
  if constexpr (BatchScoringModel<M>) {
    m.score_batch(contexts, continuations, rows);
  } else {
    std::size_t at = 0;
    for (std::size_t b = 0; b < contexts.size(); ++b) {
      const std::size_t n = (continuations[b].size() + 1) * vocab;
      score(m, contexts[b], continuations[b], rows.subspan(at, n));
      at += n;
    }
  }
}

//! Next-token logits for B contexts: row `b` of `logits` (B x V, row-major) for `contexts[b]`.
//!
//! Calls `m.next_logits_batch` when `M` is a `BatchedModel`, otherwise `m.next_logits` once per context.
//! \pre `logits.size() == contexts.size() * m.vocab_size()`.
//! \throws specdec::error when the precondition fails (and whatever the model throws).
template <Model M>
void batch_next_logits(const M& m, std::span<const std::span<const token_id>> contexts, std::span<float> logits) {
  const std::size_t vocab = static_cast<std::size_t>(m.vocab_size());
  SPECDEC_EXPECTS(logits.size() == contexts.size() * vocab, "logits must hold contexts.size() * vocab_size() values");
  if constexpr (BatchedModel<M>) {
    m.next_logits_batch(contexts, logits);
  } else {
    for (std::size_t b = 0; b < contexts.size(); ++b) m.next_logits(contexts[b], logits.subspan(b * vocab, vocab));
  }
}

//! Next-token probabilities in double for any model: `m.next_probs` when `M` is a `ProbabilityModel`,
//! otherwise a numerically stable softmax (in double) of `m.next_logits`.
//! \pre `probs.size() == m.vocab_size()`.
//! \throws specdec::error when the precondition fails, or when the logits hold NaN or `+inf` or are all
//!         `-inf`.
template <Model M>
void next_probs(const M& m, std::span<const token_id> context, std::span<double> probs) {
  const std::size_t vocab = static_cast<std::size_t>(m.vocab_size());
  SPECDEC_EXPECTS(probs.size() == vocab, "probs must hold vocab_size() values");
  if constexpr (ProbabilityModel<M>) {
    m.next_probs(context, probs);
  } else {
    std::vector<float> logits(vocab);
    m.next_logits(context, std::span<float>(logits));
    detail::logits_to_probs(logits, probs);
  }
}

}  // namespace specdec
