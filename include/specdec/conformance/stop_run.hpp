//! \file conformance/stop_run.hpp
//! \brief `stop_run`: what a verifier under test throws to end a kit run at once instead of
//! answering. Every other exception from a verifier is the verifier reporting every request of the
//! call (conformance/harness.hpp); this one passes through the kit to whoever called it. The file
//! bridge (conformance/file_bridge.hpp) throws it when a call has no answer yet.
#pragma once

#include <string>

namespace specdec::conformance {

//! Ends a kit run from inside a verifier. Deliberately not a std::exception, so that code that
//! catches std::exception (an engine's own error handling) does not take it for an error.
struct stop_run {
  std::string reason;  //!< why the run stopped, for the catcher
};

}  // namespace specdec::conformance
