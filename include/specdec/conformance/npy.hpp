//! \file conformance/npy.hpp
//! \brief NumPy's .npy files, the few kinds the conformance kit's file bridge exchanges: C-order
//! arrays of little-endian int32, int64, uint64, float32, float64, bool and uint8 (dtypes '<i4',
//! '<i8', '<u8', '<f4', '<f8', '|b1', '|u1'). Writes format version 1.0 (what numpy.save writes); reads 1.0, 2.0
//! and 3.0 headers. Anything else (another dtype, Fortran order, a truncated or padded data part, a
//! malformed header) is a `npy::format_error` that says what is wrong and how to fix it.
//!
//! \code
//!   namespace npy = specdec::conformance::npy;
//!   const std::vector<float> rows(6, 0.5f);
//!   npy::save("rows.npy", std::span<const float>(rows), {2, 3});  // numpy.load gives float32 (2, 3)
//!   const npy::array a = npy::load("rows.npy");
//!   std::vector<float> back = npy::values<float>(a, "rows.npy");   // throws unless the dtype is '<f4'
//! \endcode
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace specdec::conformance::npy {

//! A file that is not an .npy file this header reads, or a value that does not fit.
struct format_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! The element types.
enum class dtype { i4, i8, u8, f4, f8, b1, u1 };

//! The dtype's descr in an .npy header, e.g. "<f4".
constexpr std::string_view descr(dtype t) noexcept {
  switch (t) {
    case dtype::i4: return "<i4";
    case dtype::i8: return "<i8";
    case dtype::u8: return "<u8";
    case dtype::f4: return "<f4";
    case dtype::f8: return "<f8";
    case dtype::b1: return "|b1";
    case dtype::u1: return "|u1";
  }
  return "?";
}

//! Bytes per element.
constexpr std::size_t item_size(dtype t) noexcept {
  switch (t) {
    case dtype::i4:
    case dtype::f4: return 4;
    case dtype::i8:
    case dtype::u8:
    case dtype::f8: return 8;
    case dtype::b1:
    case dtype::u1: return 1;
  }
  return 0;
}

//! The dtype of a C++ element type: std::int32_t, std::int64_t, std::uint64_t, float, double, bool,
//! std::uint8_t.
template <class T>
constexpr dtype dtype_of() noexcept {
  if constexpr (std::is_same_v<T, std::int32_t>) {
    return dtype::i4;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return dtype::i8;
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    return dtype::u8;
  } else if constexpr (std::is_same_v<T, float>) {
    return dtype::f4;
  } else if constexpr (std::is_same_v<T, double>) {
    return dtype::f8;
  } else if constexpr (std::is_same_v<T, bool>) {
    return dtype::b1;
  } else {
    static_assert(std::is_same_v<T, std::uint8_t>, "npy: int32, int64, uint64, float, double, bool or uint8 elements");
    return dtype::u1;
  }
}

//! An array read from a file: its dtype, shape and data (little-endian bytes, C order).
struct array {
  dtype type = dtype::u1;          //!< the element type
  std::vector<std::size_t> shape;  //!< the dimensions
  std::string data;                //!< the elements' bytes

  //! The number of elements: the product of the shape (1 for a 0-d array).
  std::size_t size() const noexcept {
    std::size_t n = 1;
    for (const std::size_t d : shape) n *= d;
    return n;
  }
};

namespace detail {

//! Little-endian bytes of a value and back (the identity on little-endian machines).
template <class T>
void put_le(char* out, T value) noexcept {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  if constexpr (std::endian::native == std::endian::big)
    for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = bytes[sizeof(T) - 1 - i];
  else
    std::memcpy(out, bytes, sizeof(T));
}
template <class T>
T get_le(const char* in) noexcept {
  char bytes[sizeof(T)];
  if constexpr (std::endian::native == std::endian::big)
    for (std::size_t i = 0; i < sizeof(T); ++i) bytes[i] = in[sizeof(T) - 1 - i];
  else
    std::memcpy(bytes, in, sizeof(T));
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

inline constexpr char magic[] = "\x93NUMPY";  // 6 bytes and the terminating zero
inline constexpr std::size_t magic_size = 6;

//! The header's Python literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
inline std::string header_dict(dtype t, std::span<const std::size_t> shape) {
  std::string s = "{'descr': '" + std::string(descr(t)) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  return s + "), }";
}

//! A reader of the header dict: a Python literal with string keys and string, boolean or tuple values.
class header_parser {
 public:
  header_parser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  void parse(std::string& descr_out, bool& fortran_out, std::vector<std::size_t>& shape_out) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (!at('}')) {
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        descr_out = quoted();
        seen_descr = true;
      } else if (key == "fortran_order") {
        fortran_out = boolean();
        seen_fortran = true;
      } else if (key == "shape") {
        shape_out = tuple();
        seen_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!at('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail("text after the closing brace");
    if (!seen_descr || !seen_fortran || !seen_shape) fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw format_error(what_ + ": malformed .npy header (" + why + "): " + std::string(text_));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  bool at(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!at(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a quoted string");
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("expected True or False");
  }
  std::vector<std::size_t> tuple() {
    std::vector<std::size_t> dims;
    expect('(');
    while (!at(')')) {
      skip_space();
      std::size_t d = 0;
      const std::size_t first = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const auto digit = static_cast<std::size_t>(text_[pos_++] - '0');
        if (d > (std::numeric_limits<std::size_t>::max() - digit) / 10) fail("a dimension too large");
        d = d * 10 + digit;
      }
      if (pos_ == first) fail("expected a dimension");
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long literals
      dims.push_back(d);
      if (!at(')')) expect(',');
    }
    expect(')');
    return dims;
  }

  std::string_view text_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

}  // namespace detail

//! The bytes of an .npy file (format 1.0, C order) holding `values` with `shape` (the product of the
//! shape must be values.size(); an empty shape is a 0-d array of one value).
template <class T>
std::string encode(std::span<const T> values, std::span<const std::size_t> shape) {
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;
  if (n != values.size())
    throw std::invalid_argument("npy::encode: the shape holds " + std::to_string(n) + " values, not " +
                                std::to_string(values.size()));
  constexpr dtype t = dtype_of<T>();
  std::string dict = detail::header_dict(t, shape);
  // magic (6) + version (2) + header length (2) + dict + padding + '\n', a multiple of 64 in all.
  const std::size_t unpadded = detail::magic_size + 4 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 65535) throw std::invalid_argument("npy::encode: too many dimensions for a version 1.0 header");
  std::string out(detail::magic, detail::magic_size);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  const std::size_t header = out.size();
  out.resize(header + n * sizeof(T));
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>)
      out[header + i] = values[i] ? '\x01' : '\x00';
    else
      detail::put_le(out.data() + header + i * sizeof(T), values[i]);
  }
  return out;
}
//! `encode` with the shape given as a list, e.g. encode<float>(rows, {n, V}).
template <class T>
std::string encode(std::span<const T> values, std::initializer_list<std::size_t> shape) {
  return encode(values, std::span<const std::size_t>(shape.begin(), shape.size()));
}

//! Reads the bytes of an .npy file; `what` (e.g. the file name) starts every error message.
inline array decode(std::string_view bytes, const std::string& what = "npy") {
  if (bytes.size() < detail::magic_size + 4 ||
      bytes.substr(0, detail::magic_size) != std::string_view(detail::magic, detail::magic_size))
    throw format_error(what + ": not an .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_length = 0, prefix = 0;
  if (major == 1) {
    header_length = static_cast<std::size_t>(static_cast<unsigned char>(bytes[8])) |
                    static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw format_error(what + ": truncated .npy header");
    for (std::size_t i = 0; i < 4; ++i)
      header_length |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    prefix = 12;
  } else {
    throw format_error(what + ": .npy format version " + std::to_string(major) + " (this reader knows 1, 2 and 3)");
  }
  if (bytes.size() < prefix + header_length)
    throw format_error(what + ": truncated .npy header (" + std::to_string(header_length) + " bytes announced, " +
                       std::to_string(bytes.size() - prefix) + " present)");
  std::string descr_text;
  bool fortran = false;
  array a;
  detail::header_parser(bytes.substr(prefix, header_length), what).parse(descr_text, fortran, a.shape);
  bool known = false;
  for (const dtype t : {dtype::i4, dtype::i8, dtype::u8, dtype::f4, dtype::f8, dtype::b1, dtype::u1})
    if (descr_text == descr(t)) a.type = t, known = true;
  if (!known)
    throw format_error(what + ": dtype '" + descr_text +
                       "' is not one of <i4 <i8 <u8 <f4 <f8 |b1 |u1 (little-endian int32, int64, uint64, float32, float64, bool, "
                       "uint8; "
                       "convert with .astype(...))");
  if (fortran && a.shape.size() > 1)
    throw format_error(what + ": the array is in Fortran order; save a C-order array (numpy.ascontiguousarray)");
  std::size_t n = 1;
  for (const std::size_t d : a.shape) {
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / item_size(a.type) / d)
      throw format_error(what + ": the shape is too large");
    n *= d;
  }
  const std::size_t expected = n * item_size(a.type), present = bytes.size() - prefix - header_length;
  if (present < expected)
    throw format_error(what + ": truncated data: the header announces " + std::to_string(n) + " values of '" + descr_text +
                       "' (" + std::to_string(expected) + " bytes) but " + std::to_string(present) + " bytes follow");
  if (present > expected)
    throw format_error(what + ": " + std::to_string(present - expected) + " bytes after the " + std::to_string(n) +
                       " values the header announces");
  a.data.assign(bytes.substr(prefix + header_length));
  return a;
}

//! The file's bytes. \throws format_error when it cannot be read.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw format_error(path.string() + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw format_error(path.string() + ": read error");
  return bytes;
}

//! Writes `bytes` to `path`. \throws std::runtime_error when it cannot.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": cannot write");
}

