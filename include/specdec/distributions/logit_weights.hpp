//! \file distributions/logit_weights.hpp
//! \brief The weights that warping and sampling from logits work on, defined so that every backend
//! computes them, and every decision on them, bit for bit (\ref sampling_weights).
//!
//! - **Weights.** e_v = `weight_exp`(t_v), t_v = (x_v - R) * float(1 / T) in float for float rows,
//!   (x_v - R) / T in double for double rows. `weight_exp` is one fixed sequence of IEEE operations
//!   (a Cody-Waite reduction by ln 2, a polynomial by Horner's rule, an exact scaling by 2^k), which
//!   the scalar code here and the vector code of backend/simd/exp.hpp both perform. It uses no fused
//!   multiply-add, which only some targets have, and keeps the compiler from fusing its products
//!   into sums (`no_contract`), so every target, SSE2 to AVX-512 and NEON, gets the same bits.
//! - **Reference.** R is the maximum of the first chunk of `weight_chunk` logits that holds a finite
//!   one, unless the row's maximum m is more than `weight_headroom` T above it; then R = m. So a
//!   single read of the row can compute the weights chunk by chunk (the chunk's maximum, then its
//!   weights), and every weight is at most about e^64.
//! - **Masses.** A weight w counts nearbyint(w 2^g) in a sum (`fixed_mass`), an integer; sums of
//!   these are exact in 64-bit integers for any order of addition, so a top-p cut found by sorting
//!   (seq) and one found by narrowing bands (simd) agree. g is the largest exponent with which the
//!   row's largest weight stays below 2^51 and the row's whole mass below 2^62 (`fixed_mass_scale`):
//!   a count is 2^-45 to 2^-44 of the largest weight at V = 128256.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/softmax.hpp"

namespace specdec::detail {

//! Hides a value from the optimiser, so that a product passed through it is not fused with the sum
//! that uses it into a multiply-add (GCC fuses across statements under -ffp-contract=fast, its
//! default in GNU modes; a fused result differs in the last bit). Emits no instruction. `V` is a
//! float, a double or a vector register type.
template <class V>
inline void no_contract(V& v) noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+v"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(v));
#else
  (void)v;  // (MSVC does not contract under /fp:precise)
#endif
}

//! a * b + c with the product rounded first and never fused with the sum.
template <class V>
inline V multiply_add(V a, V b, V c) noexcept {
  V product = a * b;
  no_contract(product);
  return product + c;
}

//! The constants of `weight_exp` for float and double.
template <class T>
struct weight_exp_constants;

template <>
struct weight_exp_constants<float> {
  static constexpr float log2e = 1.44269504088896341f;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;  // ln 2 = hi + lo, hi with 10 bits
  //! P(r) ~ (exp(r) - 1 - r) / r^2 on |r| <= ln(2) / 2, highest degree first (Cephes's expf, Moshier).
  static constexpr std::array<float, 5> poly{1.3997796e-03f, 8.3955629e-03f, 4.1665401e-02f, 1.6666277e-01f, 5.0000000e-01f};
  static constexpr float floor = -1000.0f;    //!< arguments below it (and NaN) are raised to it: weight 0
  static constexpr int least_normal = -125;   //!< 2^k times P's range [0.7, 1.42] is normal for k >= it
  static constexpr int least_nonzero = -152;  //!< below it the result rounds to 0
  static constexpr int bias = 127, fraction_bits = 23;
};

template <>
struct weight_exp_constants<double> {
  static constexpr double log2e = 1.4426950408889634074;
  static constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  //! 1 / n! for n = 13 down to 2 (the Taylor series of (exp(r) - 1 - r) / r^2; the next term is below
  //! 2^-57 relative on |r| <= ln(2) / 2).
  static constexpr std::array<double, 12> poly{1.6059043836821613e-10, 2.08767569878681e-09,   2.505210838544172e-08,
                                               2.755731922398589e-07,  2.755731922398589e-06,  2.48015873015873e-05,
                                               1.984126984126984e-04,  1.388888888888889e-03,  8.333333333333333e-03,
                                               4.1666666666666664e-02, 1.6666666666666666e-01, 0.5};
  static constexpr double floor = -1.0e4;
  static constexpr int least_normal = -1021, least_nonzero = -1077;
  static constexpr int bias = 1023, fraction_bits = 52;
};

