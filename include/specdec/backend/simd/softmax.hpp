//! \file backend/simd/softmax.hpp
//! \brief Row maximum, log-sum-exp, softmax and log-softmax with temperature on the simd backend.
//!
//! Same definitions and the same status rules as distributions/softmax.hpp (NaN or +inf: not_finite;
//! all -inf: no_mass; -inf logits get probability 0). Agreement with seq:
//!  - the row maximum and the status are exact;
//!  - float rows: t = (x - max) * float(1 / T) and exp(t) are computed in float (`weight_exp` of
//!    backend/simd/exp.hpp, within 2 ulp of the correctly rounded value); the sum is a double sum. Each probability is within a
//!    relative (2 |t| + 4) * 2^-23 of seq's (t is the entry's scaled logit gap to the maximum, so the
//!    bound is a few ulp for the tokens that carry the mass; measured in tests/backend). The |t| term:
//!    x - max, float(1 / T) and their product each round once (3 * 2^-24 relative on t, which exp
//!    turns into 1.5 |t| 2^-23; (|t| + 4) 2^-23 was stated before tests/fuzz/warp_and_sample.cpp
//!    found 1.07 times it at t = 39);
//!  - double rows: the same operations as seq in double (division by T), `weight_exp` within 1 ulp of
//!    glibc's exp; the order of the sum moves 1 / sum, so probabilities agree within (2 V + 8) 2^-53
//!    relative;
//!  - the normalisation multiplies by 1 / sum exactly as seq does (in double, then rounded).
//! **Fallback:** other element types (logits and probabilities of different types), and float rows
//! with a temperature below 1 / FLT_MAX (whose scale 1 / T is not a float), use seq.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"
#include "specdec/backend/simd/exp.hpp"
#include "specdec/contracts.hpp"
#include "specdec/distributions/row_status.hpp"
#include "specdec/distributions/softmax.hpp"

namespace specdec::backend::simd {

namespace detail {
//! The status of a row of logits from whether it held a NaN or +inf and its largest entry:
//! not_finite, else no_mass for a row of -inf only, else ok (`specdec::detail::logit_row_max`'s).
inline row_status logit_row_status(bool nan_or_inf, double max) noexcept {
  if (nan_or_inf) return row_status::not_finite;
  return max == -std::numeric_limits<double>::infinity() ? row_status::no_mass : row_status::ok;
}
}  // namespace detail

//! The maximum of a row of logits and whether it is usable (exactly `specdec::detail::logit_row_max`).
template <class Arch, class T>
row_status logit_row_max(std::span<const T> logits, double& max_out) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size, ways = 4;  // four independent running maxima: no dependency chain
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t full = logits.size() / (ways * n) * (ways * n);
  std::array<B, ways> best;
  best.fill(B(-inf));
  auto below_inf = best[0] < B(inf);  // all true; false once a lane saw NaN or +inf
  for (std::size_t v = 0; v < full; v += ways * n)
    for (std::size_t w = 0; w < ways; ++w) {
      const B x = B::load_unaligned(logits.data() + v + w * n);
      below_inf = below_inf & (x < B(inf));
      if constexpr (detail::max_skips_nan_first<Arch>)  // both skip NaN, as seq does
        best[w] = xsimd::max(x, best[w]);
      else
        best[w] = xsimd::select(x > best[w], x, best[w]);
    }
  double m = -std::numeric_limits<double>::infinity();
  bool finite = xsimd::all(below_inf);
  alignas(64) std::array<T, n> lanes;
  for (const B& b : best) {
    b.store_aligned(lanes.data());
    for (const T x : lanes) m = std::max(m, static_cast<double>(x));
  }
  for (std::size_t v = full; v < logits.size(); ++v) {
    const double x = static_cast<double>(logits[v]);
    if (std::isnan(x) || x == std::numeric_limits<double>::infinity()) finite = false;
    if (x > m) m = x;
  }
  max_out = m;
  return detail::logit_row_status(!finite, m);
}

