//! \file theory/block.hpp
//! \brief Exact expected accepted length of block verification (Sun, Mendlovic, Leviathan,
//! Aharoni, Ro, Beirami, Suresh, ICLR 2025, arXiv 2403.10444) and of token-wise verification
//! (Leviathan et al. 2023) on one draft block of gamma tokens, by enumerating every block.
//!
//! Model: the block X = X_1..X_gamma is drawn from the draft, X_i ~ q_i = q(. | X^{i-1}), and
//! verified against p_i = p(. | X^{i-1}) (rows after the verified context; acceptance/block.hpp):
//!   a_0 = 1, a_i = block_weight(a_{i-1}, p_i(X_i), q_i(X_i)) = min(1, a_{i-1} p_i(X_i) / q_i(X_i)),
//!   R_i = sum_v max(0, a_i p_{i+1}(v) - q_{i+1}(v)),
//!   h_i = block_stop_probability(R_i, a_i) = R_i / (R_i + 1 - a_i) for i < gamma, h_gamma = a_gamma,
//!   P(tau = i | X) = h_i prod_{j > i} (1 - h_j)  (h_0 = 1),
//! tau = the accepted drafts. Token-wise (strict) verification accepts draft i with probability
//! min(1, p_i(X_i) / q_i(X_i)) until the first rejection, so
//!   P(A >= i) = sum_{X^i} prod_{j <= i} min(p_j(X_j), q_j(X_j)),
//! which for a context-independent pair (p_i = p, q_i = q) is alpha^i with alpha = sum_v min(p, q),
//! E[A] = sum_{i=1}^{gamma} alpha^i (Leviathan eq. (1) without the bonus token).
//! Block verification maximises the expected accepted drafts among valid verifiers of one block
//! (the paper's optimality result), so E[tau] >= E[A], with equality at gamma = 1. The paper's example (V = 2, p = (1/3, 2/3),
//! q = (2/3, 1/3), gamma = 2) gives E[A] = 10/9 and E[tau] = 11/9.
//!
//! Cost of the enumeration: every prefix X^i with q(X^i) > 0 is visited once (at most
//! (V^(gamma+1) - 1) / (V - 1) prefixes), reading its two rows (O(V)), and every full block adds
//! O(gamma): O(V^(gamma+1)) time, O(gamma V) memory. For vocabularies where that is too large,
//! simulate/block.hpp estimates the same quantities by Monte Carlo.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/theory/detail/numeric.hpp"
#include "specdec/theory/sd.hpp"

namespace specdec::theory::block {

//! A model's next-token row after a draft prefix: `row(prefix, out)` writes the V probabilities of
//! the token that follows the verified context and the drafted tokens `prefix` (empty: the first
//! draft). Used for both the target p and the draft q.
template <class F>
concept RowFunction = std::invocable<F&, std::span<const token_id>, std::span<double>>;

//! The row function of a context-independent model: writes `row` whatever the prefix. `row` must
//! outlive the function and have the length of the rows it is asked for.
inline auto constant_row(std::span<const double> row) {
  return [row](std::span<const token_id>, std::span<double> out) { std::copy(row.begin(), row.end(), out.begin()); };
}

namespace detail {
//! Calls `row_fn(prefix, out)` and checks that it wrote a probability row; `what` names the model.
template <RowFunction F>
void read_row(F& row_fn, std::span<const token_id> prefix, std::span<double> out, const char* what) {
  row_fn(prefix, out);
  SPECDEC_EXPECTS(theory::detail::is_probability_row(std::span<const double>(out), theory::detail::row_sum_tolerance<double>),
                  std::string(what) + " wrote a row that is not a probability row (entries in [0, 1], sum 1 within 1e-6)");
}
}  // namespace detail

//! R = sum_v max(0, a p(v) - q(v)): the mass of block verification's residual after a prefix with
//! weight a, p and q being the rows of the next position (acceptance/block.hpp;
//! Sun et al., arXiv 2403.10444).
//! \pre p.size() == q.size(). \throws specdec::error otherwise.
inline double residual_mass(double weight, std::span<const double> p, std::span<const double> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "p and q must have the same length");
  double mass = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) mass += std::max(0.0, weight * p[v] - q[v]);
  return mass;
}

