# End-to-end tests of the pprt command on real outputs, one area per MODE:
#
#   record    exit statuses and signals pass through; fork + exec; _exit;
#             a program not found or not runnable; the summary; --unwinder
#   views     top, collapse (its counts sum to the profile's total) and flame
#             on a profile pprt record wrote
#   heap      pprt record --heap on examples/demo: heap.pb.gz with Go's four
#             sample types, its allocation sites named by top
#   stacks    pprt record --cpu on examples/demo (frameless hot leaves): each
#             thread's own function between start_thread (main) and its leaf
#   go        profiles from Go's runtime/pprof (a tiny Go program built here)
#             read by top, collapse and flame
#   chromium  the flame graph rendered by headless Chromium shows the
#             hottest function, and every frame of a stack at the depth bound
#   badinput  every bad input and bad usage: the one-line message and the
#             exit code
#   trace     pprt record --trace on examples/demo, trace check and export;
#             a missing, foreign, newer-version and truncated trace
#
# Inputs: -DMODE= -DPPRT= -DPRELOAD= -DBURN= -DVICTIM= -DWAIT= -DOUT=
#         -DGO= -DGO_SRC= -DCHROMIUM= -DDEMO= -DHOSTILE= -DUNWINDER= (the build's default)
#         -DCFI= (1 when the build has the cfi unwinder)
cmake_minimum_required(VERSION 3.16)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

# run, expect: each command within 120 s.
include(${CMAKE_CURRENT_LIST_DIR}/cli_lib.cmake)

# sum_folded(<var> <text>): the sum of the numbers ending each folded line.
function(sum_folded var text)
  string(REGEX MATCHALL " [0-9]+\n" nums "${text}")
  set(sum 0)
  foreach(n ${nums})
    string(STRIP "${n}" n)
    math(EXPR sum "${sum} + ${n}")
  endforeach()
  set(${var} ${sum} PARENT_SCOPE)
endfunction()

# A CPU profile of cpu_burn at 250 Hz (period 4 ms), for the modes that read one.
function(record_burn dir)
  run(r ${PPRT} record -o ${dir} --cpu --hz 250 -- ${BURN} 0.6 0)
  expect(r 0 "CPU samples" "pprt record cpu_burn")
  if(NOT EXISTS ${dir}/cpu.pb.gz)
    message(FATAL_ERROR "pprt record wrote no ${dir}/cpu.pb.gz:\n${r_err}")
  endif()
endfunction()

