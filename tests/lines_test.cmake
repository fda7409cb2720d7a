# Source lines and inline frames, read back with the reference reader, go
# tool pprof. lines_victim (-O2 -g) writes a CPU and a heap profile; each
# run's binary is moved away before reading, so pprof cannot symbolize on
# its own and everything it shows came from pprt:
#
#   full      the binary with its DWARF: -lines -top shows the loop's
#             file:line, -traces the inlined function above its caller,
#             -list the source with samples on the loop's line; the heap
#             profile's allocation site has its file:line; pprt top --lines,
#             collapse --lines, flame, and the trace's Chrome JSON export.
#   stripped  no symbols, no DWARF; its debug file under a temporary
#             .build-id tree named by PPRT_DEBUG_DIRS: lines are found.
#   debuglink the same, its debug file found by .gnu_debuglink in .debug/.
#   nodwarf   DWARF stripped, symbols kept: names only, the mapping's flags
#             false, and go tool pprof -symbolize=local then adds the lines
#             itself from the -g binary (same build id) put in its place.
#
# -DMODE=lto: the program built with -flto, whose inlined instances point
# into another unit (DW_FORM_ref_addr): the inlined function's name and
# lines, as in full. -DMODE=fallback: a build without a DWARF reader.
#
#   dwz       stripped, its debug file run through dwz -m with a second
#             build's: the inlined function's DIE is in the alternate file.
#
# -DGO= -DPROGRAM= -DSOURCE= -DOBJCOPY= -DOUT= [-DPPRT=the pprt command] [-DMODE=fallback|lto]
# [-DDWZ= -DPROGRAM2=]
if(NOT GO)
  message("SKIP: go not found; go tool pprof is the reference reader")
  return()
endif()

# The lines the test expects, from the markers in the source.
file(STRINGS ${SOURCE} src)
set(n 0)
foreach(l IN LISTS src)
  math(EXPR n "${n} + 1")
  foreach(mark LOOP CALL ALLOC)
    if(l MATCHES "LINES_${mark} \\*/")
      set(${mark} ${n})
    endif()
  endforeach()
endforeach()
if(NOT LOOP OR NOT CALL OR NOT ALLOC)
  message(FATAL_ERROR "markers not found in ${SOURCE}")
endif()
get_filename_component(srcname ${SOURCE} NAME)

file(REMOVE_RECURSE ${OUT})
foreach(d full stripped debuglink nodwarf dbg)
  file(MAKE_DIRECTORY ${OUT}/${d})
endforeach()

function(run what)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ARGN} ${OUT}/${what}/lines_victim
                          ${OUT}/${what} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "lines_victim (${what}) failed (${rc}): ${o} ${e}")
  endif()
  # Moved away: pprof must not find it.
  file(REMOVE ${OUT}/${what}/lines_victim)
endfunction()

# pprof ARGS... -> text; fails the test if pprof does.
function(pprof var)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PPROF_BINARY_PATH=${OUT}/nowhere ${GO}
                          tool pprof ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "go tool pprof ${ARGN} failed: ${e}")
  endif()
  set(${var} "${o}" PARENT_SCOPE)
endfunction()

