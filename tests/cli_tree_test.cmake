# pprt record on process trees, and the views that read several profiles
# (tests/CMakeLists.txt registers it as cli_tree):
#
#   - a small C project built with make -j2 under pprt record (make, the
#     compiler driver, cc1, as, ld: each its own process): the merged
#     cpu.pb.gz holds >= 80% of the tree's CPU time (the rusage pprt record
#     reports, which counts every waited-for descendant), pprt top --by
#     process shows cc1, collapse --by process (with --lines too) puts each
#     stack under its program, trace.json has a pid per process named after it;
#   - a shell pipeline: both sides are in the merged profile (--no-procs:
#     only the merged outputs are left);
#   - a shell that execs: the later image has its own files, both merged;
#   - the summary's ending is the program's, not a child's;
#   - a truncated child profile or trace is named and left out, the merge
#     goes on;
#   - pprt top a b equals pprt top of pprt merge a b, and of record's merge;
#     profiles of other sample types are refused with both files named.
#
# Inputs: -DPPRT= -DBURN= -DVICTIM= -DOUT=
cmake_minimum_required(VERSION 3.16)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

# run, expect: each command within 240 s (a make -j2 under pprt record).
set(cli_timeout 240)
include(${CMAKE_CURRENT_LIST_DIR}/cli_lib.cmake)

# seconds(<var> <text>): "1.25s" / "12.5ms" / "300us" as seconds.
function(seconds var text)
  string(REGEX MATCH "^([0-9.]+)(s|ms|us|ns)$" _ "${text}")
  set(v ${CMAKE_MATCH_1})
  set(scale 1)
  if(CMAKE_MATCH_2 STREQUAL "ms")
    set(scale 1000)
  elseif(CMAKE_MATCH_2 STREQUAL "us")
    set(scale 1000000)
  elseif(CMAKE_MATCH_2 STREQUAL "ns")
    set(scale 1000000000)
  endif()
  # CMake's math() is integer only: microseconds.
  string(REGEX MATCH "^([0-9]+)\\.?([0-9]*)$" _ "${v}")
  set(whole "${CMAKE_MATCH_1}")
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 frac)
  if(whole STREQUAL "")
    message(FATAL_ERROR "not a duration: '${text}'")
  endif()
  math(EXPR us "(${whole} * 1000000 + 1${frac} - 1000000) / ${scale}")
  set(${var} ${us} PARENT_SCOPE)
endfunction()

# ---- a make -j2 project --------------------------------------------------------------
find_program(MAKE_PROG NAMES make gmake)
find_program(CC_PROG NAMES cc gcc clang)
if(NOT MAKE_PROG OR NOT CC_PROG)
  message(STATUS "SKIP: make or cc not found (the process tree test needs both)")
  return()
endif()

set(proj ${OUT}/proj)
file(MAKE_DIRECTORY ${proj})
# Four units with enough code that cc1 works for a while at -O2.
set(objs "")
foreach(u 1 2 3 4)
  set(body "")
  foreach(f RANGE 1 120)
    string(APPEND body "static int f${u}_${f}(int *a, int n) {\n"
           "  int s = 0;\n  for (int i = 0; i < n; i++) {\n"
           "    s += a[i] * ${f} + (s >> 3);\n    if (s > 1000 + ${f}) s ^= a[(i * 7) % n];\n"
           "    for (int j = i; j < n && j < i + ${f}; j++) s += a[j] ^ (s << 1);\n  }\n"
           "  return s;\n}\n")
  endforeach()
  string(APPEND body "int unit${u}(int *a, int n) {\n  int s = 0;\n")
  foreach(f RANGE 1 120)
    string(APPEND body "  s += f${u}_${f}(a, n);\n")
  endforeach()
  string(APPEND body "  return s;\n}\n")
  file(WRITE ${proj}/unit${u}.c "${body}")
  list(APPEND objs unit${u}.o)
endforeach()
file(WRITE ${proj}/main.c
     "int unit1(int *, int); int unit2(int *, int); int unit3(int *, int);\n"
     "int unit4(int *, int);\nint main(void) { int a[4] = {1, 2, 3, 4};\n"
     "  return (unit1(a, 4) + unit2(a, 4) + unit3(a, 4) + unit4(a, 4)) & 1; }\n")
