//! \file simulate/block.hpp
//! \brief Monte-Carlo simulator of block verification (Sun et al., arXiv 2403.10444) and token-wise
//! verification on the same draft blocks, the process behind theory/block.hpp.
//!
//! One draw: X_i ~ q_i (the draft's row after X^{i-1}) for i = 1..gamma, with the weights a_i and
//! stop probabilities h_i of acceptance/block.hpp (`block_weight`, and theory::block::stop_probability,
//! which uses `block_stop_probability`); then eta_i ~ U[0, 1) and tau = max{ i : eta_i < h_i }
//! (0 if none). Token-wise verification of the same block draws its own uniforms u_i and accepts
//! drafts while the strict rule passes (u_i q_i(X_i) < p_i(X_i)). The difference tau - A of each
//! draw estimates the block gain with the variance of a paired comparison.
//! Randomness: simulate/options.hpp (one Philox stream per draw: gamma uniforms for the drafts, then
//! gamma for the etas, then up to gamma for the token-wise tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/simulate/detail/position.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/theory/block.hpp"

namespace specdec::simulate::block {

//! The outcome of simulated verifications of gamma-token draft blocks.
struct verification_result {
  std::size_t gamma = 0;   //!< the draft length gamma
  count_tally block;       //!< tau per block: drafts accepted by block verification
  count_tally token_wise;  //!< A per block: drafts accepted by token-wise verification of the same block
  moments gain;            //!< tau - A per block

  //! E[tau]: the mean drafts accepted by block verification, with its standard error.
  estimate block_accepted() const noexcept { return block.summary(); }
  //! E[A]: the mean drafts accepted by token-wise verification of the same blocks, with its standard error.
  estimate token_wise_accepted() const noexcept { return token_wise.summary(); }
  //! E[tau - A]: the mean gain of block verification, with its standard error.
  estimate block_gain() const noexcept { return gain.summary(); }
};

namespace detail {
//! Accepted drafts of one block under both verifications.
struct block_outcome {
  std::uint64_t block = 0;       //!< tau
  std::uint64_t token_wise = 0;  //!< A
};

//! Drafts blocks of gamma tokens and verifies each both ways, reusing its row buffers.
class block_verifier {
 public:
  block_verifier(std::size_t vocab_size, std::size_t gamma)
      : vocab_(vocab_size), gamma_(gamma), p_(gamma * vocab_size), q_(gamma * vocab_size), h_(gamma), tokens_(gamma) {}

  //! One block on the stream `s` (the per-draw step of `verification`).
  template <theory::block::RowFunction P, theory::block::RowFunction Q>
  block_outcome operator()(P& p_row, Q& q_row, random::philox_stream s) {
    double weight = 1.0;
    for (std::size_t i = 0; i < gamma_; ++i) {
      const std::span<const token_id> prefix(tokens_.data(), i);
      theory::block::detail::read_row(p_row, prefix, row(p_, i), "p_row");
      theory::block::detail::read_row(q_row, prefix, row(q_, i), "q_row");
      const auto p = row(p_, i), q = row(q_, i);
      if (i > 0) h_[i - 1] = theory::block::stop_probability(weight, p, q);
      const std::size_t x = simulate::detail::draw_token(q, s.uniform());
      tokens_[i] = static_cast<token_id>(x);
      weight = block_weight(weight, p[x], q[x]);
    }
    h_[gamma_ - 1] = weight;  // h_gamma = a_gamma
    block_outcome o;
    for (std::size_t i = 1; i <= gamma_; ++i)
      if (s.uniform() < h_[i - 1]) o.block = i;
    for (; o.token_wise < gamma_; ++o.token_wise) {
      const auto i = static_cast<std::size_t>(o.token_wise), x = static_cast<std::size_t>(tokens_[i]);
      if (!strict.accepts(row(p_, i)[x], row(q_, i)[x], s.uniform())) break;
    }
    return o;
  }

 private:
  std::span<double> row(std::vector<double>& rows, std::size_t i) const {
    return std::span<double>(rows).subspan(i * vocab_, vocab_);
  }

  std::size_t vocab_, gamma_;
  std::vector<double> p_, q_;  // rows of positions 1..gamma of the current block, [gamma][V]
  std::vector<double> h_;      // h_1..h_gamma
  std::vector<token_id> tokens_;
};
}  // namespace detail

//! Simulates options.draws draft blocks of gamma tokens from context-dependent models given as row
//! functions (theory::block::RowFunction), each verified by block verification and token-wise.
//! \pre vocab_size >= 1; gamma >= 1; every row written is a probability row of length vocab_size;
//!      first + draws does not overflow.
//! \throws specdec::error otherwise, or what a row function throws.
template <theory::block::RowFunction P, theory::block::RowFunction Q>
verification_result verification(P&& p_row, Q&& q_row, std::size_t vocab_size, std::size_t gamma, const run_options& options) {
  SPECDEC_EXPECTS(vocab_size >= 1, "vocab_size must be >= 1");
  SPECDEC_EXPECTS(gamma >= 1, "gamma must be >= 1");
  SPECDEC_EXPECTS(simulate::detail::valid_range(options), "first + draws overflows");
  verification_result r{gamma, count_tally(gamma + 1), count_tally(gamma + 1), {}};
  detail::block_verifier verify(vocab_size, gamma);
  const std::uint64_t end = options.first + options.draws;
  for (std::uint64_t i = options.first; i != end; ++i) {
    const detail::block_outcome o = verify(p_row, q_row, draw_stream(options, i));
    r.block.add(o.block);
    r.token_wise.add(o.token_wise);
    r.gain.add(static_cast<double>(o.block) - static_cast<double>(o.token_wise));
  }
  return r;
}

//! The same for a context-independent pair: rows p and q at every position.
//! \pre p, q probability rows of the same length V >= 1; gamma >= 1; first + draws does not overflow.
//! \throws specdec::error otherwise.
inline verification_result verification(std::span<const double> p, std::span<const double> q, std::size_t gamma,
                                        const run_options& options) {
  SPECDEC_EXPECTS(simulate::detail::valid_row_pair(p, q), "p and q must be probability rows of the same non-zero length");
  return verification(theory::block::constant_row(p), theory::block::constant_row(q), p.size(), gamma, options);
}

}  // namespace specdec::simulate::block