namespace detail {

//! exp((x - max) / T) on batches of T: `weight_exp` of `specdec::detail::weight_argument`'s t, so
//! with the reference R as `max` these are the weights of distributions/logit_weights.hpp bit for
//! bit. The scaling is unconditional (x * 1 and x / 1 are exact): with a branch on `T != 1` inside
//! the loop, GCC 12 -O3 for AVX-512 turned it into a division masked by the boolean (lane 0 only), a
//! miscompile. With `Unit` (chosen outside the loop: `unit_factor`), the factor is 1 and the
//! argument is x - max without the product, the same bits for an operation fewer.
template <class Arch, class T, bool Unit = false>
struct scaled_exp {
  using B = xsimd::batch<T, Arch>;
  B max, factor;
  scaled_exp(double m, double temperature) {
    const specdec::detail::weight_argument<T> t(m, temperature);
    max = B(t.reference);
    factor = B(t.factor);
  }
  //! Whether the factor of this temperature is 1 (x * 1 and x / 1 are x).
  static bool unit_factor(double temperature) noexcept {
    return specdec::detail::weight_argument<T>(0.0, temperature).factor == T(1);
  }
  //! The weights of a group of N batches of logits, in place (`weight_exp`'s group; `KeepNaN` as there).
  template <std::size_t N, bool KeepNaN = false>
  void operator()(std::array<B, N>& x) const noexcept {
    for (std::size_t i = 0; i < N; ++i) {
      if constexpr (Unit)
        x[i] = x[i] - max;
      else if constexpr (std::is_same_v<T, float>)
        x[i] = (x[i] - max) * factor;
      else
        x[i] = (x[i] - max) / factor;  // double rows divide, as seq does
    }
    weight_exp<Arch, T, N, KeepNaN>(x);
  }
  B operator()(const B& x) const noexcept {
    std::array<B, 1> one{x};
    (*this)(one);
    return one[0];
  }
};

//! Adds the batch e of T to double accumulators.
template <class Arch, class T>
void accumulate(const xsimd::batch<T, Arch>& e, dbatch<Arch>& acc0, dbatch<Arch>& acc1) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    acc0 += widen_lo<Arch>(e);
    acc1 += widen_hi<Arch>(e);
  } else {
    acc0 += e;
  }
}

//! Sum of two double accumulators' lanes.
template <class Arch>
double lanes_sum(const dbatch<Arch>& acc0, const dbatch<Arch>& acc1) noexcept {
  return xsimd::hadd(acc0 + acc1);
}

//! Multiplies every entry by `inv` in double and rounds back to T (seq's normalisation step).
template <class Arch, class T>
void scale_row(std::span<T> row, double inv) noexcept {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size;
  const dbatch<Arch> f(inv);
  const auto scaled = [&](const B& x) {
    if constexpr (std::is_same_v<T, float>)
      return narrow<Arch>(widen_lo<Arch>(x) * f, widen_hi<Arch>(x) * f);
    else
      return x * f;
  };
  const std::size_t full = row.size() / n * n;
  for (std::size_t v = 0; v < full; v += n) scaled(B::load_unaligned(row.data() + v)).store_unaligned(row.data() + v);
  for (std::size_t v = full; v < row.size(); ++v) row[v] = static_cast<T>(static_cast<double>(row[v]) * inv);
}

//! The largest logit seen (`sum_scaled_exp` with `Track`), one maximum per batch; with the sum of
//! their weights (NaN when a logit was NaN: `weight_exp` with `KeepNaN`), the status and maximum of
//! `logit_row_max` for the entries added.
template <class Arch, class T>
struct logit_extent {
  using B = xsimd::batch<T, Arch>;
  B best = B(-std::numeric_limits<T>::infinity());

  void add(const B& x) noexcept {
    if constexpr (max_skips_nan_first<Arch>)  // (NaN skipped, as seq does)
      best = xsimd::max(x, best);
    else
      best = xsimd::select(x > best, x, best);
  }
  //! not_finite if a NaN (a NaN `weight_sum`) or +inf was added, no_mass if only -inf, else ok;
  //! `max` the largest.
  row_status status(double weight_sum, double& max) const noexcept {
    alignas(64) std::array<T, B::size> lanes;
    best.store_aligned(lanes.data());
    max = static_cast<double>(*std::max_element(lanes.begin(), lanes.end()));
    return logit_row_status(std::isnan(weight_sum) || max == std::numeric_limits<double>::infinity(), max);
  }
};