# ---- record --------------------------------------------------------------------------
if(MODE STREQUAL "record")
  # Exit status, a child exec'd by the program (its own file in procs/,
  # merged with the program's), the summary.
  run(a ${PPRT} record -o ${OUT}/a --hz 250 -- ${BURN} 1 3 ${BURN})
  expect(a 3 "exited with status 3" "exit status of a fork+exec program")
  if(UNWINDER STREQUAL "cfi")
    set(unwound "unwound by: cfi \\(DWARF tables")
  elseif(UNWINDER STREQUAL "libunwind")
    set(unwound "unwound by: libunwind")
  else()
    set(unwound "unwound by: frame pointers")
  endif()
  foreach(want "CPU samples" "0 lost" "effective rate [0-9.]+ samples per CPU-second"
          "burn_hot_inner" "cpu.pb.gz: merged from 2 processes' files" "${unwound}")
    if(NOT a_err MATCHES "${want}")
      message(FATAL_ERROR "summary lacks '${want}':\n${a_err}")
    endif()
  endforeach()
  file(GLOB kids ${OUT}/a/procs/cpu.pb.gz.*)
  list(LENGTH kids nkids)
  if(NOT EXISTS ${OUT}/a/cpu.pb.gz OR NOT nkids EQUAL 2)
    message(FATAL_ERROR "want cpu.pb.gz and two procs/cpu.pb.gz.<pid>, have: ${kids}")
  endif()
  foreach(kid ${kids})
    run(t ${PPRT} top ${kid})
    expect(t 0 "" "pprt top on one process's profile")
    if(NOT t_out MATCHES "burn_hot_inner")
      message(FATAL_ERROR "${kid} does not name burn_hot_inner:\n${t_out}")
    endif()
  endforeach()
  message(STATUS "fork+exec: exit 3 kept, each process's profile ${kids}")

  # The summary's sample count is the profile's, as collapse sums it.
  string(REGEX MATCH "([0-9]+) CPU samples" m "${a_err}")
  set(summary_samples ${CMAKE_MATCH_1})
  run(c ${PPRT} collapse --sample-index samples ${OUT}/a/cpu.pb.gz)
  sum_folded(folded "${c_out}")
  if(NOT folded EQUAL summary_samples)
    message(FATAL_ERROR "summary says ${summary_samples} samples, collapse sums ${folded}")
  endif()

  # Exit statuses and the ways a program can end.
  run(e ${PPRT} record -o ${OUT}/e --cpu -- ${VICTIM} exit 5)
  expect(e 5 "exited with status 5.*victim_burn" "exit 5")
  # _exit and a default-action SIGTERM or abort still write the profile
  # (preload/exits.c), and the summary says at which ending.
  run(x ${PPRT} record -o ${OUT}/x --cpu -- ${VICTIM} _exit 7)
  expect(x 7 "exited with status 7.*ending seen: profiles written at _exit.*victim_burn"
         "_exit(7)")
  run(s ${WAIT} ${PPRT} record -o ${OUT}/s --cpu -- ${VICTIM} term)
  expect(s 0 "killed by SIGTERM \\(15\\).*ending seen: profiles written at SIGTERM.*victim_burn"
         "SIGTERM")
  expect_match("${s_out}" "^signal 15\n$" "SIGTERM: pprt record's ending, want signal 15")
  run(b ${WAIT} ${PPRT} record -o ${OUT}/b --cpu -- ${VICTIM} abort)
  expect(b 0 "killed by SIGABRT \\(6\\).*ending seen: profiles written at a crash \\(SIGABRT"
         "abort")
  expect_match("${b_out}" "^signal 6\n$" "abort: pprt record's ending, want signal 6")
  run(h ${PPRT} record -o ${OUT}/h --cpu -- ${VICTIM} trapterm)
  expect(h 0 "ending seen: exit.*victim_burn" "a program that handles SIGTERM and exits")
  # kill -9 before any checkpoint: no profile, and the summary says why.
  run(k ${WAIT} ${PPRT} record -o ${OUT}/k --cpu --checkpoint 0 -- ${VICTIM} kill)
  expect(k 0 "killed by SIGKILL \\(9\\).*no CPU profile: the program was killed by SIGKILL"
         "SIGKILL")
  message(STATUS "exit 5; _exit 7, SIGTERM and SIGABRT written and re-raised, said so")

  # Programs that cannot be run.
  run(n ${PPRT} record -o ${OUT}/n -- pprt-no-such-program)
  expect(n 127 "^pprt record: pprt-no-such-program: command not found\n$" "not on PATH")
  run(n ${PPRT} record -o ${OUT}/n -- ${OUT}/no/such/program)
  expect(n 127 "^pprt record: [^\n]*/no/such/program: no such file\n$" "no such path")
  file(WRITE ${OUT}/notexec "not a program\n")
  run(n ${PPRT} record -o ${OUT}/n -- ${OUT}/notexec)
  expect(n 126 "^pprt record: [^\n]*/notexec: cannot run it: Permission denied\n$" "no x bit")
  message(STATUS "not found: 127, not executable: 126, one line each")

  # On a terminal: the live status line, rewritten in place, then cleared.
  # util-linux's script(1) gives pprt a pseudo-terminal.
  find_program(SCRIPT script)
  if(SCRIPT)
    run(v ${SCRIPT} --version)
  endif()
  if(SCRIPT AND v_out MATCHES "util-linux")
    run(y ${SCRIPT} -qec "${PPRT} record -o ${OUT}/y --cpu -- ${BURN} 0.5 0" /dev/null)
    string(ASCII 27 esc)
    set(status_re "\rpprt record: [0-9.]+ s elapsed, [0-9.]+ s CPU \\(pid [0-9]+\\)${esc}\\[K")
    if(NOT y_out MATCHES "${status_re}"
       OR NOT y_out MATCHES "\r${esc}\\[Kpprt record: [^\n]*exited with status 0")
      message(FATAL_ERROR "no live status line on a terminal:\n${y_out}")
    endif()
    message(STATUS "terminal: live status line shown and cleared")
  else()
    message(STATUS "util-linux script(1) not found: live status line not checked")
  endif()

  # --unwinder: the walk asked for is the one the profile names.
  run(u ${PPRT} record -o ${OUT}/u --cpu --unwinder fp -- ${BURN} 0.3 0)
  expect(u 0 "unwound by: frame pointers\n" "record --unwinder fp")
  if(CFI)
    run(u ${PPRT} record -o ${OUT}/u --cpu --unwinder cfi -- ${BURN} 0.3 0)
    expect(u 0 "unwound by: cfi \\(DWARF tables" "record --unwinder cfi")
  endif()

  # Only the outputs chosen; -q says nothing.
  run(q ${PPRT} record -q -o ${OUT}/q --cpu -- ${VICTIM} exit 0)
  expect(q 0 "^$" "-q")
  if(NOT EXISTS ${OUT}/q/cpu.pb.gz)
    message(FATAL_ERROR "--cpu -q: no cpu.pb.gz")
  endif()
  run(q ${PPRT} record -o ${OUT}/q --cpu -- ${VICTIM} exit 0)
  # Paths left out: a checkout's own path may hold these words.
  string(REGEX REPLACE "/[^ \t\n:]*" "" q_words "${q_err}")
  if(q_words MATCHES "heap|trace")
    message(FATAL_ERROR "--cpu alone mentions other outputs:\n${q_err}")
  endif()
  return()
