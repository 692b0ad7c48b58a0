//! \file core/row_batch.hpp
//! \brief `row_batch<T>`: a non-owning view of `rows` rows of `width` entries, row-major and
//! contiguous (host or device memory; the view never reads it). Every public algorithm that takes
//! a batch of rows takes one of these instead of a (span, batch, vocab) triple.
//!
//! \code
//!   std::vector<float> logits(batch * V);
//!   specdec::row_batch<const float> in(logits, V);        // batch rows of V (the size must divide)
//!   specdec::row_batch<const float> one(std::span(row));  // one row
//! \endcode
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

#include "specdec/contracts.hpp"

namespace specdec {

//! `rows` rows of `width` entries of `T` (`const T` for inputs), row-major, contiguous.
template <class T>
class row_batch {
 public:
  using element_type = T;  //!< the entries' type (`const` for a read-only view)

  row_batch() = default;

  //! `data.size() / width` rows of `width` entries.
  //! \throws specdec::error when width is 0 and data is not empty, or width does not divide data.size()
  row_batch(std::span<T> data, std::size_t width) : data_(data), width_(width) {
    SPECDEC_EXPECTS(width > 0 || data.empty(), "a row batch with entries needs a width > 0");
    SPECDEC_EXPECTS(width == 0 || data.size() % width == 0, "the row width must divide the number of entries");
  }

  //! One row: the whole span.
  explicit row_batch(std::span<T> row) : data_(row), width_(row.size()) {}

  //! A view of mutable rows is also a view of const rows.
  template <class U>
    requires std::is_same_v<const U, T> &&(!std::is_same_v<U, T>)row_batch(const row_batch<U>& other)
        : data_(other.data()), width_(other.width()) {}  // NOLINT(google-explicit-constructor)

    //! The number of rows.
    std::size_t rows() const noexcept { return width_ == 0 ? 0 : data_.size() / width_; }
    //! The entries per row (V for rows of a vocabulary).
    std::size_t width() const noexcept { return width_; }
    //! True when the view has no entries.
    bool empty() const noexcept { return data_.empty(); }
    //! All entries, row after row.
    std::span<T> data() const noexcept { return data_; }
    //! Row r. \pre r < rows()
    std::span<T> row(std::size_t r) const noexcept { return data_.subspan(r * width_, width_); }

   private:
    std::span<T> data_;
    std::size_t width_ = 0;
};

//! `row_batch(span, width)` views the span's element type.
template <class T>
row_batch(std::span<T>, std::size_t) -> row_batch<T>;

}  // namespace specdec
