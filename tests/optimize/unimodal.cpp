// The optimisation kernels of optimize/unimodal.hpp: golden-section maximisation, bisection for a
// sign change, exhaustive integer argmax (smallest on ties), and their argument checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "specdec/errors.hpp"
#include "specdec/optimize/unimodal.hpp"

namespace opt = specdec::optimize;

TEST_CASE("maximize_unimodal finds interior and boundary maxima", "[optimize][unimodal]") {
  const auto m = opt::maximize_unimodal([](double x) { return -(x - 2.0) * (x - 2.0); }, 0.0, 5.0);
  CHECK(m.x == Approx(2.0).margin(1e-7));  // the value is flat to 1e-16 within 1e-8 of the top
  CHECK(m.value == Approx(0.0).margin(1e-14));
  CHECK(m.evaluations > 10);
  CHECK(m.evaluations < 100);
  // A quasi-concave but not concave function: a ratio concave / affine (the shape of SD's speedup).
  const auto q = opt::maximize_unimodal([](double x) { return std::sqrt(x) / (1.0 + 0.3 * x); }, 0.0, 50.0, 1e-13);
  CHECK(q.x == Approx(1.0 / 0.3).epsilon(1e-6));
  // Monotone functions end at their endpoint exactly; a constant one at lo.
  CHECK(opt::maximize_unimodal([](double x) { return x; }, -1.0, 3.0).x == 3.0);
  CHECK(opt::maximize_unimodal([](double x) { return -x; }, -1.0, 3.0).x == -1.0);
  CHECK(opt::maximize_unimodal([](double) { return 1.0; }, -1.0, 3.0).x == -1.0);
  // A degenerate interval.
  CHECK(opt::maximize_unimodal([](double x) { return x; }, 2.0, 2.0).x == 2.0);
  CHECK_THROWS_AS(opt::maximize_unimodal([](double x) { return x; }, 3.0, 2.0), specdec::error);
  CHECK_THROWS_AS(opt::maximize_unimodal([](double x) { return x; }, 0.0, 1.0, 0.0), specdec::error);
  CHECK_THROWS_AS(opt::maximize_unimodal([](double x) { return x; }, 0.0, std::numeric_limits<double>::infinity()),
                  specdec::error);
}

TEST_CASE("bisect_sign_change locates the root of a non-increasing function", "[optimize][unimodal]") {
  CHECK(opt::bisect_sign_change([](double x) { return 1.5 - x; }, 0.0, 10.0) == Approx(1.5).epsilon(1e-13));
  CHECK(opt::bisect_sign_change([](double x) { return std::exp(-x) - 0.25; }, 0.0, 10.0) == Approx(std::log(4.0)).epsilon(1e-13));
  // A step: h > 0 before 0.3, <= 0 from 0.3 on.
  CHECK(opt::bisect_sign_change([](double x) { return x < 0.3 ? 1.0 : -1.0; }, 0.0, 1.0) == Approx(0.3).margin(1e-13));
  CHECK_THROWS_AS(opt::bisect_sign_change([](double x) { return x; }, 0.0, 1.0), specdec::error);  // h(lo) = 0
  CHECK_THROWS_AS(opt::bisect_sign_change([](double) { return 1.0; }, 0.0, 1.0), specdec::error);  // no change
}

TEST_CASE("argmax_integer: smallest argument on ties, NaN never wins", "[optimize][unimodal]") {
  const auto m = opt::argmax_integer([](int x) { return -std::abs(x - 3) * 1.0; }, -5, 10);
  CHECK(m.x == 3);
  CHECK(m.value == 0.0);
  CHECK(opt::argmax_integer([](int x) { return x < 4 ? 1.0 * x : 3.0; }, 0, 9).x == 3);  // plateau 3..9
  const double nan_v = std::numeric_limits<double>::quiet_NaN();
  CHECK(opt::argmax_integer([&](int x) { return x == 0 ? nan_v : 1.0 / x; }, 0, 5).x == 1);
  CHECK(opt::argmax_integer([&](int x) { return x == 2 ? nan_v : 1.0 * x; }, 0, 3).x == 3);
  CHECK(opt::argmax_integer([](int x) { return 1.0 * x; }, 4, 4).x == 4);
  CHECK_THROWS_AS(opt::argmax_integer([](int x) { return 1.0 * x; }, 5, 4), specdec::error);
}