//! Reads an .npy file.
inline array load(const std::filesystem::path& path) { return decode(read_file(path), path.string()); }

//! Writes an .npy file holding `values` with `shape`.
template <class T>
void save(const std::filesystem::path& path, std::span<const T> values, std::span<const std::size_t> shape) {
  write_file(path, encode(values, shape));
}
//! `save` with the shape given as a list.
template <class T>
void save(const std::filesystem::path& path, std::span<const T> values, std::initializer_list<std::size_t> shape) {
  write_file(path, encode(values, shape));
}

//! The values of `a`, whose dtype must be T's. \throws format_error otherwise, or when a bool is
//! neither 0 nor 1.
template <class T>
std::vector<T> values(const array& a, const std::string& what = "npy") {
  constexpr dtype t = dtype_of<T>();
  if (a.type != t)
    throw format_error(what + ": dtype '" + std::string(descr(a.type)) + "' where '" + std::string(descr(t)) + "' is expected");
  const std::size_t n = a.size();
  std::vector<T> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      const auto byte = static_cast<unsigned char>(a.data[i]);
      if (byte > 1) throw format_error(what + ": a bool that is neither 0 nor 1");
      out.push_back(byte == 1);
    } else {
      out.push_back(detail::get_le<T>(a.data.data() + i * sizeof(T)));
    }
  }
  return out;
}

//! The values of an integer or bool array (<i4 <i8 <u8 |b1 |u1) as int64. \throws format_error for
//! float32 or float64, or a uint64 above INT64_MAX.
inline std::vector<std::int64_t> integers(const array& a, const std::string& what = "npy") {
  std::vector<std::int64_t> out;
  switch (a.type) {
    case dtype::i4:
      for (const auto v : values<std::int32_t>(a, what)) out.push_back(v);
      return out;
    case dtype::i8: return values<std::int64_t>(a, what);
    case dtype::u8:
      for (const auto v : values<std::uint64_t>(a, what)) {
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          throw format_error(what + ": the value " + std::to_string(v) + " does not fit int64");
        out.push_back(static_cast<std::int64_t>(v));
      }
      return out;
    case dtype::b1:
      for (const bool v : values<bool>(a, what)) out.push_back(v ? 1 : 0);
      return out;
    case dtype::u1:
      for (const auto v : values<std::uint8_t>(a, what)) out.push_back(v);
      return out;
    case dtype::f4:
    case dtype::f8: break;
  }
  throw format_error(what + ": dtype '" + std::string(descr(a.type)) + "' where an integer or bool array is expected");
}

}  // namespace specdec::conformance::npy
