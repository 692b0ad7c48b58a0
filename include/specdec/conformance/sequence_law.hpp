//! \file conformance/sequence_law.hpp
//! \brief Small order-1 Markov target/draft pairs with exactly known distributions, and the exact law
//! of the first H tokens that speculative decoding emits on them: what specdec's own statistical
//! tests and the conformance kit compare sampled sequences with.
//!
//! Sequences of length H over a vocabulary of V tokens are numbered in base V, first token most
//! significant: index(t_0 .. t_{H-1}) = sum_i t_i V^(H-1-i).
//!
//! The speculative distribution is an exact dynamic programme over (prefix, j), where j in
//! 0..gamma is the position inside the current drafted block. At a drafted position (j < gamma) the
//! rule emits, from the rows p(. | last), q(. | last), the accepted part a(v) (the block goes on,
//! j + 1) or the corrected part R r(v) (the block ends, j = 0): `specdec::emission_distribution`.
//! At j == gamma the bonus token is drawn from p and the block ends. Because each drafted token is
//! drawn from q given the last token, and each accept test and residual draw is independent, the
//! emission at (prefix, j) depends only on the last token of the prefix and on j.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "specdec/acceptance/distribution.hpp"
#include "specdec/core/token.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::conformance {

//! An order-1 Markov target p(next | prev) and draft q(next | prev), both [V][V] row-major.
struct markov_pair {
  std::size_t vocab = 0;       //!< V
  std::vector<double> target;  //!< p[prev * V + next]
  std::vector<double> draft;   //!< q[prev * V + next]

  //! p(. | prev), V entries.
  std::span<const double> p_row(std::size_t prev) const { return std::span<const double>(target).subspan(prev * vocab, vocab); }
  //! q(. | prev), V entries.
  std::span<const double> q_row(std::size_t prev) const { return std::span<const double>(draft).subspan(prev * vocab, vocab); }

  //! The mean over previous tokens of TV(p(. | prev), q(. | prev)).
  double mean_total_variation() const {
    double s = 0.0;
    for (std::size_t a = 0; a < vocab; ++a) s += specdec::total_variation(p_row(a), q_row(a));
    return s / static_cast<double>(vocab);
  }
};

//! A random [V][V] stochastic table: rows proportional to E^2 with E ~ Exp(1) i.i.d. (peakier than
//! a flat Dirichlet, so that some sequences are rare), drawn from Philox stream `seed`.
inline std::vector<double> random_stochastic_table(std::size_t vocab, std::uint64_t seed) {
  std::vector<double> t(vocab * vocab);
  specdec::random::philox_stream s(specdec::random::stream_address{seed, 0, 0, 0, specdec::random::purpose::user});
  for (std::size_t a = 0; a < vocab; ++a) {
    double sum = 0.0;
    for (std::size_t b = 0; b < vocab; ++b) {
      const double e = s.exponential() + 1e-3;  // every transition possible
      t[a * vocab + b] = e * e;
      sum += e * e;
    }
    for (std::size_t b = 0; b < vocab; ++b) t[a * vocab + b] /= sum;
  }
  return t;
}

//! Target = a random table; draft = (1 - mix) target + mix (another random table).
inline markov_pair make_markov_pair(std::size_t vocab, std::uint64_t seed, double mix) {
  markov_pair m;
  m.vocab = vocab;
  m.target = random_stochastic_table(vocab, seed);
  const std::vector<double> other = random_stochastic_table(vocab, seed + 0x9E3779B97F4A7C15ull);
  m.draft.resize(m.target.size());
  for (std::size_t i = 0; i < m.target.size(); ++i) m.draft[i] = (1.0 - mix) * m.target[i] + mix * other[i];
  return m;
}

//! Zeroes entries of both tables and makes some contexts exact: in every row, each entry of the
//! target and, independently, of the draft is set to 0 with probability `zero_fraction` (the row's
//! two largest entries are always kept), and rows are renormalised; then every context a with
//! a % equal_every == 0 gets q(. | a) = p(. | a) (equal_every = 0: none). Zeros make drafts propose
//! tokens the target never emits (p = 0 < q) and leave target tokens the draft never proposes (q = 0 < p).
inline void sparsify(markov_pair& m, std::uint64_t seed, double zero_fraction, std::size_t equal_every) {
  specdec::random::philox_stream s(specdec::random::stream_address{seed, 1, 0, 0, specdec::random::purpose::user});
  const std::size_t V = m.vocab;
  for (std::vector<double>* table : {&m.target, &m.draft}) {
    for (std::size_t a = 0; a < V; ++a) {
      double* row = table->data() + a * V;
      std::size_t first = 0, second = V > 1 ? 1 : 0;  // the two largest entries
      if (row[second] > row[first]) std::swap(first, second);
      for (std::size_t v = 2; v < V; ++v) {
        if (row[v] > row[first]) {
          second = first;
          first = v;
        } else if (row[v] > row[second]) {
          second = v;
        }
      }
      double sum = 0.0;
      for (std::size_t v = 0; v < V; ++v) {
        if (v != first && v != second && s.uniform() < zero_fraction) row[v] = 0.0;
        sum += row[v];
      }
      for (std::size_t v = 0; v < V; ++v) row[v] /= sum;
    }
  }
  if (equal_every == 0) return;
  for (std::size_t a = 0; a < V; a += equal_every)
    std::copy(m.target.begin() + static_cast<std::ptrdiff_t>(a * V), m.target.begin() + static_cast<std::ptrdiff_t>((a + 1) * V),
              m.draft.begin() + static_cast<std::ptrdiff_t>(a * V));
}

