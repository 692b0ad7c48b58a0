//! \file simulate/detail/host_device.hpp
//! \brief `SPECDEC_DETAIL_EXEC_CHECK_DISABLE`: placed before a `SPECDEC_HOST_DEVICE` function
//! template whose instantiations may call host-only code (the CPU simulators instantiate the shared
//! per-draw steps with the library's host samplers, the cuda backend with device-side tables). It
//! silences nvcc's execution-space check for such instantiations, which only the host ever calls
//! (the pragma Thrust and CUB use for the same purpose); it expands to nothing outside nvcc.
#pragma once

//! Placed before a host-device function template: silences nvcc's execution-space check; nothing outside nvcc.
#if defined(__CUDACC__)
#define SPECDEC_DETAIL_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define SPECDEC_DETAIL_EXEC_CHECK_DISABLE
#endif
