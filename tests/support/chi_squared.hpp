//! \file tests/support/chi_squared.hpp
//! \brief Test support: the library's goodness-of-fit test (specdec/stats/chi_squared.hpp) under the
//! names the tests use, and the significance level of every statistical test in specdec.
#pragma once

#include "specdec/stats/chi_squared.hpp"

namespace specdec_test {

using specdec::stats::chi_squared_gof;
using specdec::stats::chi_squared_upper_tail;
using specdec::stats::chi_squared_upper_tail_fallback;
using specdec::stats::gof_result;

//! The significance level of every statistical test in specdec: a false failure rate of 1e-6.
inline constexpr double gof_alpha = 1e-6;

}  // namespace specdec_test
