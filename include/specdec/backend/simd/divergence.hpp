//! \file backend/simd/divergence.hpp
//! \brief Divergences between two probability rows on the simd backend: overlap (the acceptance
//! probability 1 - TV of standard speculative decoding), total variation, entropy, cross-entropy and
//! KL, as in distributions/divergence.hpp.
//!
//! Every term is computed in double with the same operations as seq (xsimd's log is within 1 ulp of
//! glibc's); only the order of the sum differs (32 lane-strided partial sums and a fixed tree, as the
//! sampler). Agreement with seq: |simd - seq| <= 1e-12 * sum_v |term_v| on rows of finite,
//! non-negative entries (measured in tests/backend); +inf results (q_v = 0 where p_v > 0) are exact.
//! Rows holding NaN give NaN or an unspecified value, as in seq.
//! **Fallback:** rows of two different element types, or of types other than float and double, use seq.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "specdec/backend/simd/arch.hpp"
#include "specdec/contracts.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::simd {

namespace detail {

template <class T, class U>
inline constexpr bool vector_pair_types = std::is_same_v<T, U> && (std::is_same_v<T, float> || std::is_same_v<T, double>);

//! sum_v term(p_v, q_v) over double batches, in lane-strided order (32 lanes, fixed tree); `q` may
//! be null for one-row sums. `term` is called on double batches and on scalars (the remainder).
template <class Arch, class T, class Term>
double pair_sum(const T* p, const T* q, std::size_t size, Term&& term) noexcept {
  using D = dbatch<Arch>;
  constexpr std::size_t R = sampling_lanes / D::size;
  std::array<D, R> acc;
  acc.fill(D(0.0));
  std::array<D, R> pd, qd;
  const auto load = [](const T* x, std::size_t base, std::array<D, R>& out) {
    if constexpr (std::is_same_v<T, float>) {
      for (std::size_t k = 0; k < R / 2; ++k) {
        const auto f = fbatch<Arch>::load_unaligned(x + base + k * fbatch<Arch>::size);
        out[2 * k] = widen_lo<Arch>(f);
        out[2 * k + 1] = widen_hi<Arch>(f);
      }
    } else {
      for (std::size_t k = 0; k < R; ++k) out[k] = D::load_unaligned(x + base + k * D::size);
    }
  };
  std::size_t v = 0;
  for (; v + sampling_lanes <= size; v += sampling_lanes) {
    load(p, v, pd);
    if (q) load(q, v, qd);
    for (std::size_t r = 0; r < R; ++r) acc[r] += term(pd[r], q ? qd[r] : D(0.0));
  }
  std::array<double, sampling_lanes> lanes;
  for (std::size_t r = 0; r < R; ++r) acc[r].store_unaligned(lanes.data() + r * D::size);
  for (std::size_t j = 0; v + j < size; ++j)
    lanes[j] += term(static_cast<double>(p[v + j]), q ? static_cast<double>(q[v + j]) : 0.0);
  return specdec::detail::reduce_lanes(lanes);
}

//! x where the mask holds, else 0 (on batches and on scalars).
template <class B>
B masked(bool keep, const B& x) noexcept {
  return keep ? x : B(0);
}
template <class B, class M>
B masked(const M& keep, const B& x) noexcept {
  return xsimd::select(keep, x, B(0.0));
}

//! True if some v has p_v > 0 and q_v <= 0 (then cross-entropy and KL are +inf).
template <class Arch, class T>
bool support_gap(std::span<const T> p, std::span<const T> q) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const std::size_t full = p.size() / n * n;
  const B zero(T(0));
  for (std::size_t v = 0; v < full; v += n)
    if (xsimd::any((B::load_unaligned(p.data() + v) > zero) & (B::load_unaligned(q.data() + v) <= zero))) return true;
  for (std::size_t v = full; v < p.size(); ++v)
    if (p[v] > T(0) && q[v] <= T(0)) return true;
  return false;
}

template <class X>
X log_of(const X& x) noexcept {
  if constexpr (std::is_same_v<X, double>)
    return std::log(x);
  else
    return xsimd::log(x);
}

}  // namespace detail

//! sum_v min(p_v, q_v), as `specdec::overlap`.
//! \pre p.size() == q.size()  \throws specdec::error otherwise
template <class Arch, class T, class U>
double overlap(std::span<const T> p, std::span<const U> q) {
  if constexpr (!detail::vector_pair_types<T, U>) {
    return specdec::overlap(p, q);
  } else {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    return detail::pair_sum<Arch>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, double>)
        return std::min(a, b);
      else
        return xsimd::min(a, b);
    });
  }
}

//! 1/2 sum_v |p_v - q_v|, as `specdec::total_variation`.
//! \pre p.size() == q.size()  \throws specdec::error otherwise
template <class Arch, class T, class U>
double total_variation(std::span<const T> p, std::span<const U> q) {
  if constexpr (!detail::vector_pair_types<T, U>) {
    return specdec::total_variation(p, q);
  } else {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    using std::abs;
    using xsimd::abs;
    return 0.5 * detail::pair_sum<Arch>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) { return abs(a - b); });
  }
}

//! -sum_{p_v > 0} p_v log p_v in nats, as `specdec::entropy`.
template <class Arch, class T>
double entropy(std::span<const T> p) {
  if constexpr (!detail::vector_pair_types<T, T>) {
    return specdec::entropy(p);
  } else {
    return -detail::pair_sum<Arch>(p.data(), static_cast<const T*>(nullptr), p.size(), [](const auto& a, const auto&) {
      return detail::masked(a > std::decay_t<decltype(a)>(0.0), a * detail::log_of(a));
    });
  }
}

//! -sum_{p_v > 0} p_v log q_v in nats; +inf when q_v <= 0 where p_v > 0 (as `specdec::cross_entropy`).
//! \pre p.size() == q.size()  \throws specdec::error otherwise
template <class Arch, class T, class U>
double cross_entropy(std::span<const T> p, std::span<const U> q) {
  if constexpr (!detail::vector_pair_types<T, U>) {
    return specdec::cross_entropy(p, q);
  } else {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    if (detail::support_gap<Arch>(p, q)) return std::numeric_limits<double>::infinity();
    return -detail::pair_sum<Arch>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) {
      return detail::masked(a > std::decay_t<decltype(a)>(0.0), a * detail::log_of(b));
    });
  }
}

//! sum_{p_v > 0} p_v log(p_v / q_v) in nats; +inf when q_v <= 0 where p_v > 0 (as `specdec::kl_divergence`).
//! \pre p.size() == q.size()  \throws specdec::error otherwise
template <class Arch, class T, class U>
double kl_divergence(std::span<const T> p, std::span<const U> q) {
  if constexpr (!detail::vector_pair_types<T, U>) {
    return specdec::kl_divergence(p, q);
  } else {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    if (detail::support_gap<Arch>(p, q)) return std::numeric_limits<double>::infinity();
    return detail::pair_sum<Arch>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) {
      return detail::masked(a > std::decay_t<decltype(a)>(0.0), a * detail::log_of(a / b));
    });
  }
}

}  // namespace specdec::backend::simd
