# Checks that every test program that runs a goodness-of-fit test (tests/support/chi_squared.hpp:
# chi_squared_gof, gof_alpha) carries the `statistical` label (// SPECDEC_TEST_LABELS: ... statistical),
# or says why it does not (// SPECDEC_TEST_STATISTICAL_EXEMPT: <reason>, e.g. a small test of a file
# that must keep running under the sanitizers, whose preset leaves `statistical` out).
# Usage: cmake -DSPECDEC_TESTS_DIR=<tests/> -P specdecCheckStatisticalLabels.cmake
file(GLOB_RECURSE _sources "${SPECDEC_TESTS_DIR}/*.cpp")
set(_missing "")
set(_checked 0)
foreach(_src IN LISTS _sources)
  file(STRINGS "${_src}" _uses REGEX "chi_squared_gof|gof_alpha")
  if(NOT _uses)
    continue()
  endif()
  math(EXPR _checked "${_checked} + 1")
  file(STRINGS "${_src}" _labelled LIMIT_COUNT 40 REGEX "SPECDEC_TEST_LABELS:.*statistical|SPECDEC_TEST_STATISTICAL_EXEMPT: *[^ ]")
  if(NOT _labelled)
    file(RELATIVE_PATH _rel "${SPECDEC_TESTS_DIR}" "${_src}")
    list(APPEND _missing "${_rel}")
  endif()
endforeach()
if(_checked EQUAL 0)
  message(FATAL_ERROR "no test uses the goodness-of-fit helpers under ${SPECDEC_TESTS_DIR}: the check found nothing to check")
endif()
if(_missing)
  list(JOIN _missing ", " _list)
  message(FATAL_ERROR "goodness-of-fit tests without the `statistical` label or an exemption: ${_list}")
endif()
message(STATUS "${_checked} test files run goodness-of-fit tests; each is labelled `statistical` or exempt with a reason")
