//! \file contracts.hpp
//! \brief `SPECDEC_EXPECTS(cond, "message")`: run-time preconditions.
//!
//! By default a failed precondition throws `specdec::error` whose text starts with the function
//! name. Define `SPECDEC_CONTRACTS` before including specdec to change that:
//! `SPECDEC_CONTRACTS_ASSERT` (1) prints the message and aborts, like assert() (unchecked with
//! NDEBUG); `SPECDEC_CONTRACTS_OFF` (2) checks nothing. Both are tested (tests/contracts/).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "specdec/config.hpp"
#include "specdec/errors.hpp"

namespace specdec::detail {
[[noreturn]] inline void contract_violation(const char* function, const char* condition, const std::string& message) {
  throw error(std::string(function) + ": " + message + " [" + condition + "]");
}
//! SPECDEC_CONTRACTS_ASSERT: what assert() does, with the precondition's message.
[[noreturn]] inline void contract_abort(const char* function, const char* condition, const std::string& message) {
  std::fprintf(stderr, "%s: %s [%s]\n", function, message.c_str(), condition);
  std::abort();
}
}  // namespace specdec::detail

//! Checks nothing: the condition and message are unevaluated, but still a use of what the condition names
//! (no unused-parameter warnings).
#define SPECDEC_DETAIL_UNCHECKED(cond, message) \
  do {                                          \
    (void)sizeof(!(cond));                      \
    (void)sizeof(message);                      \
  } while (false)

#if SPECDEC_CONTRACTS == SPECDEC_CONTRACTS_THROW
//! Checks the precondition `cond`: when false, throws `specdec::error` with `message`, naming the function and
//! the condition (or what SPECDEC_CONTRACTS selects instead; see the file comment).
#define SPECDEC_EXPECTS(cond, message)                                              \
  do {                                                                              \
    if (!(cond)) ::specdec::detail::contract_violation(__func__, #cond, (message)); \
  } while (false)
#elif SPECDEC_CONTRACTS == SPECDEC_CONTRACTS_ASSERT && !defined(NDEBUG)
#define SPECDEC_EXPECTS(cond, message)                                          \
  do {                                                                          \
    if (!(cond)) ::specdec::detail::contract_abort(__func__, #cond, (message)); \
  } while (false)
#else  // SPECDEC_CONTRACTS_OFF, or SPECDEC_CONTRACTS_ASSERT with NDEBUG (as assert())
#define SPECDEC_EXPECTS(cond, message) SPECDEC_DETAIL_UNCHECKED(cond, message)
#endif