endif()

# ---- views ---------------------------------------------------------------------------
if(MODE STREQUAL "views")
  record_burn(${OUT}/r)
  set(prof ${OUT}/r/cpu.pb.gz)
  run(t ${PPRT} top ${prof})
  expect(t 0 "^$" "pprt top")
  foreach(want "Type: cpu \\(nanoseconds\\)" "Duration: " "flat +flat% +sum% +cum +cum%"
          "burn_hot_inner" "worker")
    if(NOT t_out MATCHES "${want}")
      message(FATAL_ERROR "pprt top lacks '${want}':\n${t_out}")
    endif()
  endforeach()
  # The hottest function is the first row, flat; --cum puts a root first.
  string(REGEX MATCH "name\n[^\n]*" first "${t_out}")
  if(NOT first MATCHES "burn_hot_inner$")
    message(FATAL_ERROR "top row is not burn_hot_inner:\n${t_out}")
  endif()
  # A sample outside the burner threads (the main thread, a vdso frame
  # alone) may keep the root below 100%: a root holds nearly everything.
  run(t ${PPRT} top --cum -n 1 ${prof})
  string(REGEX MATCH "name\n[^\n]*" first "${t_out}")
  string(REGEX MATCH "([0-9.]+)%  +[^ \n%]+$" _ "${first}")
  set(cum_pct "${CMAKE_MATCH_1}")
  if(NOT cum_pct OR cum_pct LESS 90 OR first MATCHES "burn_hot_inner")
    message(FATAL_ERROR "top --cum -n 1: want a root row with >= 90% cum:\n${t_out}")
  endif()

  # collapse: root first, counts summing to the total of the chosen type.
  run(t ${PPRT} top --sample-index samples ${prof})
  string(REGEX MATCH "Total samples = ([0-9]+)" m "${t_out}")
  set(total ${CMAKE_MATCH_1})
  run(c ${PPRT} collapse --sample-index samples ${prof})
  expect(c 0 "^$" "pprt collapse")
  if(NOT c_out MATCHES "(^|\n)[^\n]*worker;[^\n]*burn_hot_inner [0-9]+\n")
    message(FATAL_ERROR "collapse: no root-first stack ending in burn_hot_inner:\n${c_out}")
  endif()
  sum_folded(samples "${c_out}")
  if(NOT samples EQUAL total OR samples EQUAL 0)
    message(FATAL_ERROR "collapse samples sum to ${samples}, top says ${total}")
  endif()
  run(c ${PPRT} collapse ${prof} -o ${OUT}/cpu.folded)
  file(READ ${OUT}/cpu.folded folded)
  sum_folded(cpu "${folded}")
  # The CPU time top totals (to 10 ms; each sample weighs the CPU time its
  # interval covered, so it is no multiple of the period).
  run(t ${PPRT} top --sample-index cpu ${prof})
  if(NOT t_out MATCHES "Total samples = ([0-9]+)\\.([0-9][0-9])s")
    message(FATAL_ERROR "top --sample-index cpu: no total in seconds:\n${t_out}")
  endif()
  math(EXPR want_cs "${CMAKE_MATCH_1} * 100 + 1${CMAKE_MATCH_2} - 100")
  math(EXPR got_cs "(${cpu} + 5000000) / 10000000")
  math(EXPR diff "${got_cs} - ${want_cs}")
  if(diff GREATER 1 OR diff LESS -1 OR cpu EQUAL 0)
    message(FATAL_ERROR "collapse cpu sums to ${cpu} ns, top totals ${want_cs} x 10 ms")
  endif()
  message(STATUS "collapse: ${total} samples, ${cpu} ns, as the profile's totals")

  # flame: a page with the data and no reference to anything outside it.
  run(f ${PPRT} flame ${prof} -o ${OUT}/flame.html)
  expect(f 0 "wrote [^\n]*flame.html" "pprt flame")
  file(READ ${OUT}/flame.html html)
  if(NOT html MATCHES "burn_hot_inner" OR NOT html MATCHES "<script")
    message(FATAL_ERROR "flame.html lacks the data or the script")
  endif()
  if(html MATCHES "(src|href)=\"(https?:)?//" OR html MATCHES "@PPRT_")
    message(FATAL_ERROR "flame.html refers to the network or has an unfilled marker")
  endif()
  run(f ${PPRT} flame ${prof})
  if(NOT EXISTS ${OUT}/r/cpu.html)
    message(FATAL_ERROR "pprt flame without -o: no cpu.html beside the profile")
  endif()
  return()
