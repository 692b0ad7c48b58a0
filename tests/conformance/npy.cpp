// conformance/npy.hpp: every dtype round-trips through the bytes of an .npy file and through a file;
// the bytes are those numpy.save writes; malformed files (another dtype, Fortran order, truncated or
// padded data, a broken header, another format) are rejected with a message that says what is wrong.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "specdec/conformance/npy.hpp"

namespace {

namespace npy = specdec::conformance::npy;

// npy::encode of a vector (a std::vector<bool> is no span: copied to an array of bool first).
template <class T>
std::string encode_vector(const std::vector<T>& values, const std::vector<std::size_t>& shape) {
  if constexpr (std::is_same_v<T, bool>) {
    const auto raw = std::make_unique<bool[]>(values.size());
    std::copy(values.begin(), values.end(), raw.get());
    return npy::encode<bool>(std::span<const bool>(raw.get(), values.size()), shape);
  } else {
    return npy::encode<T>(values, shape);
  }
}

template <class T>
void check_round_trip(const std::vector<T>& values, std::vector<std::size_t> shape) {
  const std::string bytes = encode_vector(values, shape);
  REQUIRE(bytes.size() % 64 == values.size() * sizeof(T) % 64);  // the header is padded to 64 bytes
  const npy::array a = npy::decode(bytes, "test");
  CHECK(a.type == npy::dtype_of<T>());
  CHECK(a.shape == shape);
  CHECK(a.size() == values.size());
  CHECK(npy::values<T>(a, "test") == values);
}

// A header followed by `data`, with the dict as given (padded as numpy pads it).
std::string file_with_header(std::string dict, const std::string& data) {
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

std::string error_of(const std::string& bytes) {
  try {
    npy::decode(bytes, "f.npy");
  } catch (const npy::format_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("npy: every dtype round-trips", "[conformance][npy]") {
  check_round_trip<std::int32_t>(
      {0, -1, 7, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), 42}, {2, 3});
  check_round_trip<std::int64_t>({std::numeric_limits<std::int64_t>::min(), -5, 0, std::numeric_limits<std::int64_t>::max()},
                                 {4});
  check_round_trip<std::uint64_t>({0, 1, std::numeric_limits<std::uint64_t>::max()}, {3, 1});
  check_round_trip<float>(
      {0.0f, -0.0f, 1.5f, 1e-30f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()}, {3, 2});
  check_round_trip<double>({0.7, -1e300, std::numeric_limits<double>::denorm_min()}, {3});
  check_round_trip<std::uint8_t>({0, 1, 255}, {3});
  check_round_trip<bool>({true, false, false, true}, {2, 2});
  // 0-d, empty and three-dimensional arrays.
  check_round_trip<std::int64_t>({7}, {});
  check_round_trip<float>({}, {0, 3});
  check_round_trip<std::int32_t>({}, {0});
  check_round_trip<std::uint8_t>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});

  // NaN survives bit for bit.
  const std::vector<float> nan{std::numeric_limits<float>::quiet_NaN()};
  const auto back = npy::values<float>(npy::decode(npy::encode<float>(nan, {1})));
  REQUIRE(back.size() == 1);
  CHECK(back[0] != back[0]);
}

TEST_CASE("npy: the bytes are numpy.save's", "[conformance][npy]") {
  // numpy.save(f, numpy.array([True, False])) with numpy 1.24.
  const std::string expected = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                               "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }" + std::string(60, ' ') + "\n" +
                               std::string("\x01\x00", 2);
  const std::vector<bool> flags{true, false};
  const bool raw[] = {true, false};
  CHECK(npy::encode<bool>(raw, {2}) == expected);
  CHECK(npy::values<bool>(npy::decode(expected)) == flags);
  // numpy.save of a 0-d int64 and of a float32 (0, 3) array: the shapes "()" and "(0, 3)".
  CHECK(npy::encode<std::int64_t>(std::vector<std::int64_t>{7}, {}).find("'shape': (), }") != std::string::npos);
  CHECK(npy::encode<float>(std::vector<float>{}, {0, 3}).find("'shape': (0, 3), }") != std::string::npos);
}

TEST_CASE("npy: files round-trip", "[conformance][npy]") {
  const auto dir = std::filesystem::temp_directory_path() / "specdec_npy_test";
  std::filesystem::create_directories(dir);
  const std::vector<float> rows{0.25f, 0.75f, 1.0f, 0.0f};
  npy::save<float>(dir / "rows.npy", rows, {2, 2});
  const npy::array a = npy::load(dir / "rows.npy");
  CHECK(a.shape == std::vector<std::size_t>{2, 2});
  CHECK(npy::values<float>(a) == rows);
  CHECK_THROWS_AS(npy::load(dir / "missing.npy"), npy::format_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("npy: integers() widens every integer and bool dtype", "[conformance][npy]") {
  CHECK(npy::integers(npy::decode(npy::encode<std::int32_t>(std::vector<std::int32_t>{-1, 3}, {2}))) ==
        std::vector<std::int64_t>{-1, 3});
  CHECK(npy::integers(npy::decode(npy::encode<std::uint8_t>(std::vector<std::uint8_t>{0, 200}, {2}))) ==
        std::vector<std::int64_t>{0, 200});
  const bool raw[] = {false, true};
  CHECK(npy::integers(npy::decode(npy::encode<bool>(raw, {2}))) == std::vector<std::int64_t>{0, 1});
  CHECK_THROWS_WITH(npy::integers(npy::decode(npy::encode<std::uint64_t>(std::vector<std::uint64_t>{~std::uint64_t{0}}, {1}))),
                    Catch::Contains("does not fit int64"));
  CHECK_THROWS_WITH(npy::integers(npy::decode(npy::encode<float>(std::vector<float>{1.0f}, {1}))), Catch::Contains("'<f4'"));
}

TEST_CASE("npy: malformed files are rejected with a reason", "[conformance][npy]") {
  const std::string four_ints(16, '\0');
  // The reference: a well-formed file.
  CHECK(error_of(file_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", four_ints)).empty());
  // Keys in another order and double quotes are still a valid header.
  CHECK(error_of(file_with_header("{\"shape\": (2, 2), 'fortran_order': False, 'descr': '<i4'}", four_ints)).empty());

  CHECK_THAT(error_of(file_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four_ints)),
             Catch::Contains("dtype '<c8' is not one of"));
  CHECK_THAT(error_of(file_with_header("{'descr': '>i4', 'fortran_order': False, 'shape': (4,), }", four_ints)),
             Catch::Contains("dtype '>i4'"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }", four_ints)),
             Catch::Contains("Fortran order"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", four_ints)),
             Catch::Contains("truncated data"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", four_ints)),
             Catch::Contains("bytes after"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'shape': (4,), }", four_ints)), Catch::Contains("lacks"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'fortran_order': maybe, 'shape': (4,), }", four_ints)),
             Catch::Contains("True or False"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (4,, }", four_ints)),
             Catch::Contains("malformed .npy header"));
  CHECK_THAT(error_of(file_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", four_ints)),
             Catch::Contains("unexpected key"));
  CHECK_THAT(error_of("not an npy file at all"), Catch::Contains("not an .npy file"));
  CHECK_THAT(error_of(""), Catch::Contains("not an .npy file"));
  // A header cut short, and a format version this reader does not know.
  const std::string good = file_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", four_ints);
  CHECK_THAT(error_of(good.substr(0, 40)), Catch::Contains("truncated .npy header"));
  std::string v9 = good;
  v9[6] = '\x09';
  CHECK_THAT(error_of(v9), Catch::Contains("version 9"));
  // A bool that is neither 0 nor 1.
  CHECK_THROWS_WITH(
      npy::values<bool>(npy::decode(file_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", "\x02"))),
      Catch::Contains("neither 0 nor 1"));
  // values<T> insists on T's dtype.
  CHECK_THROWS_WITH(npy::values<std::int64_t>(npy::decode(good)), Catch::Contains("'<i4' where '<i8' is expected"));
  // encode checks the shape against the values.
  CHECK_THROWS_AS(npy::encode<float>(std::vector<float>(3), {2, 2}), std::invalid_argument);
}

TEST_CASE("npy: version 2.0 headers are read", "[conformance][npy]") {
  std::string dict = "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }";
  dict.append((64 - (12 + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::string bytes("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
  bytes += dict;
  bytes += std::string("\x05\x00\x00\x00\x00\x00\x00\x00", 8);
  CHECK(npy::values<std::uint64_t>(npy::decode(bytes)) == std::vector<std::uint64_t>{5});
}
