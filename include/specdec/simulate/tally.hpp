//! \file simulate/tally.hpp
//! \brief What a Monte-Carlo simulator returns: `estimate` (a sample mean with its variance and
//! standard error), `moments` (a mergeable accumulator of real values) and `count_tally` (a
//! histogram of non-negative integer outcomes, such as accepted tokens per iteration).
//!
//! Merging is exact for `count_tally` (integer counts) and follows Chan, Golub and LeVeque's
//! pairwise update for `moments`, so a run split into chunks and merged gives the same histogram
//! as one run, and means and variances equal to rounding.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace specdec::simulate {

//! A Monte-Carlo estimate of E[X] from `count` independent draws: the sample mean, the unbiased
//! sample variance of X, and the standard error of the mean sqrt(variance / count).
//! count = 0 gives zeros; count = 1 gives variance and std_error 0.
struct estimate {
  std::uint64_t count = 0;  //!< number of draws
  double mean = 0.0;        //!< sample mean
  double variance = 0.0;    //!< unbiased sample variance of one draw
  double std_error = 0.0;   //!< standard error of the mean, sqrt(variance / count)

  //! The standardised distance (mean - expected) / std_error; 0 when std_error is 0 and the mean
  //! equals `expected`, +-infinity when std_error is 0 and it does not.
  double z_score(double expected) const noexcept {
    const double d = mean - expected;
    if (std_error > 0.0) return d / std_error;
    return d == 0.0 ? 0.0 : (d > 0.0 ? HUGE_VAL : -HUGE_VAL);
  }
};

//! The estimate of E[a X + b] from an estimate of E[X]: mean a m + b, variance a^2 v, standard
//! error |a| se (exact: an affine map of every draw).
constexpr estimate affine(const estimate& e, double a, double b) noexcept {
  return {e.count, a * e.mean + b, a * a * e.variance, (a < 0.0 ? -a : a) * e.std_error};
}

//! The delta-method estimate of g(E[X]) for a smooth g: mean g(m), standard error |g'(m)| se,
//! variance g'(m)^2 v (first-order; the bias of g(mean) is O(1/count)). Pass value = g(m) and
//! derivative = g'(m).
constexpr estimate delta_method(const estimate& e, double value, double derivative) noexcept {
  const double d = derivative < 0.0 ? -derivative : derivative;
  return {e.count, value, d * d * e.variance, d * e.std_error};
}

//! The estimate of a probability from `successes` out of `count` Bernoulli draws: mean k/n,
//! unbiased variance n/(n-1) m(1-m), standard error sqrt(variance / n).
//! \pre successes <= count (checked by the caller; count = 0 gives zeros).
inline estimate bernoulli_estimate(std::uint64_t successes, std::uint64_t count) noexcept {
  if (count == 0) return {};
  const double n = static_cast<double>(count);
  const double m = static_cast<double>(successes) / n;
  const double v = count > 1 ? m * (1.0 - m) * n / (n - 1.0) : 0.0;
  return {count, m, v, std::sqrt(v / n)};
}

//! A mergeable accumulator of real-valued draws (Welford's update; Chan et al.'s pairwise merge).
class moments {
 public:
  //! Adds one draw.
  constexpr void add(double x) noexcept { add(x, 1); }

  //! Adds `n` draws equal to x (one step of the pairwise merge).
  constexpr void add(double x, std::uint64_t n) noexcept {
    if (n == 0) return;
    const double total = static_cast<double>(count_ + n);
    const double delta = x - mean_;
    mean_ += delta * (static_cast<double>(n) / total);
    m2_ += delta * delta * (static_cast<double>(count_) * static_cast<double>(n) / total);
    count_ += n;
  }

  //! Adds every draw of `other` (order-independent up to rounding).
  constexpr void merge(const moments& other) noexcept {
    if (other.count_ == 0) return;
    if (count_ == 0) {
      *this = other;
      return;
    }
    const double total = static_cast<double>(count_ + other.count_);
    const double delta = other.mean_ - mean_;
    mean_ += delta * (static_cast<double>(other.count_) / total);
    m2_ += other.m2_ + delta * delta * (static_cast<double>(count_) * static_cast<double>(other.count_) / total);
    count_ += other.count_;
  }

