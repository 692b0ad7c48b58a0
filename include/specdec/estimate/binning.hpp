//! \file estimate/binning.hpp
//! \brief Profiling samples of SV's indicators and the 2-D binning of (S, A) shared by the acceptance
//! estimator (SV appendix D, Definition D.8, eq. (7)) and the information gain (SV section 7.4, Table 1).
//!
//! A `binning` cuts S into rows and, inside each row, A into cells. Every axis covers [0, 1]; a bin is
//! [e_k, e_{k+1}) except the last one of an axis, which is closed, [e_{n-1}, 1]. Two kinds:
//!   - uniform(ns, na): ns equal S ranges, each cut into na equal A ranges (the paper's 5x5, 10x10, 20x20);
//!   - adaptive(samples, ns, na): equal-frequency bins, denser where the samples are (the paper's
//!     "adaptive binning"): S cut at its sample quantiles k/ns, then each S row's A cut at the quantiles
//!     k/na of the A values that fall in that row. Repeated quantiles (point masses) are merged, so a
//!     row may have fewer bins; a quantile equal to 1 gives the atom A = 1 (the companion accepts for
//!     sure) a bin [1, 1] of its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "specdec/contracts.hpp"

namespace specdec::estimate {

//! One profiling sample of a drafted token: its indicators S and A and x, the target's acceptance of
//! the token: either its acceptance probability min(1, p(t)/q(t)) or an observed accept bit (0 or 1).
//! All three lie in [0, 1].
struct indicator_sample {
  double s = 0.0;  //!< S, SV eq. (1)
  double a = 0.0;  //!< A, SV eq. (2)
  double x = 0.0;  //!< the target's acceptance probability of the token, or its accept bit
};

namespace detail {
//! Values up to this far outside [0, 1] are float rounding and are clamped; farther is an error.
inline constexpr double unit_tolerance = 1e-6;

//! x clamped to [0, 1] when within `unit_tolerance` of it; NaN and values farther out are rejected.
inline double checked_unit(double x, const char* what) {
  if (!(x >= -unit_tolerance && x <= 1.0 + unit_tolerance))
    throw error(std::string("specdec::estimate: ") + what + " must be in [0, 1] (not NaN)");
  return std::clamp(x, 0.0, 1.0);
}

//! The bin of x in [0, 1] along edges e_0 = 0 < ... < e_{n-1} <= e_n = 1 (last bin closed).
inline std::size_t bin_of(std::span<const double> edges, double x) {
  const auto interior = edges.subspan(1, edges.size() - 2);
  return static_cast<std::size_t>(std::upper_bound(interior.begin(), interior.end(), x) - interior.begin());
}

//! True for edges e_0 = 0, e_n = 1, n >= 1, strictly increasing except that e_{n-1} may equal 1.
inline bool valid_edges(std::span<const double> e) {
  if (e.size() < 2 || e.front() != 0.0 || e.back() != 1.0) return false;
  for (std::size_t k = 0; k + 1 < e.size(); ++k) {
    if (!std::isfinite(e[k])) return false;
    if (k + 2 < e.size() ? !(e[k] < e[k + 1]) : !(e[k] <= e[k + 1])) return false;
  }
  return true;
}

//! `bins` equal ranges of [0, 1].
inline std::vector<double> uniform_edges(std::size_t bins) {
  std::vector<double> e(bins + 1);
  for (std::size_t k = 0; k <= bins; ++k) e[k] = static_cast<double>(k) / static_cast<double>(bins);
  e.back() = 1.0;
  return e;
}

//! Equal-frequency edges of `values` (sorted here): the k/bins quantiles, merged when equal, 0 and 1
//! added as the outer edges (a quantile equal to 1 leaves the bin [1, 1]). No values gives [0, 1].
inline std::vector<double> quantile_edges(std::vector<double> values, std::size_t bins) {
  std::sort(values.begin(), values.end());
  std::vector<double> e{0.0};
  if (!values.empty())
    for (std::size_t k = 1; k < bins; ++k) {
      const double q = values[k * values.size() / bins];
      if (q > e.back()) e.push_back(q);
    }
  e.push_back(1.0);  // after a quantile equal to 1 this closes the bin [1, 1] of the atom at 1
  return e;
}
}  // namespace detail

//! A 2-D binning of (S, A): S rows, each with its own A edges (see the file comment).
class binning {
 public:
  //! ns x na equal-width bins (SV Table 1's 5x5, 10x10, 20x20).
  //! \pre ns >= 1, na >= 1. \throws specdec::error otherwise.
  static binning uniform(std::size_t s_bins, std::size_t a_bins) {
    SPECDEC_EXPECTS(s_bins >= 1 && a_bins >= 1, "a binning needs at least one bin per axis");
    return binning(detail::uniform_edges(s_bins), std::vector<std::vector<double>>(s_bins, detail::uniform_edges(a_bins)),
                   "uniform " + std::to_string(s_bins) + "x" + std::to_string(a_bins));
  }

