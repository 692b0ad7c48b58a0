# Runs PROGRAM twice, with the arguments FIRST and then SECOND (each a "|"-separated list), and fails
# unless both succeed and print the same generated texts: specdec-llama's "--- request" blocks, which
# end where its summary ("method ...") begins. Used to check that greedy speculative decoding gives
# target-only decoding's text.
foreach(run IN ITEMS FIRST SECOND)
  string(REPLACE "|" ";" args "${${run}}")
  execute_process(COMMAND "${PROGRAM}" ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the ${run} run failed (${rc}):\n${out}\n${err}")
  endif()
  string(FIND "${out}" "--- request" begin)
  string(FIND "${out}" "\nmethod " end)
  if(begin LESS 0 OR end LESS begin)
    message(FATAL_ERROR "the ${run} run printed no text:\n${out}")
  endif()
  math(EXPR length "${end} - ${begin}")
  string(SUBSTRING "${out}" ${begin} ${length} text_${run})
  string(REGEX MATCH "\nmethod [^\n]*" summary_${run} "${out}")
endforeach()
if(NOT text_FIRST STREQUAL text_SECOND)
  message(FATAL_ERROR "the texts differ:\n${text_FIRST}\n-- and --\n${text_SECOND}")
endif()
message("same text:${summary_FIRST}${summary_SECOND}")