  //! The number of draws.
  constexpr std::uint64_t count() const noexcept { return count_; }
  //! The sample mean (0 without draws).
  constexpr double mean() const noexcept { return mean_; }
  //! Unbiased sample variance (0 for fewer than two draws).
  constexpr double variance() const noexcept { return count_ > 1 ? m2_ / static_cast<double>(count_ - 1) : 0.0; }
  //! Standard error of the mean (0 without draws).
  double std_error() const noexcept { return count_ > 0 ? std::sqrt(variance() / static_cast<double>(count_)) : 0.0; }
  //! The estimate of the mean.
  estimate summary() const noexcept { return {count_, mean(), variance(), std_error()}; }

 private:
  std::uint64_t count_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;
};

//! A histogram of non-negative integer outcomes, counts[v] = number of draws equal to v. It grows
//! as larger values arrive, up to `histogram_limit` entries; larger values are kept in a `moments`
//! accumulator (they count in every summary, not in `histogram()`). `add` on a value inside the
//! current histogram is one increment, so simulators call it once per iteration.
class count_tally {
 public:
  //! The largest histogram kept: values >= this go to the overflow accumulator.
  static constexpr std::size_t histogram_limit = std::size_t{1} << 20;

  count_tally() = default;
  //! An empty tally with room for the values 0..reserve-1 (capped at histogram_limit).
  explicit count_tally(std::size_t reserve) : counts_(reserve < histogram_limit ? reserve : histogram_limit, 0) {}

  //! Adds one draw of value v.
  void add(std::uint64_t v) {
    if (v < counts_.size()) {
      ++counts_[static_cast<std::size_t>(v)];
      return;
    }
    add_outside(v, 1);
  }

  //! Adds n draws of value v at once (n = 0 adds nothing and does not grow the histogram). The
  //! histogram ends exactly as after n calls of add(v); for v >= histogram_limit the overflow
  //! accumulator takes the n draws in one step, which may round differently from n single adds.
  //! Used to merge histograms computed elsewhere (the cuda backend's simulators).
  void add(std::uint64_t v, std::uint64_t n) {
    if (n == 0) return;
    if (v < counts_.size()) {
      counts_[static_cast<std::size_t>(v)] += n;
      return;
    }
    add_outside(v, n);
  }

  //! Adds every draw of `other` (exact for the histogram).
  void merge(const count_tally& other) {
    if (other.counts_.size() > counts_.size()) counts_.resize(other.counts_.size(), 0);
    for (std::size_t v = 0; v < other.counts_.size(); ++v) counts_[v] += other.counts_[v];
    overflow_.merge(other.overflow_);
  }

  //! counts[v] for v < histogram().size() (values above the limit are not listed).
  std::span<const std::uint64_t> histogram() const noexcept { return counts_; }
  //! The number of draws equal to v (0 for v outside the histogram).
  std::uint64_t count_of(std::uint64_t v) const noexcept { return v < counts_.size() ? counts_[v] : 0; }
  //! Draws whose value was >= histogram_limit.
  std::uint64_t overflow_count() const noexcept { return overflow_.count(); }

  //! Total number of draws.
  std::uint64_t count() const noexcept {
    std::uint64_t n = overflow_.count();
    for (const std::uint64_t c : counts_) n += c;
    return n;
  }
  //! The fraction of draws equal to v (0 without draws).
  double frequency(std::uint64_t v) const noexcept {
    const std::uint64_t n = count();
    return n > 0 ? static_cast<double>(count_of(v)) / static_cast<double>(n) : 0.0;
  }
  //! Mean, variance and standard error of the value, from the histogram (merged group by group,
  //! so the variance is free of the cancellation of sum-of-squares formulas) and the overflow.
  estimate summary() const noexcept {
    moments m;
    for (std::size_t v = 0; v < counts_.size(); ++v) m.add(static_cast<double>(v), counts_[v]);
    m.merge(overflow_);
    return m.summary();
  }

 private:
  void add_outside(std::uint64_t v, std::uint64_t n) {
    if (v < histogram_limit) {
      std::size_t size = counts_.empty() ? 16 : counts_.size();
      while (size <= v) size *= 2;
      counts_.resize(size < histogram_limit ? size : histogram_limit, 0);
      counts_[static_cast<std::size_t>(v)] += n;
      return;
    }
    overflow_.add(static_cast<double>(v), n);
  }

  std::vector<std::uint64_t> counts_;
  moments overflow_;
};

}  // namespace specdec::simulate