endif()

# ---- stacks --------------------------------------------------------------------------
# The demo's hot leaves set up no frame (GCC, even with -fno-omit-frame-pointer):
# with frame pointers their samples lose the function that called them. With
# the cfi unwinder (the default where the build has it; cli_record checks
# that), >= 95% of each leaf's CPU time has the thread's own function
# between start_thread (or main) and the leaf.
if(MODE STREQUAL "stacks")
  if(NOT CFI)
    message(STATUS "SKIP: this build has no cfi unwinder")
    return()
  endif()
  run(r ${PPRT} record -q -o ${OUT}/s --cpu --hz 1000 --unwinder cfi -- ${DEMO} 1.0)
  expect(r 0 "^$" "pprt record --cpu on the demo")
  run(c ${PPRT} collapse ${OUT}/s/cpu.pb.gz)
  expect(c 0 "^$" "pprt collapse")
  string(REPLACE ";" "|" folded "${c_out}") # one line a stack, no list separators
  foreach(chain "start_thread|hasher|demo_hash_strings"
          "start_thread|sorter|demo_sort_records|demo_sift_down"
          "main|multiply_loop|demo_multiply_matrices")
    string(REGEX REPLACE ".*\\|" "" leaf "${chain}")
    string(REPLACE "|" "\\|" chain_re "${chain}")
    # The preload's thread start (registered_start) is a frame of its own
    # where the compiler did not make its call a tail call (-O0 builds).
    string(REPLACE "start_thread\\|" "start_thread\\|(registered_start\\|)?" chain_re
           "${chain_re}")
    string(REGEX MATCHALL "[^\n]*\\|${leaf} [0-9]+\n" all "${folded}")
    string(REGEX MATCHALL "[^\n]*${chain_re} [0-9]+\n" whole "${folded}")
    string(JOIN "" all ${all})
    string(JOIN "" whole ${whole})
    sum_folded(total "${all}")
    sum_folded(good "${whole}")
    if(total LESS 20000000) # 20 ms of CPU: 20 samples at 1000 Hz
      message(FATAL_ERROR "${leaf}: ${total} ns of samples, too few to judge:\n${c_out}")
    endif()
    math(EXPR pct "${good} * 1000 / ${total}")
    message(STATUS "${leaf}: ${pct} per mille of its CPU time under ${chain}")
    if(pct LESS 950)
      message(FATAL_ERROR "${leaf}: only ${pct} per mille of its samples have ${chain}:\n${c_out}")
    endif()
  endforeach()
  return()
endif()

# ---- heap ----------------------------------------------------------------------------
if(MODE STREQUAL "heap")
  run(r ${PPRT} record -o ${OUT}/h --heap --heap-rate 65536 -- ${DEMO} 0.5)
  expect(r 0 "heap.pb.gz: in use at exit [^\n]*allocated [^\n]*one sample per 65536 bytes"
         "pprt record --heap")
  string(REGEX REPLACE "/[^ \t\n:]*" "" r_words "${r_err}") # paths, as for --cpu
  if(EXISTS ${OUT}/h/cpu.pb.gz OR EXISTS ${OUT}/h/trace.pprt OR r_words MATCHES "CPU samples|trace")
    message(FATAL_ERROR "--heap alone wrote or mentioned other outputs:\n${r_err}")
  endif()
  foreach(site demo_make_records demo_make_matrix demo_make_strings)
    if(NOT r_err MATCHES "${site}")
      message(FATAL_ERROR "the summary's top allocation sites lack ${site}:\n${r_err}")
    endif()
  endforeach()
  run(t ${PPRT} top ${OUT}/h/heap.pb.gz)
  if(NOT t_rc EQUAL 0 OR NOT t_out MATCHES "Type: inuse_space \\(bytes\\)"
     OR NOT t_out MATCHES "demo_make_records")
    message(FATAL_ERROR "pprt top heap.pb.gz: want inuse_space, demo_make_records:\n${t_out}")
  endif()
  foreach(type alloc_objects alloc_space inuse_objects inuse_space)
    run(c ${PPRT} collapse --sample-index ${type} ${OUT}/h/heap.pb.gz)
    sum_folded(sum "${c_out}")
    run(t ${PPRT} top --sample-index ${type} ${OUT}/h/heap.pb.gz)
    if(NOT c_rc EQUAL 0 OR NOT t_rc EQUAL 0 OR sum EQUAL 0)
      message(FATAL_ERROR "heap ${type}: collapse or top failed:\n${c_err}${t_err}")
    endif()
  endforeach()
  message(STATUS "heap: record --heap, top and collapse on all four sample types")
  return()
