//! \file estimate/acceptance_estimator.hpp
//! \brief SV's acceptance estimator P(accept | S, A) (Kim et al., SV, section 5; appendix D, Definitions
//! D.7-D.8, eq. (7), Assumption D.9): the mean target acceptance of the profiling samples that fall in
//! the (S, A) bin of a drafted token.
//!
//! **Fit.** Each sample (S, A, x) adds x (the target acceptance probability min(1, p/q), or an
//! observed accept bit) to the sum of its cell of a `binning` (uniform 5x5 / 10x10 / 20x20 or adaptive
//! equal-frequency bins). The estimate of a cell is its sample mean, which is unbiased for the mean
//! acceptance of the tokens that fall in it when profiling and inference see the same distribution of
//! (S, A, x) (Assumption D.9).
//!
//! **Empty and thin bins.** Estimates are smoothed hierarchically, cell -> S row -> all samples, with
//! a pseudo-count m (`prior_weight`) and a minimum count (`min_count`):
//!   global  mu   = sum x / n                                   (all samples)
//!   row r   mu_r = (sum_r x + m mu) / (n_r + m)   if n_r >= min_count, else mu
//!   cell c  mu_c = (sum_c x + m mu_r) / (n_c + m) if n_c >= min_count, else mu_r
//! So an empty bin, or one with fewer than `min_count` samples, falls back to its S row's estimate
//! (and an empty or thin row to the overall acceptance), and a sparsely filled bin is pulled toward
//! its row by m pseudo-samples. m = 0 and min_count = 1 give the raw bin means, with the fallback for
//! empty bins only. P(accept | S) (`given_similarity`) is the row estimate mu_r.
//!
//! **Save / load.** `save` writes the raw counts and sums (not the smoothed values) in a line-based
//! text format, so an engine can profile offline and load the profile at start-up:
//! \code
//!   specdec-sv-acceptance-profile 1
//!   prior_weight <m>
//!   min_count <k>
//!   name <binning name, rest of the line>
//!   s_edges <R + 1> e_0 ... e_R
//!   row <r> a_edges <C_r + 1> e_0 ... e_C          (R lines, r = 0 .. R - 1)
//!   row <r> cells <C_r> n_0 sum_0 ... n_{C-1} sum_{C-1}   (R lines)
//!   end
//! \endcode
//! Doubles are written with 17 significant digits, so a profile round-trips exactly. `load` checks
//! every field (header, version, counts, edges, 0 <= sum <= n) and throws `specdec::error` naming the
//! problem.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <limits>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/estimate/binning.hpp"

namespace specdec::estimate {

//! How the estimator treats empty and thin bins (see the file comment).
struct estimator_options {
  double prior_weight = 2.0;  //!< m >= 0: pseudo-samples pulling a bin toward its row, a row toward the mean
  std::size_t min_count = 5;  //!< >= 1: a bin (or row) with fewer samples takes its parent's estimate
};

//! P(accept | S, A) from binned profiling samples (SV Def. D.8). Copyable value type.
class acceptance_estimator {
 public:
  //! Fits the estimator: counts and sums of x per cell of `bins`.
  //! \pre samples non-empty (an empty profile has nothing to estimate from); every S, A, x in [0, 1]
  //!      (not NaN; values within 1e-6 outside are clamped); prior_weight finite and >= 0; min_count >= 1.
  //! \throws specdec::error otherwise.
  static acceptance_estimator fit(std::span<const indicator_sample> samples, binning bins, estimator_options options = {}) {
    SPECDEC_EXPECTS(!samples.empty(), "the profile is empty: no samples to estimate P(accept | S, A) from");
    std::vector<std::uint64_t> counts(bins.cells(), 0);
    std::vector<double> sums(bins.cells(), 0.0);
    for (const auto& x : samples) {
      const std::size_t c = bins.cell(x.s, x.a);
      ++counts[c];
      sums[c] += detail::checked_unit(x.x, "x (the target acceptance)");
    }
    return acceptance_estimator(std::move(bins), std::move(counts), std::move(sums), options);
  }