//! V^H.
inline std::size_t num_sequences(std::size_t vocab, int horizon) {
  std::size_t n = 1;
  for (int i = 0; i < horizon; ++i) n *= vocab;
  return n;
}

//! The exact distribution of the target's own first H tokens after the prompt token `prompt`.
inline std::vector<double> target_sequence_distribution(const markov_pair& m, std::size_t prompt, int horizon) {
  std::vector<double> cur{1.0};
  for (int t = 0; t < horizon; ++t) {
    std::vector<double> next(cur.size() * m.vocab, 0.0);
    for (std::size_t prefix = 0; prefix < cur.size(); ++prefix) {
      const std::size_t last = t == 0 ? prompt : prefix % m.vocab;
      const auto p = m.p_row(last);
      for (std::size_t v = 0; v < m.vocab; ++v) next[prefix * m.vocab + v] += cur[prefix] * p[v];
    }
    cur.swap(next);
  }
  return cur;
}

//! The law of the first `horizon` tokens of a process that emits blocks of at most gamma + 1 tokens:
//! at a drafted position after token a, `accepted[a][v]` is the probability of keeping draft v and
//! going on, `corrected[a][v]` that of emitting v and ending the block; after gamma kept drafts,
//! `bonus[a][v]` that of the last token. A dynamic programme over (prefix, position in the block).
inline std::vector<double> block_emission_distribution(std::span<const double> accepted, std::span<const double> corrected,
                                                       std::span<const double> bonus, std::size_t V, std::size_t prompt,
                                                       int horizon, std::size_t gamma) {
  const std::size_t J = gamma + 1;
  std::vector<double> cur(J, 0.0);  // [prefix][j], one empty prefix
  cur[0] = 1.0;
  for (int t = 0; t < horizon; ++t) {
    const std::size_t prefixes = cur.size() / J;
    std::vector<double> next(prefixes * V * J, 0.0);
    for (std::size_t prefix = 0; prefix < prefixes; ++prefix) {
      const std::size_t last = t == 0 ? prompt : prefix % V;
      for (std::size_t j = 0; j < J; ++j) {
        const double mass = cur[prefix * J + j];
        if (mass == 0.0) continue;
        for (std::size_t v = 0; v < V; ++v) {
          double* out = &next[(prefix * V + v) * J];
          if (j + 1 < J) {  // a drafted position
            out[j + 1] += mass * accepted[last * V + v];
            out[0] += mass * corrected[last * V + v];
          } else {  // the bonus position
            out[0] += mass * bonus[last * V + v];
          }
        }
      }
    }
    cur.swap(next);
  }
  std::vector<double> dist(cur.size() / J, 0.0);
  for (std::size_t s = 0; s < dist.size(); ++s)
    for (std::size_t j = 0; j < J; ++j) dist[s] += cur[s * J + j];
  return dist;
}

//! The exact distribution of the first H tokens emitted by chain speculative decoding with a
//! rejection-family `rule`, drafting gamma tokens per block from `m.draft` and verifying them against
//! `m.target` (the verifier is told the true q). Dynamic programme over (prefix, j), see the file comment.
template <class Rule>
std::vector<double> speculative_sequence_distribution(const Rule& rule, const markov_pair& m, std::size_t prompt, int horizon,
                                                      std::size_t gamma) {
  const std::size_t V = m.vocab;
  // Emission parts per previous token, computed once.
  std::vector<double> accepted(V * V), corrected(V * V);
  for (std::size_t a = 0; a < V; ++a)
    specdec::emission_distribution(rule, m.p_row(a), m.q_row(a), std::span<double>(accepted).subspan(a * V, V),
                                   std::span<double>(corrected).subspan(a * V, V));
  return block_emission_distribution(accepted, corrected, m.target, V, prompt, horizon, gamma);
}

//! The cell of the first `horizon` tokens of `tokens` in a table of V^horizon: sum_i x_i V^(H-1-i).
inline std::size_t sequence_cell(std::span<const specdec::token_id> tokens, std::size_t vocab, int horizon) {
  std::size_t index = 0;
  for (int i = 0; i < horizon; ++i) index = index * vocab + static_cast<std::size_t>(tokens[static_cast<std::size_t>(i)]);
  return index;
}

//! max_i |a_i - b_i|.
inline double max_abs_difference(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size()) throw std::invalid_argument("max_abs_difference: length mismatch");
  double d = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace specdec::conformance
