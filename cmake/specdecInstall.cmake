# Install rules: headers, the exported targets, the package config files and a pkg-config file.
# Included from the top-level CMakeLists.txt when SPECDEC_INSTALL is ON.
include(CMakePackageConfigHelpers)

# Header-only and architecture-independent: the CMake package lives under share/.
set(SPECDEC_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/specdec"
    CACHE STRING "Where to install specdecConfig.cmake (relative to the prefix)")
set(SPECDEC_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig"
    CACHE STRING "Where to install specdec.pc (relative to the prefix)")
mark_as_advanced(SPECDEC_INSTALL_CMAKEDIR SPECDEC_INSTALL_PKGCONFIGDIR)

install(TARGETS ${SPECDEC_EXPORTED_TARGETS}
        EXPORT specdecTargets
        FILE_SET HEADERS DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
# The FILE_SET holds the headers present at configure time; install the whole tree as well so a
# header added since the last configure is never missing from an install.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/specdec"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh")

install(EXPORT specdecTargets
        NAMESPACE specdec::
        FILE specdecTargets.cmake
        DESTINATION "${SPECDEC_INSTALL_CMAKEDIR}")

# Variables recorded in the config file: what was enabled when this copy was built.
foreach(_c IN ITEMS simd cuda learn stats conformance llama_cpp)
  string(TOUPPER "${_c}" _C)
  if(_c IN_LIST SPECDEC_ENABLED_COMPONENTS)
    set(SPECDEC_PACKAGE_HAS_${_C} ON)
  else()
    set(SPECDEC_PACKAGE_HAS_${_C} OFF)
  endif()
endforeach()

# Where the build found llama.cpp: the installed config's fallback for find_dependency(llama).
if(SPECDEC_PACKAGE_HAS_LLAMA_CPP)
  set(SPECDEC_PACKAGE_LLAMA_DIR "${llama_DIR}")
else()
  set(SPECDEC_PACKAGE_LLAMA_DIR "")
endif()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/specdecConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/specdecConfig.cmake"
  INSTALL_DESTINATION "${SPECDEC_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/specdecConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion
  ARCH_INDEPENDENT)
install(FILES
          "${PROJECT_BINARY_DIR}/specdecConfig.cmake"
          "${PROJECT_BINARY_DIR}/specdecConfigVersion.cmake"
          "${PROJECT_SOURCE_DIR}/cmake/specdecXsimdWorkaround.cmake"
        DESTINATION "${SPECDEC_INSTALL_CMAKEDIR}")

# pkg-config: relocatable (the prefix is computed from the .pc file's own location).
if(IS_ABSOLUTE "${SPECDEC_INSTALL_PKGCONFIGDIR}")
  set(_pc_dir "${SPECDEC_INSTALL_PKGCONFIGDIR}")
else()
  set(_pc_dir "${CMAKE_INSTALL_PREFIX}/${SPECDEC_INSTALL_PKGCONFIGDIR}")
endif()
if(IS_ABSOLUTE "${SPECDEC_INSTALL_PKGCONFIGDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SPECDEC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SPECDEC_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _pc_up "${_pc_dir}" "${CMAKE_INSTALL_PREFIX}")
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(SPECDEC_PC_PREFIX "\${pcfiledir}/${_pc_up}")
  set(SPECDEC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/specdec.pc.in" "${PROJECT_BINARY_DIR}/specdec.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/specdec.pc" DESTINATION "${SPECDEC_INSTALL_PKGCONFIGDIR}")