//! The sum of N batches as a balanced tree of adds: ((e0 + e1) + (e2 + e3)) + ... (an odd one out
//! joins the next level).
template <class B, std::size_t N>
B tree_sum(const std::array<B, N>& e) noexcept {
  if constexpr (N == 1) {
    return e[0];
  } else {
    std::array<B, (N + 1) / 2> half;
    for (std::size_t i = 0; i < N / 2; ++i) half[i] = e[2 * i] + e[2 * i + 1];
    if constexpr (N % 2 == 1) half[N / 2] = e[N - 1];
    return tree_sum(half);
  }
}

//! sum_v exp((x_v - m) / T), storing each exp into `out` (same length as `logits`) when `Store`.
//! (A compile-time switch, not `if (out)`: see `scaled_exp` about GCC 12 and loop-invariant branches.)
//! The weights are computed `exp_group` batches at a time (see `weight_exp`) and added in row order.
//! With `Pairs` (float rows), each group's batches (2 or 8) are added in float, as a tree, before
//! the double sum: at most 3 more roundings per term, so the sum is within 3 2^-24 relative of the
//! double sum, for fewer widening adds. With `Track`, `*seen` gets the largest logit
//! (`logit_extent`), and a NaN logit's weight is NaN (`weight_exp` with `KeepNaN`): the sum is NaN.
//! With a non-empty `ahead`, the loop also prefetches it, a cache line per batch (the next part of a
//! row that `one_read_weights` reads from memory while this part computes). The loop is compiled
//! twice, for a unit factor and for others (`scaled_exp`'s `Unit`), and chosen before it runs.
template <class Arch, bool Store, class T, bool Pairs = false, bool Track = false, bool Unit = false>
double sum_scaled_exp(std::span<const T> logits, double m, double temperature, T* out, std::span<const T> ahead = {},
                      logit_extent<Arch, T>* seen = nullptr) noexcept {
  if constexpr (!Unit) {
    if (scaled_exp<Arch, T>::unit_factor(temperature))
      return sum_scaled_exp<Arch, Store, T, Pairs, Track, true>(logits, m, temperature, out, ahead, seen);
  }
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size, per_line = 64 / sizeof(T), exp_group = 8;
  constexpr bool pairs = Pairs && std::is_same_v<T, float>;
  const scaled_exp<Arch, T, Unit> f(m, temperature);
  dbatch<Arch> acc0(0.0), acc1(0.0);
  logit_extent<Arch, T> extent;
  // The weights of G batches from entry v on, stored and added.
  const auto step = [&]<std::size_t G>(std::size_t v, std::integral_constant<std::size_t, G>) {
    std::array<B, G> e;
    for (std::size_t i = 0; i < G; ++i) e[i] = B::load_unaligned(logits.data() + v + i * n);
    if constexpr (Track)
      for (std::size_t i = 0; i < G; ++i) extent.add(e[i]);
    f.template operator()<G, Track>(e);
    for (std::size_t i = 0; i < G; ++i)
      if constexpr (Store) e[i].store_unaligned(out + v + i * n);
    if constexpr (pairs && G % 2 == 0)  // a tree of float adds, then one widening add
      accumulate<Arch, T>(tree_sum(e), acc0, acc1);
    else
      for (std::size_t i = 0; i < G; ++i) accumulate<Arch, T>(e[i], acc0, acc1);
  };
  constexpr std::size_t width = exp_group * n;  // entries per group
  const std::size_t full = logits.size() / width * width, covered = std::min(full, ahead.size() / width * width);
  std::size_t v = 0;
  for (; v < covered; v += width) {
    for (std::size_t j = 0; j < width; j += per_line) __builtin_prefetch(ahead.data() + v + j);
    step(v, std::integral_constant<std::size_t, exp_group>{});
  }
  for (; v < full; v += width) step(v, std::integral_constant<std::size_t, exp_group>{});
  if constexpr (pairs)
    for (; v + 2 * n <= logits.size(); v += 2 * n) step(v, std::integral_constant<std::size_t, 2>{});
  for (; v + n <= logits.size(); v += n) step(v, std::integral_constant<std::size_t, 1>{});
  if (v < logits.size()) {  // the remainder through the same vector code, padded with -inf
    const std::size_t rest = logits.size() - v;
    const B x = load_partial<B>(logits.data() + v, rest, -std::numeric_limits<T>::infinity());
    std::array<B, 1> e{x};
    if constexpr (Track) extent.add(x);
    f.template operator()<1, Track>(e);
    if constexpr (Store) store_partial(out + v, e[0], rest);
    accumulate<Arch, T>(e[0], acc0, acc1);
  }
  if constexpr (Track) *seen = extent;
  return lanes_sum<Arch>(acc0, acc1);
}