function(expect text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: no match for '${regex}' in:\n${text}")
  endif()
endfunction()

# A build without libdw (-DMODE=fallback): names, every mapping flag false,
# and a comment that says why there are no lines.
if(MODE STREQUAL "fallback")
  file(COPY ${PROGRAM} DESTINATION ${OUT}/full)
  execute_process(COMMAND ${OUT}/full/lines_victim ${OUT}/full RESULT_VARIABLE rc ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "lines_victim failed (${rc}): ${e}")
  endif()
  file(REMOVE ${OUT}/full/lines_victim)
  pprof(comments -comments ${OUT}/full/cpu.pb.gz)
  expect("${comments}" "symbolized: names only \\(this build of pprt has no DWARF reader: PPRT_SYMBOLIZER=elf\\)"
         "fallback: the comment")
  pprof(raw -raw ${OUT}/full/cpu.pb.gz)
  expect("${raw}" "Mappings\n1: [^\n]*lines_victim [0-9a-f]+ *\n" "fallback: no flags on the main mapping")
  pprof(top -top ${OUT}/full/cpu.pb.gz)
  expect("${top}" "lines_caller" "fallback: names")
  message(STATUS "fallback: names only, flags false, and the comment says why")
  return()
endif()

file(COPY ${PROGRAM} DESTINATION ${OUT}/full)
run(full)

if(MODE STREQUAL "lto")
  pprof(traces_lines -traces -lines ${OUT}/full/cpu.pb.gz)
  expect("${traces_lines}" "lines_mix [^\n]*:${LOOP}[^\n]*\n[^\n]*lines_caller[^ ]* [^\n]*:${CALL}[ \n]"
         "lto: -traces -lines (the inlined function named, above its caller)")
  message(STATUS "lto: ${srcname}:${LOOP} in lines_mix, inlined into lines_caller at :${CALL}")
  return()
endif()

pprof(top -lines -top ${OUT}/full/cpu.pb.gz)
expect("${top}" "lines_mix [^\n]*${srcname}:${LOOP}[ \n]" "full: -lines -top")
string(REGEX MATCH "Build ID: ([0-9a-f]+)" _ "${top}")
set(build_id ${CMAKE_MATCH_1})
if(NOT build_id)
  message(FATAL_ERROR "no build id in:\n${top}")
endif()
pprof(traces -traces ${OUT}/full/cpu.pb.gz)
expect("${traces}" "lines_mix[^\n]*\n[^\n]*lines_caller" "full: -traces (inlined frame above its caller)")
pprof(traces_lines -traces -lines ${OUT}/full/cpu.pb.gz)
expect("${traces_lines}" "lines_mix [^\n]*:${LOOP}[^\n]*\n[^\n]*lines_caller [^\n]*:${CALL}[ \n]"
       "full: -traces -lines (the caller's line is the call's)")
get_filename_component(srcdir ${SOURCE} DIRECTORY)
pprof(list -source_path ${srcdir} -list lines_caller ${OUT}/full/cpu.pb.gz)
# "     flat        cum     LINE: source". pprof lists an inlined function's
# lines under its own name: the caller's listing has the loop's samples as
# cum on the call's line, the inlined function's has them on the loop's line.
expect("${list}" "\n +\\. +[0-9.]+m?s +${CALL}:" "full: -list lines_caller")
pprof(list -source_path ${srcdir} -list lines_mix ${OUT}/full/cpu.pb.gz)
expect("${list}" "\n +[0-9.]+m?s +[0-9.]+m?s +${LOOP}:" "full: -list lines_mix")
pprof(raw -raw ${OUT}/full/cpu.pb.gz)
expect("${raw}" "Mappings\n1: [^\n]*lines_victim [0-9a-f]+ \\[FN\\]\\[FL\\]\\[LN\\]\\[IN\\]"
       "full: the main mapping's flags")
pprof(heap -sample_index=alloc_space -lines -top ${OUT}/full/heap.pb.gz)
expect("${heap}" "lines_alloc [^\n]*${srcname}:${ALLOC}[ \n]" "full: heap -lines -top")
message(STATUS "full: ${srcname}:${LOOP} in lines_mix, inlined into lines_caller at :${CALL}; heap site :${ALLOC}")

# The pprt command on the same profile: top --lines, collapse --lines, the
# flame graph's inline marks and file:line tooltips; and the trace's export.
if(PPRT)
  function(pprt_cmd var)
    execute_process(COMMAND ${PPRT} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "pprt ${ARGN} failed: ${e}")
    endif()
    set(${var} "${o}" PARENT_SCOPE)
  endfunction()
  pprt_cmd(top top --lines -n 0 ${OUT}/full/cpu.pb.gz)
  expect("${top}" "  lines_mix ${srcname}:${LOOP}\n" "pprt top --lines")
  pprt_cmd(top top -n 0 ${OUT}/full/cpu.pb.gz)
  expect("${top}" "  lines_mix\n" "pprt top (the inlined function has its own row)")
  pprt_cmd(folded collapse --lines ${OUT}/full/cpu.pb.gz)
  expect("${folded}" ";lines_caller ${srcname}:${CALL};lines_mix ${srcname}:${LOOP} [0-9]+\n"
         "pprt collapse --lines")
  pprt_cmd(page flame -o - ${OUT}/full/cpu.pb.gz)
  expect("${page}" "\"lines_mix \\(inline\\)\"" "pprt flame: the inline mark")
  # names[i] and where[i] go together: find lines_mix's index in names.
  string(REGEX MATCH "\"names\":\\[(\"all\"[^]]*)\\]" _ "${page}")
  string(REPLACE "," ";" names_list "${CMAKE_MATCH_1}")
  list(FIND names_list "\"lines_mix (inline)\"" at)
  string(REGEX MATCH "\"where\":\\[(null[^]]*)\\]" _ "${page}")
  string(REPLACE "," ";" where_list "${CMAKE_MATCH_1}")
  list(GET where_list ${at} where)
  expect("${where}" "^\"${srcname}:[0-9]+\"$" "pprt flame: lines_mix's tooltip file:line")
  message(STATUS "pprt: top --lines, collapse --lines, flame (inline mark, ${where})")
  # The trace's CPU samples: the stack table's source lines in the export.
  pprt_cmd(json trace export ${OUT}/full/trace.pprt -o -)
  expect("${json}" "\"lines_mix [^\"]*/${srcname}:${LOOP} \\(inline\\)\",\"lines_caller [^\"]*/${srcname}:${CALL}\""
         "pprt trace export: sample stacks with file:line")
  message(STATUS "trace: lines_mix ${srcname}:${LOOP} (inline), lines_caller ${srcname}:${CALL}")
endif()

# Stripped, with a separate debug file found by build id.
string(SUBSTRING ${build_id} 0 2 bid_dir)
string(SUBSTRING ${build_id} 2 -1 bid_rest)
file(MAKE_DIRECTORY ${OUT}/dbg/.build-id/${bid_dir})
execute_process(COMMAND ${OBJCOPY} --only-keep-debug ${PROGRAM}
                        ${OUT}/dbg/.build-id/${bid_dir}/${bid_rest}.debug RESULT_VARIABLE rc1)
execute_process(COMMAND ${OBJCOPY} --strip-all ${PROGRAM} ${OUT}/stripped/lines_victim
                RESULT_VARIABLE rc2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "objcopy failed")
endif()
run(stripped PPRT_DEBUG_DIRS=${OUT}/dbg)
pprof(top -lines -top ${OUT}/stripped/cpu.pb.gz)
expect("${top}" "lines_mix [^\n]*${srcname}:${LOOP}[ \n]" "stripped: -lines -top")
message(STATUS "stripped: lines from ${OUT}/dbg/.build-id/${bid_dir}/${bid_rest}.debug")

# Stripped, its debug file through dwz: the DIEs it shares with a second
# build of the same source (PROGRAM2), lines_mix's abstract function among
# them, moved into an alternate file that .gnu_debugaltlink names by a
# path that does not exist and by build id: found by build id.
if(DWZ AND PROGRAM2)
  file(MAKE_DIRECTORY ${OUT}/dwz/work)
  foreach(p PROGRAM PROGRAM2)
    execute_process(COMMAND ${OBJCOPY} --only-keep-debug ${${p}} ${OUT}/dwz/work/${p}.debug
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "objcopy (dwz) failed")
    endif()
  endforeach()
  execute_process(COMMAND ${DWZ} -m ${OUT}/dwz/work/common.debug -M /nonexistent/common.debug
                          ${OUT}/dwz/work/PROGRAM.debug ${OUT}/dwz/work/PROGRAM2.debug
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  execute_process(COMMAND ${OBJCOPY} --dump-section .gnu_debugaltlink=${OUT}/dwz/work/altlink
                          ${OUT}/dwz/work/PROGRAM.debug RESULT_VARIABLE rc2 OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0)
    message(FATAL_ERROR "dwz -m made no alternate file (${rc}, ${rc2}): ${o} ${e}")
  endif()
  # The alternate file's build id: the bytes after the path (given to -M)
  # and its NUL. (Not by the first 00 byte: a build id may hold one.)
  file(READ ${OUT}/dwz/work/altlink link HEX)
  string(LENGTH "/nonexistent/common.debug" path_len)
  math(EXPR skip "(${path_len} + 1) * 2")
  string(SUBSTRING "${link}" ${skip} -1 alt_id)
  string(LENGTH "${alt_id}" n)
  if(n LESS 4)
    message(FATAL_ERROR "no build id in .gnu_debugaltlink: ${link}")
  endif()
  foreach(f ${build_id}:PROGRAM ${alt_id}:common)
    string(REPLACE ":" ";" f ${f})
    list(GET f 0 id)
    list(GET f 1 name)
    string(SUBSTRING ${id} 0 2 d)
    string(SUBSTRING ${id} 2 -1 rest)
    file(MAKE_DIRECTORY ${OUT}/dwz/dbg/.build-id/${d})
    file(RENAME ${OUT}/dwz/work/${name}.debug ${OUT}/dwz/dbg/.build-id/${d}/${rest}.debug)
  endforeach()
  execute_process(COMMAND ${OBJCOPY} --strip-all ${PROGRAM} ${OUT}/dwz/lines_victim
                  RESULT_VARIABLE rc)
  run(dwz PPRT_DEBUG_DIRS=${OUT}/dwz/dbg)
  pprof(traces_lines -traces -lines ${OUT}/dwz/cpu.pb.gz)
  expect("${traces_lines}" "lines_mix [^\n]*:${LOOP}[^\n]*\n[^\n]*lines_caller [^\n]*:${CALL}[ \n]"
         "dwz: -traces -lines (the inlined function's DIE in the alternate file)")
  message(STATUS "dwz: lines_mix named from the alternate file ${alt_id}")
else()
  message(STATUS "dwz: not run (dwz not found)")
endif()

# Stripped, with its debug file found by .gnu_debuglink in the .debug
# directory next to it (no build-id tree holds it).
file(MAKE_DIRECTORY ${OUT}/debuglink/.debug)
execute_process(COMMAND ${OBJCOPY} --only-keep-debug ${PROGRAM}
                        ${OUT}/debuglink/.debug/lines_victim.debug RESULT_VARIABLE rc1)
execute_process(COMMAND ${OBJCOPY} --strip-all
                        --add-gnu-debuglink=${OUT}/debuglink/.debug/lines_victim.debug
                        ${PROGRAM} ${OUT}/debuglink/lines_victim RESULT_VARIABLE rc2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "objcopy (debuglink) failed")
endif()
run(debuglink)
pprof(top -lines -top ${OUT}/debuglink/cpu.pb.gz)
expect("${top}" "lines_mix [^\n]*${srcname}:${LOOP}[ \n]" "debuglink: -lines -top")
message(STATUS "debuglink: lines from ${OUT}/debuglink/.debug/lines_victim.debug")

# No DWARF: names only, flags false; pprof adds the lines from the -g copy.
execute_process(COMMAND ${OBJCOPY} --strip-debug ${PROGRAM} ${OUT}/nodwarf/lines_victim
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objcopy --strip-debug failed")
endif()
run(nodwarf)
pprof(raw -raw ${OUT}/nodwarf/cpu.pb.gz)
expect("${raw}" "Mappings\n1: [^\n]*lines_victim [0-9a-f]+ *\n" "nodwarf: no flags on the main mapping")
pprof(top -top ${OUT}/nodwarf/cpu.pb.gz)
expect("${top}" "lines_caller" "nodwarf: names from the symbol table")
if(top MATCHES "${srcname}")
  message(FATAL_ERROR "nodwarf: a file name without DWARF:\n${top}")
endif()
# Go's pprof reads no build ids from files, so it takes a binary found on
# PPROF_BINARY_PATH as a mismatch; the -g copy goes where the mapping says.
file(COPY ${PROGRAM} DESTINATION ${OUT}/nodwarf)
execute_process(COMMAND ${GO} tool pprof -symbolize=local -lines -top ${OUT}/nodwarf/cpu.pb.gz
                RESULT_VARIABLE rc OUTPUT_VARIABLE top ERROR_VARIABLE e)
expect("${top}" "${srcname}:${LOOP}[ \n]" "nodwarf: go tool pprof -symbolize=local (${e})")
message(STATUS "nodwarf: names only, flags false; pprof -symbolize=local found ${srcname}:${LOOP}")
