# Core purity (docs/design.md, 'Principles', 1): the core needs only a C++20 compiler.
# Fails if a header outside learn/, stats/, backend/simd/ and backend/cuda/ -- and whose file name
# contains neither "simd" nor "cuda" -- includes Eigen, Boost, xsimd, CUB, Thrust or CUDA headers.
#   cmake -DSPECDEC_INCLUDE_DIR=<repo>/include/specdec -P specdecCheckCorePurity.cmake
cmake_minimum_required(VERSION 3.23)
if(NOT SPECDEC_INCLUDE_DIR OR NOT IS_DIRECTORY "${SPECDEC_INCLUDE_DIR}")
  message(FATAL_ERROR "core purity: pass -DSPECDEC_INCLUDE_DIR=<repo>/include/specdec")
endif()

set(_forbidden "^[ \t]*#[ \t]*include[ \t]*[<\"](Eigen|unsupported/Eigen|boost/|xsimd|cub/|thrust/|cuda|llama\\.h|ggml)")
file(GLOB_RECURSE _headers LIST_DIRECTORIES false
     "${SPECDEC_INCLUDE_DIR}/*.hpp" "${SPECDEC_INCLUDE_DIR}/*.h" "${SPECDEC_INCLUDE_DIR}/*.cuh")
set(_checked 0)
set(_violations "")
foreach(_h IN LISTS _headers)
  file(RELATIVE_PATH _rel "${SPECDEC_INCLUDE_DIR}" "${_h}")
  get_filename_component(_name "${_rel}" NAME)
  if(_rel MATCHES "^(learn|stats|backend/simd|backend/cuda)/" OR _rel MATCHES "^integrations/llama_cpp[/.]" OR _name MATCHES "simd|cuda")
    continue()
  endif()
  math(EXPR _checked "${_checked} + 1")
  file(STRINGS "${_h}" _lines REGEX "${_forbidden}")
  foreach(_line IN LISTS _lines)
    string(STRIP "${_line}" _line)
    list(APPEND _violations "  specdec/${_rel}: ${_line}")
  endforeach()
endforeach()

if(_violations)
  list(JOIN _violations "\n" _msg)
  message(FATAL_ERROR
    "core purity: core headers include optional dependencies:\n${_msg}\n"
    "Move that code under learn/, stats/, backend/simd/ or backend/cuda/ (or a file named *simd* / *cuda*).")
endif()
message(STATUS "core purity: ${_checked} core header(s) checked, none includes Eigen/Boost/xsimd/CUB/Thrust/CUDA")
