// SPECDEC_CONTRACTS = SPECDEC_CONTRACTS_OFF (2): failed preconditions are not checked at all, so a
// call that would throw in the default mode returns. The mode is chosen before any specdec header;
// the whole core (specdec.hpp) is included so that it is compiled in this mode with the warnings of
// the test build (a parameter used only in a precondition must not become "unused").
#define SPECDEC_CONTRACTS 2
#include <catch2/catch.hpp>

#include "specdec/contracts.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/specdec.hpp"

namespace {
int checked(int x) {
  SPECDEC_EXPECTS(x > 0, "x must be positive");
  return x;
}
}  // namespace

TEST_CASE("SPECDEC_CONTRACTS_OFF: preconditions are not checked", "[contracts]") {
  STATIC_REQUIRE(SPECDEC_CONTRACTS == SPECDEC_CONTRACTS_OFF);
  CHECK_NOTHROW(checked(-1));
  CHECK(checked(-1) == -1);
  specdec::warp_params w;
  w.top_p = 0.0;  // outside (0, 1]: validate() would throw in the default mode
  CHECK_NOTHROW(specdec::validate(w));
}
