//! \file version.hpp
//! \brief The library version. The single source of truth: CMake reads it from here.
#pragma once

#define SPECDEC_VERSION_MAJOR 0
#define SPECDEC_VERSION_MINOR 1
#define SPECDEC_VERSION_PATCH 0
#define SPECDEC_VERSION (SPECDEC_VERSION_MAJOR * 10000 + SPECDEC_VERSION_MINOR * 100 + SPECDEC_VERSION_PATCH)

namespace specdec {
//! The version as three numbers, for run-time checks.
struct version_info {
  int major, minor, patch;
};
inline constexpr version_info version{SPECDEC_VERSION_MAJOR, SPECDEC_VERSION_MINOR, SPECDEC_VERSION_PATCH};
}  // namespace specdec
