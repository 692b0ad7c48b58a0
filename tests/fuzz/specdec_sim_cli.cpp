// Fuzz harness: the command line of specdec-sim (tools/specdec_sim/cli.hpp, cli.cpp):
// `option_parser::parse` on argument vectors split from the input at zero bytes, every typed
// accessor on the parsed options, and `parse_numbers` on each argument.
//
// Invariants: no crash or sanitizer report; every mistake is a `usage_error` (main turns it into
// exit status 2) and nothing else is thrown; --help stops the parse; a number is finite; a list of
// integers holds integers of magnitude <= 1e9; a count is a non-negative integer written in decimal
// digits; a list or range has at least one value and a range at most 10^6 + 1.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "fuzz_input.hpp"

namespace {

using specdec_sim::usage_error;

// The options of a typical subcommand (sd, tree): lists, single values, the common ones.
specdec_sim::option_parser make_parser() {
  specdec_sim::option_parser o("specdec-sim fuzz", "the options of a subcommand");
  o.value("alpha", "LIST", "0.1:0.95:0.05", "acceptance rates");
  o.value("gamma", "LIST", "1,2,3,4,6,8,12", "draft lengths");
  o.value("c-hat", "X", "", "one number");
  o.value("budget", "N", "15", "an integer");
  o.value("pair-seed", "S", "1", "a count");
  o.flag("verbose", "a flag");
  o.common(1000);
  return o;
}

void check_numbers(const std::vector<double>& v) {
  FUZZ_CHECK(!v.empty() && v.size() <= 1'000'001);
  for (const double x : v) FUZZ_CHECK(std::isfinite(x));
}

// Runs `f`; a usage_error is a documented outcome, anything else escapes (and the fuzzer reports it).
template <class F>
void accessor(F&& f) {
  try {
    f();
  } catch (const usage_error&) {
  }
}

void check_count(const specdec_sim::option_parser& o, const std::string& name) {
  accessor([&] {
    const std::uint64_t n = o.count(name);
    // The text is n in decimal digits (cli.hpp).
    const std::string digits = o.text(name);
    FUZZ_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos);
    FUZZ_CHECK(std::to_string(n) == digits.substr(std::min(digits.find_first_not_of('0'), digits.size() - 1)));
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool quiet = [] {  // --help prints to std::cout
    static std::ostringstream sink;
    std::cout.rdbuf(sink.rdbuf());
    return true;
  }();
  (void)quiet;
  specdec_fuzz::byte_reader in(data, size);
  const std::string_view text = in.rest();
  std::vector<std::string> args;
  for (std::size_t start = 0; start < text.size() && args.size() < 64;) {
    const std::size_t end = std::min(text.find('\0', start), text.size());
    args.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& a : args) accessor([&] { check_numbers(specdec_sim::parse_numbers(a, "--fuzz")); });

  specdec_sim::option_parser o = make_parser();
  bool run = false;
  try {
    run = o.parse(args);
  } catch (const usage_error&) {
    return 0;
  }
  if (!run) {
    FUZZ_CHECK(o.flag_set("help"));
    return 0;
  }
  for (const char* name : {"alpha", "gamma", "c-hat", "budget", "pair-seed", "draws", "seed", "policy", "csv", "plot"}) {
    accessor([&] { check_numbers(o.numbers(name)); });
    accessor([&] {
      for (const int i : o.integers(name)) FUZZ_CHECK(std::abs(static_cast<double>(i)) <= 1e9);
    });
    accessor([&] { FUZZ_CHECK(std::isfinite(o.number(name))); });
    check_count(o, name);
  }
  FUZZ_CHECK(o.csv_path().has_value() == o.given("csv") && o.plot_path().has_value() == o.given("plot"));
  (void)o.quiet();
  (void)o.flag_set("verbose");
  (void)specdec_sim::point_stream({o.given("alpha") ? 1.0 : 0.0, static_cast<double>(args.size())});
  return 0;
}
