# specdec-sim --policy cuda against --policy seq: runs one Monte-Carlo subcommand with both policies
# (the same small grid, the same seed) and requires byte-identical CSV files, since the GPU simulators
# draw the CPU's numbers. Prints "SKIPPED: no CUDA device" (CTest SKIP_REGULAR_EXPRESSION) when the
# cuda run finds no device.
#   cmake -DSIM=<specdec-sim> -DSUBCOMMAND=sd|sprinter|sv -DWORK_DIR=<dir> -P compare_policies.cmake
cmake_minimum_required(VERSION 3.23)
foreach(_v IN ITEMS SIM SUBCOMMAND WORK_DIR)
  if(NOT ${_v})
    message(FATAL_ERROR "compare_policies.cmake: pass -D${_v}=...")
  endif()
endforeach()

if(SUBCOMMAND STREQUAL "sd")
  set(_args --alpha 0.5,0.8,0.95 --gamma 0,1,4,8 --c 0.05,0.2 --draws 50000)
elseif(SUBCOMMAND STREQUAL "sprinter")
  set(_args --eta-tp 0:1:0.25 --eta-fp 0.1,0.9 --r 5 --draws 50000)
elseif(SUBCOMMAND STREQUAL "sv")
  set(_args --max-gamma 10 --draws 50000)
else()
  message(FATAL_ERROR "compare_policies.cmake: unknown subcommand ${SUBCOMMAND}")
endif()

set(_seq "${WORK_DIR}/${SUBCOMMAND}_policy_seq.csv")
set(_cuda "${WORK_DIR}/${SUBCOMMAND}_policy_cuda.csv")
execute_process(COMMAND "${SIM}" ${SUBCOMMAND} ${_args} --seed 7 --quiet --policy seq --csv "${_seq}"
                RESULT_VARIABLE _rc_seq ERROR_VARIABLE _err_seq)
if(NOT _rc_seq EQUAL 0)
  message(FATAL_ERROR "specdec-sim ${SUBCOMMAND} --policy seq failed (${_rc_seq}): ${_err_seq}")
endif()
execute_process(COMMAND "${SIM}" ${SUBCOMMAND} ${_args} --seed 7 --quiet --policy cuda --csv "${_cuda}"
                RESULT_VARIABLE _rc_cuda ERROR_VARIABLE _err_cuda)
if(NOT _rc_cuda EQUAL 0)
  if(_err_cuda MATCHES "no CUDA device")
    message("SKIPPED: no CUDA device (${_err_cuda})")
    return()
  endif()
  message(FATAL_ERROR "specdec-sim ${SUBCOMMAND} --policy cuda failed (${_rc_cuda}): ${_err_cuda}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${_seq}" "${_cuda}" RESULT_VARIABLE _same)
if(NOT _same EQUAL 0)
  message(FATAL_ERROR "specdec-sim ${SUBCOMMAND}: --policy cuda wrote a different CSV than --policy seq "
                      "(${_seq} vs ${_cuda})")
endif()
message("specdec-sim ${SUBCOMMAND}: --policy cuda and --policy seq wrote identical CSV files")
