# specdec_find_numpy_python(<out_var>): a Python 3 interpreter that imports NumPy, for the tests that run
# Python scripts (examples/conformance_numpy.py, scripts/make-llama-test-models.py): SPECDEC_NUMPY_PYTHON
# when set, else FindPython3's interpreter, else Debian's /usr/bin/python3 (where scripts/install-deps.sh
# installs python3-numpy) when the one found first (a pyenv or venv) lacks NumPy. Empty when none does.
set(SPECDEC_NUMPY_PYTHON "" CACHE FILEPATH "Python with NumPy for the tests that run Python scripts (empty: look for one)")
mark_as_advanced(SPECDEC_NUMPY_PYTHON)

function(specdec_find_numpy_python out_var)
  if(SPECDEC_NUMPY_PYTHON)
    set(${out_var} "${SPECDEC_NUMPY_PYTHON}" PARENT_SCOPE)
    return()
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_candidates)
  if(Python3_Interpreter_FOUND)
    list(APPEND _candidates "${Python3_EXECUTABLE}")
  endif()
  if(EXISTS /usr/bin/python3)
    list(APPEND _candidates /usr/bin/python3)
  endif()
  foreach(_python IN LISTS _candidates)
    execute_process(COMMAND "${_python}" -c "import numpy" RESULT_VARIABLE _numpy_missing OUTPUT_QUIET ERROR_QUIET)
    if(_numpy_missing EQUAL 0)
      set(${out_var} "${_python}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out_var} "" PARENT_SCOPE)
endfunction()
