//! \file models/markov.hpp
//! \brief Markov (tabular) reference models over small vocabularies with exactly known distributions.
//!
//! A `markov_model` of order k predicts the next token from the last k tokens of the context through an
//! explicit probability table (double). Its next-token distribution, the probability of any sequence and
//! (with `enumerate_sequences`) the whole distribution over continuations are known exactly, which is what
//! exact and statistical tests of acceptance rules need (docs/design.md, 'Models' and 'Tests').
//!
//! **The table.** For order k the model holds one row of V probabilities for every context of effective
//! length m = 0..k: 1 row for m = 0, V rows for m = 1, ..., V^k rows for m = k, concatenated level by level
//! (row-major, `sum_{m=0..k} V^m` rows in all). The row used after a context c of length L is the row of
//! its last `m = min(L, k)` tokens at level m, indexed in base V with the oldest of those tokens most
//! significant. So levels 0..k-1 are the *initial tables* used while the context is shorter than k
//! (the start distribution, then p(x_2 | x_1), ...), and level k is the transition table. For k = 0 the
//! model is a fixed categorical; for k = 1 the table is `initial` (1 row) followed by the V x V transition
//! matrix whose row is the previous token.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/models/enumerate.hpp"

namespace specdec {

//! A Markov model of order k over V tokens with an explicit probability table (see the file comment for
//! the layout and the rule for contexts shorter than k). It is a `ProbabilityModel` and a
//! `ParallelScoringModel`. Only the last `min(L, k)` ids of a context are read (and checked).
class markov_model {
 public:
  //! The largest table (in entries, `rows * V`) a model may hold: 2^26 doubles, 512 MiB.
  static constexpr std::size_t max_table_size = std::size_t{1} << 26;

  //! The number of rows of an order-`order` table over `vocab_size` tokens: `sum_{m=0..order} V^m`.
  //! \pre `vocab_size >= 1` and `rows * vocab_size <= max_table_size`. \throws specdec::error otherwise.
  static std::size_t table_rows(std::size_t vocab_size, std::size_t order) {
    SPECDEC_EXPECTS(vocab_size >= 1, "the vocabulary must not be empty");
    std::size_t rows = 0, level = 1;
    for (std::size_t m = 0; m <= order; ++m) {
      rows += level;
      SPECDEC_EXPECTS(rows <= max_table_size / vocab_size, "the Markov table would exceed max_table_size entries");
      if (m < order) level *= vocab_size;  // level <= rows, so no overflow before the check above
    }
    return rows;
  }

  //! A model of order `order` over `vocab_size` tokens from its full table (layout in the file comment).
  //! \pre `table.size() == table_rows(vocab_size, order) * vocab_size`; every entry is finite and
  //!      non-negative; every row sums to 1 within 1e-9.
  //! \throws specdec::error when a precondition fails.
  markov_model(std::size_t vocab_size, std::size_t order, std::vector<double> table)
      : vocab_(vocab_size), order_(order), table_(std::move(table)) {
    const std::size_t rows = table_rows(vocab_size, order);
    SPECDEC_EXPECTS(table_.size() == rows * vocab_, "the table must hold table_rows(V, order) * V entries");
    std::size_t level = 1, offset = 0;
    for (std::size_t m = 0; m <= order; ++m) {
      offsets_.push_back(offset);
      offset += level;
      level *= vocab_;
    }
    for (std::size_t r = 0; r < rows; ++r) {
      [[maybe_unused]] double sum = 0.0;
      for (std::size_t t = 0; t < vocab_; ++t) {
        const double p = table_[r * vocab_ + t];
        SPECDEC_EXPECTS(std::isfinite(p) && p >= 0.0, "a table entry is negative or not finite");
        sum += p;
      }
      SPECDEC_EXPECTS(std::abs(sum - 1.0) <= 1e-9, "a table row does not sum to 1 within 1e-9");
    }
  }

  //! An order-0 model: the fixed categorical distribution `probs` after every context.
  //! \pre `probs` is non-empty, finite, non-negative and sums to 1 within 1e-9. \throws specdec::error otherwise.
  static markov_model categorical(std::vector<double> probs) {
    const std::size_t v = probs.size();
    return markov_model(v, 0, std::move(probs));
  }

  //! An order-1 chain: `initial` (V entries) for the empty context, then `transition` (V x V, row-major,
  //! row = previous token).
  //! \pre `transition.size() == initial.size()^2`; rows valid as for the main constructor.
  //! \throws specdec::error otherwise.
  static markov_model chain(std::vector<double> initial, std::vector<double> transition) {
    const std::size_t v = initial.size();
    SPECDEC_EXPECTS(transition.size() == v * v, "the transition matrix must be V x V");
    std::vector<double> table = std::move(initial);
    table.insert(table.end(), transition.begin(), transition.end());
    return markov_model(v, 1, std::move(table));
  }

