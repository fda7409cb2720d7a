# The preload library on an unmodified program (cpu_burn):
#   1. PPRT_CPUPROFILE writes a profile at exit; the program's exit status is
#      kept; go tool pprof -top shows its hot functions and the thread name;
#      a child it forks and execs writes its own file (path.<pid>), not ours;
#   2. an unusable variable gives one line on stderr, no profile, and the
#      program runs as usual.
# Inputs: -DPRELOAD= -DBURN= -DGO= (empty without go) -DOUT=
include(${CMAKE_CURRENT_LIST_DIR}/cli_lib.cmake)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

run_preloaded(a PPRT_CPUPROFILE=${OUT}/cpu.pb.gz PPRT_CPUPROFILE_HZ=250 ${BURN} 1.5 3 ${BURN})
if(NOT a_rc EQUAL 3)
  message(FATAL_ERROR "exit status ${a_rc}, want 3 (the program's own): ${a_err}")
endif()
if(NOT EXISTS ${OUT}/cpu.pb.gz)
  message(FATAL_ERROR "no profile written: ${a_err}")
endif()
file(GLOB child_profiles ${OUT}/cpu.pb.gz.*)
list(LENGTH child_profiles nchild)
if(NOT nchild EQUAL 1)
  message(FATAL_ERROR "want one child profile cpu.pb.gz.<pid>, found: ${child_profiles}")
endif()
if(GO)
  foreach(f ${OUT}/cpu.pb.gz ${child_profiles})
    run(top ${GO} tool pprof -top -tagshow=thread_name ${f})
    if(NOT top_rc EQUAL 0 OR NOT top_out MATCHES "burn_hot_inner")
      message(FATAL_ERROR "go tool pprof -top ${f}: no burn_hot_inner:\n${top_out}\n${top_err}")
    endif()
  endforeach()
  execute_process(COMMAND ${GO} tool pprof -tags ${OUT}/cpu.pb.gz OUTPUT_VARIABLE tags)
  if(NOT tags MATCHES "burner")
    message(FATAL_ERROR "thread_name label 'burner' missing:\n${tags}")
  endif()
  message(STATUS "go tool pprof -top names burn_hot_inner; thread_name burner present")
else()
  message(STATUS "go not found: profiles written, names not checked")
endif()

# A profiled process that execs a program which is not profiled: the
# process timer must not follow it across exec (it would die of SIGPROF).
run_preloaded(e PPRT_CPUPROFILE=${OUT}/exec.pb.gz PPRT_CPUPROFILE_TIMER=process ${BURN} 0.3 5 ${BURN} exec)
if(NOT e_rc EQUAL 5)
  message(FATAL_ERROR "exec'd program: exit ${e_rc}, want 5: ${e_err}")
endif()
message(STATUS "an exec'd, unprofiled program is not killed by the profiling timer")

# Unusable settings: one clear line, no profile, the program unharmed.
foreach(bad "PPRT_CPUPROFILE_HZ=abc" "PPRT_CPUPROFILE_HZ=0" "PPRT_CPUPROFILE_TIMER=fast"
            "PPRT_SYMBOLIZE=maybe")
  file(REMOVE ${OUT}/bad.pb.gz)
  run_preloaded(b PPRT_CPUPROFILE=${OUT}/bad.pb.gz ${bad} ${BURN} 0.1 0)
  string(REGEX REPLACE "=.*" "" var "${bad}")
  if(NOT b_rc EQUAL 0 OR NOT b_err MATCHES "^pprt: ${var}=[^\n]*not profiling\n$")
    message(FATAL_ERROR "${bad}: exit ${b_rc}, stderr [${b_err}]")
  endif()
  if(EXISTS ${OUT}/bad.pb.gz)
    message(FATAL_ERROR "${bad}: a profile was written anyway")
  endif()
endforeach()
run_preloaded(c PPRT_CPUPROFILE=${OUT}/no/such/dir/x.pb.gz ${BURN} 0.1 0)
if(NOT c_rc EQUAL 0 OR NOT c_err MATCHES "cannot open PPRT_CPUPROFILE=.*No such file")
  message(FATAL_ERROR "unwritable path: exit ${c_rc}, stderr [${c_err}]")
endif()
message(STATUS "bad settings: one line each, program unharmed")
