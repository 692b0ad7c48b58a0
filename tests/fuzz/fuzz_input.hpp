//! \file tests/fuzz/fuzz_input.hpp
//! \brief The byte reader every fuzz harness decodes its input with, and the checks they share.
//!
//! Reading never fails: past the end every byte is 0, so a short input decodes to small, benign
//! choices (the first option of every menu) and the fuzzer can grow it byte by byte. Rows are cheap
//! to describe (a kind, a seed, a few modifiers), so a few bytes reach rows of hundreds of entries.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "specdec/distributions/warp.hpp"

namespace specdec_fuzz {

//! Stops the run with a message when an invariant fails (libFuzzer reports the abort as a crash).
[[noreturn]] inline void fail(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "fuzz invariant violated at %s:%d: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace specdec_fuzz

//! Checks an invariant of a harness; aborts with the condition's text when it fails.
#define FUZZ_CHECK(cond)                                          \
  do {                                                            \
    if (!(cond)) ::specdec_fuzz::fail(__FILE__, __LINE__, #cond); \
  } while (false)

namespace specdec_fuzz {

//! Values that break numerical code: NaN, infinities, signed zeros, subnormals, extremes.
inline constexpr std::array<double, 16> special_values{std::numeric_limits<double>::quiet_NaN(),
                                                       std::numeric_limits<double>::infinity(),
                                                       -std::numeric_limits<double>::infinity(),
                                                       -0.0,
                                                       0.0,
                                                       std::numeric_limits<double>::denorm_min(),
                                                       std::numeric_limits<double>::min(),
                                                       std::numeric_limits<double>::max(),
                                                       -1.0,
                                                       1.0,
                                                       0.5,
                                                       1e-300,
                                                       1e300,
                                                       -1e-300,
                                                       0x1p-140,
                                                       1.0 + 0x1p-52};

//! splitmix64: fills a row from a 64-bit seed (a row of V entries costs eight input bytes).
class splitmix64 {
 public:
  explicit splitmix64(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  //! A double in [0, 1).
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  std::uint64_t state_;
};

//! Reads the fuzz input front to back.
class byte_reader {
 public:
  byte_reader(const std::uint8_t* data, std::size_t size) noexcept : data_(data), size_(size) {}

  std::size_t remaining() const noexcept { return size_ - pos_; }
  bool exhausted() const noexcept { return pos_ >= size_; }

  //! The next byte, 0 past the end.
  std::uint8_t byte() noexcept { return pos_ < size_ ? data_[pos_++] : std::uint8_t{0}; }
  bool flag() noexcept { return (byte() & 1u) != 0; }

  //! An unsigned integer of `sizeof(U)` bytes, little-endian.
  template <std::unsigned_integral U>
  U bits() noexcept {
    U v = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) v = static_cast<U>(v | (static_cast<U>(byte()) << (8 * i)));
    return v;
  }

  //! An integer in [lo, hi] (lo <= hi), reading only as many bytes as the range needs.
  template <std::integral I>
  I in_range(I lo, I hi) noexcept {
    using U = std::make_unsigned_t<std::common_type_t<I, long long>>;
    const U span = static_cast<U>(static_cast<U>(hi) - static_cast<U>(lo));
    U raw = 0;
    for (U left = span; left != 0; left >>= 8) raw = static_cast<U>((raw << 8) | byte());
    return static_cast<I>(static_cast<U>(lo) + (span == std::numeric_limits<U>::max() ? raw : raw % (span + 1)));
  }

  //! One of `options`, by index.
  template <class T, std::size_t N>
  T pick(const std::array<T, N>& options) noexcept {
    return options[in_range<std::size_t>(0, N - 1)];
  }

  //! A double of any kind: a small value in [0, 1], a special value, a small integer, or raw bits.
  double any_double() noexcept {
    const std::uint8_t kind = byte();
    switch (kind % 4) {
      case 0: return static_cast<double>(byte()) / 255.0;
      case 1: return special_values[byte() % special_values.size()];
      case 2: return static_cast<double>(static_cast<std::int8_t>(byte()));
      default: return std::bit_cast<double>(bits<std::uint64_t>());
    }
  }

  //! `max` bytes (fewer at the end) as text.
  std::string_view text(std::size_t max) noexcept {
    const std::size_t n = std::min(max, remaining());
    const std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  //! Everything left, as text.
  std::string_view rest() noexcept { return text(remaining()); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

//! How a row is meant to be read: probabilities (weights) or logits.
enum class row_style { probabilities, logits };

//! `x` as a T, mapping finite doubles beyond T's range to infinities (a plain cast would be
//! undefined behaviour, which UBSan reports).
template <class T>
T to_row_value(double x) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    if (std::isfinite(x) && std::abs(x) > static_cast<double>(std::numeric_limits<float>::max()))
      return x > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return static_cast<T>(x);
}

//! Fills `row` (V >= 1 entries) from the input: a base row of one of eight kinds, then optional
//! normalisation, scaling and a few entries overwritten with special values. `like` (empty or of
//! the same length) is the row that kind 4 copies (so that p == q can happen).
//! Past the end of the input the row is a normalised pseudo-random row.
template <class T>
void fill_row(byte_reader& in, std::span<T> row, row_style style, std::span<const T> like = {}) {
  const std::size_t V = row.size();
  std::vector<double> x(V, 0.0);
  const bool logits = style == row_style::logits;
  const double none = logits ? -std::numeric_limits<double>::infinity() : 0.0;
  const std::uint8_t kind = in.byte();
  switch (kind % 8) {
    case 0: {  // pseudo-random (skewed for probabilities, spread for logits)
      splitmix64 g(in.bits<std::uint32_t>());
      const double spread = 1.0 + static_cast<double>(kind >> 3);
      for (double& v : x) v = logits ? spread * (g.unit() * 2.0 - 1.0) : std::pow(g.unit(), spread);
      break;
    }
    case 1:  // one byte per entry
      for (double& v : x) v = logits ? (static_cast<double>(in.byte()) - 128.0) / 16.0 : static_cast<double>(in.byte());
      break;
    case 2:  // uniform
      std::fill(x.begin(), x.end(), logits ? 0.0 : 1.0);
      break;
    case 3:  // one-hot
      std::fill(x.begin(), x.end(), none);
      x[in.in_range<std::size_t>(0, V - 1)] = logits ? static_cast<double>(in.byte()) : 1.0;
      break;
    case 4:  // a copy of `like`
      if (like.size() == V) {
        for (std::size_t v = 0; v < V; ++v) x[v] = static_cast<double>(like[v]);
        break;
      }
      std::fill(x.begin(), x.end(), logits ? 0.0 : 1.0);
      break;
    case 5: {  // sparse: a few entries
      std::fill(x.begin(), x.end(), none);
      for (int k = 1 + (in.byte() % 8); k > 0; --k) {
        const std::size_t at = in.in_range<std::size_t>(0, V - 1);
        x[at] = logits ? (static_cast<double>(in.byte()) - 128.0) / 16.0 : static_cast<double>(in.byte());
      }
      break;
    }
    case 6: {  // pseudo-random with many exact zeros (or -inf logits)
      splitmix64 g(in.bits<std::uint32_t>());
      for (double& v : x) v = g.next() % 2 == 0 ? none : (logits ? 4.0 * g.unit() : g.unit());
      break;
    }
    default:  // nothing: all zero, or all -inf
      std::fill(x.begin(), x.end(), none);
      break;
  }
  // Modifiers: bit 0 keeps the raw weights (probabilities are normalised otherwise), bits 1-3 pick
  // a scale, bits 4-5 count the entries overwritten with special values, bits 6-7 more of them.
  const std::uint8_t mods = in.byte();
  if (!logits && (mods & 1u) == 0) {
    double sum = 0.0;
    for (const double v : x) sum += v;
    if (sum > 0.0 && std::isfinite(sum))
      for (double& v : x) v /= sum;
  }
  static constexpr std::array<double, 8> scales{1.0, 1.0, 1.0, 2.0, 0.5, 1e300, 1e-310, -1.0};
  const double scale = scales[(mods >> 1) & 7u];
  if (scale != 1.0)
    for (double& v : x) v *= scale;
  for (int k = ((mods >> 4) & 3u) + ((mods >> 6) == 3u ? 4 : 0); k > 0; --k) {
    const std::size_t at = in.in_range<std::size_t>(0, V - 1);
    x[at] = special_values[in.byte() % special_values.size()];
  }
  for (std::size_t v = 0; v < V; ++v) row[v] = to_row_value<T>(x[v]);
}

//! A vocabulary size: usually 1-300; with `large` (rarely) a few thousand, so that rows span
//! several tiles of the samplers (2048 entries each).
inline std::size_t vocab_size(byte_reader& in, bool large) {
  return large ? in.in_range<std::size_t>(2040, 4200) : in.in_range<std::size_t>(1, 300);
}

//! A token id: mostly in [0, V), sometimes an id just outside it or an extreme one.
inline std::int32_t token(byte_reader& in, std::size_t V) {
  const std::uint8_t kind = in.byte();
  if (kind < 0xF0) return in.in_range<std::int32_t>(0, static_cast<std::int32_t>(V - 1));
  const auto v = static_cast<std::int32_t>(V);
  const std::array<std::int32_t, 8> odd{
      -1, v, v + 1, -2, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), 1 << 20, -(1 << 20)};
  return odd[kind % odd.size()];
}

//! The index of the first largest value of a row (NaN skipped), as every greedy rule defines it.
template <class T>
std::size_t first_argmax(std::span<const T> row) {
  std::size_t best = 0;
  for (std::size_t v = 1; v < row.size(); ++v)
    if (row[v] > row[best]) best = v;
  return best;
}

//! Whether a row is usable as a distribution: entries finite and >= 0, some > 0.
template <class T>
bool usable_row(std::span<const T> row) {
  bool mass = false;
  for (const T x : row) {
    const double v = static_cast<double>(x);
    if (!(v >= 0.0) || !std::isfinite(v)) return false;
    mass = mass || v > 0.0;
  }
  return mass;
}

//! A row a warper or softmax reported `row_status::ok`: a distribution (entries finite, >= 0, some
//! > 0, summing to 1 within rounding of the row's type).
template <class T>
bool is_distribution(std::span<const T> row) {
  double sum = 0.0;
  for (const T x : row) sum += static_cast<double>(x);
  const double slack = 8.0 * static_cast<double>(row.size() + 1) * static_cast<double>(std::numeric_limits<T>::epsilon());
  return usable_row(row) && std::abs(sum - 1.0) <= slack;
}

//! Whether `|sum(row) - 1|` is within `margin` of `tolerance`, where two summation orders may
//! decide a normalisation check differently (simd sums in lane order).
template <class T>
bool normalisation_ambiguous(std::span<const T> row, double tolerance) {
  double sum = 0.0, magnitude = 0.0;
  for (const T x : row) {
    sum += static_cast<double>(x);
    magnitude += std::abs(static_cast<double>(x));
  }
  if (!std::isfinite(sum) || std::isnan(tolerance)) return false;  // decided the same way by any order
  return std::abs(std::abs(sum - 1.0) - tolerance) <= 1e-9 * std::max(1.0, magnitude);
}

//! `normalisation_ambiguous` for any row of a buffer of rows of V entries.
template <class T>
bool any_normalisation_ambiguous(std::span<const T> rows, std::size_t V, double tolerance) {
  for (std::size_t at = 0; at + V <= rows.size(); at += V)
    if (normalisation_ambiguous(rows.subspan(at, V), tolerance)) return true;
  return false;
}

//! Sampling parameters: usually usual ones, sometimes any value (invalid ones included).
inline specdec::warp_params warp_params(byte_reader& in, std::size_t V) {
  static constexpr std::array<double, 8> temperatures{1.0, 0.0, 0.7, 2.0, 1e-3, 100.0, 1e-300, 0.05};
  static constexpr std::array<double, 8> top_ps{1.0, 0.9, 0.5, 0.1, 1e-9, 0.999999, 1.0 - 0x1p-53, 0.3};
  static constexpr std::array<double, 8> min_ps{0.0, 0.05, 0.5, 1.0, 1e-300, 0.1, 0.999, 0.01};
  specdec::warp_params w;
  const std::uint8_t how = in.byte();
  if (how & 1u) w.temperature = (how & 16u) ? in.any_double() : in.pick(temperatures);
  if (how & 2u) w.top_k = (how & 32u) ? static_cast<int>(in.bits<std::uint32_t>()) : in.in_range<int>(0, static_cast<int>(V) + 2);
  if (how & 4u) w.top_p = (how & 64u) ? in.any_double() : in.pick(top_ps);
  if (how & 8u) w.min_p = (how & 128u) ? in.any_double() : in.pick(min_ps);
  return w;
}

//! The documented domain of warp parameters (`specdec::validate`).
inline bool valid_params(const specdec::warp_params& w) {
  return w.temperature >= 0.0 && std::isfinite(w.temperature) && w.top_k >= 0 && w.top_p > 0.0 && w.top_p <= 1.0 &&
         w.min_p >= 0.0 && w.min_p <= 1.0;
}

}  // namespace specdec_fuzz