string(REPLACE ";" " " objs_s "${objs}")
file(WRITE ${proj}/Makefile
     "CC = ${CC_PROG}\nCFLAGS = -O2\nprog: main.o ${objs_s}\n\t$(CC) -o $@ main.o ${objs_s}\n"
     "%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\nclean:\n\trm -f prog *.o\n")

# Names, not lines: with libdw, symbolizing source lines at each process's
# exit, after its profile stopped, is CPU the tree's rusage counts and no
# profile holds (measured: 9.5 s of CPU for the tree instead of 5.4 s, the
# profile 65% of it instead of 88%), and this ratio checks the merge, not
# the symbolizer.
set(ENV{PPRT_SYMBOLIZE} names)
run(m ${PPRT} record -o ${OUT}/m --hz 250 -- ${MAKE_PROG} -j2 -C ${proj})
unset(ENV{PPRT_SYMBOLIZE})
expect(m 0 "exited with status 0" "pprt record make -j2")
if(NOT EXISTS ${proj}/prog)
  message(FATAL_ERROR "make under pprt record built nothing:\n${m_err}")
endif()
foreach(want "cpu.pb.gz: merged from [0-9]+ processes' files" "top processes by CPU"
        "trace.json: the traces of [0-9]+ processes")
  if(NOT m_err MATCHES "${want}")
    message(FATAL_ERROR "the summary lacks '${want}':\n${m_err}")
  endif()
endforeach()

# The tree's CPU time: pprt record's "(N s CPU)", the rusage of make and
# every descendant it waited for (they all wait for theirs).
string(REGEX MATCH "after [0-9.]+ s \\(([0-9.]+) s CPU\\)" _ "${m_err}")
seconds(tree_us "${CMAKE_MATCH_1}s")
run(t ${PPRT} top -n 5 ${OUT}/m/cpu.pb.gz)
string(REGEX MATCH "Total samples = ([0-9.]+[a-z]*s)" _ "${t_out}")
seconds(prof_us "${CMAKE_MATCH_1}")
if(tree_us LESS 100000)
  message(FATAL_ERROR "make used only ${tree_us} us of CPU: the project is too small to test")
endif()
# Measured on this project at --hz 250 (8 runs, 2 shared cores): 88.1% on
# average, standard deviation 0.8 points, so mean - 4 sd = 84.7%; the 80%
# asked stays under it. The rest is each process's start before the preload
# library runs and its end after the profile is written.
math(EXPR pct "100 * ${prof_us} / ${tree_us}")
message(STATUS "make -j2: the tree used ${tree_us} us of CPU, the merged profile holds "
               "${prof_us} us (${pct}%)")
if(pct LESS 80)
  message(FATAL_ERROR "the merged profile holds ${pct}% of the tree's CPU time (want >= 80%):\n"
                      "${m_err}\n${t_out}")
endif()

run(b ${PPRT} top --by process -n 0 ${OUT}/m/cpu.pb.gz)
expect(b 0 "^$" "pprt top --by process")
if(NOT b_out MATCHES "\n +[0-9.]+[a-z]*s +[0-9.]+% +[0-9.]+% +[0-9]+  cc1\n")
  message(FATAL_ERROR "pprt top --by process does not show cc1:\n${b_out}")
endif()
# The pids counted are those with samples: a cc1 that ends within a few
# sampling periods may have none (seen once on a loaded machine), so the
# check is that the merge kept several cc1 processes apart, not all five.
string(REGEX MATCH "([0-9]+)  cc1\n" _ "${b_out}")
if(CMAKE_MATCH_1 LESS 2)
  message(FATAL_ERROR "want cc1 run by several pids (5 units), got ${CMAKE_MATCH_1}:\n${b_out}")
endif()
message(STATUS "top --by process:\n${b_out}")

