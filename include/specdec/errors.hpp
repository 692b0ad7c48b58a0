//! \file errors.hpp
//! \brief The exception types specdec throws on the host. Device code never throws (docs/design.md, 'Statuses and errors').
#pragma once

#include <stdexcept>
#include <string>

namespace specdec {

//! A violated precondition: a bad argument, a shape mismatch, a parameter out of its domain.
class error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

//! Numerical trouble in data that passed the shape checks: a model's row without usable mass (NaN,
//! +inf or no mass) met by `decode`, `log_softmax_at` or a drafter stage, which the decode loops turn
//! into an `invalid_row` status.
class numerical_error : public std::domain_error {
 public:
  using std::domain_error::domain_error;
};

//! A failed CUDA runtime call, turned into an exception on the host side.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

//! A failed call into an inference engine that specdec drives (integrations/: a model file that does
//! not load, a decode call that fails, a context that is full).
class engine_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace specdec
