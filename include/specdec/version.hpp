//! \file version.hpp
//! \brief The library version. The single source of truth: CMake reads it from here.
#pragma once

//! The major version.
#define SPECDEC_VERSION_MAJOR 0
//! The minor version.
#define SPECDEC_VERSION_MINOR 1
//! The patch version.
#define SPECDEC_VERSION_PATCH 0
//! The version as one number, major * 10000 + minor * 100 + patch.
#define SPECDEC_VERSION (SPECDEC_VERSION_MAJOR * 10000 + SPECDEC_VERSION_MINOR * 100 + SPECDEC_VERSION_PATCH)

namespace specdec {
//! The version as three numbers, for run-time checks.
struct version_info {
  int major, minor, patch;  //!< the patch version (SPECDEC_VERSION_PATCH)
  //! \var major
  //! The major version (SPECDEC_VERSION_MAJOR).
  //! \var minor
  //! The minor version (SPECDEC_VERSION_MINOR).
};
//! The version of the headers included, as `version_info`.
inline constexpr version_info version{SPECDEC_VERSION_MAJOR, SPECDEC_VERSION_MINOR, SPECDEC_VERSION_PATCH};
}  // namespace specdec
