//! \file backend/simd/select.hpp
//! \brief Selection without sorting the row: the k-th largest value of a row, and the indices of the
//! entries at or above a threshold, on the simd backend.
//!
//! `kth_largest` is a threshold filter: one pass compares each batch with a running threshold tau
//! (a lower bound of the answer) and appends the entries above it to a small buffer, without a
//! branch (SSSE3, AVX2: shuffle tables; AVX-512: a register compress; otherwise a scalar loop);
//! when the buffer fills, `std::nth_element` finds the k-th largest of the buffer, which becomes the new tau,
//! and the entries below it are dropped. Being branch-free matters: a branch on freshly loaded data
//! mispredicts whenever an entry passes and, when the row comes from DRAM, waits for the load first
//! (the branchy version took 75 us from DRAM against 30 us from L2 at V = 128256, k = 50). The worst
//! case (an ascending row) is O(V) nth_element work. For k up to 8 batches' lanes (128 floats on
//! AVX-512) on rows of 16 times that, tau starts from `kth_bound` (a pass of vector maxima over
//! interleaved groups) instead of -inf, which spares most shrinks of the buffer (`k-th largest (k
//! 50)`, V = 32000: 17-20 us against 33-41 us from -inf, bench/README.md). The answer is exact: the
//! value std::nth_element finds on the whole row (seq's `keep_top_k`). Measured against a radix select (an 11-bit
//! histogram, then nth_element in the chosen bucket: 4-5x slower) and nth_element on a copy (20x
//! slower) in bench/README.md.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "specdec/backend/simd/xsimd_include.hpp"

#include "specdec/backend/simd/arch.hpp"

namespace specdec::backend::simd {

namespace detail {

//! Shuffle indices that move the lanes selected by an 8-bit mask to the front (AVX2 compress).
inline constexpr auto compress_lut_8 = [] {
  std::array<std::array<std::int32_t, 8>, 256> lut{};
  for (std::size_t m = 0; m < 256; ++m) {
    std::size_t n = 0;
    for (std::int32_t j = 0; j < 8; ++j)
      if (m & (std::size_t{1} << j)) lut[m][n++] = j;
  }
  return lut;
}();

//! pshufb masks that move the 4-byte lanes selected by a 4-bit mask to the front (SSSE3 compress).
inline constexpr auto compress_lut_4 = [] {
  std::array<std::array<std::uint8_t, 16>, 16> lut{};
  for (std::size_t m = 0; m < 16; ++m) {
    std::size_t n = 0;
    for (std::uint8_t j = 0; j < 4; ++j)
      if (m & (std::size_t{1} << j)) {
        for (std::uint8_t b = 0; b < 4; ++b) lut[m][4 * n + b] = static_cast<std::uint8_t>(4 * j + b);
        ++n;
      }
    for (; n < 4; ++n)
      for (std::uint8_t b = 0; b < 4; ++b) lut[m][4 * n + b] = 0x80;  // zero the unused lanes
  }
  return lut;
}();

//! Writes the lanes of x where `keep` holds to out[0..count) (in lane order; out has room for a
//! whole batch) and returns count. Without branches on SSSE3 and AVX2 (shuffle tables) and AVX-512
//! (compress); through a scalar loop elsewhere (double rows, NEON).
template <class Arch, class T>
std::size_t compress_where(const xsimd::batch<T, Arch>& x, const xsimd::batch_bool<T, Arch>& keep, T* out) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<T, float> && is_family<Arch, xsimd::avx512f>) {
    const __mmask16 m = keep;
    _mm512_storeu_ps(out, _mm512_maskz_compress_ps(m, x));  // (a register compress: fast on every AVX-512 CPU)
    return static_cast<std::size_t>(std::popcount(static_cast<unsigned>(m)));
  }
#endif
#if XSIMD_WITH_AVX2
  if constexpr (std::is_same_v<T, float> && is_family<Arch, xsimd::avx2>) {
    const int m = _mm256_movemask_ps(keep);
    const __m256i order =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(compress_lut_8[static_cast<std::size_t>(m)].data()));
    _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(x, order));
    return static_cast<std::size_t>(std::popcount(static_cast<unsigned>(m)));
  }