  //! Equal-frequency bins from profiling samples: at most ns S rows, at most na A bins per row
  //! (fewer where quantiles coincide).
  //! \pre samples non-empty with S and A in [0, 1]; ns, na >= 1. \throws specdec::error otherwise.
  static binning adaptive(std::span<const indicator_sample> samples, std::size_t s_bins, std::size_t a_bins) {
    SPECDEC_EXPECTS(!samples.empty(), "adaptive bins need at least one sample (empty profile)");
    SPECDEC_EXPECTS(s_bins >= 1 && a_bins >= 1, "a binning needs at least one bin per axis");
    std::vector<double> s_values;
    s_values.reserve(samples.size());
    for (const auto& x : samples) s_values.push_back(detail::checked_unit(x.s, "S"));
    std::vector<double> s_edges = detail::quantile_edges(s_values, s_bins);
    std::vector<std::vector<double>> a_values(s_edges.size() - 1);
    for (const auto& x : samples)
      a_values[detail::bin_of(s_edges, detail::checked_unit(x.s, "S"))].push_back(detail::checked_unit(x.a, "A"));
    std::vector<std::vector<double>> a_edges;
    a_edges.reserve(a_values.size());
    for (auto& v : a_values) a_edges.push_back(detail::quantile_edges(std::move(v), a_bins));
    return binning(std::move(s_edges), std::move(a_edges), "adaptive " + std::to_string(s_bins) + "x" + std::to_string(a_bins));
  }

  //! A binning from explicit edges: `s_edges` (rows + 1 values) and one A edge list per row.
  //! \pre every edge list starts at 0, ends at 1 and increases strictly (its last inner edge may be 1);
  //!      a_edges.size() == s_edges.size() - 1. \throws specdec::error otherwise.
  binning(std::vector<double> s_edges, std::vector<std::vector<double>> a_edges, std::string name = "custom")
      : s_edges_(std::move(s_edges)), a_edges_(std::move(a_edges)), name_(std::move(name)) {
    SPECDEC_EXPECTS(detail::valid_edges(s_edges_), "S edges must run from 0 to 1 and increase strictly");
    SPECDEC_EXPECTS(a_edges_.size() + 1 == s_edges_.size(), "there must be one A edge list per S row");
    row_begin_.push_back(0);
    for (const auto& e : a_edges_) {
      SPECDEC_EXPECTS(detail::valid_edges(e), "A edges must run from 0 to 1 and increase strictly");
      row_begin_.push_back(row_begin_.back() + e.size() - 1);
    }
  }

  //! The S row of s. \throws specdec::error unless s is in [0, 1] (within 1e-6; not NaN).
  std::size_t row(double s) const { return detail::bin_of(s_edges_, detail::checked_unit(s, "S")); }
  //! The cell of (s, a), in [0, cells()): cells of row r are [row_begin(r), row_begin(r + 1)).
  //! \throws specdec::error unless s and a are in [0, 1] (within 1e-6; not NaN).
  std::size_t cell(double s, double a) const {
    const std::size_t r = row(s);
    return row_begin_[r] + detail::bin_of(a_edges_[r], detail::checked_unit(a, "A"));
  }
  //! The row that holds cell c. \pre c < cells().
  std::size_t row_of_cell(std::size_t c) const {
    return static_cast<std::size_t>(std::upper_bound(row_begin_.begin(), row_begin_.end(), c) - row_begin_.begin()) - 1;
  }
  std::size_t rows() const noexcept { return a_edges_.size(); }                       //!< number of S rows
  std::size_t cells() const noexcept { return row_begin_.back(); }                    //!< number of (S, A) cells
  std::size_t row_begin(std::size_t r) const { return row_begin_.at(r); }             //!< first cell of row r (r <= rows())
  const std::vector<double>& s_edges() const noexcept { return s_edges_; }            //!< rows() + 1 S edges
  const std::vector<double>& a_edges(std::size_t r) const { return a_edges_.at(r); }  //!< A edges of row r
  //! "uniform 10x10", "adaptive 20x20" or the name given to the constructor.
  const std::string& name() const noexcept { return name_; }

 private:
  std::vector<double> s_edges_;
  std::vector<std::vector<double>> a_edges_;
  std::vector<std::size_t> row_begin_;
  std::string name_;
};

}  // namespace specdec::estimate