# collapse --by process: every stack under its program's frame.
# With --lines too: the same roots, and the root frame has no line of its own.
foreach(lines "" --lines)
  run(c ${PPRT} collapse --by process ${lines} ${OUT}/m/cpu.pb.gz)
  expect(c 0 "^$" "pprt collapse --by process ${lines}")
  # (Lines hold ';', CMake's list separator: lines are not counted as a list.)
  string(REGEX REPLACE "(^|\n)process [^\n]*" "" rest "${c_out}")
  string(STRIP "${rest}" rest)
  if(NOT rest STREQUAL "" OR NOT c_out MATCHES "(^|\n)process cc1;")
    message(FATAL_ERROR
      "collapse --by process ${lines}: stacks not under a process frame:\n${rest}")
  endif()
endforeach()
run(f ${PPRT} flame --by process -o ${OUT}/m/flame.html ${OUT}/m/cpu.pb.gz)
file(READ ${OUT}/m/flame.html html)
if(NOT f_rc EQUAL 0 OR NOT html MATCHES "\"process cc1\"")
  message(FATAL_ERROR "flame --by process has no \"process cc1\" frame:\n${f_err}")
endif()

# trace.json: a process_name for every pid of an event, cc1 among them.
file(READ ${OUT}/m/trace.json json)
string(REGEX MATCHALL "\"pid\":[0-9]+,\"tid\":0,\"name\":\"process_name\",\"args\":\\{\"name\":\"[^\"]+\""
       named "${json}")
string(REGEX MATCHALL "\"pid\":[0-9]+" pids "${json}")
list(REMOVE_DUPLICATES pids)
list(LENGTH named nnamed)
list(LENGTH pids npids)
if(NOT nnamed EQUAL npids OR npids LESS 8)
  message(FATAL_ERROR "trace.json names ${nnamed} of ${npids} processes (want all, >= 8)")
endif()
foreach(prog make cc1)
  if(NOT json MATCHES "\"name\":\"process_name\",\"args\":\\{\"name\":\"${prog}\"\\}")
    message(FATAL_ERROR "trace.json has no process named ${prog}")
  endif()
endforeach()
# One time axis: make starts before any process it runs, so its first event
# comes first; with each trace left at its own origin all would start at 0.
string(REGEX MATCHALL "\"pid\":[0-9]+,\"tid\":[0-9]+,\"ts\":[0-9]+" stamps "${json}")
string(REGEX MATCH "\"pid\":([0-9]+),\"tid\":0,\"name\":\"process_name\",\"args\":\\{\"name\":\"make\"\\}"
       _ "${json}")
set(make_pid ${CMAKE_MATCH_1})
set(first_make "")
set(first_other "")
foreach(st ${stamps})
  string(REGEX MATCH "\"pid\":([0-9]+),\"tid\":[0-9]+,\"ts\":([0-9]+)" _ "${st}")
  if(CMAKE_MATCH_1 STREQUAL make_pid)
    if(first_make STREQUAL "" OR CMAKE_MATCH_2 LESS first_make)
      set(first_make ${CMAKE_MATCH_2})
    endif()
  elseif(first_other STREQUAL "" OR CMAKE_MATCH_2 LESS first_other)
    set(first_other ${CMAKE_MATCH_2})
  endif()
endforeach()
if(first_make STREQUAL "" OR first_other STREQUAL "" OR NOT first_make LESS first_other)
  message(FATAL_ERROR "trace.json: make's first event at ${first_make} us is not before its "
                      "children's first at ${first_other} us: not one time axis")
endif()
# The same document from pprt trace export of the files themselves.
file(GLOB traces ${OUT}/m/procs/trace.pprt.*)
run(e ${PPRT} trace export ${traces} -o ${OUT}/m/again.json)
expect(e 0 "wrote .*again.json" "pprt trace export of several traces")
file(READ ${OUT}/m/again.json again)
string(REGEX MATCHALL "\"name\":\"process_name\"" again_named "${again}")
list(LENGTH again_named n_again)
if(NOT n_again EQUAL nnamed)
  message(FATAL_ERROR "trace export of the files names ${n_again} processes, trace.json ${nnamed}")