#endif
#if XSIMD_WITH_SSSE3
  if constexpr (std::is_same_v<T, float> && is_family<Arch, xsimd::ssse3>) {
    const int m = _mm_movemask_ps(keep);
    const __m128i order = _mm_loadu_si128(reinterpret_cast<const __m128i*>(compress_lut_4[static_cast<std::size_t>(m)].data()));
    _mm_storeu_ps(out, _mm_castsi128_ps(_mm_shuffle_epi8(_mm_castps_si128(x), order)));
    return static_cast<std::size_t>(std::popcount(static_cast<unsigned>(m)));
  }
#endif
  constexpr std::size_t n = xsimd::batch<T, Arch>::size;
  alignas(64) std::array<T, n> lanes;
  alignas(64) std::array<bool, n> kept;
  x.store_aligned(lanes.data());
  keep.store_aligned(kept.data());
  std::size_t count = 0;
  for (std::size_t j = 0; j < n; ++j) {
    out[count] = lanes[j];
    count += kept[j] ? 1 : 0;
  }
  return count;
}

//! Writes the lanes of x that are > tau to out[0..count) (as `compress_where`) and returns count.
template <class Arch, class T>
std::size_t compress_greater(const xsimd::batch<T, Arch>& x, const xsimd::batch<T, Arch>& tau, T* out) noexcept {
  return compress_where<Arch>(x, x > tau, out);  // (false for NaN)
}

//! The running state of `kth_largest`: the threshold, the number of candidates, the buffer's capacity.
template <class T>
struct filter_state {
  T tau;
  std::size_t size, cap;
};

//! Keeps the candidates >= the k-th largest of the buffer, which becomes tau (once set, >= k entries
//! seen are >= tau); grows the buffer when ties at tau keep it more than half full (keeping `slack`
//! entries of room past the capacity).
template <class T>
[[gnu::noinline]] filter_state<T> shrink(std::vector<T>& buffer, filter_state<T> st, std::size_t k, std::size_t slack) {
  const auto first = buffer.begin(), last = buffer.begin() + static_cast<std::ptrdiff_t>(st.size);
  std::nth_element(first, first + static_cast<std::ptrdiff_t>(k - 1), last, std::greater<T>());
  st.tau = buffer[k - 1];
  st.size = static_cast<std::size_t>(std::remove_if(first, last, [t = st.tau](T x) { return x < t; }) - first);
  if (st.size > st.cap / 2) {
    st.cap *= 2;
    buffer.resize(st.cap + slack);
  }
  return st;
}


//! The number of interleaved groups of `kth_bound` for batches of `n` lanes: 8 registers' worth.
inline constexpr std::size_t kth_bound_groups(std::size_t n) noexcept { return 8 * n; }

//! A lower bound of the k-th largest entry of `row` (NaN skipped), for k <= `kth_bound_groups`: the
//! k-th largest of the maxima of the interleaved groups {v : v mod G = g} over the row's whole
//! batches. The maxima are G distinct entries, so at least k entries of the row are >= it. One pass
//! of vector maxima, which spares `kth_largest` most of the buffer shrinks it would take from -inf
//! (interleaved groups, so that a range of ids with low values does not pull the bound down).
template <class Arch, class T>
T kth_bound(std::span<const T> row, std::size_t k) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size, regs = 8;
  std::array<B, regs> best;
  best.fill(B(-std::numeric_limits<T>::infinity()));
  const std::size_t full = row.size() / (regs * n) * (regs * n);
  for (std::size_t v = 0; v < full; v += regs * n)
    for (std::size_t j = 0; j < regs; ++j) {
      const B x = B::load_unaligned(row.data() + v + j * n);
      best[j] = xsimd::select(x > best[j], x, best[j]);  // a NaN never replaces a maximum
    }
  alignas(64) std::array<T, regs * n> maxima;
  for (std::size_t j = 0; j < regs; ++j) best[j].store_aligned(maxima.data() + j * n);
  std::nth_element(maxima.begin(), maxima.begin() + static_cast<std::ptrdiff_t>(k - 1), maxima.end(), std::greater<T>());
  return maxima[k - 1];
}

}  // namespace detail