//! The weights of `one_read_weights`: the row's status, their sum, the reference R they are relative
//! to, and the row's maximum.
struct referenced_weights {
  row_status status;
  double sum, reference, max;
};

//! The weights of distributions/logit_weights.hpp, bit for bit, of a row of logits (`scaled_exp` with
//! the reference R), stored to `out`, and their sum (float rows: summed in groups, `sum_scaled_exp`),
//! reading the row from memory once, chunk by chunk (`specdec::detail::weight_chunk`), each chunk
//! prefetched while the one before it computes. R is the first finite chunk maximum (that chunk's
//! `logit_row_max`, then its weights from the first-level cache); every later chunk's weights,
//! maximum and status come from one pass (`sum_scaled_exp` with `Track`). So weights can exceed 1,
//! by at most e^64; when a later chunk's maximum would take them past that, R becomes the row's
//! maximum (the rest of the row is read for it) and the weights so far are computed again. The
//! status is `logit_row_max`'s for the row; the weights are unspecified on not_finite, 0 on no_mass.
//! \pre T > 0; float rows: 1 / T a float (`vector_temperature`)
template <class Arch, class T>
referenced_weights one_read_weights(std::span<const T> logits, double temperature, T* out) noexcept {
  constexpr std::size_t chunk = 4096;  // (16 KB of floats)
  constexpr double headroom = 64.0;    // (float's largest is e^88.7)
  constexpr double none = -std::numeric_limits<double>::infinity();
  referenced_weights r{row_status::no_mass, 0.0, none, none};
  for (std::size_t begin = 0; begin < logits.size(); begin += chunk) {
    const std::span<const T> part = logits.subspan(begin, std::min(chunk, logits.size() - begin));
    const std::size_t next = begin + part.size();
    const std::span<const T> ahead = logits.subspan(next, std::min(chunk, logits.size() - next));
    if (r.status == row_status::ok) {  // R is set: the chunk's weights, maximum and status in one pass
      logit_extent<Arch, T> seen;
      const double part_sum =
          sum_scaled_exp<Arch, true, T, true, true>(part, r.reference, temperature, out + begin, ahead, &seen);
      double part_max = none;
      const row_status s = seen.status(part_sum, part_max);
      if (s == row_status::not_finite) return {s, 0.0, r.reference, r.max};
      r.max = std::max(r.max, part_max);
      if (!((part_max - r.reference) / temperature > headroom)) {
        r.sum += part_sum;
        continue;
      }
      // R becomes the row's maximum: the weights so far, this chunk's included, are computed again.
      double row_max = none;
      if (logit_row_max<Arch>(logits.subspan(begin), row_max) == row_status::not_finite)
        return {row_status::not_finite, 0.0, r.reference, r.max};
      r.reference = row_max;
      r.sum = sum_scaled_exp<Arch, true, T, true>(logits.first(next), r.reference, temperature, out);
      continue;
    }
    double part_max = none;
    const row_status s = logit_row_max<Arch>(part, part_max);
    if (s == row_status::not_finite) return {s, 0.0, r.reference, r.max};
    if (s == row_status::no_mass) {  // (no reference yet: weights 0)
      std::fill(out + begin, out + begin + part.size(), T(0));
      continue;
    }
    // The first finite chunk: its maximum is R.
    r.status = row_status::ok;
    r.reference = r.max = part_max;
    r.sum = sum_scaled_exp<Arch, true, T, true>(part, r.reference, temperature, out + begin, ahead);
  }
  return r;
}

template <class T, class U>
inline constexpr bool vector_softmax_types = std::is_same_v<T, U> && (std::is_same_v<T, float> || std::is_same_v<T, double>);

//! Whether the vector code can scale a row of T by this temperature: float rows multiply by
//! float(1 / T), which is +inf for T below 1 / FLT_MAX (about 2.9e-39), and inf * 0 at the maximum
//! would be NaN; such rows take seq's path (found by tests/fuzz/warp_and_sample.cpp).
template <class T>
bool vector_temperature(double temperature) noexcept {
  return !std::is_same_v<T, float> || 1.0 / temperature <= static_cast<double>(std::numeric_limits<float>::max());
}

}  // namespace detail

