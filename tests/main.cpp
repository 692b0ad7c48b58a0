// The Catch2 main shared by every specdec test executable (compiled once, see tests/CMakeLists.txt).
// It exits 77 (CTest: skipped) when the cases that ran all skipped (support/skip.hpp has the rule).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/skip.hpp"

namespace {

//! Counts the test cases that ended skipped and those that ran to their end (support/skip.hpp).
struct skip_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    specdec_test::skips().case_skipped = false;
    TestEventListenerBase::testCaseStarting(info);
  }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    specdec_test::skip_record& s = specdec_test::skips();
    ++(s.case_skipped ? s.skipped_cases : s.completed_cases);
    TestEventListenerBase::testCaseEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(skip_listener)

int main(int argc, char* argv[]) { return specdec_test::exit_code_after_skips(Catch::Session().run(argc, argv)); }
