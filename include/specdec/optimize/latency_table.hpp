//! \file optimize/latency_table.hpp
//! \brief Latency profiles for SV's goodput optimisers, beyond the `theory::LatencyProfile` concept
//! (theory/latency_profile.hpp, which they all satisfy as callables `L(int k) -> double`):
//!   - `latency_table`: a measured table of (k, L(k)) points with monotone interpolation;
//!   - `saturating_latency`: the analytic constant-then-linear profile of SV Assumption D.10 in its
//!     simplest form -- flat while the accelerator is not saturated, linear after;
//!   - `offset_latency`: k -> extra + L(offset + k), to turn a per-position profile of a batched target
//!     into the per-verified-token profile a scheduler reads;
//!   - `check_latency_profile` / `is_convex_profile`: the checks of the optimisers' assumptions.
//!
//! What k counts is up to the caller and stated where a profile is used: the optimisers of
//! optimize/sv_length.hpp and optimize/batch_scheduler.hpp read L(k) with k = drafted tokens verified
//! (as theory::sv::estimated_goodput does); decode/sv.hpp's batch loop reads the target's profile with
//! k = positions scored in one call.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/theory/latency_profile.hpp"

namespace specdec::optimize {

//! How a `latency_table` fills the gaps between measured points.
enum class interpolation {
  linear,  //!< piecewise linear: monotone, and convex whenever the measured points are
  pchip,   //!< Fritsch-Carlson monotone cubic (PCHIP): smooth and monotone, not always convex
};

//! A measured latency profile: points (k_i, L_i) with k_0 < k_1 < ... and L_0 <= L_1 <= ..., read at
//! any integer k: interpolated between points, L_0 below k_0 (a call cannot be cheaper than the
//! smallest one measured), and extrapolated linearly beyond the last point with the slope of the last
//! segment (the linear regime of SV Assumption D.10). Both interpolations preserve monotonicity, so the
//! profile never decreases.
class latency_table {
 public:
  //! \pre at least one point; k strictly increasing; every L finite and > 0; L non-decreasing
  //!      (a latency that falls when more tokens are verified is a measurement error).
  //! \throws specdec::error otherwise.
  latency_table(std::vector<double> k, std::vector<double> latency, interpolation kind = interpolation::linear)
      : k_(std::move(k)), l_(std::move(latency)), kind_(kind) {
    SPECDEC_EXPECTS(!k_.empty() && k_.size() == l_.size(), "a latency table needs one latency per point, and at least one point");
    for (std::size_t i = 0; i < k_.size(); ++i) {
      SPECDEC_EXPECTS(std::isfinite(k_[i]) && std::isfinite(l_[i]) && l_[i] > 0.0, "latencies must be finite and > 0");
      if (i > 0) {
        SPECDEC_EXPECTS(k_[i] > k_[i - 1], "the points' k must increase strictly");
        SPECDEC_EXPECTS(l_[i] >= l_[i - 1], "the latency profile is not increasing: L decreases between two points");
      }
    }
    if (kind_ == interpolation::pchip) tangents();
  }

  //! L(k) as described in the class comment.
  double operator()(double k) const {
    SPECDEC_EXPECTS(std::isfinite(k), "k must be finite");
    const std::size_t n = k_.size();
    if (n == 1 || k <= k_.front()) return l_.front();
    if (k >= k_.back()) {
      const double slope = (l_[n - 1] - l_[n - 2]) / (k_[n - 1] - k_[n - 2]);
      return l_.back() + slope * (k - k_.back());
    }
    const std::size_t i = static_cast<std::size_t>(std::upper_bound(k_.begin(), k_.end(), k) - k_.begin()) - 1;
    const double h = k_[i + 1] - k_[i], t = (k - k_[i]) / h;
    if (kind_ == interpolation::linear) return l_[i] + t * (l_[i + 1] - l_[i]);
    // Cubic Hermite with the monotone tangents m_i.
    const double t2 = t * t, t3 = t2 * t;
    return (2 * t3 - 3 * t2 + 1) * l_[i] + (t3 - 2 * t2 + t) * h * m_[i] + (-2 * t3 + 3 * t2) * l_[i + 1] +
           (t3 - t2) * h * m_[i + 1];
  }
  //! L(k) for an integer k (what `theory::LatencyProfile` calls).
  double operator()(int k) const { return (*this)(static_cast<double>(k)); }

  const std::vector<double>& points_k() const noexcept { return k_; }        //!< measured k
  const std::vector<double>& points_latency() const noexcept { return l_; }  //!< measured L(k)

