# C++ names: cxx_victim's profile names its functions demangled, with the
# mangled names as system names, in go tool pprof and in pprt top.
# -DGO= -DPROGRAM= -DPPRT= -DOUT=
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${PROGRAM} ${OUT}/cpu.pb.gz RESULT_VARIABLE rc OUTPUT_VARIABLE o
                ERROR_VARIABLE e)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cxx_victim failed (${rc}): ${o} ${e}")
endif()

function(expect text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: no match for '${regex}' in:\n${text}")
  endif()
endfunction()

execute_process(COMMAND ${PPRT} top -n 0 ${OUT}/cpu.pb.gz RESULT_VARIABLE rc OUTPUT_VARIABLE top
                ERROR_VARIABLE e)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pprt top failed: ${e}")
endif()
expect("${top}" "  demo::Thrower::run\\(int\\)\n" "pprt top")
expect("${top}" "  operator new\\(unsigned long\\)\n|  std::runtime_error::" "pprt top (libstdc++)")
if(top MATCHES "  _Z")
  message(FATAL_ERROR "pprt top shows a mangled name:\n${top}")
endif()

if(NOT GO)
  message("SKIP: go not found; pprt top's names were checked, go tool pprof's were not")
  return()
endif()
# -symbolize=none: what is shown is what pprt wrote, not pprof's demangling.
execute_process(COMMAND ${GO} tool pprof -symbolize=none -top ${OUT}/cpu.pb.gz
                RESULT_VARIABLE rc OUTPUT_VARIABLE top ERROR_VARIABLE e)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "go tool pprof -top failed: ${e}")
endif()
expect("${top}" " demo::Thrower::run" "go tool pprof -top")
execute_process(COMMAND ${GO} tool pprof -symbolize=none -raw ${OUT}/cpu.pb.gz
                RESULT_VARIABLE rc OUTPUT_VARIABLE raw ERROR_VARIABLE e)
# -raw prints "name file:line:column s=start(system name)" when they differ.
expect("${raw}" "demo::Thrower::run\\(int\\) [^\n]*\\(_ZN4demo7Thrower3runEi\\)" "go tool pprof -raw")
message(STATUS "demangled: demo::Thrower::run(int), system name _ZN4demo7Thrower3runEi")
