//! \file decode/likelihood.hpp
//! \brief The quality of an output: its log-likelihood and perplexity under a model (MTAD, seed 003,
//! eq. (1): PPL(x_{1:N}) = exp(-(1/N) sum_t log p(x_t | x_{1:t-1}))).
//!
//! The model's own distribution is used, p = softmax(logits) with no temperature and no filter: a
//! warped p would give probability 0 (infinite perplexity) to any token outside the nucleus, and
//! methods that warp differently could not be compared. The paper measures "perplexity based on the
//! probability of the large model" (appendix E).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/theory/mtad.hpp"

namespace specdec {

//! log softmax(logits)[t] in double: logits[t] - log_sum_exp(logits); -inf when logits[t] = -inf.
//! \pre t in [0, logits.size()). \throws specdec::error otherwise; specdec::numerical_error when the row
//!      holds NaN or +inf or only -inf.
template <class T>
double log_softmax_at(std::span<const T> logits, token_id t) {
  SPECDEC_EXPECTS(in_vocabulary(t, logits.size()), "the token is outside the row");
  const double lse = log_sum_exp(logits);
  if (std::isnan(lse) || lse == -std::numeric_limits<double>::infinity())
    throw numerical_error("specdec::log_softmax_at: the logit row holds NaN or +inf, or has no mass");
  return static_cast<double>(logits[static_cast<std::size_t>(t)]) - lse;
}

//! The log-probabilities log p(x_t | context, x_{1:t-1}) of `tokens` under `model` (unwarped), from one
//! `score` call (tokens.size() + 1 rows; the last is not read).
//! \throws specdec::error when a token is outside the vocabulary; specdec::numerical_error on an
//!         unusable row; whatever the model throws.
template <Model M>
std::vector<double> token_log_likelihoods(const M& model, std::span<const token_id> context, std::span<const token_id> tokens) {
  const std::size_t V = model.vocab_size();
  std::vector<float> rows((tokens.size() + 1) * V);
  score(model, context, tokens, std::span<float>(rows));
  std::vector<double> out(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i)
    out[i] = log_softmax_at(std::span<const float>(rows).subspan(i * V, V), tokens[i]);
  return out;
}

//! Perplexity (eq. (1)) of `tokens` after `context` under `model`; +inf when a token has probability 0.
//! \pre tokens not empty. \throws specdec::error otherwise, and as token_log_likelihoods.
template <Model M>
double perplexity_under(const M& model, std::span<const token_id> context, std::span<const token_id> tokens) {
  SPECDEC_EXPECTS(!tokens.empty(), "the token sequence must not be empty");
  const std::vector<double> lp = token_log_likelihoods(model, context, tokens);
  return theory::mtad::perplexity_from_log_probs(std::span<const double>(lp));
}

}  // namespace specdec