//! h_i after a prefix of i < gamma drafts with weight a_i, from the rows (p_{i+1}, q_{i+1}) of the
//! next position: block_stop_probability(residual_mass(a_i, p_{i+1}, q_{i+1}), a_i).
//! \pre p_next.size() == q_next.size(). \throws specdec::error otherwise.
inline double stop_probability(double weight, std::span<const double> p_next, std::span<const double> q_next) {
  return block_stop_probability(residual_mass(weight, p_next, q_next), weight);
}

//! P(tau = i | X) = h_i prod_{j > i} (1 - h_j) for i = 0..gamma, added with weight `probability` to
//! law[0..gamma]; h[j - 1] = h_j for j = 1..gamma (h_0 = 1).
inline void add_block_length_law(std::span<const double> h, double probability, std::span<double> law) {
  double later_fail = probability;  // prod_{j > i} (1 - h_j), times the weight
  for (std::size_t i = h.size(); i > 0; --i) {
    law[i] += later_fail * h[i - 1];
    later_fail *= 1.0 - h[i - 1];
  }
  law[0] += later_fail;
}

//! The exact laws of the accepted drafts of one block of gamma drafts: P(A = i) for token-wise
//! verification and P(tau = i) for block verification, i = 0..gamma.
struct length_laws {
  std::vector<double> token_wise;  //!< P(A = i), i = 0..gamma
  std::vector<double> block;       //!< P(tau = i), i = 0..gamma

  //! E[A], token-wise verification.
  double token_wise_mean() const noexcept { return mean(token_wise); }
  //! E[tau], block verification.
  double block_mean() const noexcept { return mean(block); }

 private:
  static double mean(const std::vector<double>& law) noexcept {
    double m = 0.0;
    for (std::size_t i = 1; i < law.size(); ++i) m += static_cast<double>(i) * law[i];
    return m;
  }
};

namespace detail {
//! The depth-first enumeration of the blocks behind accepted_length_laws.
template <class P, class Q>
class block_enumeration {
 public:
  block_enumeration(P& p_row, Q& q_row, std::size_t vocab_size, std::size_t gamma)
      : p_row_(p_row),
        q_row_(q_row),
        vocab_(vocab_size),
        gamma_(gamma),
        p_(gamma * vocab_size),
        q_(gamma * vocab_size),
        prefix_(gamma),
        h_(gamma) {
    laws_.token_wise.assign(gamma + 1, 0.0);
    laws_.block.assign(gamma + 1, 0.0);
  }

  length_laws run() && {
    visit(0, 1.0, 1.0, 1.0);
    return std::move(laws_);
  }

 private:
  std::span<double> row(std::vector<double>& rows, std::size_t i) { return std::span<double>(rows).subspan(i * vocab_, vocab_); }

  //! Reads the rows after the prefix of length i, checked.
  void read_rows(std::size_t i) {
    const std::span<const token_id> prefix(prefix_.data(), i);
    read_row(p_row_, prefix, row(p_, i), "p_row");
    read_row(q_row_, prefix, row(q_, i), "q_row");
  }

