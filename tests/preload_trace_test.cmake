# PPRT_TRACE on an unmodified program (cpu_burn), read back with trace_check:
#   1. the trace decodes; the program's two threads are in it with their
#      start, end and OS name ("burner"); with PPRT_CPUPROFILE too, the CPU
#      samples; the exit status is the program's; the exec'd child writes
#      path.<pid>;
#   2. the JSON export parses (python3's json, where there is a python3);
#   3. a process that execs leaves a complete trace;
#   4. an unwritable path is one line on stderr, the program unharmed.
# Inputs: -DPRELOAD= -DBURN= -DCHECK= (tests/trace_check.c) -DPYTHON= -DOUT=
include(${CMAKE_CURRENT_LIST_DIR}/cli_lib.cmake)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

run_preloaded(a PPRT_TRACE=${OUT}/trace.pprt PPRT_CPUPROFILE=${OUT}/cpu.pb.gz
              PPRT_CPUPROFILE_HZ=250 ${BURN} 0.5 3 ${BURN})
if(NOT a_rc EQUAL 3)
  message(FATAL_ERROR "exit status ${a_rc}, want 3 (the program's own): ${a_err}")
endif()
if(NOT a_err STREQUAL "")
  message(FATAL_ERROR "unexpected stderr: ${a_err}")
endif()
run(t ${CHECK} ${OUT}/trace.pprt ${OUT}/trace.json)
expect(t 0 "" "trace_check")
set(facts "${t_out}")
string(REGEX MATCHALL "thread [0-9]+ name=burner start=1 end=1" burners "${facts}")
list(LENGTH burners nburners)
if(NOT nburners EQUAL 2)
  message(FATAL_ERROR "want two threads named burner with start and end:\n${facts}")
endif()
expect_match("${facts}" "cpu_sample [1-9]" "no CPU samples in the trace")
expect_match("${facts}" "lost 0" "events lost")
file(GLOB children ${OUT}/trace.pprt.*)
list(LENGTH children nchild)
if(NOT nchild EQUAL 1)
  message(FATAL_ERROR "want one child trace trace.pprt.<pid>, found: ${children}")
endif()
run(t ${CHECK} ${children})
expect(t 0 "" "trace_check on the child's trace")
message(STATUS "trace: two burner threads with start, end and name; CPU samples; child's own file")

if(PYTHON)
  execute_process(COMMAND ${PYTHON} -c
    "import json,sys; d=json.load(open(sys.argv[1])); e=d['traceEvents']; \
assert any(x['ph']=='M' and x['name']=='thread_name' and x['args']['name']=='burner' for x in e); \
assert any(x['ph']=='i' and x['name']=='cpu sample' for x in e); print(len(e))"
    ${OUT}/trace.json RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "python3 json on the export: ${err}")
  endif()
  string(STRIP "${out}" out)
  message(STATUS "python3 json reads the export: ${out} events")
endif()

# A traced process that execs (its exit handlers never run): the file is
# complete up to the exec, as the exec wrapper ends the generation.
run_preloaded(e PPRT_TRACE=${OUT}/exec.pprt ${BURN} 0.2 5 ${BURN} exec)
if(NOT e_rc EQUAL 5)
  message(FATAL_ERROR "exec'd program: exit ${e_rc}, want 5: ${e_err}")
endif()
run(t ${CHECK} ${OUT}/exec.pprt)
if(NOT t_rc EQUAL 0 OR NOT t_out MATCHES "name=burner start=1 end=1")
  message(FATAL_ERROR "the trace of a process that exec'd: ${t_err}\n${t_out}")
endif()
message(STATUS "a process that execs leaves a complete trace")

run_preloaded(c PPRT_TRACE=${OUT}/no/such/dir/x.pprt ${BURN} 0.1 0)
if(NOT c_rc EQUAL 0 OR NOT c_err MATCHES "^pprt: cannot open PPRT_TRACE=.*No such file[^\n]*not tracing\n$")
  message(FATAL_ERROR "unwritable path: exit ${c_rc}, stderr [${c_err}]")
endif()
message(STATUS "bad PPRT_TRACE: one line, program unharmed")
