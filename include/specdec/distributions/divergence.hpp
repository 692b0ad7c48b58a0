//! \file distributions/divergence.hpp
//! \brief Divergences between two probability rows, accumulated in double.
//!
//! overlap(p, q) = sum_v min(p_v, q_v) is the acceptance probability of standard speculative
//! decoding (Leviathan et al. 2023, beta = 1 - TV); total_variation = 1/2 sum |p - q|.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "specdec/contracts.hpp"

namespace specdec {

//! sum_v min(p_v, q_v).
//! \pre p.size() == q.size()
template <class T, class U>
double overlap(std::span<const T> p, std::span<const U> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
  double s = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) s += std::min(static_cast<double>(p[v]), static_cast<double>(q[v]));
  return s;
}

//! TV(p, q) = 1/2 sum_v |p_v - q_v|.
//! \pre p.size() == q.size()
template <class T, class U>
double total_variation(std::span<const T> p, std::span<const U> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
  double s = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) s += std::abs(static_cast<double>(p[v]) - static_cast<double>(q[v]));
  return 0.5 * s;
}

//! Shannon entropy H(p) = -sum p log p in nats (0 log 0 = 0).
template <class T>
double entropy(std::span<const T> p) {
  double h = 0.0;
  for (const T x : p) {
    const double v = static_cast<double>(x);
    if (v > 0.0) h -= v * std::log(v);
  }
  return h;
}

//! Cross-entropy H(p, q) = -sum p log q in nats; +inf when q_v = 0 where p_v > 0.
//! \pre p.size() == q.size()
template <class T, class U>
double cross_entropy(std::span<const T> p, std::span<const U> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
  double h = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double pv = static_cast<double>(p[v]);
    if (pv <= 0.0) continue;
    const double qv = static_cast<double>(q[v]);
    if (qv <= 0.0) return std::numeric_limits<double>::infinity();
    h -= pv * std::log(qv);
  }
  return h;
}

//! KL(p || q) = sum p log(p / q) in nats; +inf when q_v = 0 where p_v > 0.
//! \pre p.size() == q.size()
template <class T, class U>
double kl_divergence(std::span<const T> p, std::span<const U> q) {
  SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
  double d = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    const double pv = static_cast<double>(p[v]);
    if (pv <= 0.0) continue;
    const double qv = static_cast<double>(q[v]);
    if (qv <= 0.0) return std::numeric_limits<double>::infinity();
    d += pv * std::log(pv / qv);
  }
  return d;
}

}  // namespace specdec
