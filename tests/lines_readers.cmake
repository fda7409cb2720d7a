# Runs lines_readers built with pprt's own DWARF reader (OWN) and with the
# libdw one (LIBDW) over LIB, every STEP bytes, and fails on any difference,
# printing the first ones. The own reader is also run with its addresses in
# plain address order, which must change nothing. OUT is a directory for
# the outputs.
file(MAKE_DIRECTORY ${OUT})
get_filename_component(name ${LIB} NAME)
foreach(run own libdw own_plain)
  if(run STREQUAL "libdw")
    set(exe ${LIBDW})
    set(extra)
  else()
    set(exe ${OWN})
    set(extra)
    if(run STREQUAL "own_plain")
      set(extra plain)
    endif()
  endif()
  execute_process(COMMAND ${exe} ${LIB} ${STEP} ${extra} OUTPUT_FILE ${OUT}/${name}.${run}.txt
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${exe} ${LIB} ${STEP} ${extra}: ${rc}\n${err}")
  endif()
endforeach()
# The outputs are compared whole; on a difference, line by line for the
# first few.
set(failed 0)
foreach(other libdw own_plain)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT}/${name}.own.txt
                          ${OUT}/${name}.${other}.txt RESULT_VARIABLE same)
  if(same EQUAL 0)
    continue()
  endif()
  set(failed 1)
  file(STRINGS ${OUT}/${name}.own.txt own)
  file(STRINGS ${OUT}/${name}.${other}.txt lines)
  # One pass over both (ZIP_LISTS, CMake 3.17): list(GET) at each index
  # reparses the whole list, and over 80,000 lines the walk outran the
  # test's timeout instead of showing the difference.
  if(CMAKE_VERSION VERSION_LESS 3.17)
    message("${name}: compare ${OUT}/${name}.own.txt and ${name}.${other}.txt")
  else()
    set(shown 0)
    foreach(a b IN ZIP_LISTS own lines)
      if(NOT a STREQUAL b)
        message("${name}: own ${a}\n${name}: ${other} ${b}")
        math(EXPR shown "${shown} + 1")
        if(shown EQUAL 5)
          break()
        endif()
      endif()
    endforeach()
  endif()
  message(SEND_ERROR "${name}: the own reader and ${other} differ (outputs in ${OUT})")
endforeach()
if(NOT failed)
  file(STRINGS ${OUT}/${name}.own.txt own)
  list(LENGTH own count)
  message(STATUS "${name}: ${count} addresses, own = libdw = own in address order")
endif()
