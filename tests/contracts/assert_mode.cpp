// SPECDEC_CONTRACTS = SPECDEC_CONTRACTS_ASSERT (1): a failed precondition is an assert(), so it
// aborts (with NDEBUG undefined, as here even in Release builds) instead of throwing. The test
// passes when SIGABRT arrives from the failed precondition, and fails if the call returns or throws.
// The whole core (specdec.hpp) is compiled in this mode.
#undef NDEBUG
#define SPECDEC_CONTRACTS 1
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "specdec/contracts.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/specdec.hpp"

namespace {
extern "C" void on_abort(int) { std::_Exit(0); }  // the precondition fired: the expected outcome
}  // namespace

int main() {
  static_assert(SPECDEC_CONTRACTS == SPECDEC_CONTRACTS_ASSERT);
  // Passing preconditions are silent.
  specdec::validate(specdec::warp_params{});
  std::signal(SIGABRT, on_abort);
  specdec::warp_params w;
  w.top_p = 0.0;
  try {
    specdec::validate(w);
  } catch (...) {
    std::fputs("contracts/assert_mode: a failed precondition threw instead of asserting\n", stderr);
    return 1;
  }
  std::fputs("contracts/assert_mode: a failed precondition returned instead of asserting\n", stderr);
  return 1;
}
