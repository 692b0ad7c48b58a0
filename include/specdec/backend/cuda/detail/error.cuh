//! \file backend/cuda/detail/error.cuh
//! \brief CUDA runtime errors become `specdec::cuda_error` on the host (docs/design.md, 'Statuses and errors').
//! Device code never traps: bad data is reported through status flags.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "specdec/errors.hpp"

namespace specdec::backend::cuda {

//! Throws `specdec::cuda_error` naming `what` and the CUDA error when `status` is not cudaSuccess.
inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw cuda_error(std::string("specdec: ") + what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

//! Checks the launch of `kernel` (a bad configuration is reported at once; faults inside the kernel
//! surface at the next synchronising call, which the caller checks).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace specdec::backend::cuda