  //! An estimator from per-cell counts and sums of x (what `fit` computes and `save` writes).
  //! \pre counts.size() == sums.size() == bins.cells(); 0 <= sums[c] <= counts[c]; at least one sample;
  //!      options valid (as for `fit`). \throws specdec::error otherwise.
  acceptance_estimator(binning bins, std::vector<std::uint64_t> counts, std::vector<double> sums, estimator_options options = {})
      : bins_(std::move(bins)), counts_(std::move(counts)), sums_(std::move(sums)), options_(options) {
    SPECDEC_EXPECTS(std::isfinite(options_.prior_weight) && options_.prior_weight >= 0.0, "prior_weight must be finite and >= 0");
    SPECDEC_EXPECTS(options_.min_count >= 1, "min_count must be >= 1");
    SPECDEC_EXPECTS(counts_.size() == bins_.cells() && sums_.size() == bins_.cells(), "one count and one sum per cell");
    std::uint64_t n = 0;
    double total = 0.0;
    for (std::size_t c = 0; c < counts_.size(); ++c) {
      SPECDEC_EXPECTS(sums_[c] >= 0.0 && sums_[c] <= static_cast<double>(counts_[c]) * (1.0 + 1e-12),
                      "a cell's sum of x must lie in [0, its count]");
      n += counts_[c];
      total += sums_[c];
    }
    SPECDEC_EXPECTS(n > 0, "the profile is empty: no samples to estimate P(accept | S, A) from");
    samples_ = n;
    mean_ = total / static_cast<double>(n);
    const double m = options_.prior_weight;
    const auto smooth = [&](double sum, std::uint64_t count, double parent) {
      return count < options_.min_count ? parent : (sum + m * parent) / (static_cast<double>(count) + m);
    };
    row_values_.resize(bins_.rows());
    values_.resize(bins_.cells());
    for (std::size_t r = 0; r < bins_.rows(); ++r) {
      std::uint64_t rn = 0;
      double rs = 0.0;
      for (std::size_t c = bins_.row_begin(r); c < bins_.row_begin(r + 1); ++c) {
        rn += counts_[c];
        rs += sums_[c];
      }
      row_values_[r] = smooth(rs, rn, mean_);
      for (std::size_t c = bins_.row_begin(r); c < bins_.row_begin(r + 1); ++c)
        values_[c] = smooth(sums_[c], counts_[c], row_values_[r]);
    }
  }

  //! P(accept | S = s, A = a): the smoothed estimate of the cell of (s, a). In [0, 1].
  //! \throws specdec::error unless s and a are in [0, 1] (NaN indicators included).
  double operator()(double s, double a) const { return values_[bins_.cell(s, a)]; }

  //! P(accept | S = s): the smoothed estimate of s's row (all A pooled). SV's exact ("causal") mode
  //! uses it to decide on a position before looking at the drafted token (decode/sv.hpp).
  //! \throws specdec::error unless s is in [0, 1].
  double given_similarity(double s) const { return row_values_[bins_.row(s)]; }

  //! Estimates for n tokens: out[i] = (*this)(s[i], a[i]).
  //! \pre s, a and out have the same length. \throws specdec::error otherwise or on a bad indicator.
  void estimate(std::span<const double> s, std::span<const double> a, std::span<double> out) const {
    SPECDEC_EXPECTS(s.size() == a.size() && a.size() == out.size(), "s, a and out must have the same length");
    for (std::size_t i = 0; i < s.size(); ++i) out[i] = (*this)(s[i], a[i]);
  }

  double overall() const noexcept { return mean_; }                         //!< mean x over every sample
  std::uint64_t samples() const noexcept { return samples_; }               //!< number of samples
  const binning& bins() const noexcept { return bins_; }                    //!< the binning
  const estimator_options& options() const noexcept { return options_; }    //!< smoothing options
  std::uint64_t count(std::size_t cell) const { return counts_.at(cell); }  //!< samples in a cell
  double sum(std::size_t cell) const { return sums_.at(cell); }             //!< sum of x in a cell
  double value(std::size_t cell) const { return values_.at(cell); }         //!< smoothed estimate of a cell
  //! Cells with fewer than `min_count` samples (those that took their row's estimate).
  std::size_t thin_cells() const noexcept {
    std::size_t k = 0;
    for (const auto c : counts_) k += c < options_.min_count;
    return k;
  }

