# What the cmake -P test scripts that run programs share (cli_test,
# cli_tree_test, cli_bounds, preload_test, preload_trace_test):
#
#   run(<var> <command...>)     runs the command within cli_timeout seconds
#                               (the script may set it before the include;
#                               120 otherwise) and sets <var>_rc, <var>_out
#                               and <var>_err
#   expect(<var> <exit code> <stderr regex> [what...])
#                               stops the test, showing what ran and what it
#                               printed, unless the command run as <var>
#                               exited so and its stderr matches ("" matches
#                               anything)
#   expect_match(<text> <regex> <what>)
#                               stops the test with <what> and the text
#                               unless the text matches
#   run_preloaded(<var> <VAR=value...> <program> <args...>)
#                               run() with LD_PRELOAD=${PRELOAD} and the
#                               variables given
#   skip_without(<var> <why>)   ends the script (a macro: its return() is
#                               the script's) with "SKIP: <why>", which the
#                               test's SKIP_REGULAR_EXPRESSION turns into a
#                               skip, when <var> is empty or not found
if(NOT cli_timeout)
  set(cli_timeout 120)
endif()

function(run var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT ${cli_timeout})
  set(${var}_rc "${rc}" PARENT_SCOPE)
  set(${var}_out "${out}" PARENT_SCOPE)
  set(${var}_err "${err}" PARENT_SCOPE)
endfunction()

function(expect var code regex)
  if(NOT "${${var}_rc}" STREQUAL "${code}" OR NOT "${${var}_err}" MATCHES "${regex}")
    # A view's output can be gigabytes; its start is enough to see why.
    string(SUBSTRING "${${var}_out}" 0 20000 out)
    message(FATAL_ERROR "${ARGN}: exit ${${var}_rc} (want ${code}), stderr:\n${${var}_err}\n"
                        "want it to match: ${regex}\nstdout:\n${out}")
  endif()
endfunction()

function(run_preloaded var)
  run(r ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} ${ARGN})
  set(${var}_rc "${r_rc}" PARENT_SCOPE)
  set(${var}_out "${r_out}" PARENT_SCOPE)
  set(${var}_err "${r_err}" PARENT_SCOPE)
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}:\n${text}")
  endif()
endfunction()

macro(skip_without var why)
  if(NOT ${var})
    message("SKIP: ${why}")
    return()
  endif()
endmacro()
