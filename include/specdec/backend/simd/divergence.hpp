//! \file backend/simd/divergence.hpp
//! \brief Divergences between two probability rows on the simd backend: overlap (the acceptance
//! probability 1 - TV of standard speculative decoding), total variation, entropy, cross-entropy and
//! KL, as in distributions/divergence.hpp.
//!
//! Every term is computed in double with the same operations as seq (the log is `log_double`, within
//! 2 ulp of glibc's); only the order of the sum differs (32 lane-strided partial sums and a fixed tree, as the
//! sampler). Agreement with seq: |simd - seq| <= 1e-12 * sum_v |term_v| on rows of finite,
//! non-negative entries (measured in tests/backend); +inf results (q_v = 0 where p_v > 0) are exact.
//! Rows holding NaN give NaN or an unspecified value, as in seq.
//! **Fallback:** rows of two different element types, or of types other than float and double, use
//! seq; so do entropy, cross-entropy and KL on architectures with two double lanes (SSE, NEON).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
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

//! Natural log of double batches, within 2 ulp (xsimd 8.1's double log is several times slower):
//! x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) = 2 s (1 + s^2/3 + ... + s^22/23),
//! s = (m - 1) / (m + 1), |s| <= 0.1716 (the next term is below 2^-65), then e ln 2 + log m with
//! ln 2 split in two. Subnormals are scaled first; 0 -> -inf, +inf -> +inf, negatives and NaN -> NaN.
template <class Arch>
dbatch<Arch> log_double(const dbatch<Arch>& x) noexcept {
  using D = dbatch<Arch>;
  using U = xsimd::batch<std::uint64_t, Arch>;
  const auto tiny = x < D(std::numeric_limits<double>::min());
  const D y = xsimd::select(tiny, x * D(0x1p54), x);
  const U bits = xsimd::bitwise_cast<U>(y);
  // The biased exponent (0..2047) as a double: OR it into the mantissa of 2^52, subtract 2^52.
  const D biased = xsimd::bitwise_cast<D>((bits >> 52) | U(0x4330000000000000ull)) - D(0x1p52);
  D m = xsimd::bitwise_cast<D>((bits & U(0x000fffffffffffffull)) | U(0x3ff0000000000000ull));  // [1, 2)
  D e = biased - xsimd::select(tiny, D(1023.0 + 54.0), D(1023.0));
  const auto high = m > D(1.4142135623730951);
  m = xsimd::select(high, m * D(0.5), m);
  e = xsimd::select(high, e + D(1.0), e);
  const D s = (m - D(1.0)) / (m + D(1.0)), z = s * s;
  // 1 + z/3 + ... + z^11/23 by Estrin's scheme (depth 4 instead of 11: the latency, not the
  // operation count, bounded the Horner form).
  const D z2 = z * z, z4 = z2 * z2;
  const auto pair = [&z](double a, double b) { return xsimd::fma(D(b), z, D(a)); };  // a + b z
  const D p01 = pair(1.0, 1.0 / 3), p23 = pair(1.0 / 5, 1.0 / 7), p45 = pair(1.0 / 9, 1.0 / 11);
  const D p67 = pair(1.0 / 13, 1.0 / 15), p89 = pair(1.0 / 17, 1.0 / 19), pab = pair(1.0 / 21, 1.0 / 23);
  const D q0 = xsimd::fma(p23, z2, p01), q1 = xsimd::fma(p67, z2, p45), q2 = xsimd::fma(pab, z2, p89);
  const D poly = xsimd::fma(xsimd::fma(q2, z4, q1), z4, q0);
  const D log_m = D(2.0) * s * poly;
  const D result = e * D(0.69314718036912381649) + (e * D(1.9082149292705877e-10) + log_m);  // ln 2 = hi + lo
  const D inf(std::numeric_limits<double>::infinity());
  return xsimd::select(x == D(0.0), -inf,
                       xsimd::select(x == inf, inf, xsimd::select(x > D(0.0), result, D(std::numeric_limits<double>::quiet_NaN()))));
}

//! With two double lanes (SSE, NEON) `log_double` is no faster than glibc's scalar log (measured:
//! 5.5 against 4-6 ns per entry), so the log-based divergences fall back to seq there.
template <class Arch>
inline constexpr bool fast_vector_log = dbatch<Arch>::size >= 4;

template <class X>
X log_of(const X& x) noexcept {
  if constexpr (std::is_same_v<X, double>)
    return std::log(x);
  else
    return log_double<typename X::arch_type>(x);
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
    return 0.5 * detail::pair_sum<Arch, true>(p.data(), q.data(), p.size(), [](const auto& a, const auto& b) { return abs(a - b); });
  }
}

//! -sum_{p_v > 0} p_v log p_v in nats, as `specdec::entropy`.
template <class Arch, class T>
double entropy(std::span<const T> p) {
  if constexpr (!detail::vector_pair_types<T, T> || !detail::fast_vector_log<Arch>) {
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
  if constexpr (!detail::vector_pair_types<T, U> || !detail::fast_vector_log<Arch>) {
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
  if constexpr (!detail::vector_pair_types<T, U> || !detail::fast_vector_log<Arch>) {
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
