# Runs one libFuzzer harness (the CTest tests fuzz/<name>_run): copies the seed corpus SEEDS into
# WORK_DIR/corpus (in the build tree; the source tree is never written), fuzzes for SECONDS with the
# dictionary DICT (may be empty), and fails when the fuzzer finds a crash, a leak, a timeout or an
# invariant violation; the input is then in WORK_DIR/artifacts/. Ends with the line
# "run_fuzzer summary: fuzz_<name>: N executions in S s".
#   cmake -DFUZZER=... -DSEEDS=... -DWORK_DIR=... -DSECONDS=30 [-DDICT=...] -P run_fuzzer.cmake
foreach(_var FUZZER SEEDS WORK_DIR SECONDS)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_fuzzer.cmake: -D${_var}=... is required")
  endif()
endforeach()

file(MAKE_DIRECTORY "${WORK_DIR}/corpus" "${WORK_DIR}/artifacts")
file(GLOB _seeds "${SEEDS}/*")
if(_seeds)
  file(COPY ${_seeds} DESTINATION "${WORK_DIR}/corpus")
endif()

# -malloc_limit_mb: one allocation above 256 MB is a finding (memory must follow the input's size).
set(_args "-max_total_time=${SECONDS}" -print_final_stats=1 -timeout=20 -malloc_limit_mb=256
          "-artifact_prefix=${WORK_DIR}/artifacts/")
if(DEFINED DICT AND NOT "${DICT}" STREQUAL "")
  list(APPEND _args "-dict=${DICT}")
endif()
message(STATUS "run_fuzzer: ${FUZZER} ${_args} ${WORK_DIR}/corpus")
execute_process(COMMAND "${FUZZER}" ${_args} "${WORK_DIR}/corpus" RESULT_VARIABLE _rc OUTPUT_VARIABLE _log ERROR_VARIABLE _log)
message("${_log}")
# One line to grep for (scripts/test.sh): "run_fuzzer summary: fuzz_<name>: N executions in S s".
get_filename_component(_name "${FUZZER}" NAME)
set(_executions "?")
if(_log MATCHES "stat::number_of_executed_units: *([0-9]+)")
  set(_executions "${CMAKE_MATCH_1}")
endif()
message("run_fuzzer summary: ${_name}: ${_executions} executions in ${SECONDS} s")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "run_fuzzer: ${FUZZER} failed (${_rc}); the input is in ${WORK_DIR}/artifacts/. "
                      "Reproduce with: ${FUZZER} <input>; keep it as a regression input by copying it to "
                      "tests/fuzz/corpus/<name>/ once the bug is fixed.")
endif()
