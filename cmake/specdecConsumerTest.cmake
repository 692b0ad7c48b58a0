# consumer/find_package: install specdec from the build tree into a scratch prefix, then configure,
# build and run tests/consumer/ -- a separate project that uses find_package(specdec CONFIG REQUIRED).
# Run by CTest (see tests/CMakeLists.txt) with:
#   SPECDEC_BINARY_DIR           the top-level build directory
#   SPECDEC_CONSUMER_SOURCE_DIR  tests/consumer
#   SPECDEC_WORK_DIR             scratch directory under the build tree (wiped first)
#   SPECDEC_GENERATOR, SPECDEC_CXX_COMPILER, SPECDEC_CONFIG
#   SPECDEC_EXPECT_COMPONENTS    comma-separated optional targets that must exist (simd,learn,...)
#   SPECDEC_VERSION              the version the consumer must print
cmake_minimum_required(VERSION 3.23)
foreach(_v SPECDEC_BINARY_DIR SPECDEC_CONSUMER_SOURCE_DIR SPECDEC_WORK_DIR SPECDEC_GENERATOR SPECDEC_VERSION)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "consumer test: ${_v} is not set")
  endif()
endforeach()
if(NOT SPECDEC_CONFIG)
  set(SPECDEC_CONFIG Release)
endif()

set(_prefix "${SPECDEC_WORK_DIR}/prefix")
set(_build "${SPECDEC_WORK_DIR}/build")
file(REMOVE_RECURSE "${SPECDEC_WORK_DIR}")
file(MAKE_DIRECTORY "${SPECDEC_WORK_DIR}")

function(run_step what)
  message(STATUS "consumer test: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${what} failed (${_rc}):\n${_out}")
  endif()
  set(STEP_OUTPUT "${_out}" PARENT_SCOPE)
endfunction()

run_step("install into ${_prefix}"
  "${CMAKE_COMMAND}" --install "${SPECDEC_BINARY_DIR}" --prefix "${_prefix}" --config "${SPECDEC_CONFIG}")

string(REPLACE "," ";" _components "${SPECDEC_EXPECT_COMPONENTS}")
set(_configure_args
  -S "${SPECDEC_CONSUMER_SOURCE_DIR}" -B "${_build}" -G "${SPECDEC_GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${_prefix}"
  "-DCMAKE_BUILD_TYPE=${SPECDEC_CONFIG}"
  "-DSPECDEC_EXPECTED_PREFIX=${_prefix}"
  "-DSPECDEC_EXPECTED_VERSION=${SPECDEC_VERSION}"
  "-DSPECDEC_EXPECT_COMPONENTS=${SPECDEC_EXPECT_COMPONENTS}")
if(SPECDEC_CXX_COMPILER)
  list(APPEND _configure_args "-DCMAKE_CXX_COMPILER=${SPECDEC_CXX_COMPILER}")
endif()
run_step("configure tests/consumer" "${CMAKE_COMMAND}" ${_configure_args})
run_step("build tests/consumer" "${CMAKE_COMMAND}" --build "${_build}" --config "${SPECDEC_CONFIG}")

# Find and run the programs (single- or multi-config layouts).
foreach(_app IN ITEMS specdec_consumer specdec_consumer_simd)
  unset(_exe)
  foreach(_candidate "${_build}/${_app}" "${_build}/${SPECDEC_CONFIG}/${_app}"
                     "${_build}/${_app}.exe" "${_build}/${SPECDEC_CONFIG}/${_app}.exe")
    if(EXISTS "${_candidate}")
      set(_exe "${_candidate}")
      break()
    endif()
  endforeach()
  if(NOT DEFINED _exe)
    if(_app STREQUAL "specdec_consumer" OR "simd" IN_LIST _components)
      message(FATAL_ERROR "consumer test: ${_app} was not built")
    endif()
    continue()
  endif()
  run_step("run ${_app}" "${_exe}")
  message(STATUS "consumer test: ${_app} says: ${STEP_OUTPUT}")
  if(NOT STEP_OUTPUT MATCHES "specdec ${SPECDEC_VERSION}")
    message(FATAL_ERROR "consumer test: ${_app} printed '${STEP_OUTPUT}', expected 'specdec ${SPECDEC_VERSION}'")
  endif()
endforeach()
message(STATUS "consumer test: passed")
