# The readers (read/: the profile and trace decoders, the trace's JSON
# exporter, the JSON escaper) are not part of the runtime: fails when the
# static library defines one of their symbols. A build with the HTTP
# endpoint (PRESENT=ON) is the one exception, and there the check is the
# other way round, so that the day the endpoint no longer needs them the
# exception is noticed.
execute_process(COMMAND ${NM} -g --defined-only ${LIB}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(found "")
set(count 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] +(.+)$")
    math(EXPR count "${count} + 1")
    string(REGEX REPLACE "^_" "" bare "${CMAKE_MATCH_1}") # Mach-O adds a leading _
    if(bare MATCHES "^pprt__(profile_decode|profile_decoded_free|profile_check|trace_decode|trace_free$|trace_export|json_)")
      list(APPEND found ${bare})
    endif()
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no global symbols found in ${LIB}: the check is not looking")
endif()
if(PRESENT AND NOT found)
  message(FATAL_ERROR "${LIB} has the HTTP endpoint but none of the readers it uses")
endif()
if(NOT PRESENT AND found)
  message(FATAL_ERROR "reader symbols in the runtime library ${LIB}: ${found}")
endif()
message(STATUS "${count} global symbols; reader symbols: ${found}")
