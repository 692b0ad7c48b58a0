# The documentation's C++ snippets compile (CTest docs/snippets). Every block fenced exactly
# ```cpp in README.md and docs/**/*.md is a complete translation unit; each is compiled with
#   <compiler> -std=c++20 -fsyntax-only -I <repo>/include -DSPECDEC_ENABLE_SIMD=<0|1>
# (one process per block). Other fences are not compiled: ```cuda for code that needs the cuda
# backend (nvcc), ```c++-fragment or ```text for excerpts that are not whole translation units.
# Fails naming the file, the line of the block and the compiler's output.
#   cmake -DSPECDEC_SOURCE_DIR=<repo> -DSPECDEC_CXX_COMPILER=<c++> -DSPECDEC_SNIPPET_DIR=<scratch dir>
#         [-DSPECDEC_SNIPPET_SIMD=0|1] [-DSPECDEC_SNIPPET_INCLUDES=<dir;dir>] -P specdecCompileSnippets.cmake
cmake_minimum_required(VERSION 3.23)
foreach(_var SPECDEC_SOURCE_DIR SPECDEC_CXX_COMPILER SPECDEC_SNIPPET_DIR)
  if(NOT ${_var})
    message(FATAL_ERROR "docs/snippets: pass -D${_var}=...")
  endif()
endforeach()
if(NOT DEFINED SPECDEC_SNIPPET_SIMD)
  set(SPECDEC_SNIPPET_SIMD 0)
endif()

set(_flags -std=c++20 -fsyntax-only "-I${SPECDEC_SOURCE_DIR}/include" "-DSPECDEC_ENABLE_SIMD=${SPECDEC_SNIPPET_SIMD}")
foreach(_dir IN LISTS SPECDEC_SNIPPET_INCLUDES)  # e.g. xsimd's include directory, when not a system one
  if(_dir AND NOT _dir MATCHES "^/usr(/local)?/include/?$")
    list(APPEND _flags "-isystem" "${_dir}")
  endif()
endforeach()

file(GLOB_RECURSE _docs LIST_DIRECTORIES false RELATIVE "${SPECDEC_SOURCE_DIR}" "${SPECDEC_SOURCE_DIR}/docs/*.md")
list(SORT _docs)
set(_files README.md ${_docs})

file(REMOVE_RECURSE "${SPECDEC_SNIPPET_DIR}")
file(MAKE_DIRECTORY "${SPECDEC_SNIPPET_DIR}")

set(_open "```cpp\n")
set(_close "\n```")
set(_compiled 0)
set(_failed 0)
set(_report "")
foreach(_rel IN LISTS _files)
  file(READ "${SPECDEC_SOURCE_DIR}/${_rel}" _text)
  # Work on "\n" + text so that a fence on the first line is found like every other.
  set(_rest "\n${_text}")
  set(_line 0)  # the line _rest starts in (0: the virtual line before line 1)
  set(_index 0)
  while(TRUE)
    string(FIND "${_rest}" "\n${_open}" _at)
    if(_at EQUAL -1)
      break()
    endif()
    # The fence line's number: newlines before it (the leading "\n" counts as line 0's end).
    string(SUBSTRING "${_rest}" 0 ${_at} _before)
    string(REGEX REPLACE "[^\n]" "" _newlines "${_before}")
    string(LENGTH "${_newlines}" _n)
    math(EXPR _fence_line "${_line} + ${_n} + 1")
    string(LENGTH "\n${_open}" _skip)
    math(EXPR _start "${_at} + ${_skip}")
    string(SUBSTRING "${_rest}" ${_start} -1 _after)
    string(FIND "${_after}" "${_close}" _end)
    if(_end EQUAL -1)
      string(APPEND _report "${_rel}:${_fence_line}: the ```cpp block is never closed\n\n")
      math(EXPR _failed "${_failed} + 1")
      break()
    endif()
    string(SUBSTRING "${_after}" 0 ${_end} _code)
    math(EXPR _index "${_index} + 1")
    string(MAKE_C_IDENTIFIER "${_rel}" _stem)
    set(_source "${SPECDEC_SNIPPET_DIR}/${_stem}_line${_fence_line}.cpp")
    math(EXPR _first_code_line "${_fence_line} + 1")
    file(WRITE "${_source}" "#line ${_first_code_line} \"${_rel}\"\n${_code}\n")
    execute_process(COMMAND "${SPECDEC_CXX_COMPILER}" ${_flags} "${_source}"
                    RESULT_VARIABLE _result OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    math(EXPR _compiled "${_compiled} + 1")
    if(NOT _result EQUAL 0)
      string(APPEND _report "${_rel}:${_fence_line}: ```cpp block ${_index} of ${_rel} does not compile (${_source}):\n${_out}\n")
      math(EXPR _failed "${_failed} + 1")
    endif()
    # Continue after the closing fence.
    string(LENGTH "${_close}" _close_length)
    math(EXPR _next "${_end} + ${_close_length}")
    string(SUBSTRING "${_after}" 0 ${_next} _consumed)
    string(REGEX REPLACE "[^\n]" "" _newlines "${_consumed}")
    string(LENGTH "${_newlines}" _n2)
    math(EXPR _line "${_fence_line} + ${_n2} + 1")  # the closing fence's line
    string(SUBSTRING "${_after}" ${_next} -1 _rest)
  endwhile()
endforeach()

if(_failed GREATER 0)
  message(FATAL_ERROR "docs/snippets: ${_failed} of ${_compiled} C++ block(s) fail:\n\n${_report}"
                      "A ```cpp block must be a complete translation unit; fence excerpts ```c++-fragment and "
                      "CUDA code ```cuda.")
endif()
message(STATUS "docs/snippets: ${_compiled} ```cpp block(s) in README.md and docs/ compile "
               "(SPECDEC_ENABLE_SIMD=${SPECDEC_SNIPPET_SIMD})")