endif()

# ---- go ------------------------------------------------------------------------------
if(MODE STREQUAL "go")
  skip_without(GO "go not found (ci/test installs golang-go); Go's profiles not checked")
  # No module downloads and no toolchain switch: the program uses only the
  # standard library and its go.mod requires nothing.
  set(goenv GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod CGO_ENABLED=0
      GOCACHE=${OUT}/gocache GOPATH=${OUT}/gopath)
  run(g ${CMAKE_COMMAND} -E env ${goenv} ${GO} -C ${GO_SRC} build -o ${OUT}/gopprof .)
  if(NOT g_rc EQUAL 0)
    # go before 1.20 has no -C.
    execute_process(COMMAND ${CMAKE_COMMAND} -E env ${goenv} ${GO} build -o ${OUT}/gopprof .
                    WORKING_DIRECTORY ${GO_SRC} RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "go build of the pprof writer failed: ${g_err}\n${err}")
    endif()
  endif()
  run(g ${OUT}/gopprof ${OUT})
  if(NOT g_rc EQUAL 0)
    message(FATAL_ERROR "gopprof failed: ${g_err}")
  endif()
  run(t ${PPRT} top ${OUT}/go-cpu.pprof)
  expect(t 0 "^$" "pprt top on Go's CPU profile")
  string(REGEX MATCH "name\n[^\n]*" first "${t_out}")
  if(NOT t_out MATCHES "Type: cpu \\(nanoseconds\\)" OR NOT first MATCHES "main.goBurnHot$"
     OR NOT t_out MATCHES "main.main")
    message(FATAL_ERROR "Go CPU profile: want type cpu and main.goBurnHot first:\n${t_out}")
  endif()
  run(t ${PPRT} top --sample-index samples ${OUT}/go-cpu.pprof)
  string(REGEX MATCH "Total samples = ([0-9]+)" m "${t_out}")
  set(total ${CMAKE_MATCH_1})
  run(c ${PPRT} collapse --sample-index samples ${OUT}/go-cpu.pprof)
  sum_folded(sum "${c_out}")
  if(NOT sum EQUAL total OR total EQUAL 0)
    message(FATAL_ERROR "Go CPU profile: collapse sums ${sum}, top says ${total}")
  endif()
  # The heap profile: Go's four sample types; no default type, so the last
  # (inuse_space) is shown, and any other by name.
  run(t ${PPRT} top ${OUT}/go-heap.pprof)
  expect(t 0 "^$" "pprt top on Go's heap profile")
  if(NOT t_out MATCHES "Type: inuse_space \\(bytes\\)" OR NOT t_out MATCHES "main.goAllocSite")
    message(FATAL_ERROR "Go heap profile: want inuse_space and main.goAllocSite:\n${t_out}")
  endif()
  foreach(type alloc_objects alloc_space inuse_objects)
    run(t ${PPRT} top --sample-index ${type} ${OUT}/go-heap.pprof)
    if(NOT t_rc EQUAL 0 OR NOT t_out MATCHES "Type: ${type}" OR NOT t_out MATCHES "goAllocSite")
      message(FATAL_ERROR "Go heap profile, ${type}:\n${t_out}${t_err}")
    endif()
  endforeach()
  run(f ${PPRT} flame --sample-index alloc_space ${OUT}/go-heap.pprof -o ${OUT}/go-heap.html)
  expect(f 0 "wrote" "pprt flame on Go's heap profile")
  message(STATUS "Go's runtime/pprof CPU and heap profiles read: goBurnHot, goAllocSite")
  return()
endif()

