// Small Monte-Carlo helpers shared by the tests/theory/*.cpp executables: a sample-moment
// accumulator and a "within k standard errors" check. Random numbers come from specdec's Philox
// streams (purpose::simulate), so every run draws the same numbers; seeds are printed.
#pragma once

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>

#include "specdec/random/stream.hpp"

namespace specdec_test {

//! A Philox stream for Monte-Carlo draws: (seed, request, step) select independent streams of up
//! to 2^25 doubles each.
inline specdec::random::philox_stream mc_stream(std::uint64_t seed, std::uint32_t request, std::uint32_t step = 0) {
  return specdec::random::philox_stream(
      specdec::random::stream_address{seed, request, step, 0, specdec::random::purpose::simulate});
}

//! Sample mean and variance with their standard errors. Sums of powers are taken around a shift
//! (pass the theoretical mean) in long double, so cancellation is harmless for the sizes used here.
class moments {
 public:
  explicit moments(double shift = 0.0) : shift_(shift) {}
  void add(double x) {
    const long double d = static_cast<long double>(x) - shift_;
    ++n_;
    s1_ += d;
    s2_ += d * d;
    s3_ += d * d * d;
    s4_ += d * d * d * d;
  }
  std::uint64_t count() const { return n_; }
  double mean() const { return static_cast<double>(shift_ + s1_ / n_); }
  //! Unbiased sample variance.
  double variance() const {
    const long double m = s1_ / n_;
    return static_cast<double>((s2_ - n_ * m * m) / (n_ - 1));
  }
  double se_mean() const { return std::sqrt(variance() / static_cast<double>(n_)); }
  //! Standard error of the sample variance, sqrt((mu4 - sigma^4) / n) with sample central moments.
  double se_variance() const {
    const long double n = static_cast<long double>(n_);
    const long double m = s1_ / n;
    const long double c2 = s2_ / n - m * m;
    const long double c4 = s4_ / n - 4 * m * s3_ / n + 6 * m * m * s2_ / n - 3 * m * m * m * m;
    const long double v = (c4 - c2 * c2) / n;
    return static_cast<double>(v > 0 ? std::sqrt(v) : 0.0L);
  }

 private:
  long double shift_;
  std::uint64_t n_ = 0;
  long double s1_ = 0, s2_ = 0, s3_ = 0, s4_ = 0;
};

//! |estimate - expected| <= k se + 1e-9 (1 + |expected|); the slack covers se = 0 (a sample
//! that never varied, e.g. acceptance 1 - 1e-12) and rounding. Prints the comparison.
inline bool within_se(const std::string& what, double estimate, double expected, double se, double k = 5.0) {
  const double z = se > 0 ? (estimate - expected) / se : 0.0;
  std::cout << "  " << what << ": simulated " << estimate << " +- " << se << ", closed form " << expected << " (z = " << z
            << ")\n";
  return std::abs(estimate - expected) <= k * se + 1e-9 * (1.0 + std::abs(expected));
}

}  // namespace specdec_test
