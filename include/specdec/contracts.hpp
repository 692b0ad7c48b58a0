//! \file contracts.hpp
//! \brief `SPECDEC_EXPECTS(cond, "message")`: run-time preconditions.
//!
//! By default a failed precondition throws `specdec::error` whose text starts with the function
//! name, once: a message that begins with its function's (qualified) name is not prefixed again.
//! Define `SPECDEC_CONTRACTS` before including specdec to change that: `SPECDEC_CONTRACTS_ASSERT`
//! (1) prints the message and aborts, like assert() (unchecked with NDEBUG); `SPECDEC_CONTRACTS_OFF`
//! (2) checks nothing. Both are tested (tests/contracts/).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "specdec/config.hpp"
#include "specdec/errors.hpp"

namespace specdec::detail {
//! Whether `message` begins with a name of `function` and ": " (`add: ...`, `specdec::batch_decoder::add: ...`, or for a
//! constructor `specdec::batch_decoder: ...`): such a message names its function already and is not prefixed again.
inline bool names_function(std::string_view function, std::string_view message) {
  const std::size_t colon = message.find(": ");
  if (colon == std::string_view::npos) return false;
  const std::string_view name = message.substr(0, colon);
  if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:") != std::string_view::npos)
    return false;
  const std::size_t scope = name.rfind("::");
  return (scope == std::string_view::npos ? name : name.substr(scope + 2)) == function;
}
//! "function: message [condition]", the function named once (`names_function`).
inline std::string contract_message(const char* function, const char* condition, const std::string& message) {
  std::string out = names_function(function, message) ? message : std::string(function) + ": " + message;
  return out + " [" + condition + "]";
}
[[noreturn]] inline void contract_violation(const char* function, const char* condition, const std::string& message) {
  throw error(contract_message(function, condition, message));
}
//! SPECDEC_CONTRACTS_ASSERT: what assert() does, with the precondition's message.
[[noreturn]] inline void contract_abort(const char* function, const char* condition, const std::string& message) {
  std::fprintf(stderr, "%s\n", contract_message(function, condition, message).c_str());
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
