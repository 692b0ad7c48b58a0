//! \file backend/simd/divergence.hpp
//! \brief Divergences between two probability rows on the simd backend: overlap (the acceptance
//! probability 1 - TV of standard speculative decoding), total variation, entropy, cross-entropy and
//! KL, as in distributions/divergence.hpp.
//!
//! Every sum is a double sum in a different order than seq's (32 lane-strided partial sums and a
//! fixed tree, as the sampler). Agreement with seq, on rows of finite, non-negative entries:
//!  - overlap, total variation: the same double terms; |simd - seq| <= 1e-12 * sum_v |term_v|.
//!  - entropy, cross-entropy, KL of **float** rows: the log is taken in float precision
//!    (backend/simd/log.hpp) of x_v = p_v (entropy), q_v (cross-entropy) or p_v / q_v (KL, from the
//!    mantissas, without cancellation when p_v is close to q_v), then multiplied by p_v and summed in
//!    double. Each log is within a relative 2^-21 of the exact one, so
//!    |simd - seq| <= 2^-21 * sum_{p_v > 0} p_v |log x_v| (+ 1e-12 of it for the order of the sum),
//!    i.e. a relative 4.8e-7 of entropy and cross-entropy (all terms of one sign on rows of
//!    probabilities), and of sum_v p_v |log(p_v / q_v)| for KL (KL(p || p) is exactly 0). That is
//!    the size of the change that rounding the inputs to float already makes (a relative 2^-24 in
//!    each p_v moves H by up to 2^-24 (H + 1)); measured in tests/backend. Float rows with a
//!    subnormal, infinite, NaN or negative entry (also -0), and rows where q_v = 0 while p_v > 0
//!    (a +inf result), are computed by seq: the same result as seq, exactly.
//!  - entropy, cross-entropy, KL of **double** rows: the log is `log_double` (within 2 ulp of
//!    glibc's), the terms the same operations as seq; |simd - seq| <= 1e-12 * sum_v |term_v|;
//!    +inf results (q_v = 0 where p_v > 0) are exact; rows holding NaN give NaN or an unspecified
//!    value, as in seq.
//! **Fallback:** rows of two different element types, or of types other than float and double, use
//! seq; so do the log-based divergences of double rows on architectures with two double lanes (SSE,
//! NEON), where `log_double` is no faster than glibc's log.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/log.hpp"
#include "specdec/contracts.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/sampling/categorical.hpp"

namespace specdec::backend::simd {

namespace detail {

template <class T, class U>
inline constexpr bool vector_pair_types = std::is_same_v<T, U> && (std::is_same_v<T, float> || std::is_same_v<T, double>);

//! sum_v term(p_v, q_v) over double batches, in lane-strided order (32 lanes, fixed tree); without
//! `Pair`, q is not read (one-row sums, q_v = 0). `term` is called on double batches and on scalars
//! (the remainder). (`Pair` is a compile-time switch: GCC 12 -O3 miscompiled a loop-invariant branch
//! around vector code for AVX-512, see softmax.hpp.)
template <class Arch, bool Pair, class T, class Term>
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
    if constexpr (Pair) load(q, v, qd);
    for (std::size_t r = 0; r < R; ++r) acc[r] += term(pd[r], Pair ? qd[r] : D(0.0));
  }
  std::array<double, sampling_lanes> lanes;
  for (std::size_t r = 0; r < R; ++r) acc[r].store_unaligned(lanes.data() + r * D::size);
  for (std::size_t j = 0; v + j < size; ++j)
    lanes[j] += term(static_cast<double>(p[v + j]), Pair ? static_cast<double>(q[v + j]) : 0.0);
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

//! With two double lanes (SSE, NEON) `log_double` is no faster than glibc's scalar log (measured:
//! 5.5 against 4-6 ns per entry), so the log-based divergences of double rows fall back to seq there.
template <class Arch>
inline constexpr bool fast_vector_log = dbatch<Arch>::size >= 4;

template <class X>
X log_of(const X& x) noexcept {
  if constexpr (std::is_same_v<X, double>)
    return std::log(x);
  else
    return log_double<typename X::arch_type>(x);
}

//! Which log-based divergence a float-row pass computes.
enum class log_term { entropy, cross_entropy, kl };

//! The float path of entropy (sum_v p_v log p_v), cross-entropy (sum_v p_v log q_v) and KL (sum_v
//! p_v log(p_v / q_v)) over float rows, in lane-strided order (32 lanes, fixed tree; the last
//! partial round goes through the same vector code, padded with zeros, which add +0 or -0). Returns
//! false, and leaves `out` alone, when the row needs seq: an entry that is not +0 or a positive
//! normal float, or (cross-entropy, KL) q_v = 0 where p_v > 0.
template <class Arch, log_term Term>
bool float_log_sum(const float* p, const float* q, std::size_t size, double& out) noexcept {
  using F = fbatch<Arch>;
  using D = dbatch<Arch>;
  constexpr std::size_t R = sampling_lanes / D::size;  // double accumulators; R / 2 float batches per round
  constexpr bool pair = Term != log_term::entropy;
  std::array<D, R> acc;
  acc.fill(D(0.0));
  normal_float_tracker<Arch> ok;
  auto gap = xsimd::batch_bool<float, Arch>(false);
  const auto round = [&](const float* pr, const float* qr) {
    for (std::size_t k = 0; k < R / 2; ++k) {
      const F pv = F::load_unaligned(pr + k * F::size);
      ok.add(pv);
      float_log_split<Arch> s;
      if constexpr (pair) {
        const F qv = F::load_unaligned(qr + k * F::size);
        ok.add(qv);
        gap = gap | ((pv > F(0.0f)) & (qv == F(0.0f)));
        s = Term == log_term::kl ? reduce_ratio<Arch>(pv, qv) : split_log_float<Arch>(qv);
      } else {
        s = split_log_float<Arch>(pv);
      }
      // log x = k ln 2 + log(1 + f), times p in double (p = 0 lanes: the log is finite, the term +-0).
      const F lx = log_from_split<Arch>(s);
      acc[2 * k] += widen_lo<Arch>(pv) * widen_lo<Arch>(lx);
      acc[2 * k + 1] += widen_hi<Arch>(pv) * widen_hi<Arch>(lx);
    }
  };
  std::size_t v = 0;
  for (; v + sampling_lanes <= size; v += sampling_lanes) round(p + v, pair ? q + v : nullptr);
  if (v < size) {
    std::array<float, sampling_lanes> pt{}, qt{};
    std::copy(p + v, p + size, pt.begin());
    if constexpr (pair) std::copy(q + v, q + size, qt.begin());
    round(pt.data(), qt.data());
  }
  if (!ok.all() || xsimd::any(gap)) return false;
  std::array<double, sampling_lanes> lanes;
  for (std::size_t r = 0; r < R; ++r) acc[r].store_unaligned(lanes.data() + r * D::size);
  out = specdec::detail::reduce_lanes(lanes);
  return true;
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
    return detail::pair_sum<Arch, true>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) {
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
    return 0.5 *
           detail::pair_sum<Arch, true>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) { return abs(a - b); });
  }
}