# ---- chromium ------------------------------------------------------------------------
if(MODE STREQUAL "chromium")
  skip_without(CHROMIUM
    "chromium not found (Debian: apt-get install chromium); flame graph not rendered")
  record_burn(${OUT}/r)
  run(f ${PPRT} flame ${OUT}/r/cpu.pb.gz -o ${OUT}/flame.html)
  expect(f 0 "wrote" "pprt flame")
  # No network, no profile of the user's: a fresh profile directory and
  # every background service off.
  set(flags --headless --no-sandbox --disable-gpu --disable-background-networking
      --disable-component-update --disable-sync --no-first-run --disable-extensions
      --user-data-dir=${OUT}/chromium-profile)
  run(d ${CHROMIUM} ${flags} --dump-dom file://${OUT}/flame.html)
  if(NOT d_rc EQUAL 0)
    message(FATAL_ERROR "chromium --dump-dom failed (${d_rc}):\n${d_err}")
  endif()
  # The names are in the data as JSON too; only a frame the script drew is
  # a div of class "fr" with the name as its text.
  expect_match("${d_out}" "<div class=\"fr[^\"]*\"[^>]*>burn_hot_inner</div>"
               "the rendered page has no frame burn_hot_inner")
  expect_match("${d_out}" "data-frames=\"[1-9]" "the rendered page did not record its frame count")
  # Search and zoom, set through the URL's fragment: the matching frame is
  # marked and the total matched shown; zoomed, burn_hot_inner fills the
  # width under its callers, which are drawn faded above it.
  run(d ${CHROMIUM} ${flags} --dump-dom "file://${OUT}/flame.html#search=hot_inn")
  if(NOT d_out MATCHES "<div class=\"fr match\"[^>]*>burn_hot_inner</div>"
     OR NOT d_out MATCHES "Matched: [0-9.]+m?s \\([0-9.]+% of view\\)")
    message(FATAL_ERROR "search for hot_inn: no marked frame or no matched total:\n${d_out}")
  endif()
  run(d ${CHROMIUM} ${flags} --dump-dom "file://${OUT}/flame.html#zoom=burn_hot_inner")
  if(NOT d_out MATCHES "<div class=\"fr\"[^>]*width: 100%[^>]*>burn_hot_inner</div>"
     OR NOT d_out MATCHES "<div class=\"fr anc\"[^>]*>worker</div>")
    message(FATAL_ERROR "zoom to burn_hot_inner: not full width under faded callers:\n${d_out}")
  endif()
  run(s ${CHROMIUM} ${flags} --window-size=1200,600 --screenshot=${OUT}/flame.png
      file://${OUT}/flame.html)
  if(NOT EXISTS ${OUT}/flame.png)
    message(FATAL_ERROR "chromium --screenshot wrote nothing:\n${s_err}")
  endif()
  message(STATUS "headless Chromium drew burn_hot_inner, searched and zoomed; screenshot ${OUT}/flame.png")
  # A stack as deep as the views allow (4096 frames, tools/cli.h): the
  # page's script draws every frame of it.
  run(g ${HOSTILE} ${OUT}/deep.pb.gz 4096 1)
  run(f ${PPRT} flame ${OUT}/deep.pb.gz -o ${OUT}/deep.html)
  expect(f 0 "wrote" "pprt flame on a stack 4096 frames deep")
  run(d ${CHROMIUM} ${flags} --dump-dom file://${OUT}/deep.html)
  if(NOT d_out MATCHES "data-frames=\"4097\"")
    string(REGEX MATCH "data-frames=\"[0-9]*\"" drawn "${d_out}")
    message(FATAL_ERROR "a stack 4096 frames deep: want 4097 frames drawn, have '${drawn}':\n${d_err}")
  endif()
  message(STATUS "headless Chromium drew all 4096 frames of a stack at the depth bound")
  return()
endif()

# ---- badinput ------------------------------------------------------------------------
if(MODE STREQUAL "badinput")
  record_burn(${OUT}/r)
  set(good ${OUT}/r/cpu.pb.gz)
  file(WRITE ${OUT}/text.txt "this is not a profile\n")
  file(WRITE ${OUT}/empty.pb.gz "")
  # The first 200 bytes of a real profile: a gzip stream cut short.
  execute_process(COMMAND head -c 200 ${good} OUTPUT_FILE ${OUT}/trunc.pb.gz)
  file(SIZE ${OUT}/trunc.pb.gz tsize)
  if(tsize EQUAL 0)
    message(FATAL_ERROR "could not make a truncated profile")
  endif()
  foreach(cmd top flame collapse)
    set(extra)
    if(cmd STREQUAL "flame")
      set(extra -o ${OUT}/bad.html)
    endif()
    run(r ${PPRT} ${cmd} ${OUT}/missing.pb.gz ${extra})
    expect(r 3 "^pprt ${cmd}: [^\n]*/missing.pb.gz: cannot open: No such file or directory\n$"
           "${cmd} missing file")
    run(r ${PPRT} ${cmd} ${OUT}/text.txt ${extra})
    expect(r 3 "^pprt ${cmd}: [^\n]*/text.txt: not a pprof profile[^\n]*\n$" "${cmd} text file")
    run(r ${PPRT} ${cmd} ${OUT}/empty.pb.gz ${extra})
    expect(r 3 "^pprt ${cmd}: [^\n]*/empty.pb.gz: empty input, not a profile\n$" "${cmd} empty")
    run(r ${PPRT} ${cmd} ${OUT}/trunc.pb.gz ${extra})
    expect(r 3 "^pprt ${cmd}: [^\n]*/trunc.pb.gz: truncated gzip data[^\n]*\n$"
           "${cmd} truncated")
    run(r ${PPRT} ${cmd} ${OUT} ${extra})
    expect(r 3 "^pprt ${cmd}: [^\n]*: is a directory, not a file\n$" "${cmd} directory")
    run(r ${PPRT} ${cmd} ${good} --frobnicate)
    expect(r 2 "^pprt ${cmd}: unknown option '--frobnicate' \\(see pprt ${cmd} --help\\)\n$"
           "${cmd} unknown option")
    run(r ${PPRT} ${cmd})
    expect(r 2 "^pprt ${cmd}: missing FILE" "${cmd} without FILE")
    run(r ${PPRT} ${cmd} ${good} --sample-index bogus ${extra})
    expect(r 2 "^pprt ${cmd}: [^\n]*: no sample type 'bogus' \\(the profile has: samples, cpu\\)\n$"
           "${cmd} unknown sample type")
    run(r ${PPRT} ${cmd} --help)
    if(NOT r_rc EQUAL 0 OR NOT r_out MATCHES "^usage: pprt ${cmd} FILE.*Exit status:")
      message(FATAL_ERROR "pprt ${cmd} --help: exit ${r_rc}:\n${r_out}")
    endif()
  endforeach()
  run(r ${PPRT} top -n many ${good})
  expect(r 2 "^pprt top: -n many: not a number of rows\n$" "top -n many")
  run(r ${PPRT} collapse ${good} -o ${OUT}/no/such/dir/x.folded)
  expect(r 1 "^pprt collapse: [^\n]*x.folded: cannot write: No such file or directory\n$"
         "collapse to an unwritable path")

  # The command itself.
  run(r ${PPRT})
  expect(r 2 "^usage: pprt COMMAND" "no command")
  run(r ${PPRT} frobnicate)
  expect(r 2 "^pprt: unknown command 'frobnicate' \\(see pprt --help\\)\n$" "unknown command")
  run(r ${PPRT} --help)
  if(NOT r_rc EQUAL 0 OR NOT r_out MATCHES "Exit status:.*2 +bad usage.*127")
    message(FATAL_ERROR "pprt --help: exit ${r_rc} or no exit codes:\n${r_out}")
  endif()
  foreach(cmd record trace)
    run(r ${PPRT} ${cmd} --help)
    if(NOT r_rc EQUAL 0 OR NOT r_out MATCHES "^usage: pprt ${cmd} .*Exit status:")
      message(FATAL_ERROR "pprt ${cmd} --help: exit ${r_rc}:\n${r_out}")
    endif()
  endforeach()
  run(r ${PPRT} --version)
  if(NOT r_rc EQUAL 0 OR NOT r_out MATCHES "^pprt [0-9]+\\.[0-9]+\\.[0-9]+\n$")
    message(FATAL_ERROR "pprt --version: exit ${r_rc}: ${r_out}")
  endif()

  # record's own usage errors.
  run(r ${PPRT} record -o ${OUT}/x)
  expect(r 2 "^pprt record: missing PROGRAM" "record without a program")
  run(r ${PPRT} record --hz fast -- ${BURN} 0.1 0)
  expect(r 2 "^pprt record: --hz fast: not a rate in Hz \\(1-10000\\)\n$" "record --hz fast")
  run(r ${PPRT} record --unwinder dwarf -- ${BURN} 0.1 0)
  expect(r 2 "^pprt record: --unwinder dwarf: not cfi, fp or libunwind\n$" "record --unwinder dwarf")
  run(r ${PPRT} record --bogus -- ${BURN} 0.1 0)
  expect(r 2 "^pprt record: unknown option '--bogus'" "record --bogus")
  run(r ${PPRT} record --preload ${OUT}/no-such-lib.so -- ${BURN} 0.1 0)
  expect(r 125 "^pprt record: --preload [^\n]*no-such-lib.so: no such file\n$" "record --preload")
  file(WRITE ${OUT}/afile "")
  run(r ${PPRT} record -o ${OUT}/afile -- ${BURN} 0.1 0)
  expect(r 125 "^pprt record: output directory [^\n]*afile: " "record -o onto a file")
  message(STATUS "bad inputs and usage: one line each, exit codes 1, 2, 3, 125")
  return()
endif()

# ---- trace ---------------------------------------------------------------------------
if(MODE STREQUAL "trace")
  run(r ${PPRT} trace check ${OUT}/missing.pprt)
  expect(r 3 "^pprt trace check: [^\n]*/missing.pprt: cannot open: No such file or directory\n$"
         "trace check on a missing file")
  run(r ${PPRT} trace)
  expect(r 2 "^pprt trace: missing check or export" "trace without a subcommand")
  run(r ${PPRT} trace frob x)
  expect(r 2 "^pprt trace: unknown subcommand 'frob'" "trace frob")
  run(r ${PPRT} trace export)
  expect(r 2 "^pprt trace export: missing FILE" "trace export without FILE")
  file(WRITE ${OUT}/t.pprt "this is not a trace but a line of text\n")
  run(r ${PPRT} trace check ${OUT}/t.pprt)
  expect(r 3 "^pprt trace check: [^\n]*/t.pprt: offset 0: not a pprt trace[^\n]*\n$"
         "trace check on a text file")

  # A real trace: examples/demo recorded with --trace; its regions, logs,
  # counters and named threads come back from check and export.
  if(NOT DEMO)
    message(FATAL_ERROR "the trace test needs examples/demo (PPRT_BUILD_EXAMPLES)")
  endif()
  run(r ${PPRT} record -o ${OUT}/rec --trace -- ${DEMO} 0.5)
  expect(r 0 "trace.pprt: [0-9.]+ KiB, valid; events [0-9]+ \\(lost [0-9]+\\); threads [1-9][0-9]*; time span [0-9.]+ s"
         "pprt record --trace")
  set(trace ${OUT}/rec/trace.pprt)
  run(c ${PPRT} trace check ${trace})
  expect(c 0 "^$" "pprt trace check")
  foreach(want "^trace format version [0-9]+, process [0-9]+, [0-9]+ bytes: valid\n"
          "generations +[1-9]" "time span +[0-9.]+ s" "region_begin +[1-9]" "region_end +[1-9]"
          "log +[1-9]" "counter +[1-9]" "threads +[1-9]" " hasher\n" " sorter\n")
    if(NOT c_out MATCHES "${want}")
      message(FATAL_ERROR "trace check lacks '${want}':\n${c_out}")
    endif()
  endforeach()
  run(e ${PPRT} trace export ${trace} -o ${OUT}/trace.json)
  expect(e 0 "wrote [^\n]*trace.json" "pprt trace export")
  file(READ ${OUT}/trace.json json)
  foreach(want "\"traceEvents\"" "\"ph\":\"B\"[^\n]*\"name\":\"hash batch\""
          "\"ph\":\"E\"" "\"ph\":\"C\"" "\"name\":\"thread_name\"[^\n]*\"hasher\"")
    if(NOT json MATCHES "${want}")
      message(FATAL_ERROR "trace.json lacks ${want}")
    endif()
  endforeach()
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
    string(JSON nevents ERROR_VARIABLE jerr LENGTH "${json}" traceEvents)
    if(jerr OR nevents LESS 10)
      message(FATAL_ERROR "trace.json does not parse as JSON with traceEvents: ${jerr}")
    endif()
  endif()
  run(e ${PPRT} trace export ${trace} -o -)
  if(NOT e_rc EQUAL 0 OR NOT e_out MATCHES "^{")
    message(FATAL_ERROR "trace export -o - did not write JSON to stdout: ${e_err}")
  endif()

  # A newer format version (byte 8 of the header) and a cut-off file: one
  # line with the offset and the reason, exit 3, no OUT left behind.
  execute_process(COMMAND sh -c "head -c 8 \"$0\"; printf '\\143'; tail -c +10 \"$0\"" ${trace}
                  OUTPUT_FILE ${OUT}/v99.pprt)
  run(v ${PPRT} trace check ${OUT}/v99.pprt)
  expect(v 3 "^pprt trace check: [^\n]*/v99.pprt: offset 8: trace format version 99 is newer than this reader[^\n]*\n$"
         "a trace of version 99")
  execute_process(COMMAND head -c 100 ${trace} OUTPUT_FILE ${OUT}/cut.pprt)
  run(v ${PPRT} trace check ${OUT}/cut.pprt)
  expect(v 3 "^pprt trace check: [^\n]*/cut.pprt: offset [0-9]+: [^\n]+\n$" "a truncated trace")
  run(v ${PPRT} trace export ${OUT}/cut.pprt -o ${OUT}/cut.json)
  expect(v 3 "^pprt trace export: [^\n]*/cut.pprt: offset [0-9]+: " "export of a truncated trace")
  if(EXISTS ${OUT}/cut.json OR EXISTS ${OUT}/cut.json.tmp)
    message(FATAL_ERROR "export of a bad trace left a file behind")
  endif()
  message(STATUS "trace: record --trace, check, export; bad version and truncation: exit 3")
  return()
endif()

message(FATAL_ERROR "unknown MODE '${MODE}'")
