# Runs one libFuzzer target for SECONDS from a fresh copy of its seeds; any
# crash, leak, timeout or trap fails the test and leaves the input in CORPUS.
# TIMEOUT (seconds) and RSS_MB limit each input (default 10 s, 2048 MB).
if(NOT TIMEOUT)
  set(TIMEOUT 10)
endif()
if(NOT RSS_MB)
  set(RSS_MB 2048)
endif()
file(REMOVE_RECURSE ${CORPUS})
file(MAKE_DIRECTORY ${CORPUS})
file(GLOB seeds ${SEEDS}/*)
if(NOT seeds)
  message(FATAL_ERROR "no seed inputs in ${SEEDS}")
endif()
file(COPY ${seeds} DESTINATION ${CORPUS})
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=${TIMEOUT} -rss_limit_mb=${RSS_MB}
          -max_len=65536 -artifact_prefix=${CORPUS}/ ${CORPUS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "#[0-9]+[^\n]*DONE[^\n]*" done "${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer failed (${rc}):\n${err}")
endif()
message(STATUS "fuzzed ${SECONDS}s (per input: ${TIMEOUT} s, ${RSS_MB} MB): ${done}")