//! -sum_{p_v > 0} p_v log p_v in nats, as `specdec::entropy`.
template <class Arch, class T>
double entropy(std::span<const T> p) {
  if constexpr (std::is_same_v<T, float>) {
    double s = 0.0;
    return detail::float_log_sum<Arch, detail::log_term::entropy>(p.data(), nullptr, p.size(), s)
               ? 0.0 - s
               : specdec::entropy(p);  // (+0, as seq, for a sum of zeros)
  } else if constexpr (!detail::vector_pair_types<T, T> || !detail::fast_vector_log<Arch>) {
    return specdec::entropy(p);
  } else {
    return -detail::pair_sum<Arch, false>(p.data(), static_cast<const T*>(nullptr), p.size(), [](const auto& a, const auto&) {
      return detail::masked(a > std::decay_t<decltype(a)>(0.0), a * detail::log_of(a));
    });
  }
}

//! -sum_{p_v > 0} p_v log q_v in nats; +inf when q_v <= 0 where p_v > 0 (as `specdec::cross_entropy`).
//! \pre p.size() == q.size()  \throws specdec::error otherwise
template <class Arch, class T, class U>
double cross_entropy(std::span<const T> p, std::span<const U> q) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<U, float>) {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    double s = 0.0;
    return detail::float_log_sum<Arch, detail::log_term::cross_entropy>(p.data(), q.data(), p.size(), s)
               ? 0.0 - s
               : specdec::cross_entropy(p, q);
  } else if constexpr (!detail::vector_pair_types<T, U> || !detail::fast_vector_log<Arch>) {
    return specdec::cross_entropy(p, q);
  } else {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    if (detail::support_gap<Arch>(p, q)) return std::numeric_limits<double>::infinity();
    return -detail::pair_sum<Arch, true>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) {
      return detail::masked(a > std::decay_t<decltype(a)>(0.0), a * detail::log_of(b));
    });
  }
}

//! sum_{p_v > 0} p_v log(p_v / q_v) in nats; +inf when q_v <= 0 where p_v > 0 (as `specdec::kl_divergence`).
//! \pre p.size() == q.size()  \throws specdec::error otherwise
template <class Arch, class T, class U>
double kl_divergence(std::span<const T> p, std::span<const U> q) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<U, float>) {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    double s = 0.0;
    return detail::float_log_sum<Arch, detail::log_term::kl>(p.data(), q.data(), p.size(), s) ? s : specdec::kl_divergence(p, q);
  } else if constexpr (!detail::vector_pair_types<T, U> || !detail::fast_vector_log<Arch>) {
    return specdec::kl_divergence(p, q);
  } else {
    SPECDEC_EXPECTS(p.size() == q.size(), "rows differ in length");
    if (detail::support_gap<Arch>(p, q)) return std::numeric_limits<double>::infinity();
    return detail::pair_sum<Arch, true>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) {
      return detail::masked(a > std::decay_t<decltype(a)>(0.0), a * detail::log_of(a / b));
    });
  }
}

}  // namespace specdec::backend::simd