//! The k-th largest (k >= 1) of the entries of `row` that are > -inf (NaN and -inf are ignored), or
//! nothing when fewer than k entries qualify. Exact (comparisons only). If `saw_nan` is given, it is
//! set to whether the row holds a NaN (found in the same pass).
template <class Arch, class T>
std::optional<T> kth_largest(std::span<const T> row, std::size_t k, bool* saw_nan = nullptr) {
  if (k == 0) return std::nullopt;
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size, ways = 8;  // measured: 2 and 4 ways took 25 % and 15 % longer on SSE4.2
  constexpr T lowest = -std::numeric_limits<T>::infinity();
  // The inner loop holds no call, so that tau, size, the buffer's address and the NaN flags stay in
  // registers; `shrink` (rare) runs between inner loops.
  detail::filter_state<T> st{lowest, 0, std::max<std::size_t>(4 * k, 256)};  // every entry > tau is a candidate
  // Start from a bound when the row is long enough for it to pay: entries >= it pass (the largest T
  // below it; never below -inf).
  constexpr std::size_t groups = detail::kth_bound_groups(n);
  if (k <= groups && row.size() >= 16 * groups) st.tau = std::nextafter(detail::kth_bound<Arch>(row, k), lowest);
  std::vector<T> buffer(st.cap + ways * n);
  const std::size_t full = row.size() / n * n;
  std::size_t v = 0;
  bool nan = false;  // (a flag in a general register: vector registers do not survive `shrink` calls)
  while (true) {
    T* const out = buffer.data();
    const B tau(st.tau);
    // `ways` batches per test of the loop conditions (the buffer has room for them past `cap`), then
    // the last few one at a time.
    for (; v + ways * n <= full && st.size < st.cap; v += ways * n) {
      std::array<B, ways> x;
      for (std::size_t j = 0; j < ways; ++j) x[j] = B::load_unaligned(row.data() + v + j * n);
      if (saw_nan != nullptr) {
        auto any_nan = xsimd::isnan(x[0]);
        for (std::size_t j = 1; j < ways; ++j) any_nan = any_nan | xsimd::isnan(x[j]);
        nan |= xsimd::any(any_nan);
      }
      for (std::size_t j = 0; j < ways; ++j)
        st.size += detail::compress_greater<Arch>(x[j], tau, out + st.size);  // NaN, -inf never pass
    }
    for (; v < full && st.size < st.cap; v += n) {
      const B x = B::load_unaligned(row.data() + v);
      if (saw_nan != nullptr) nan |= xsimd::any(xsimd::isnan(x));
      st.size += detail::compress_greater<Arch>(x, tau, out + st.size);
    }
    if (v == full && full < row.size() && st.size < st.cap) {  // the remainder, padded with -inf
      const B x = load_partial<B>(row.data() + v, row.size() - v, lowest);
      if (saw_nan != nullptr) nan |= xsimd::any(xsimd::isnan(x));
      st.size += detail::compress_greater<Arch>(x, tau, out + st.size);
      v = row.size();
    }
    if (st.size >= st.cap)
      st = detail::shrink(buffer, st, k, ways * n);
    else if (v >= full)
      break;
  }
  if (saw_nan) *saw_nan = nan;
  buffer.resize(st.size);
  if (buffer.size() < k) return std::nullopt;  // (after a shrink the buffer holds >= k entries)
  std::nth_element(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(k - 1), buffer.end(), std::greater<T>());
  return buffer[k - 1];
}

//! Appends to `out`, in increasing order, the indices v with row[v] >= threshold (NaN never). Made
//! for thresholds that few entries reach (the candidates of a top-k): one branch per 4 batches, taken
//! only around a candidate.
template <class Arch, class T, class Index>
void indices_at_least(std::span<const T> row, T threshold, std::vector<Index>& out) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t n = B::size, block = 4 * n;
  const std::size_t full = row.size() / block * block;
  const B t(threshold);
  const T* x = row.data();
  const auto scan = [&](std::size_t from, std::size_t to) {
    for (std::size_t v = from; v < to; ++v)
      if (x[v] >= threshold) out.push_back(static_cast<Index>(v));
  };
  for (std::size_t v = 0; v < full; v += block) {
    const auto hit = (B::load_unaligned(x + v) >= t) | (B::load_unaligned(x + v + n) >= t) |
                     (B::load_unaligned(x + v + 2 * n) >= t) | (B::load_unaligned(x + v + 3 * n) >= t);
    if (xsimd::any(hit)) scan(v, v + block);
  }
  scan(full, row.size());
}

}  // namespace specdec::backend::simd
