//! \file tests/support/batch_builder.hpp
//! \brief Test support: building ragged chain batches (packed or padded) from per-request data,
//! and owning the output buffers of a verification.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/random/stream.hpp"

namespace specdec_test {

//! One request of a chain batch: n drafts, n draft rows, n + 1 target rows (each of length V).
template <class T>
struct request_data {
  std::vector<specdec::token_id> drafts;
  std::vector<std::vector<T>> draft_rows;   //!< [n][V]
  std::vector<std::vector<T>> target_rows;  //!< [n + 1][V]
  specdec::random::request_stream stream;
};

//! Owns the buffers of a chain batch and hands out the non-owning view.
template <class T>
struct owned_batch {
  std::size_t vocab = 0;
  bool packed = true;
  std::size_t width = 0;  //!< padded layout: the padded number of drafts per request
  std::vector<std::int32_t> num_drafts;
  std::vector<specdec::token_id> draft_tokens;
  std::vector<T> draft_rows, target_rows;
  std::vector<specdec::random::request_stream> streams;

  specdec::chain_batch<T> view() const {
    const auto n = std::span<const std::int32_t>(num_drafts);
    return specdec::chain_batch<T>{packed ? specdec::ragged_layout::packed(n) : specdec::ragged_layout::padded(n, width), vocab,
                                   std::span<const specdec::token_id>(draft_tokens), std::span<const T>(draft_rows),
                                   std::span<const T>(target_rows)};
  }
  std::span<const specdec::random::request_stream> stream_span() const { return streams; }
  std::size_t batch_size() const { return num_drafts.size(); }
  std::size_t max_drafts() const {
    if (!packed) return width;
    std::size_t m = 0;
    for (const auto n : num_drafts) m = std::max(m, static_cast<std::size_t>(n));
    return m;
  }
};

//! Lays the requests out packed ([sum n_b] draft rows, [sum n_b + 1] target rows) or padded to
//! `width` drafts ([B][width] and [B][width + 1]). Padding rows and padding draft ids are filled
//! with `pad_value` / `pad_token` (NaN and an out-of-range id by default), so a verifier that read
//! them would be caught.
template <class T>
owned_batch<T> build_batch(const std::vector<request_data<T>>& requests, std::size_t vocab, bool packed, std::size_t width = 0,
                           T pad_value = std::numeric_limits<T>::quiet_NaN(), specdec::token_id pad_token = -7) {
  owned_batch<T> b;
  b.vocab = vocab;
  b.packed = packed;
  for (const auto& r : requests) {
    if (r.draft_rows.size() != r.drafts.size() || r.target_rows.size() != r.drafts.size() + 1)
      throw std::invalid_argument("build_batch: a request needs n draft rows and n + 1 target rows");
    if (!packed && r.drafts.size() > width) throw std::invalid_argument("build_batch: request wider than the padding");
  }
  if (packed) {
    std::size_t m = 0;
    for (const auto& r : requests) m = std::max(m, r.drafts.size());
    b.width = m;
  } else {
    b.width = width;
  }
  const auto append_row = [&](std::vector<T>& to, const std::vector<T>& row) {
    if (row.size() != vocab) throw std::invalid_argument("build_batch: row of the wrong length");
    to.insert(to.end(), row.begin(), row.end());
  };
  for (const auto& r : requests) {
    b.num_drafts.push_back(static_cast<std::int32_t>(r.drafts.size()));
    b.streams.push_back(r.stream);
    for (std::size_t i = 0; i < r.drafts.size(); ++i) {
      b.draft_tokens.push_back(r.drafts[i]);
      append_row(b.draft_rows, r.draft_rows[i]);
    }
    for (const auto& row : r.target_rows) append_row(b.target_rows, row);
    if (!packed) {
      for (std::size_t i = r.drafts.size(); i < width; ++i) {
        b.draft_tokens.push_back(pad_token);
        b.draft_rows.insert(b.draft_rows.end(), vocab, pad_value);
        b.target_rows.insert(b.target_rows.end(), vocab, pad_value);
      }
    }
  }
  return b;
}

//! The output buffers of a verification of B requests of at most `max_drafts` drafts.
struct owned_outputs {
  std::size_t stride = 1;
  std::vector<specdec::token_id> tokens;
  std::vector<std::int32_t> num_accepted;
  std::vector<specdec::verify_status> status;

  owned_outputs(std::size_t batch_size, std::size_t max_drafts)
      : stride(max_drafts + 1),
        tokens(batch_size * (max_drafts + 1), -99),
        num_accepted(batch_size, -99),
        status(batch_size, static_cast<specdec::verify_status>(0xFF)) {}
  template <class T>
  explicit owned_outputs(const owned_batch<T>& b) : owned_outputs(b.batch_size(), b.max_drafts()) {}

  specdec::chain_outputs view() { return specdec::chain_outputs{tokens, num_accepted, status}; }
  //! Request b's output row (max_drafts + 1 entries, padded with -1).
  std::vector<specdec::token_id> row(std::size_t b) const {
    return std::vector<specdec::token_id>(tokens.begin() + static_cast<std::ptrdiff_t>(b * stride),
                                          tokens.begin() + static_cast<std::ptrdiff_t>((b + 1) * stride));
  }
  //! Request b's emitted tokens without the padding.
  std::vector<specdec::token_id> emitted(std::size_t b) const {
    std::vector<specdec::token_id> out;
    for (const auto t : row(b))
      if (t != specdec::no_token) out.push_back(t);
    return out;
  }
};

//! A probability row: Exp(1) weights (a fraction of them exactly 0), normalised; never all zero.
template <class T>
std::vector<T> random_probability_row(specdec::random::philox_stream& s, std::size_t vocab, double zero_fraction = 0.0) {
  std::vector<double> w(vocab);
  double z = 0.0;
  for (auto& x : w) {
    const double e = s.exponential();
    x = s.uniform() < zero_fraction ? 0.0 : e;
    z += x;
  }
  if (z == 0.0) {
    w[static_cast<std::size_t>(s.uniform() * static_cast<double>(vocab))] = 1.0;
    z = 1.0;
  }
  std::vector<T> row(vocab);
  for (std::size_t v = 0; v < vocab; ++v) row[v] = static_cast<T>(w[v] / z);
  return row;
}

//! Calls fn(rule, name) for one instance of every acceptance rule (lenient on both sides of 1).
template <class Fn>
void for_each_rule(Fn&& fn) {
  fn(specdec::strict, "strict");
  fn(specdec::lenient_rule{0.5}, "lenient 0.5");
  fn(specdec::lenient_rule{2.0}, "lenient 2");
  fn(specdec::greedy, "greedy");
  fn(specdec::sample_and_match, "sample-and-match");
}

}  // namespace specdec_test