  //! The number of tokens V.
  std::size_t vocab_size() const noexcept { return vocab_; }
  //! The order k: how many previous tokens the prediction depends on.
  std::size_t order() const noexcept { return order_; }
  //! The number of rows, `table_rows(V, k)`.
  std::size_t row_count() const noexcept { return table_.size() / vocab_; }
  //! The whole table, row-major (layout in the file comment).
  std::span<const double> table() const noexcept { return table_; }
  //! Row `r` of the table. \pre `r < row_count()`. \throws specdec::error otherwise.
  std::span<const double> row_at(std::size_t r) const {
    SPECDEC_EXPECTS(r < row_count(), "row index out of range");
    return std::span<const double>(table_).subspan(r * vocab_, vocab_);
  }

  //! The index of the row used after `context`: `offset(m) + sum_j c_j V^(m-1-j)` over its last
  //! `m = min(L, k)` tokens `c_0..c_{m-1}`.
  //! \pre those last m ids are in the vocabulary. \throws specdec::error otherwise.
  std::size_t row_index(std::span<const token_id> context) const {
    const std::size_t m = std::min(context.size(), order_);
    std::size_t index = 0;
    for (token_id t : context.last(m)) {
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "a context token is outside the vocabulary");
      index = index * vocab_ + static_cast<std::size_t>(t);
    }
    return offsets_[m] + index;
  }

  //! The exact next-token distribution after `context` (a view into the table).
  //! \throws specdec::error when a token read is outside the vocabulary.
  std::span<const double> row(std::span<const token_id> context) const { return row_at(row_index(context)); }

  //! Writes the exact next-token probabilities after `context`.
  //! \pre `probs.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_probs(std::span<const token_id> context, std::span<double> probs) const {
    SPECDEC_EXPECTS(probs.size() == vocab_, "probs must hold vocab_size() values");
    const auto r = row(context);
    std::copy(r.begin(), r.end(), probs.begin());
  }

  //! Writes `log p` (as float; `-inf` where p = 0) for the token after `context`.
  //! \pre `logits.size() == vocab_size()`. \throws specdec::error otherwise.
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    SPECDEC_EXPECTS(logits.size() == vocab_, "logits must hold vocab_size() values");
    write_logits(row(context), logits);
  }

  //! Writes `continuation.size() + 1` rows of logits: row i after `context + continuation[0..i)`.
  //! \pre `rows.size() == (continuation.size() + 1) * vocab_size()`; the ids read are in the vocabulary.
  //! \throws specdec::error otherwise.
  void score(std::span<const token_id> context, std::span<const token_id> continuation, std::span<float> rows) const {
    SPECDEC_EXPECTS(rows.size() == (continuation.size() + 1) * vocab_,
                    "rows must hold (continuation.size() + 1) * vocab_size() values");
    const auto [tail, start] = joined_tail(context, continuation);
    for (std::size_t i = 0; i <= continuation.size(); ++i)
      write_logits(row(std::span<const token_id>(tail).first(start + i)), rows.subspan(i * vocab_, vocab_));
  }

  //! The exact probability of `continuation` after `context`:
  //! `prod_i p(continuation[i] | context + continuation[0..i))`, in double.
  //! \throws specdec::error when an id read is outside the vocabulary.
  double sequence_probability(std::span<const token_id> context, std::span<const token_id> continuation) const {
    const auto [tail, start] = joined_tail(context, continuation);
    double p = 1.0;
    for (std::size_t i = 0; i < continuation.size(); ++i) {
      const token_id t = continuation[i];
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "a continuation token is outside the vocabulary");
      p *= row(std::span<const token_id>(tail).first(start + i))[static_cast<std::size_t>(t)];
    }
    return p;
  }

  //! `log(sequence_probability(context, continuation))`, summed in log space (no underflow for long
  //! sequences); `-inf` when the sequence is impossible.
  //! \throws specdec::error when an id read is outside the vocabulary.
  double sequence_log_probability(std::span<const token_id> context, std::span<const token_id> continuation) const {
    const auto [tail, start] = joined_tail(context, continuation);
    double lp = 0.0;
    for (std::size_t i = 0; i < continuation.size(); ++i) {
      const token_id t = continuation[i];
      SPECDEC_EXPECTS(in_vocabulary(t, vocab_), "a continuation token is outside the vocabulary");
      lp += std::log(row(std::span<const token_id>(tail).first(start + i))[static_cast<std::size_t>(t)]);
    }
    return lp;
  }

 private:
  static void write_logits(std::span<const double> probs, std::span<float> logits) {
    for (std::size_t t = 0; t < probs.size(); ++t)
      logits[t] = probs[t] > 0.0 ? static_cast<float>(std::log(probs[t])) : -std::numeric_limits<float>::infinity();
  }

  // The last min(L, k) tokens of the context followed by the continuation, and where the continuation
  // starts in it. For every i, the last min(k, L + i) tokens of tail[0, start + i) are those of
  // context + continuation[0, i), so row_index() of that prefix is the right row.
  std::pair<std::vector<token_id>, std::size_t> joined_tail(std::span<const token_id> context,
                                                            std::span<const token_id> continuation) const {
    const std::size_t start = std::min(context.size(), order_);
    std::vector<token_id> tail;
    tail.reserve(start + continuation.size());
    const auto last = context.last(start);
    tail.assign(last.begin(), last.end());
    tail.insert(tail.end(), continuation.begin(), continuation.end());
    return {std::move(tail), start};
  }

  std::size_t vocab_;
  std::size_t order_;
  std::vector<double> table_;
  std::vector<std::size_t> offsets_;  // first row of each level m = 0..k
};