 private:
  // Fritsch-Carlson tangents: zero at a flat segment or a local extremum, otherwise the weighted
  // harmonic mean of the neighbouring secants (Fritsch & Butland 1984), the end secants at the ends;
  // every tangent is in [0, 3 min(adjacent secants)], which keeps each cubic piece monotone.
  void tangents() {
    const std::size_t n = k_.size();
    m_.assign(n, 0.0);
    if (n < 2) return;
    std::vector<double> h(n - 1), d(n - 1);
    for (std::size_t i = 0; i + 1 < n; ++i) {
      h[i] = k_[i + 1] - k_[i];
      d[i] = (l_[i + 1] - l_[i]) / h[i];
    }
    m_[0] = d[0];
    m_[n - 1] = d[n - 2];
    for (std::size_t i = 1; i + 1 < n; ++i)
      if (d[i - 1] > 0.0 && d[i] > 0.0) {
        const double w1 = 2 * h[i] + h[i - 1], w2 = h[i] + 2 * h[i - 1];
        m_[i] = (w1 + w2) / (w1 / d[i - 1] + w2 / d[i]);
      }
  }

  std::vector<double> k_, l_, m_;
  interpolation kind_;
};

//! SV Assumption D.10's constant-then-linear profile in its simplest form: L(k) = base for
//! k <= saturation, base + slope (k - saturation) after. Its increments are 0 then `slope`: non-
//! decreasing, so the profile is convex (eq. (9)). (D.10 asks increments to rise strictly before the
//! threshold; a flat start is the limit case and keeps every property the optimisers use.)
struct saturating_latency {
  double base = 1.0;        //!< latency of an unsaturated call, > 0
  double saturation = 0.0;  //!< k at which the accelerator saturates, >= 0
  double slope = 0.0;       //!< latency per extra unit of k beyond saturation, >= 0

  //! L(k). \throws specdec::error on invalid parameters or a non-finite k.
  double operator()(double k) const {
    SPECDEC_EXPECTS(std::isfinite(base) && base > 0.0, "base must be finite and > 0");
    SPECDEC_EXPECTS(std::isfinite(saturation) && saturation >= 0.0, "saturation must be finite and >= 0");
    SPECDEC_EXPECTS(std::isfinite(slope) && slope >= 0.0, "slope must be finite and >= 0");
    SPECDEC_EXPECTS(std::isfinite(k), "k must be finite");
    return base + slope * std::max(0.0, k - saturation);
  }
  //! L(k) for an integer k (what `theory::LatencyProfile` calls).
  double operator()(int k) const { return (*this)(static_cast<double>(k)); }
};

//! k -> extra + L(offset + k): e.g. the latency of a batch step that verifies k drafted tokens when the
//! target scores `offset` other positions (one per request) and `extra` is spent drafting.
template <theory::LatencyProfile L>
struct offset_latency {
  const L* profile = nullptr;  //!< the underlying profile (not owned)
  int offset = 0;              //!< added to k
  double extra = 0.0;          //!< added to the latency, finite and >= 0

  //! extra + L(offset + k). \throws specdec::error from `theory::latency_at`, or for a bad `extra`.
  double operator()(int k) const {
    SPECDEC_EXPECTS(profile != nullptr, "offset_latency needs a profile");
    SPECDEC_EXPECTS(std::isfinite(extra) && extra >= 0.0, "extra must be finite and >= 0");
    SPECDEC_EXPECTS(offset + k >= 0, "offset + k (the positions scored) must be >= 0");
    return extra + theory::latency_at(*profile, static_cast<std::size_t>(offset + k));
  }
};

//! Checks L(k) for k = first..last: finite, > 0 and non-decreasing.
//! \throws specdec::error naming the first k where the profile is not positive or decreases
//!         ("not increasing").
template <theory::LatencyProfile L>
void check_latency_profile(const L& profile, int first, int last) {
  SPECDEC_EXPECTS(first >= 0, "first must be >= 0");
  double previous = 0.0;
  for (int k = first; k <= last; ++k) {
    const double l = theory::latency_at(profile, static_cast<std::size_t>(k));
    if (k > first && l < previous)
      throw error("specdec::optimize::check_latency_profile: the latency profile is not increasing: L(" + std::to_string(k) +
                  ") < L(" + std::to_string(k - 1) + ")");
    previous = l;
  }
}

//! True when the increments L(k+1) - L(k) do not decrease over k = first..last (convexity, SV eq. (9)),
//! within a relative tolerance of 1e-12 of the latencies.
template <theory::LatencyProfile L>
bool is_convex_profile(const L& profile, int first, int last) {
  SPECDEC_EXPECTS(first >= 0, "first must be >= 0");
  for (int k = first; k + 2 <= last; ++k) {
    const auto at = [&](int j) { return theory::latency_at(profile, static_cast<std::size_t>(j)); };
    const double a = at(k), b = at(k + 1), c = at(k + 2);
    if ((c - b) < (b - a) - 1e-12 * c) return false;
  }
  return true;
}

}  // namespace specdec::optimize
