//! \file tests/support/sample_scale.hpp
//! \brief Test support: the sample sizes of the slowest statistical tests, scaled for slow builds.
//!
//! `SPECDEC_TEST_SAMPLE_SCALE` (a number in (0, 1], default 1) multiplies the sample sizes that go
//! through `scaled_sample_count`; the sanitizer build in scripts/test.sh sets it. Thresholds never
//! change: a test at a fixed false-failure level with fewer samples only loses power, and the
//! negative controls of the scaled tests are checked to still fail at the scale CI uses.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace specdec_test {

//! The factor read from SPECDEC_TEST_SAMPLE_SCALE. \throws std::invalid_argument if it is set and is
//! not a number in (0, 1].
inline double sample_scale() {
  const char* text = std::getenv("SPECDEC_TEST_SAMPLE_SCALE");
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double scale = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(scale > 0.0 && scale <= 1.0))
    throw std::invalid_argument(std::string("SPECDEC_TEST_SAMPLE_SCALE must be a number in (0, 1], not ") + text);
  return scale;
}

//! n scaled by `sample_scale()`, at least `floor` (and never more than n).
inline std::uint64_t scaled_sample_count(std::uint64_t n, std::uint64_t floor = 1000) {
  const auto scaled = static_cast<std::uint64_t>(std::llround(static_cast<double>(n) * sample_scale()));
  return std::min(n, std::max(scaled, floor));
}

}  // namespace specdec_test
