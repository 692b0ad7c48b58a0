//! \file contracts.hpp
//! \brief `SPECDEC_EXPECTS(cond, "message")`: run-time preconditions.
//!
//! By default a failed precondition throws `specdec::error` whose text starts with the function
//! name; define `SPECDEC_CONTRACTS` to `SPECDEC_CONTRACTS_ASSERT` or `SPECDEC_CONTRACTS_OFF` to change that.
#pragma once

#include <cassert>
#include <string>

#include "specdec/config.hpp"
#include "specdec/errors.hpp"

namespace specdec::detail {
[[noreturn]] inline void contract_violation(const char* function, const char* condition, const std::string& message) {
  throw error(std::string(function) + ": " + message + " [" + condition + "]");
}
}  // namespace specdec::detail

#if SPECDEC_CONTRACTS == SPECDEC_CONTRACTS_THROW
#define SPECDEC_EXPECTS(cond, message)                                              \
  do {                                                                              \
    if (!(cond)) ::specdec::detail::contract_violation(__func__, #cond, (message)); \
  } while (false)
#elif SPECDEC_CONTRACTS == SPECDEC_CONTRACTS_ASSERT
#define SPECDEC_EXPECTS(cond, message) assert((cond) && (message))
#else
#define SPECDEC_EXPECTS(cond, message) ((void)0)
#endif
