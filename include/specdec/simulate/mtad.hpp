//! \file simulate/mtad.hpp
//! \brief Monte-Carlo simulator of MTAD's verification ("Optimized Multi-Token Joint Decoding with Auxiliary
//! Model for LLM Inference", Algorithm 1) on a context-free draft/target pair: the accepted length per
//! iteration, whose mean gamma_bar enters Lemma A.1, Theorem 3.5 and Theorem 3.6 (theory/mtad.hpp), and the
//! log-likelihoods of the output.
//!
//! One iteration drafts gamma tokens x_1..x_gamma (sampled i.i.d. from q, or argmax q repeated: the
//! exact beam of a context-free q), accepts the LONGEST prefix x_{1:j} with
//! tau < min(1, p(x_{1:j}) / q(x_{1:j})) (Algorithm 1's strict test; p(x_{1:j}) = prod p(x_t) since the
//! pair is context-free), then samples one token from p. Tokens per iteration gamma_i = j + 1, the
//! target's token included (the proof of Lemma A.1). With U = max |log p - log q| every prefix with
//! j U < |log tau| passes, so gamma_i >= theory::mtad::guaranteed_tokens_per_iteration(tau, U, gamma).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/simulate/detail/position.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/theory/detail/numeric.hpp"

namespace specdec::simulate::mtad {

//! How the draft of an iteration is produced.
enum class drafting {
  sampled,  //!< gamma tokens sampled i.i.d. from q (beam sampling with one beam)
  argmax,   //!< argmax q repeated gamma times (exact beam search on a context-free q; epsilon = 0)
};

//! The outcome of simulated MTAD iterations.
struct run_result {
  std::size_t gamma = 0;             //!< drafts per iteration
  count_tally tokens;                //!< gamma_i = accepted drafts + 1 per iteration
  std::uint64_t draft_tokens = 0;    //!< drafted tokens, gamma per iteration
  std::uint64_t emitted_tokens = 0;  //!< tokens emitted in total (sum of gamma_i)
  std::uint64_t min_tokens = 0;      //!< the smallest gamma_i seen (0 without draws)
  double sum_log_p = 0.0;            //!< sum of log p over every emitted token (natural log)
  double sum_log_q = 0.0;            //!< sum of log q over every emitted token (-inf if q(x) = 0 for one)

  //! gamma_bar = E[gamma_i], tokens per iteration.
  estimate gamma_bar() const noexcept { return tokens.summary(); }
  //! PPL_p of the output, exp(-sum log p / tokens) (eq. (1)).
  double perplexity_p() const noexcept { return std::exp(-sum_log_p / static_cast<double>(emitted_tokens)); }
  //! PPL_q of the output, exp(-sum log q / tokens).
  double perplexity_q() const noexcept { return std::exp(-sum_log_q / static_cast<double>(emitted_tokens)); }
};

//! Simulates MTAD iterations on the context-free pair (p, q) (see the file comment).
//! \pre p, q probability rows of the same length V >= 1 (sums 1 within 1e-6); tau in [0, 1];
//!      first + draws does not overflow.
//! \throws specdec::error otherwise.
inline run_result run(std::span<const double> p, std::span<const double> q, double tau, std::size_t gamma, drafting how,
                      const run_options& options) {
  SPECDEC_EXPECTS(detail::valid_row_pair(p, q), "p and q must be probability rows of the same non-zero length");
  SPECDEC_EXPECTS(theory::detail::is_probability(tau), "tau must be in [0, 1]");
  SPECDEC_EXPECTS(detail::valid_range(options), "first + draws overflows");
  std::vector<double> log_p(p.size()), log_q(q.size());
  for (std::size_t v = 0; v < p.size(); ++v) {
    log_p[v] = std::log(p[v]);
    log_q[v] = std::log(q[v]);
  }
  const std::size_t argmax_q = static_cast<std::size_t>(std::max_element(q.begin(), q.end()) - q.begin());
  const std::size_t g = gamma;
  run_result r;
  r.gamma = gamma;
  r.tokens = count_tally(g + 2);
  r.min_tokens = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::size_t> draft(g);
  const std::uint64_t end = options.first + options.draws;
  for (std::uint64_t i = options.first; i != end; ++i) {
    auto s = draw_stream(options, i);
    for (auto& x : draft) x = how == drafting::argmax ? argmax_q : detail::draw_token(q, s.uniform());
    double log_ratio = 0.0;  // log p(x_{1:j}) - log q(x_{1:j})
    std::size_t accepted = 0;
    for (std::size_t j = 1; j <= g; ++j) {
      log_ratio += log_p[draft[j - 1]] - log_q[draft[j - 1]];
      if (tau < std::min(1.0, std::exp(log_ratio))) accepted = j;  // the longest passing prefix
    }
    for (std::size_t j = 0; j < accepted; ++j) {
      r.sum_log_p += log_p[draft[j]];
      r.sum_log_q += log_q[draft[j]];
    }
    const std::size_t t = detail::draw_token(p, s.uniform());  // the target's token
    r.sum_log_p += log_p[t];
    r.sum_log_q += log_q[t];
    r.draft_tokens += g;
    r.emitted_tokens += accepted + 1;
    r.tokens.add(accepted + 1);
    r.min_tokens = std::min<std::uint64_t>(r.min_tokens, accepted + 1);
  }
  if (options.draws == 0) r.min_tokens = 0;
  return r;
}

}  // namespace specdec::simulate::mtad
