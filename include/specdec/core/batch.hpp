//! \file core/batch.hpp
//! \brief Ragged batches: request b has n_b drafted tokens; rows of V probabilities in row-major buffers.
//!
//! Two layouts (docs/design.md, 'Batches and outputs'):
//! - packed: draft rows are concatenated ([sum n_b][V]); request b's target rows follow the same order
//!   with one extra row each ([sum (n_b + 1)][V]);
//! - padded: [B][max_n][V] for the draft and [B][max_n + 1][V] for the target; rows past n_b are unused.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

//! Where request b's i-th draft row and target row live.
class ragged_layout {
 public:
  ragged_layout() = default;

  //! Concatenated rows. \throws specdec::error if any n_b < 0.
  static ragged_layout packed(std::span<const std::int32_t> num_drafts) {
    ragged_layout l;
    l.assign_packed(num_drafts);
    return l;
  }
  //! Makes this layout `packed(num_drafts)`, reusing its buffers (no allocation once they are large
  //! enough: what a decode loop calls every step). \throws specdec::error if any n_b < 0.
  void assign_packed(std::span<const std::int32_t> num_drafts) {
    for (const auto n : num_drafts) SPECDEC_EXPECTS(n >= 0, "a request has a negative number of drafts");
    num_drafts_.assign(num_drafts.begin(), num_drafts.end());
    offsets_.resize(num_drafts.size() + 1);
    offsets_[0] = 0;
    for (std::size_t b = 0; b < num_drafts.size(); ++b) offsets_[b + 1] = offsets_[b] + num_drafts[b];
    max_drafts_ = num_drafts.empty() ? 0 : static_cast<std::size_t>(*std::max_element(num_drafts.begin(), num_drafts.end()));
  }
  //! [B][max_drafts] rows. \throws specdec::error if any n_b < 0 or n_b > max_drafts, or if
  //! B * (max_drafts + 1) rows do not fit in std::size_t (no buffer could hold them).
  static ragged_layout padded(std::span<const std::int32_t> num_drafts, std::size_t max_drafts) {
    ragged_layout l(num_drafts);
    for (const auto n : num_drafts)
      SPECDEC_EXPECTS(static_cast<std::size_t>(n) <= max_drafts, "a request has more drafts than the padded width");
    SPECDEC_EXPECTS(num_drafts.empty() || max_drafts < std::numeric_limits<std::size_t>::max() / num_drafts.size(),
                    "the padded width is too large: B * (max_drafts + 1) rows overflow std::size_t");
    l.max_drafts_ = max_drafts;
    return l;
  }

  //! B, the number of requests.
  std::size_t batch_size() const noexcept { return num_drafts_.size(); }
  //! n_b, the number of drafts of request b.
  std::size_t num_drafts(std::size_t b) const noexcept { return static_cast<std::size_t>(num_drafts_[b]); }
  //! The widest request (packed) or the padded width: output rows hold max_drafts() + 1 tokens.
  std::size_t max_drafts() const noexcept { return max_drafts_; }
  //! True for a packed layout (rows concatenated), false for a padded one.
  bool is_packed() const noexcept { return !offsets_.empty(); }

  //! The draft row of request b's draft i: offsets[b] + i packed, b * max_drafts + i padded.
  std::size_t draft_row(std::size_t b, std::size_t i) const noexcept {
    return is_packed() ? static_cast<std::size_t>(offsets_[b]) + i : b * max_drafts_ + i;
  }
  //! The target row of request b's position i (i = n_b: the bonus row): offsets[b] + b + i packed, b * (max_drafts + 1) + i
  //! padded.
  std::size_t target_row(std::size_t b, std::size_t i) const noexcept {
    return is_packed() ? static_cast<std::size_t>(offsets_[b]) + b + i : b * (max_drafts_ + 1) + i;
  }
  //! The number of draft rows: sum n_b packed, B * max_drafts padded.
  std::size_t num_draft_rows() const noexcept {
    return is_packed() ? static_cast<std::size_t>(offsets_.back()) : batch_size() * max_drafts_;
  }
  //! The number of target rows: sum (n_b + 1) packed, B * (max_drafts + 1) padded.
  std::size_t num_target_rows() const noexcept {
    return is_packed() ? num_draft_rows() + batch_size() : batch_size() * (max_drafts_ + 1);
  }

 private:
  explicit ragged_layout(std::span<const std::int32_t> num_drafts) : num_drafts_(num_drafts.begin(), num_drafts.end()) {
    for (const auto n : num_drafts) SPECDEC_EXPECTS(n >= 0, "a request has a negative number of drafts");
  }
  std::vector<std::int32_t> num_drafts_;
  std::vector<std::int64_t> offsets_;  // packed only: B + 1 prefix sums
  std::size_t max_drafts_ = 0;
};

namespace detail {
//! Whether a buffer of `size` values holds exactly `rows` rows of `V` values, computed without the
//! product rows * V (which wraps around for a huge V). \pre V > 0
constexpr bool holds_rows(std::size_t size, std::size_t rows, std::size_t V) noexcept {
  return size % V == 0 && size / V == rows;
}
}  // namespace detail

//! Inputs of a chain verification: the drafted tokens and the rows of the draft (q) and target (p).
//! `T` is float or double. Rows are probabilities (`verify`) or logits (`verify_from_logits`).
template <class T>
struct chain_batch {
  ragged_layout layout;                    //!< where each request's rows live
  std::size_t vocab_size = 0;              //!< V, the length of every row
  std::span<const token_id> draft_tokens;  //!< one per draft row
  std::span<const T> draft_rows;           //!< [num_draft_rows][V]; may be empty for rules that never read q
  std::span<const T> target_rows;          //!< [num_target_rows][V]

  //! Request b's draft row i (q), V entries.
  std::span<const T> draft_row(std::size_t b, std::size_t i) const {
    return draft_rows.subspan(layout.draft_row(b, i) * vocab_size, vocab_size);
  }
  //! Request b's target row i (p), V entries; i = n_b is the bonus row.
  std::span<const T> target_row(std::size_t b, std::size_t i) const {
    return target_rows.subspan(layout.target_row(b, i) * vocab_size, vocab_size);
  }
  //! Request b's draft i.
  token_id draft_token(std::size_t b, std::size_t i) const { return draft_tokens[layout.draft_row(b, i)]; }
};

}  // namespace specdec
