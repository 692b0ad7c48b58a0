# One GPU test program under compute-sanitizer (memcheck or racecheck): fails on any error or hazard
# the tool reports (its --error-exitcode), so a sanitizer finding that was fixed stays fixed. Prints
# "SKIPPED: ..." (CTest SKIP_REGULAR_EXPRESSION) when compute-sanitizer is not installed or the
# machine has no CUDA device (the program's own probe exits 77). compute-sanitizer is looked up when
# the test runs, so a build configured on a machine without it still runs it on one that has it.
# PROGRAM_ARGS (a Catch2 test spec, e.g. "~[shapes]") leaves out cases too large to run under the tool.
#   cmake -DTOOL=memcheck|racecheck -DPROGRAM=<test program> [-DPROGRAM_ARGS=<args>] [-DCUDA_BIN=<toolkit bin>]
#         -P compute_sanitizer.cmake
cmake_minimum_required(VERSION 3.23)
foreach(_v IN ITEMS TOOL PROGRAM)
  if(NOT ${_v})
    message(FATAL_ERROR "compute_sanitizer.cmake: pass -D${_v}=...")
  endif()
endforeach()

find_program(_sanitizer compute-sanitizer HINTS "${CUDA_BIN}" /usr/local/cuda/bin NO_CACHE)
if(NOT _sanitizer)
  message("SKIPPED: compute-sanitizer not found")
  return()
endif()
# The GPU tests' main exits 77 before Catch2 runs when there is no device.
execute_process(COMMAND "${PROGRAM}" --list-test-names-only RESULT_VARIABLE _probe OUTPUT_QUIET ERROR_QUIET)
if(_probe EQUAL 77)
  message("SKIPPED: no CUDA device")
  return()
endif()
execute_process(COMMAND "${_sanitizer}" --tool "${TOOL}" --error-exitcode 99 "${PROGRAM}" ${PROGRAM_ARGS}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
message("${_out}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "compute-sanitizer ${TOOL} ${PROGRAM}: exit ${_rc} (99: the tool reported errors or hazards)")
endif()