//! log(sum_v exp(logits_v / temperature)), stable; NaN for a row with NaN or +inf, -inf for a row
//! of -inf only (as `specdec::log_sum_exp`).
//! \pre temperature > 0 and finite  \throws specdec::error otherwise
template <class Arch, class T>
double log_sum_exp(std::span<const T> logits, double temperature = 1.0) {
  if constexpr (!detail::vector_softmax_types<T, T>) {
    return specdec::log_sum_exp(logits, temperature);
  } else {
    SPECDEC_EXPECTS(temperature > 0.0 && std::isfinite(temperature), "temperature must be finite and > 0");
    if (!detail::vector_temperature<T>(temperature)) return specdec::log_sum_exp(logits, temperature);
    double m = 0.0;
    const row_status s = logit_row_max<Arch>(logits, m);
    if (s == row_status::not_finite) return std::numeric_limits<double>::quiet_NaN();
    if (s == row_status::no_mass) return -std::numeric_limits<double>::infinity();
    return m / temperature + std::log(detail::sum_scaled_exp<Arch, false>(logits, m, temperature, static_cast<T*>(nullptr)));
  }
}

//! probs = softmax(logits / temperature); on a row that is not usable, `probs` is zero-filled and the
//! status says why (as `specdec::softmax`).
//! \pre probs.size() == logits.size(), temperature > 0  \throws specdec::error otherwise
template <class Arch, class T, class U>
row_status softmax(std::span<const T> logits, std::span<U> probs, double temperature = 1.0) {
  if constexpr (!detail::vector_softmax_types<T, U>) {
    return specdec::softmax(logits, probs, temperature);
  } else {
    SPECDEC_EXPECTS(probs.size() == logits.size(), "probs and logits differ in length");
    SPECDEC_EXPECTS(temperature > 0.0 && std::isfinite(temperature), "temperature must be finite and > 0");
    if (!detail::vector_temperature<T>(temperature)) return specdec::softmax(logits, probs, temperature);
    double m = 0.0;
    const row_status s = logit_row_max<Arch>(logits, m);
    if (s != row_status::ok) {
      std::fill(probs.begin(), probs.end(), U(0));
      return s;
    }
    const double sum = detail::sum_scaled_exp<Arch, true>(logits, m, temperature, probs.data());
    detail::scale_row<Arch>(probs, 1.0 / sum);  // sum >= 1: the maximum contributes exp(0)
    return row_status::ok;
  }
}

//! out = log_softmax(logits / temperature); -inf where the probability is 0 (as `specdec::log_softmax`):
//! out_v = double(x_v) / T - lse in double, rounded to U.
//! \pre out.size() == logits.size(), temperature > 0  \throws specdec::error otherwise
template <class Arch, class T, class U>
row_status log_softmax(std::span<const T> logits, std::span<U> out, double temperature = 1.0) {
  if constexpr (!detail::vector_softmax_types<T, U>) {
    return specdec::log_softmax(logits, out, temperature);
  } else {
    SPECDEC_EXPECTS(out.size() == logits.size(), "out and logits differ in length");
    const double lse = log_sum_exp<Arch>(logits, temperature);
    // Unusable rows, and lse overflowing (|max| / T beyond DBL_MAX): seq's code, statuses and all.
    if (!std::isfinite(lse)) return specdec::log_softmax(logits, out, temperature);
    using B = xsimd::batch<T, Arch>;
    constexpr std::size_t n = B::size;
    const dbatch<Arch> t(temperature), l(lse);
    const std::size_t full = logits.size() / n * n;
    for (std::size_t v = 0; v < full; v += n) {
      const B x = B::load_unaligned(logits.data() + v);
      if constexpr (std::is_same_v<T, float>)
        narrow<Arch>(widen_lo<Arch>(x) / t - l, widen_hi<Arch>(x) / t - l).store_unaligned(out.data() + v);
      else
        (x / t - l).store_unaligned(out.data() + v);
    }
    for (std::size_t v = full; v < logits.size(); ++v)
      out[v] = static_cast<U>(static_cast<double>(logits[v]) / temperature - lse);
    return row_status::ok;
  }
}

}  // namespace specdec::backend::simd
