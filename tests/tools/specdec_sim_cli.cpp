// specdec-sim's command-line helpers (tools/specdec_sim/cli.cpp, compiled into this test): counts
// and number lists refuse what they cannot represent. Both cases were found by the fuzz harness
// tests/fuzz/specdec_sim_cli.cpp (its corpus replays them too).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../../tools/specdec_sim/cli.cpp"  // the tool's sources are not a library target

namespace {

specdec_sim::option_parser parsed(const std::vector<std::string>& args) {
  specdec_sim::option_parser o("specdec-sim test", "");
  o.common(100);
  REQUIRE(o.parse(args));
  return o;
}

}  // namespace

TEST_CASE("specdec-sim: a count is decimal digits; a sign or blanks are a usage error", "[tools][bad_input]") {
  // std::stoull reads " -1" as 2^64 - 1: --seed " -1" was accepted as 18446744073709551615.
  for (const std::string bad : {" -1", "-1", " 5", "+5", "5 ", "0x10", "1e3", "", "18446744073709551616"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parsed({"--seed", bad}).seed(), specdec_sim::usage_error);
  }
  CHECK(parsed({"--seed", "18446744073709551615"}).seed() == 18446744073709551615ull);
  CHECK(parsed({"--draws=007"}).draws() == 7);
  CHECK(parsed({}).draws() == 100);
}

TEST_CASE("specdec-sim: a range whose points leave the finite numbers is a usage error", "[tools][bad_input]") {
  // 0 : DBL_MAX : DBL_MAX / 10^6 rounds its last point past DBL_MAX: it gave +inf.
  CHECK_THROWS_AS(specdec_sim::parse_numbers("0:1.7976931348623157e308:1.7976931348623157e302", "--alpha"),
                  specdec_sim::usage_error);
  const auto v = specdec_sim::parse_numbers("0:1:0.25,2", "--alpha");
  CHECK(v == std::vector<double>{0.0, 0.25, 0.5, 0.75, 1.0, 2.0});
  const auto wide = specdec_sim::parse_numbers("-1e307:1e307:1e302", "--alpha");
  CHECK(wide.size() == 200001);
  CHECK(std::all_of(wide.begin(), wide.end(), [](double x) { return std::isfinite(x); }));
}