template <class T>
using weight_bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

//! 2^k as a T, for least_normal <= k <= the largest exponent.
template <class T>
T power_of_two(int k) noexcept {
  using C = weight_exp_constants<T>;
  return std::bit_cast<T>(static_cast<weight_bits_t<T>>(static_cast<weight_bits_t<T>>(k + C::bias) << C::fraction_bits));
}

//! exp(t) as the fixed operation sequence of the file comment, within 2 ulp of exp (measured in
//! tests/distributions/logit_weights.cpp): k = nearbyint(t log2 e); r = (t - k ln2_hi) - k ln2_lo
//! (k ln2_hi is exact); e = ((r^2 P(r)) + r) + 1, P by Horner's rule; then e 2^k, rounded once (two
//! scalings, the first exact, when the result is subnormal). NaN and arguments below `floor` give 0.
//! \pre t <= 88 (float), 709 (double)
template <class T>
T weight_exp(T t) noexcept {
  using C = weight_exp_constants<T>;
  if (!(t > C::floor)) t = C::floor;
  const T k = std::nearbyint(t * C::log2e);
  T r = multiply_add(k, -C::ln2_hi, t);  // (k (-c) is (-k) c, exactly)
  r = multiply_add(k, -C::ln2_lo, r);
  T p = C::poly[0];
  for (std::size_t i = 1; i < C::poly.size(); ++i) p = multiply_add(p, r, C::poly[i]);
  const T e = multiply_add(r * r, p, r) + T(1);
  const int ki = static_cast<int>(k);
  if (ki >= C::least_normal) return e * power_of_two<T>(ki);
  if (ki < C::least_nonzero) return T(0);
  return e * power_of_two<T>(C::least_normal) * power_of_two<T>(ki - C::least_normal);
}

//! Logits per chunk of the single-read weights (`weight_reference`).
inline constexpr std::size_t weight_chunk = 4096;
//! How far (in units of T) the row's maximum may lie above the first chunk's before it becomes the
//! reference (float's largest is e^88.7).
inline constexpr double weight_headroom = 64.0;

//! R of the file comment from the first finite chunk maximum and the row's maximum m.
inline double choose_reference(double first_chunk_max, double m, double temperature) noexcept {
  return (m - first_chunk_max) / temperature > weight_headroom ? m : first_chunk_max;
}

//! The reference R of a usable row whose maximum is m (the file comment).
template <class T>
double weight_reference(std::span<const T> logits, double m, double temperature) noexcept {
  for (std::size_t begin = 0; begin < logits.size(); begin += weight_chunk) {
    double part_max = 0.0;
    const auto part = logits.subspan(begin, std::min(weight_chunk, logits.size() - begin));
    if (logit_row_max(part, part_max) == row_status::ok) return choose_reference(part_max, m, temperature);
  }
  return m;
}

//! The scaled gap t of the file comment, as the logits' type computes it.
template <class T>
struct weight_argument {
  T reference, factor;  // factor: float(1 / T) for float rows, T itself for double rows (a divisor)
  weight_argument(double r, double temperature)
      : reference(static_cast<T>(r)),
        factor(std::is_same_v<T, float> ? static_cast<T>(1.0 / temperature) : static_cast<T>(temperature)) {}
  T operator()(T x) const noexcept {
    if constexpr (std::is_same_v<T, float>)
      return (x - reference) * factor;
    else
      return (x - reference) / factor;
  }
};

//! Whether rows of T take the weights of this file at temperature T > 0: float and double rows,
//! except float rows whose float(1 / T) overflows (T below about 2.9e-39).
template <class T>
bool weighs_logits(double temperature) noexcept {
  if constexpr (std::is_same_v<T, float>)
    return temperature > 0.0 && 1.0 / temperature <= static_cast<double>(std::numeric_limits<float>::max());
  else
    return std::is_same_v<T, double> && temperature > 0.0;
}

