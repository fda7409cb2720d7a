# Runs profile_interop, then reads its two profiles with the reference
# reader, go tool pprof: both must parse (-raw, -top), and both must show
# the expected function names: from pprt's in-process symbolizer in
# names.pb.gz, and from pprof's own symbolization of the binaries through
# pprt's mappings in addrs.pb.gz.
if(NOT GO)
  message("SKIP: go not found; go tool pprof is the reference reader")
  return()
endif()
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${PROGRAM} ${OUT} ${LIB} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "profile_interop failed: ${out} ${err}")
endif()
set(names interop_static_leaf interop_middle main dlopen_static_helper)
foreach(file names addrs)
  foreach(mode -raw -top -traces)
    execute_process(COMMAND ${GO} tool pprof ${mode} ${OUT}/${file}.pb.gz
                    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "go tool pprof ${mode} ${file}.pb.gz failed: ${err}")
    endif()
    if(mode STREQUAL "-raw")
      continue() # -raw prints addresses, not names, for unsymbolized input
    endif()
    foreach(name ${names})
      if(NOT text MATCHES "(^|[ \t\n])${name}([ \t\n]|$)")
        message(FATAL_ERROR "go tool pprof ${mode} ${file}.pb.gz does not name ${name}:\n${text}\n${err}")
      endif()
    endforeach()
  endforeach()
  message(STATUS "${file}.pb.gz: go tool pprof names ${names}")
endforeach()