endif()
# A bad trace among them is named, and nothing is written.
file(WRITE ${OUT}/bad.pprt "not a trace")
run(e ${PPRT} trace export ${traces} ${OUT}/bad.pprt -o ${OUT}/m/bad.json)
expect(e 3 "trace export: [^\n]*bad.pprt: " "pprt trace export with a bad trace")
if(EXISTS ${OUT}/m/bad.json)
  message(FATAL_ERROR "pprt trace export wrote bad.json from a bad trace")
endif()
message(STATUS "trace.json: ${npids} processes, each named, make's first event first "
               "(${first_make} us < ${first_other} us)")

# ---- several files: top of the files = top of their merge ---------------------------
file(GLOB procs ${OUT}/m/procs/cpu.pb.gz.*)
run(t1 ${PPRT} top -n 0 ${procs})
run(mg ${PPRT} merge -o ${OUT}/merged.pb.gz ${procs})
expect(mg 0 "wrote" "pprt merge")
run(t2 ${PPRT} top -n 0 ${OUT}/merged.pb.gz)
run(t3 ${PPRT} top -n 0 ${OUT}/m/cpu.pb.gz)
# The "File:" line names the first input's main binary: record puts the
# program's own first.
foreach(v t1 t2 t3)
  string(REGEX REPLACE "^File: [^\n]*\n" "" ${v}_out "${${v}_out}")
endforeach()
if(NOT t1_rc EQUAL 0 OR NOT t1_out STREQUAL t2_out OR NOT t1_out STREQUAL t3_out)
  message(FATAL_ERROR "pprt top of the files, of pprt merge and of record's merge differ:\n"
                      "${t1_out}\n---\n${t2_out}\n---\n${t3_out}")
endif()
list(GET procs 0 first)
run(x ${PPRT} top ${first} ${OUT}/m/heap.pb.gz)
expect(x 3 "cannot merge [^ ]*cpu.pb.gz[^ ]* and [^ ]*heap.pb.gz: different sample types.*cpu/nanoseconds.*alloc_space/bytes"
       "top of a CPU and a heap profile")
run(x ${PPRT} top --by= ${first})
expect(x 2 "--by needs a label key" "--by with no key")
run(x ${PPRT} merge ${first})
expect(x 2 "missing -o OUT" "pprt merge without -o")
run(x ${PPRT} merge -o ${OUT}/x.pb.gz ${first} ${OUT}/bad.pprt)
expect(x 3 "merge: [^\n]*bad.pprt: " "pprt merge with a bad file")
message(STATUS "top of several files = top of their merge; mixed types refused")

# ---- a shell pipeline ----------------------------------------------------------------
run(p ${PPRT} record -o ${OUT}/p --cpu --trace --no-procs --
    sh -c "${BURN} 0.4 0 | ${VICTIM} exit 0")
expect(p 0 "exited with status 0" "a pipeline")
# --no-procs: the merged outputs only.
if(EXISTS ${OUT}/p/procs OR NOT EXISTS ${OUT}/p/trace.pprt OR NOT EXISTS ${OUT}/p/trace.json)
  message(FATAL_ERROR "--no-procs: want trace.pprt and trace.json, no procs/:\n${p_err}")
endif()
run(b ${PPRT} top --by process ${OUT}/p/cpu.pb.gz)
get_filename_component(burn_name ${BURN} NAME)
get_filename_component(victim_name ${VICTIM} NAME)
if(NOT b_out MATCHES "  ${burn_name}\n" OR NOT b_out MATCHES "  ${victim_name}\n")
  message(FATAL_ERROR "the pipeline's merged profile lacks a side:\n${b_out}\n${p_err}")
endif()
run(t ${PPRT} top -n 0 ${OUT}/p/cpu.pb.gz)
if(NOT t_out MATCHES "burn_hot_inner" OR NOT t_out MATCHES "victim_burn")
  message(FATAL_ERROR "the pipeline's merged profile lacks a side's function:\n${t_out}")
endif()
message(STATUS "pipeline: both sides merged")