  //! Writes the profile in the text format of the file comment (exact round trip through `load`).
  void save(std::ostream& os) const {
    std::ostringstream o;
    o.precision(17);
    o << "specdec-sv-acceptance-profile 1\nprior_weight " << options_.prior_weight << "\nmin_count " << options_.min_count
      << "\nname " << bins_.name() << "\ns_edges " << bins_.s_edges().size();
    for (const double e : bins_.s_edges()) o << ' ' << e;
    o << '\n';
    for (std::size_t r = 0; r < bins_.rows(); ++r) {
      o << "row " << r << " a_edges " << bins_.a_edges(r).size();
      for (const double e : bins_.a_edges(r)) o << ' ' << e;
      o << '\n';
    }
    for (std::size_t r = 0; r < bins_.rows(); ++r) {
      o << "row " << r << " cells " << bins_.row_begin(r + 1) - bins_.row_begin(r);
      for (std::size_t c = bins_.row_begin(r); c < bins_.row_begin(r + 1); ++c) o << ' ' << counts_[c] << ' ' << sums_[c];
      o << '\n';
    }
    o << "end\n";
    os << o.str();
  }

  //! Reads a profile written by `save`.
  //! \throws specdec::error on a malformed, truncated or inconsistent profile (the message says which field).
  static acceptance_estimator load(std::istream& is) {
    const auto fail = [](const std::string& what) { return error("specdec::estimate::acceptance_estimator::load: " + what); };
    const auto expect_word = [&](const char* word) {
      std::string w;
      if (!(is >> w) || w != word) throw fail(std::string("expected '") + word + "'" + (w.empty() ? "" : ", found '" + w + "'"));
    };
    const auto read_size = [&](const char* what) {
      long long v = -1;
      if (!(is >> v) || v < 0 || v > (1ll << 40)) throw fail(std::string("bad ") + what);
      return static_cast<std::size_t>(v);
    };
    const auto read_double = [&](const char* what) {
      double v = 0.0;
      if (!(is >> v) || !std::isfinite(v)) throw fail(std::string("bad ") + what);
      return v;
    };
    const auto read_edges = [&](const char* what) {
      const std::size_t n = read_size(what);
      if (n < 2 || n > (1u << 20)) throw fail(std::string("bad number of ") + what);
      std::vector<double> e(n);
      for (auto& x : e) x = read_double(what);
      if (!detail::valid_edges(e)) throw fail(std::string(what) + " must run from 0 to 1 and increase strictly");
      return e;
    };
    expect_word("specdec-sv-acceptance-profile");
    if (read_size("version") != 1) throw fail("unsupported version (this build reads version 1)");
    estimator_options o;
    expect_word("prior_weight");
    o.prior_weight = read_double("prior_weight");
    expect_word("min_count");
    o.min_count = read_size("min_count");
    expect_word("name");
    std::string name;
    std::getline(is >> std::ws, name);
    expect_word("s_edges");
    std::vector<double> s_edges = read_edges("s_edges");
    const std::size_t rows = s_edges.size() - 1;
    std::vector<std::vector<double>> a_edges(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      expect_word("row");
      if (read_size("row index") != r) throw fail("rows out of order");
      expect_word("a_edges");
      a_edges[r] = read_edges("a_edges");
    }
    std::vector<std::uint64_t> counts;
    std::vector<double> sums;
    for (std::size_t r = 0; r < rows; ++r) {
      expect_word("row");
      if (read_size("row index") != r) throw fail("rows out of order");
      expect_word("cells");
      if (read_size("cell count") + 1 != a_edges[r].size()) throw fail("a row's cell count does not match its A edges");
      for (std::size_t c = 0; c + 1 < a_edges[r].size(); ++c) {
        counts.push_back(read_size("count"));
        const double s = read_double("sum");
        if (s < 0.0 || s > static_cast<double>(counts.back()) * (1.0 + 1e-12)) throw fail("a cell's sum must lie in [0, count]");
        sums.push_back(s);
      }
    }
    expect_word("end");
    try {
      return acceptance_estimator(binning(std::move(s_edges), std::move(a_edges), name), std::move(counts), std::move(sums), o);
    } catch (const error& e) {
      throw fail(e.what());
    }
  }

 private:
  binning bins_;
  std::vector<std::uint64_t> counts_;
  std::vector<double> sums_;
  estimator_options options_;
  std::uint64_t samples_ = 0;
  double mean_ = 0.0;
  std::vector<double> row_values_, values_;
};

}  // namespace specdec::estimate
