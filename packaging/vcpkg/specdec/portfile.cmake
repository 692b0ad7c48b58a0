# vcpkg port of specdec, used as an overlay port straight from a specdec checkout:
#   vcpkg install specdec --overlay-ports=<specdec>/packaging/vcpkg
# or, in manifest mode, "vcpkg-configuration": { "overlay-ports": ["<specdec>/packaging/vcpkg"] }.
#
# The sources are the checkout this port lives in (three levels up), so the port always builds the
# code next to it: there is no released tarball whose REF/SHA512 could be pinned yet. To build
# another checkout, set SPECDEC_SOURCE_DIR and let it through vcpkg's environment filter:
#   VCPKG_KEEP_ENV_VARS=SPECDEC_SOURCE_DIR SPECDEC_SOURCE_DIR=/path/to/specdec vcpkg install specdec ...
# When specdec is published, replace this block with vcpkg_from_github(... REF v${VERSION} SHA512 ...)
# for a registry (see packaging/README.md).
if(DEFINED ENV{SPECDEC_SOURCE_DIR} AND NOT "$ENV{SPECDEC_SOURCE_DIR}" STREQUAL "")
  set(SOURCE_PATH "$ENV{SPECDEC_SOURCE_DIR}")
else()
  get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
endif()
if(NOT EXISTS "${SOURCE_PATH}/include/specdec/version.hpp" OR NOT EXISTS "${SOURCE_PATH}/CMakeLists.txt")
  message(FATAL_ERROR "specdec: '${SOURCE_PATH}' is not a specdec source tree (set SPECDEC_SOURCE_DIR)")
endif()

# header-only port
set(VCPKG_BUILD_TYPE release)

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    simd  SPECDEC_ENABLE_SIMD
    cuda  SPECDEC_ENABLE_CUDA
    learn SPECDEC_ENABLE_EIGEN
    stats SPECDEC_ENABLE_BOOST_MATH
)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DSPECDEC_BUILD_TESTS=OFF
    -DSPECDEC_BUILD_BENCH=OFF
    -DSPECDEC_BUILD_EXAMPLES=OFF
    -DSPECDEC_INSTALL=ON
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH share/cmake/specdec)
vcpkg_fixup_pkgconfig()

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug" "${CURRENT_PACKAGES_DIR}/lib")

vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