//! The weights e_v of a usable row with maximum m, written to `out`; returns the maximum's weight.
//! \pre `weighs_logits<T>(temperature)`, out.size() == logits.size()
template <class T>
T logit_weights(std::span<const T> logits, double m, double temperature, std::span<T> out) noexcept {
  const weight_argument<T> t(weight_reference(logits, m, temperature), temperature);
  for (std::size_t v = 0; v < logits.size(); ++v) out[v] = weight_exp(t(logits[v]));
  return weight_exp(t(static_cast<T>(m)));
}

//! The fixed-point masses of a row of `size` weights whose largest is `top` > 0: a weight w counts
//! nearbyint((w 2^g1) 2^g2), g1 + g2 = g (two scalings so that 2^g1 and 2^g2 are doubles for any
//! top; g2 = 0 unless top is near the ends of double's range).
struct fixed_mass_scale {
  int exponent;   //!< g
  double first;   //!< 2^g1
  double second;  //!< 2^g2

  fixed_mass_scale(double top, std::size_t size) noexcept
      : exponent(std::min(51, 62 - static_cast<int>(std::bit_width(size))) - (std::ilogb(top) + 1)),
        first(std::ldexp(1.0, std::clamp(exponent, -1000, 1000))),
        second(std::ldexp(1.0, exponent - std::clamp(exponent, -1000, 1000))) {}

  //! The weight's count: below 2^51, so that sums of a row's counts stay below 2^62.
  std::int64_t operator()(double w) const noexcept { return static_cast<std::int64_t>(std::nearbyint(w * first * second)); }
  //! The least T that counts at least 1 (about 2^-g / 2).
  template <class T>
  T least_counted() const noexcept {
    T t = static_cast<T>(std::ldexp(0.5, -exponent));
    if (!(t > T(0))) t = std::numeric_limits<T>::denorm_min();
    while (t > std::numeric_limits<T>::denorm_min() && (*this)(static_cast<double>(t)) >= 1) t = std::nextafter(t, T(0));
    while ((*this)(static_cast<double>(t)) < 1) t = std::nextafter(t, std::numeric_limits<T>::infinity());
    return t;
  }
  //! 1 / (mass 2^-g): the factor that normalises a row whose counts sum to `mass` > 0.
  double inverse(std::int64_t mass) const noexcept { return std::ldexp(1.0 / static_cast<double>(mass), exponent); }
};

//! The fixed-point goal of a top-p cut: ceil(top_p * mass), at most mass.
inline std::int64_t fixed_goal(double top_p, std::int64_t mass) noexcept {
  const double g = std::ceil(top_p * static_cast<double>(mass));
  return g >= static_cast<double>(mass) ? mass : static_cast<std::int64_t>(g);
}

//! The walk of `fixed_threshold_in` over values already in descending order, resumable: `reach`
//! gives the top-p cut for a goal, and a later call with a goal at least as large continues from
//! there (the cuts of several goals for one sort).
template <class T>
class fixed_threshold_walk {
 public:
  fixed_threshold_walk(std::span<const T> descending, std::int64_t above, T fallback, const fixed_mass_scale& f) noexcept
      : values_(descending), cumulative_(above), fallback_(fallback), f_(f) {}
  //! The first value at which the cumulative mass reaches `goal`; the fallback if none does.
  //! \pre `goal` is at least the previous call's
  T reach(std::int64_t goal) noexcept {
    for (; next_ < values_.size(); ++next_) {
      const std::int64_t with = cumulative_ + f_(static_cast<double>(values_[next_]));
      if (with >= goal) return values_[next_];
      cumulative_ = with;
    }
    return fallback_;
  }

 private:
  std::span<const T> values_;
  std::int64_t cumulative_;  // the mass above values_[next_]
  std::size_t next_ = 0;
  T fallback_;
  const fixed_mass_scale& f_;
};

//! The top-p cut among `values` (any order; sorted in place), cumulating fixed-point masses from
//! `above` (the mass of the entries larger than every value): the first value, in descending order,
//! at which the cumulative mass reaches `goal`; `fallback` if none does.
template <class T>
T fixed_threshold_in(std::vector<T>& values, std::int64_t above, std::int64_t goal, T fallback, const fixed_mass_scale& f) {
  std::sort(values.begin(), values.end(), std::greater<T>());
  return fixed_threshold_walk<T>(values, above, fallback, f).reach(goal);
}

}  // namespace specdec::detail