  //! The prefix X^i has draft probability `probability`, weight a_i = `weight` and token-wise
  //! acceptance mass prod_{j <= i} min(p_j(X_j), q_j(X_j)) = `token_mass`.
  void visit(std::size_t i, double probability, double weight, double token_mass) {
    if (i == gamma_) {
      h_[gamma_ - 1] = weight;  // h_gamma = a_gamma
      add_block_length_law(h_, probability, laws_.block);
      laws_.token_wise[gamma_] += token_mass;
      return;
    }
    read_rows(i);
    const auto p = row(p_, i), q = row(q_, i);
    if (i > 0) h_[i - 1] = stop_probability(weight, p, q);
    laws_.token_wise[i] += token_mass * (1.0 - sd::detail::acceptance_rate_impl<double>(p, q));
    for (std::size_t x = 0; x < vocab_; ++x) {
      if (!(q[x] > 0.0)) continue;  // a block the draft never proposes
      prefix_[i] = static_cast<token_id>(x);
      visit(i + 1, probability * q[x], block_weight(weight, p[x], q[x]), token_mass * std::min(p[x], q[x]));
    }
  }

  P& p_row_;
  Q& q_row_;
  std::size_t vocab_, gamma_;
  std::vector<double> p_, q_;  // rows of positions 1..gamma along the current prefix, [gamma][V]
  std::vector<token_id> prefix_;
  std::vector<double> h_;  // h_1..h_gamma along the current prefix
  length_laws laws_;
};
}  // namespace detail

//! The exact laws of token-wise and block verification of one block of gamma drafts for
//! context-dependent models given as row functions (the file comment; `p_row` and `q_row` are
//! called once per visited prefix). Blocks of draft probability 0 are skipped.
//! \pre vocab_size >= 1; gamma >= 1; every row written is a probability row of length vocab_size;
//!      vocab_size^gamma <= max_blocks.
//! \throws specdec::error otherwise, or what a row function throws.
template <RowFunction P, RowFunction Q>
length_laws accepted_length_laws(P&& p_row, Q&& q_row, std::size_t vocab_size, std::size_t gamma,
                                 std::size_t max_blocks = std::size_t{1} << 24) {
  SPECDEC_EXPECTS(vocab_size >= 1, "vocab_size must be >= 1");
  SPECDEC_EXPECTS(gamma >= 1, "gamma must be >= 1");
  std::size_t blocks = 1;
  for (std::size_t i = 0; i < gamma && blocks <= max_blocks; ++i) blocks *= vocab_size;
  SPECDEC_EXPECTS(blocks <= max_blocks, "vocab_size^gamma exceeds max_blocks");
  return detail::block_enumeration<std::remove_reference_t<P>, std::remove_reference_t<Q>>(p_row, q_row, vocab_size, gamma).run();
}

//! The laws for a context-independent pair: the same rows p and q at every position.
//! \pre p, q probability rows of the same length V >= 1; gamma >= 1; V^gamma <= max_blocks.
//! \throws specdec::error otherwise.
inline length_laws accepted_length_laws(std::span<const double> p, std::span<const double> q, std::size_t gamma,
                                        std::size_t max_blocks = std::size_t{1} << 24) {
  SPECDEC_EXPECTS(p.size() == q.size() && !p.empty(), "p and q must be non-empty rows of the same length");
  return accepted_length_laws(constant_row(p), constant_row(q), p.size(), gamma, max_blocks);
}

//! E[tau] of block verification for a context-independent pair, by enumeration of the V^gamma blocks.
//! \pre as accepted_length_laws. \throws specdec::error otherwise.
inline double block_expected_accepted(std::span<const double> p, std::span<const double> q, std::size_t gamma,
                                      std::size_t max_blocks = std::size_t{1} << 24) {
  return accepted_length_laws(p, q, gamma, max_blocks).block_mean();
}

//! E[A] of token-wise verification for a context-independent pair: sum_{i=1}^{gamma} alpha^i,
//! alpha = sum_v min(p(v), q(v)) (theory::sd::acceptance_rate and expected_tokens, minus the bonus
//! token). gamma = 0 gives 0.
//! \pre p, q probability rows of the same length. \throws specdec::error otherwise.
inline double token_wise_expected_accepted(std::span<const double> p, std::span<const double> q, std::size_t gamma) {
  return sd::expected_tokens(sd::acceptance_rate(p, q), gamma) - 1.0;
}

}  // namespace specdec::theory::block
