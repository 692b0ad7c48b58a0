//! \file stats/chi_squared.hpp
//! \brief Pearson's chi-squared goodness-of-fit test of observed counts against exact probabilities:
//! what specdec's own statistical tests and the conformance kit (specdec/conformance/) decide with.
//!
//! Cells whose expected count is below `min_expected` (5 by default) are pooled, smallest first,
//! into one cell until that cell reaches it. A cell with expected probability 0 that was observed
//! is an impossible outcome: the test reports it and returns p-value 0.
//! The p-value is the upper tail of the chi-squared distribution with (cells - 1) degrees of
//! freedom, from Boost.Math when its headers are available, otherwise from a regularised
//! incomplete gamma function computed here (series / continued fraction).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <span>
#include <stdexcept>
#include <vector>

#if __has_include(<boost/math/distributions/chi_squared.hpp>)
#include <boost/math/distributions/chi_squared.hpp>
//! 1 when the Boost.Math headers are available (the p-value then comes from Boost.Math), 0 otherwise.
#define SPECDEC_STATS_HAVE_BOOST_MATH 1
#else
//! 1 when the Boost.Math headers are available (the p-value then comes from Boost.Math), 0 otherwise.
#define SPECDEC_STATS_HAVE_BOOST_MATH 0
#endif

namespace specdec::stats {

//! Regularised upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a), a > 0, x >= 0.
//! Series for x < a + 1, Lentz continued fraction otherwise; relative accuracy ~1e-13.
inline double gamma_q(double a, double x) {
  if (!(a > 0.0) || !(x >= 0.0)) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {  // P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::abs(term) < std::abs(sum) * 1e-16) break;
    }
    return std::max(0.0, 1.0 - sum * std::exp(log_prefix));
  }
  // Q(a, x) = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)), modified Lentz.
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

//! P(X >= statistic) for X ~ chi-squared(dof), computed here without Boost.
inline double chi_squared_upper_tail_fallback(double statistic, double dof) { return gamma_q(0.5 * dof, 0.5 * statistic); }

//! P(X >= statistic) for X ~ chi-squared(dof): Boost.Math when available.
inline double chi_squared_upper_tail(double statistic, double dof) {
  if (statistic <= 0.0) return 1.0;
#if SPECDEC_STATS_HAVE_BOOST_MATH
  return boost::math::cdf(boost::math::complement(boost::math::chi_squared_distribution<double>(dof), statistic));
#else
  return chi_squared_upper_tail_fallback(statistic, dof);
#endif
}

//! The outcome of a goodness-of-fit test.
struct gof_result {
  double statistic = 0.0;        //!< Pearson's X^2 over the pooled cells
  std::size_t dof = 0;           //!< pooled cells - 1
  double p_value = 1.0;          //!< P(chi2(dof) >= statistic); 0 when an impossible cell was observed
  std::size_t cells = 0;         //!< cells after pooling
  std::size_t pooled = 0;        //!< original cells merged into the pooled cell
  std::uint64_t impossible = 0;  //!< observations in cells of expected probability 0
  std::uint64_t n = 0;           //!< total observations
};

//! Prints the result on one line: the statistic, dof, p-value, N and the cell counts.
inline std::ostream& operator<<(std::ostream& os, const gof_result& r) {
  return os << "chi2 = " << r.statistic << ", dof = " << r.dof << ", p = " << r.p_value << " (N = " << r.n
            << ", cells = " << r.cells << ", pooled " << r.pooled << ", impossible = " << r.impossible << ")";
}

//! Pearson's test of `observed` counts against the exact probabilities `expected_prob` (summing to 1
//! over the cells of positive probability). Cells of expected count < min_expected are pooled.
//! \throws std::invalid_argument on a length mismatch or when fewer than two cells remain.
inline gof_result chi_squared_gof(std::span<const std::uint64_t> observed, std::span<const double> expected_prob,
                                  double min_expected = 5.0) {
  if (observed.size() != expected_prob.size()) throw std::invalid_argument("chi_squared_gof: length mismatch");
  gof_result r;
  r.n = std::accumulate(observed.begin(), observed.end(), std::uint64_t{0});
  const double n = static_cast<double>(r.n);
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    if (expected_prob[i] > 0.0)
      order.push_back(i);
    else
      r.impossible += observed[i];
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return expected_prob[a] < expected_prob[b]; });
  // Pool the smallest cells until the pooled cell is large enough (and is not itself tiny).
  std::size_t k = 0;
  double pooled_e = 0.0, pooled_o = 0.0;
  while (k < order.size() && (n * expected_prob[order[k]] < min_expected || (k > 0 && pooled_e < min_expected))) {
    pooled_e += n * expected_prob[order[k]];
    pooled_o += static_cast<double>(observed[order[k]]);
    ++k;
  }
  r.pooled = k;
  double x2 = 0.0;
  std::size_t cells = 0;
  if (k > 0) {
    x2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  for (std::size_t i = k; i < order.size(); ++i) {
    const double e = n * expected_prob[order[i]];
    const double d = static_cast<double>(observed[order[i]]) - e;
    x2 += d * d / e;
    ++cells;
  }
  if (cells < 2) throw std::invalid_argument("chi_squared_gof: fewer than two cells after pooling");
  r.statistic = x2;
  r.cells = cells;
  r.dof = cells - 1;
  r.p_value = r.impossible > 0 ? 0.0 : chi_squared_upper_tail(x2, static_cast<double>(r.dof));
  return r;
}


//! Pearson's test of independence of the rows and the columns of a contingency table `counts`
//! ([rows][cols], row-major): expected counts from the margins, (r - 1)(c - 1) degrees of freedom
//! over the rows and columns that were observed at all.
//! \throws std::invalid_argument on a size mismatch or when fewer than two rows or two columns were observed.
inline gof_result chi_squared_independence(std::span<const std::uint64_t> counts, std::size_t rows, std::size_t cols) {
  if (counts.size() != rows * cols) throw std::invalid_argument("chi_squared_independence: size mismatch");
  std::vector<double> row_sum(rows, 0.0), col_sum(cols, 0.0);
  gof_result r;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      const auto c = static_cast<double>(counts[i * cols + j]);
      row_sum[i] += c;
      col_sum[j] += c;
      r.n += counts[i * cols + j];
    }
  const auto observed = [](const std::vector<double>& s) {
    return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](double x) { return x > 0.0; }));
  };
  const std::size_t r_used = observed(row_sum), c_used = observed(col_sum);
  if (r_used < 2 || c_used < 2) throw std::invalid_argument("chi_squared_independence: fewer than two rows or columns observed");
  const double n = static_cast<double>(r.n);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      if (row_sum[i] == 0.0 || col_sum[j] == 0.0) continue;
      const double e = row_sum[i] * col_sum[j] / n;
      const double d = static_cast<double>(counts[i * cols + j]) - e;
      r.statistic += d * d / e;
    }
  r.cells = r_used * c_used;
  r.dof = (r_used - 1) * (c_used - 1);
  r.p_value = chi_squared_upper_tail(r.statistic, static_cast<double>(r.dof));
  return r;
}

}  // namespace specdec::stats
