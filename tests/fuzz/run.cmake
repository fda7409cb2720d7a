# Runs one libFuzzer target for SECONDS from a fresh copy of its seeds; any
# crash, leak, timeout or trap fails the test and leaves the input in CORPUS.
file(REMOVE_RECURSE ${CORPUS})
file(MAKE_DIRECTORY ${CORPUS})
file(GLOB seeds ${SEEDS}/*)
if(NOT seeds)
  message(FATAL_ERROR "no seed inputs in ${SEEDS}")
endif()
file(COPY ${seeds} DESTINATION ${CORPUS})
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -max_len=65536 -artifact_prefix=${CORPUS}/ ${CORPUS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "#[0-9]+[^\n]*DONE[^\n]*" done "${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer failed (${rc}):\n${err}")
endif()
message(STATUS "fuzzed ${SECONDS}s: ${done}")
