//! \file tests/support/skip.hpp
//! \brief How a test says that it could not run what it checks, so that CTest reports it "Skipped"
//! (as the GPU tests do on a machine without a device) instead of "Passed".
//!
//! A test case whose precondition is missing (a CPU without the ISA it tests, a compiler that
//! rejected the ISA's flags, no default corpus) calls `SPECDEC_SKIP(why)`: the reason is printed as
//! a Catch2 warning and the running test case is marked skipped; the case then returns.
//!
//! The rule, applied by the shared Catch2 main (tests/main.cpp) to the whole test program: it exits
//! 77, which CTest reads as "Skipped" (every test has SKIP_RETURN_CODE 77, tests/CMakeLists.txt),
//! when no assertion failed, at least one test case was skipped and no test case ran to its end
//! without skipping, that is when nothing the program was meant to check ran. A failure always wins
//! (the program fails). A program some of whose cases ran reports "Passed", with the skipped cases'
//! warnings in its output; so cases that share a precondition are tagged and registered as a CTest
//! test of their own (`// SPECDEC_TEST_SPLIT: <tag>`, tests/CMakeLists.txt), which then reports
//! "Skipped" alone when that precondition is missing.
#pragma once

#include <catch2/catch.hpp>

namespace specdec_test {

//! What the main needs to decide on the exit code: whether the running case skipped, and counts.
struct skip_record {
  bool case_skipped = false;  //!< the running test case called SPECDEC_SKIP
  int skipped_cases = 0;      //!< test cases that ended skipped
  int completed_cases = 0;    //!< test cases that ended without skipping
};

//! The program's one record (an inline function's static: one object across the program's files).
inline skip_record& skips() {
  static skip_record record;
  return record;
}

//! The program's exit code from Catch2's `rc`: 77 (skipped) when rc is 0 and only skipped cases ran.
inline int exit_code_after_skips(int rc) {
  const skip_record& s = skips();
  return rc == 0 && s.skipped_cases > 0 && s.completed_cases == 0 ? 77 : rc;
}

}  // namespace specdec_test

//! Marks the running test case skipped and prints why (a streamed Catch2 message: "no corpus at " << dir).
#define SPECDEC_SKIP(why)                        \
  do {                                           \
    WARN("skipped: " << why);                    \
    ::specdec_test::skips().case_skipped = true; \
  } while (false)
