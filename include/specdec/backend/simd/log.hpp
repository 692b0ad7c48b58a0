//! \file backend/simd/log.hpp
//! \brief Vector natural logarithms for the log-based divergences of the simd backend
//! (backend/simd/divergence.hpp): a double-precision log of double batches, and a float-precision
//! log of float batches returned as an exponent and a reduced logarithm, so that the caller adds
//! k ln 2 in double.
//!
//! **Float path** (float rows): x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) by integer
//! operations on the bits (no table), then log(1 + f) = f + f^2 Q(f), Q a degree-8 polynomial
//! fitted (Chebyshev, then rounded to float) to (log1p(f) - f) / f^2 on [-0.2929, 0.41422]; its
//! approximation error is 0.23 ulp of float; with the float evaluation the error of log x stays
//! below 2^-21 relative (tests/backend measure it on every 7th float of the reduced range and on
//! random floats and ratios: largest 2^-23.0 on x86, 2^-22.3 on NEON64).
//! Since |log(1 + f)| <= ln(2) / 2 <= |log x| whenever k != 0, the relative error of log(1 + f)
//! carries over to log x = k ln 2 + log(1 + f), formed in one fused multiply-add (`log_from_split`).
//! For a ratio x = p / q of two floats (KL), `reduce_ratio` gives t = p' / q' - 1 from the
//! mantissas, with p' / q' in [sqrt(1/2), sqrt(2)]: the difference p' - q' is exact (the two are
//! within a factor 2) and the division rounds once, so t, and log(1 + t), keep a relative error of a
//! few float ulp even when p / q is close to 1 (no cancellation).
//! Inputs must be positive normal floats; zeros give finite values (never used by the callers, which
//! multiply them by p = 0); subnormals, infinities, NaN and negative inputs give unspecified values,
//! so callers check their rows (`normal_float_tracker`).
//!
//! **Double path** (double rows): `log_double`, within 2 ulp of glibc's log (below).
#pragma once

#include <cstdint>
#include <limits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"

namespace specdec::backend::simd::detail {

//! Int32 batches of the float batch width.
template <class Arch>
using ibatch = xsimd::batch<std::int32_t, Arch>;

//! x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), for positive normal floats x; `k_as_float`
//! is k exactly (|k| <= 127).
template <class Arch>
struct float_log_split {
  fbatch<Arch> k_as_float;
  fbatch<Arch> f;
};

//! The split of `float_log_split`: bits(x) - bits(sqrt(1/2)) has the exponent k in its top bits
//! (arithmetic shift), and removing k from x's exponent field leaves 1 + f (f = (1 + f) - 1 is exact).
template <class Arch>
float_log_split<Arch> split_log_float(const fbatch<Arch>& x) noexcept {
  using I = ibatch<Arch>;
  const I bits = xsimd::bitwise_cast<I>(x);
  const I k = (bits - I(0x3f3504f3)) >> 23;  // 0x3f3504f3 = float(sqrt(1/2))
  const fbatch<Arch> one_plus_f = xsimd::bitwise_cast<fbatch<Arch>>(bits - (k << 23));
  return {xsimd::batch_cast<float>(k), one_plus_f - fbatch<Arch>(1.0f)};
}

//! log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1] (see the file comment for the fit and its error).
template <class Arch>
fbatch<Arch> log1p_reduced(const fbatch<Arch>& f) noexcept {
  using F = fbatch<Arch>;
  // (log1p(f) - f) / f^2 = -1/2 + f/3 - f^2/4 + ..., degree 8 (coefficients of the fit, c0 first).
  F q(-0x1.3a50c2p-4f);
  q = xsimd::fma(q, f, F(0x1.049008p-3f));
  q = xsimd::fma(q, f, F(-0x1.0cda54p-3f));
  q = xsimd::fma(q, f, F(0x1.22ea4ap-3f));
  q = xsimd::fma(q, f, F(-0x1.54837ep-3f));
  q = xsimd::fma(q, f, F(0x1.99a012p-3f));
  q = xsimd::fma(q, f, F(-0x1.00020cp-2f));
  q = xsimd::fma(q, f, F(0x1.555554p-2f));
  q = xsimd::fma(q, f, F(-0x1.fffffep-2f));
  return xsimd::fma(f * f, q, f);
}

//! log x = k ln 2 + log(1 + f) in float from a split of x (`split_log_float`), or log(p / q) from
//! `reduce_ratio`: within a relative 2^-21 of the exact value (k ln 2 is exact in the fused add, ln 2
//! rounded to float is off by 2^-28 relative, and |log(1 + f)| <= |k ln 2 + log(1 + f)| for k != 0).
template <class Arch>
fbatch<Arch> log_from_split(const float_log_split<Arch>& s) noexcept {
  return xsimd::fma(s.k_as_float, fbatch<Arch>(0x1.62e430p-1f), log1p_reduced<Arch>(s.f));  // float(ln 2)
}

//! log(p / q) = k ln 2 + log(1 + t) for positive normal floats p, q: `k_as_float` = k exactly, `f` = t
//! in [sqrt(1/2) - 1, sqrt(2) - 1] (rounded once, by the division).
template <class Arch>
float_log_split<Arch> reduce_ratio(const fbatch<Arch>& p, const fbatch<Arch>& q) noexcept {
  using F = fbatch<Arch>;
  using I = ibatch<Arch>;
  const I bp = xsimd::bitwise_cast<I>(p), bq = xsimd::bitwise_cast<I>(q);
  const I mantissa(0x007fffff), one(0x3f800000);
  F mp = xsimd::bitwise_cast<F>((bp & mantissa) | one), mq = xsimd::bitwise_cast<F>((bq & mantissa) | one);  // [1, 2)
  I k = (bp >> 23) - (bq >> 23);  // the biased exponents (p, q > 0: no sign bit)
  // Bring mp / mq into [sqrt(1/2), sqrt(2)] by doubling the smaller mantissa (exact).
  const F sqrt2(1.41421354f);
  const auto q_small = mp > sqrt2 * mq, p_small = mq > sqrt2 * mp;
  mq = xsimd::select(q_small, mq + mq, mq);
  mp = xsimd::select(p_small, mp + mp, mp);
  k = xsimd::select(xsimd::bool_cast(q_small), k + I(1), k);
  k = xsimd::select(xsimd::bool_cast(p_small), k - I(1), k);
  return {xsimd::batch_cast<float>(k), (mp - mq) / mq};  // mp - mq is exact (Sterbenz)
}

//! Tracks whether every entry of a float row is +0 or a positive normal float (the inputs the float
//! log handles), with one unsigned max and one unsigned min per batch.
template <class Arch>
class normal_float_tracker {
 public:
  using bits = xsimd::batch<std::uint32_t, Arch>;
  void add(const fbatch<Arch>& x) noexcept {
    finite_.add(x);                                                    // sign bit, +inf, NaN: above the largest finite float
    low_ = xsimd::min(low_, xsimd::bitwise_cast<bits>(x) - bits(1u));  // subnormals: below FLT_MIN - 1 ulp; +0 wraps to the top
  }
  bool all() const noexcept { return finite_.all() && xsimd::all(low_ >= bits(0x007fffffu)); }

 private:
  fast_usable_tracker<Arch, float> finite_;
  bits low_ = bits(0xffffffffu);
};

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
  return xsimd::select(
      x == D(0.0), -inf,
      xsimd::select(x == inf, inf, xsimd::select(x > D(0.0), result, D(std::numeric_limits<double>::quiet_NaN()))));
}

}  // namespace specdec::backend::simd::detail
