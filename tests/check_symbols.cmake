# Checks the global symbols the static library defines (nm).
#
# By default: fails when one is outside pprt's two namespaces, pprt_
# (public) and pprt__ (internal, cross-file). A vendoring library links pprt
# statically, so any other global would collide with its own names.
#
# With -DREADERS=OFF: fails when one belongs to the readers (read/: the
# profile and trace decoders, the trace's JSON exporter, the JSON escaper),
# which are not part of the runtime (libpprt_http, the endpoint's library,
# carries them; libpprt never does).
execute_process(COMMAND ${NM} -g --defined-only ${LIB}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
set(readers "")
set(count 0)
foreach(line IN LISTS lines)
  # "<address> <type> <name>"; skip file headers ("x.o:") and blank lines.
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] +(.+)$")
    set(name ${CMAKE_MATCH_1})
    string(REGEX REPLACE "^_" "" bare "${name}") # Mach-O adds a leading _
    # i386 PIC: gcc's pc thunks are hidden COMDAT copies, identical in every
    # object that has one, so they cannot collide with anything.
    if(name MATCHES "^_*x86\\.get_pc_thunk\\.")
      continue()
    endif()
    if(NOT bare MATCHES "^pprt_")
      list(APPEND bad ${name})
    endif()
    if(bare MATCHES "^pprt__(profile_decode|profile_check|trace_decode|trace_free$|trace_export|tdec_|json_)")
      list(APPEND readers ${bare})
    endif()
    math(EXPR count "${count} + 1")
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no global symbols found in ${LIB}: the check is not looking")
endif()
if(NOT DEFINED READERS)
  if(bad)
    message(FATAL_ERROR "global symbols without the pprt_ prefix in ${LIB}: ${bad}")
  endif()
  message(STATUS "${count} global symbols, all prefixed pprt_")
elseif(readers)
  message(FATAL_ERROR "reader symbols in the runtime library ${LIB}: ${readers}")
else()
  message(STATUS "${count} global symbols, none of them the readers'")
endif()