# ---- a process that execs ---------------------------------------------------------
# sh runs the burner, then execs the victim: one pid, two images. The later
# image writes FILE.<pid>.1 where the earlier one left a file (its trace up
# to the exec), and both programs are in the merge.
run(x ${PPRT} record -o ${OUT}/x -- sh -c "${BURN} 0.3 0 && exec ${VICTIM} exit 0")
expect(x 0 "exited with status 0" "a shell that execs")
run(b ${PPRT} top --by process ${OUT}/x/cpu.pb.gz)
if(NOT b_out MATCHES "  ${burn_name}\n" OR NOT b_out MATCHES "  ${victim_name}\n")
  message(FATAL_ERROR "the exec'd program or the child is not in the merge:\n${b_out}\n${x_err}")
endif()
file(GLOB later ${OUT}/x/procs/trace.pprt.*.1)
list(LENGTH later nlater)
if(NOT nlater EQUAL 1)
  message(FATAL_ERROR "want one trace.pprt.<pid>.1 for the exec'd image, have: ${later}")
endif()
file(READ ${OUT}/x/trace.json json)
foreach(prog sh ${victim_name} ${burn_name})
  if(NOT json MATCHES "\"name\":\"process_name\",\"args\":\\{\"name\":\"${prog}\"\\}")
    message(FATAL_ERROR "trace.json of the exec case has no process named ${prog}")
  endif()
endforeach()
message(STATUS "exec: the later image has its own files, all three programs merged")

# ---- how the program ended, not its child ------------------------------------------
# The child dies of SIGTERM (its profile says so); the program, cpu_burn,
# returns from main (10: its child failed): the summary's ending is the
# program's.
file(WRITE ${OUT}/term.sh "#!/bin/sh\nexec ${VICTIM} term\n")
file(CHMOD ${OUT}/term.sh PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
run(e ${PPRT} record -o ${OUT}/e --cpu -- ${BURN} 0.2 0 ${OUT}/term.sh)
expect(e 10 "ending seen: exit \\(written by the exit handlers\\)" "the program's own ending")
run(t ${PPRT} top --by process ${OUT}/e/cpu.pb.gz)
if(NOT t_out MATCHES "  ${victim_name}\n")
  message(FATAL_ERROR "the child killed by SIGTERM is not in the merge:\n${t_out}")
endif()
message(STATUS "ending: the program's, with its child's profile written at SIGTERM merged")

# ---- a truncated child profile -------------------------------------------------------
# A child killed while it wrote leaves part of a file: planted here from a
# real one, while the program runs (record clears procs/ when it starts).
# (No ";" in the command: run() would split it as a CMake list.)
# The largest trace of the make run, cut inside its first generation.
set(big "")
set(big_size 0)
foreach(t ${traces})
  file(SIZE ${t} size)
  if(size GREATER big_size)
    set(big ${t})
    set(big_size ${size})
  endif()
endforeach()
run(k ${PPRT} record -o ${OUT}/k --cpu --trace --
    sh -c "head -c 150 ${first} > ${OUT}/k/procs/cpu.pb.gz.999999 && head -c 120 ${big} > ${OUT}/k/procs/trace.pprt.999999 && ${BURN} 0.3 0")
expect(k 0 "procs/cpu.pb.gz.999999: [^\n]*\npprt record: [^\n]*cpu.pb.gz.999999: left out of"
       "a truncated child profile")
if(NOT k_err MATCHES "procs/trace.pprt.999999: [^\n]*left out"
   OR NOT k_err MATCHES "trace.json: the traces of [0-9]+ processes")
  message(FATAL_ERROR "a truncated child trace is not named and left out:\n${k_err}")
endif()
if(NOT k_err MATCHES "1 left out" OR NOT EXISTS ${OUT}/k/cpu.pb.gz)
  message(FATAL_ERROR "the merge did not go on without the truncated file:\n${k_err}")
endif()
run(t ${PPRT} top ${OUT}/k/cpu.pb.gz)
if(NOT t_out MATCHES "burn_hot_inner")
  message(FATAL_ERROR "the merge without the truncated file lacks the burner:\n${t_out}\n${k_err}")
endif()
message(STATUS "a truncated child profile: named, left out, the rest merged")
