//! \file estimate/information_gain.hpp
//! \brief How much observing SV's indicators reduces the uncertainty of a drafted token's acceptance:
//! I(X; S, A) = H(X) - H(X | S, A) (Kim et al., SV, sections 4.1 and 7.4, Table 1; appendix B.3).
//!
//! **What X is.** X is the target's acceptance of a drafted token, as recorded in the samples: its
//! acceptance probability min(1, p/q) or an observed accept bit. X is continuous, so it is discretised
//! into `x_bins` equal-width bins of [0, 1] -- [k/K, (k+1)/K) for k < K - 1 and [(K-1)/K, 1] -- before
//! taking entropies (the paper does not say how it discretises X; its H(X) of 1.38-1.78 bits shows it
//! uses more than two levels). Accept bits land in the first and last bins. (S, A) are discretised by a
//! `binning` (the same uniform or adaptive bins as the estimator). Entropies are in **bits**.
//!
//! **Estimators.** The plug-in (maximum-likelihood) entropies of the empirical distributions:
//!   H(X) = -sum_k P(k) log2 P(k),   H(X | S, A) = sum_c P(c) H(X | c),   gain = H(X) - H(X | S, A) >= 0.
//! The plug-in gain is biased upward on small samples (about (cells - 1)(K - 1) / (2 n ln 2) bits for
//! independent variables), so a companion that tells nothing still shows a small positive gain. The
//! Miller-Madow correction adds (m - 1) / (2 n ln 2) to each plug-in entropy of n samples with m
//! occupied X bins (G. A. Miller 1955; discussed in L. Paninski 2003, "Estimation of entropy and mutual
//! information", Neural Computation 15), i.e.
//!   H_MM(X) = H(X) + (m - 1) / (2 N ln 2),   H_MM(X | S, A) = H(X | S, A) + sum_c (m_c - 1) / (2 N ln 2),
//! which removes the first-order bias; the corrected gain can then be slightly negative (reported as is).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/estimate/binning.hpp"

namespace specdec::estimate {

//! What to condition X on.
enum class conditioning {
  s_and_a,  //!< the (S, A) cells of the binning (SV section 7.4)
  s_only,   //!< the S rows only (SV appendix B.1: the gain of S alone)
};

//! Options of `information_gain`.
struct information_gain_options {
  std::size_t x_bins = 10;                     //!< K >= 2 equal-width bins of X on [0, 1]
  bool miller_madow = false;                   //!< add the Miller-Madow bias correction to both entropies
  conditioning given = conditioning::s_and_a;  //!< condition on (S, A) cells or on S rows
};

//! The result of `information_gain`; entropies in bits.
struct information_gain_result {
  double h_x = 0.0;           //!< H(X)
  double h_x_given = 0.0;     //!< H(X | S, A) (or H(X | S))
  double gain = 0.0;          //!< h_x - h_x_given
  std::uint64_t samples = 0;  //!< N
  std::size_t x_bins = 0;     //!< K
  std::size_t cells = 0;      //!< conditioning cells of the binning (rows for s_only)
  std::size_t occupied = 0;   //!< conditioning cells that hold at least one sample
  bool miller_madow = false;  //!< whether the correction was applied
  //! gain / H(X) (0 when H(X) = 0): the share of the uncertainty removed (SV's "34%").
  double relative_gain() const noexcept { return h_x > 0.0 ? gain / h_x : 0.0; }
};

namespace detail {
//! Plug-in entropy in bits of a histogram with `n` samples, and its number of occupied bins.
inline double entropy_bits(std::span<const std::uint64_t> histogram, std::uint64_t n, std::size_t& occupied) {
  occupied = 0;
  if (n == 0) return 0.0;
  double h = 0.0;
  for (const auto c : histogram)
    if (c > 0) {
      ++occupied;
      const double p = static_cast<double>(c) / static_cast<double>(n);
      h -= p * std::log2(p);
    }
  return h;
}
}  // namespace detail

//! The bin of x in K equal-width bins of [0, 1] (the last one closed).
//! \pre K >= 1. \throws specdec::error unless x is in [0, 1] (within 1e-6; not NaN).
inline std::size_t x_bin(double x, std::size_t x_bins) {
  const double v = detail::checked_unit(x, "x (the target acceptance)");
  const auto k = static_cast<std::size_t>(v * static_cast<double>(x_bins));
  return k < x_bins ? k : x_bins - 1;
}

//! H(X), H(X | S, A) and I(X; S, A) of profiling samples under a binning (see the file comment for
//! the discretisation of X, the units and the Miller-Madow option).
//! \pre samples non-empty; every S, A, x in [0, 1] (not NaN); x_bins >= 2.
//! \throws specdec::error otherwise.
inline information_gain_result information_gain(std::span<const indicator_sample> samples, const binning& bins,
                                                const information_gain_options& options = {}) {
  SPECDEC_EXPECTS(!samples.empty(), "the profile is empty: no samples to measure information gain on");
  SPECDEC_EXPECTS(options.x_bins >= 2, "X needs at least two bins");
  const std::size_t K = options.x_bins;
  const bool by_cell = options.given == conditioning::s_and_a;
  const std::size_t cells = by_cell ? bins.cells() : bins.rows();
  std::vector<std::uint64_t> joint(cells * K, 0), marginal(K, 0), per_cell(cells, 0);
  for (const auto& x : samples) {
    const std::size_t c = by_cell ? bins.cell(x.s, x.a) : bins.row(x.s);
    const std::size_t k = x_bin(x.x, K);
    ++joint[c * K + k];
    ++marginal[k];
    ++per_cell[c];
  }
  information_gain_result r;
  r.samples = samples.size();
  r.x_bins = K;
  r.cells = cells;
  r.miller_madow = options.miller_madow;
  const double n = static_cast<double>(r.samples);
  const double mm = 1.0 / (2.0 * n * std::numbers::ln2);  // Miller-Madow, per extra occupied bin, in bits
  std::size_t m = 0;
  r.h_x = detail::entropy_bits(marginal, r.samples, m);
  if (options.miller_madow) r.h_x += static_cast<double>(m - 1) * mm;
  for (std::size_t c = 0; c < cells; ++c) {
    if (per_cell[c] == 0) continue;
    ++r.occupied;
    const double hc = detail::entropy_bits(std::span<const std::uint64_t>(joint).subspan(c * K, K), per_cell[c], m);
    r.h_x_given += static_cast<double>(per_cell[c]) / n * hc;
    if (options.miller_madow) r.h_x_given += static_cast<double>(m - 1) * mm;
  }
  r.gain = r.h_x - r.h_x_given;
  return r;
}

}  // namespace specdec::estimate