namespace detail {

// Portable random draws for the random tables. Only the bits of std::mt19937_64 are specified by the
// standard (std::gamma_distribution and friends differ between standard libraries), so the transforms
// are written out here: same seed, same tables with any standard library (up to libm rounding).

//! A uniform double in the open interval (0, 1) from the top 53 bits of one draw.
inline double open_uniform(std::mt19937_64& rng) { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; }

//! A standard normal draw by the Box-Muller transform (Box & Muller 1958), one per two uniforms.
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = open_uniform(rng), u2 = open_uniform(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

//! The logarithm of a Gamma(shape, 1) draw: Marsaglia & Tsang (2000), "A simple method for generating
//! gamma variables", ACM TOMS 26(3), for shape >= 1; for shape < 1 their boost
//! `G(a) = G(a + 1) * U^(1/a)`, taken in log space so tiny shapes do not underflow to 0.
inline double log_gamma_draw(double shape, std::mt19937_64& rng) {
  if (shape < 1.0) {
    const double boosted = log_gamma_draw(shape + 1.0, rng);
    return boosted + std::log(open_uniform(rng)) / shape;
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = standard_normal(rng);
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = open_uniform(rng);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d * v);
  }
}

//! Fills `row` with a Dirichlet(concentration, ..., concentration) draw (normalised gamma draws), where each
//! entry is first set to 0 with probability `zero_fraction` (at least one entry is always kept).
inline void dirichlet_row(std::span<double> row, double concentration, double zero_fraction, std::mt19937_64& rng) {
  const std::size_t v = row.size();
  std::vector<bool> keep(v, true);
  if (zero_fraction > 0.0) {
    std::size_t kept = 0;
    for (std::size_t t = 0; t < v; ++t) {
      keep[t] = open_uniform(rng) >= zero_fraction;
      kept += keep[t] ? 1u : 0u;
    }
    if (kept == 0) keep[static_cast<std::size_t>(rng() % v)] = true;
  }
  double max = -std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t < v; ++t) {
    row[t] = keep[t] ? log_gamma_draw(concentration, rng) : -std::numeric_limits<double>::infinity();
    max = std::max(max, row[t]);
  }
  double sum = 0.0;
  for (double& x : row) {
    x = std::exp(x - max);  // exp(-inf) == 0 for the zeroed entries
    sum += x;
  }
  for (double& x : row) x /= sum;
}

}  // namespace detail

//! A random Markov model of order `order` over `vocab_size` tokens: every row of the table (all levels,
//! see the file comment) is an independent symmetric Dirichlet(`concentration`) draw, made from gamma
//! draws (Marsaglia & Tsang 2000) fed by `std::mt19937_64(seed)`. Small concentrations give peaked rows,
//! large ones rows close to uniform. With `zero_fraction > 0` each entry is first zeroed with that
//! probability (at least one entry per row survives), giving sparse rows with exact zeros.
//! Deterministic: the same arguments give the same table.
//! \pre `vocab_size >= 1`; `concentration` finite and > 0; `0 <= zero_fraction < 1`; the table fits
//!      `markov_model::max_table_size`.
//! \throws specdec::error otherwise.
inline markov_model random_markov_model(std::size_t vocab_size, std::size_t order, std::uint64_t seed, double concentration = 1.0,
                                        double zero_fraction = 0.0) {
  SPECDEC_EXPECTS(std::isfinite(concentration) && concentration > 0.0, "concentration must be finite and > 0");
  SPECDEC_EXPECTS(zero_fraction >= 0.0 && zero_fraction < 1.0, "zero_fraction must be in [0, 1)");
  const std::size_t rows = markov_model::table_rows(vocab_size, order);
  std::vector<double> table(rows * vocab_size);
  std::mt19937_64 rng(seed);
  for (std::size_t r = 0; r < rows; ++r)
    detail::dirichlet_row(std::span<double>(table).subspan(r * vocab_size, vocab_size), concentration, zero_fraction, rng);
  return markov_model(vocab_size, order, std::move(table));
}

}  // namespace specdec
