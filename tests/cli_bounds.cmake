# The views' bounds (tools/cli.h, docs/guide.md): top, flame and collapse on
# valid profiles that are small on disk but expand to huge stacks. Each
# must finish within the time limit, with exit status 3 and a message that
# names the bound, or, at the bound itself, with the right output.
#
#   deep     one location with 400,000 lines, one sample: 1.6 KB gzip'd
#            (flame crashed here, recursing once per level)
#   runaway  one location with 2,000,000 lines, 200,000 samples: 10 KB
#            (top and flame ran for hours, expanding every sample)
#   depth+1  a stack of 4097 frames
#   total+1  4097 samples of 4096 frames: 16,781,312 frames
#   bound    4096 samples of 4096 frames: 16,777,216 frames, shown
#   zero     the runaway stacks under the default type, and a type "zero"
#            that is 0 in every sample: shown for --sample-index zero
#   longname 4096 frames of a 300,000-byte name: top and flame show it,
#            collapse refuses its 1.2 GB line
#
# Inputs: -DPPRT= -DHOSTILE= (tests/hostile_profile.c) -DOUT=
cmake_minimum_required(VERSION 3.16)

file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

# Seconds each command may take. The refusals take well under a second in
# an optimized build; decoding the runaway file's 2,000,000 lines is the
# slow part under AddressSanitizer.
set(cli_timeout 120)
include(${CMAKE_CURRENT_LIST_DIR}/cli_lib.cmake)

function(make name lines samples)
  run(g ${HOSTILE} ${OUT}/${name}.pb.gz ${lines} ${samples})
  if(NOT g_rc EQUAL 0)
    message(FATAL_ERROR "hostile_profile ${name}: ${g_rc} ${g_err}")
  endif()
  file(SIZE ${OUT}/${name}.pb.gz size)
  message(STATUS "${name}: ${lines} lines x ${samples} samples, ${size} bytes")
endfunction()

make(deep 400000 1)
make(runaway 2000000 200000)
make(depth1 4097 1)
make(total1 4096 4097)
make(bound 4096 4096)

set(too_deep "sample 0's stack is more than 4096 frames deep \\(inlined frames included\\), deeper than pprt's views show")
set(too_many "the samples' stacks add up to more than 16777216 frames \\(inlined frames included\\), more than pprt's views expand")
foreach(cmd top flame collapse)
  foreach(c "deep;${too_deep}" "runaway;${too_deep}" "depth1;${too_deep}" "total1;${too_many}")
    list(GET c 0 name)
    list(GET c 1 why)
    string(TIMESTAMP t0 "%s")
    run(r ${PPRT} ${cmd} ${OUT}/${name}.pb.gz)
    string(TIMESTAMP t1 "%s")
    expect(r 3 "^pprt ${cmd}: [^\n]*/${name}.pb.gz: ${why}\n$" "pprt ${cmd} ${name}")
    math(EXPR secs "${t1} - ${t0}")
    message(STATUS "pprt ${cmd} ${name}: exit 3 in ~${secs} s")
  endforeach()
endforeach()
# With source lines in the names the frames are the same ones, and count
# the same.
foreach(cmd top flame collapse)
  foreach(c "deep;${too_deep}" "total1;${too_many}")
    list(GET c 0 name)
    list(GET c 1 why)
    run(r ${PPRT} ${cmd} --lines ${OUT}/${name}.pb.gz)
    expect(r 3 "^pprt ${cmd}: [^\n]*/${name}.pb.gz: ${why}\n$" "pprt ${cmd} --lines ${name}")
  endforeach()
endforeach()
message(STATUS "--lines: the same refusals")
# At the bound: shown, and right.
string(REPEAT "hostile;" 4095 chain)
run(r ${PPRT} top ${OUT}/bound.pb.gz)
expect(r 0 "^$" "pprt top bound")
if(NOT r_out MATCHES "\n +4096 100.00% 100.00% +4096 100.00%  hostile\n")
  message(FATAL_ERROR "pprt top bound: want one row, hostile, flat and cum 4096:\n${r_out}")
endif()
run(r ${PPRT} collapse ${OUT}/bound.pb.gz)
expect(r 0 "^$" "pprt collapse bound")
if(NOT r_out STREQUAL "${chain}hostile 4096\n")
  string(LENGTH "${r_out}" n)
  message(FATAL_ERROR "pprt collapse bound: want one line of 4096 frames, got ${n} bytes")
endif()
run(r ${PPRT} flame ${OUT}/bound.pb.gz -o ${OUT}/bound.html)
expect(r 0 "wrote" "pprt flame bound")
file(READ ${OUT}/bound.html page)
# flame marks inlined frames: the location's outermost line is "hostile"
# (name 2: interned after the inlined lines), under it 4095 frames of
# "hostile (inline)" (name 1). Count the nodes "[1,4096" (name 1, value
# 4096) by what removing them takes away (a list of them would not do:
# CMake lists group by brackets).
string(LENGTH "${page}" before)
string(REPLACE "[1,4096" "" rest "${page}")
string(LENGTH "${rest}" after)
math(EXPR n "(${before} - ${after}) / 7")
if(NOT n EQUAL 4095 OR NOT page MATCHES "\"names\":\\[\"all\",\"hostile \\(inline\\)\",\"hostile\"\\]"
   OR NOT page MATCHES "\"root\":\\[0,4096,\\[\\[2,4096,\\[\\[1,4096,")
  message(FATAL_ERROR "pprt flame bound: want hostile and a chain of 4095 inlined nodes under "
                      "it, have ${n} inlined nodes")
endif()
message(STATUS "at the bound (4096 x 4096 frames): top, collapse and flame right")

# Long names: shown once by top and flame, repeated on every frame by
# collapse, which refuses text over 1 GiB before writing any.
run(g ${HOSTILE} ${OUT}/longname.pb.gz 4096 1 name=300000)
run(r ${PPRT} collapse ${OUT}/longname.pb.gz)
expect(r 3 "^pprt collapse: [^\n]*/longname.pb.gz: the folded stacks would be more than 1073741824 bytes, more than pprt collapse writes\n$"
       "pprt collapse longname")
if(NOT r_out STREQUAL "")
  message(FATAL_ERROR "pprt collapse longname wrote before refusing")
endif()
run(r ${PPRT} top ${OUT}/longname.pb.gz)
expect(r 0 "^$" "pprt top longname")
run(r ${PPRT} flame ${OUT}/longname.pb.gz -o ${OUT}/longname.html)
expect(r 0 "wrote" "pprt flame longname")
message(STATUS "a 300,000-byte name 4096 deep: collapse refuses, top and flame show it")

# The bounds apply to the value shown: the same stacks under a type that is
# 0 in every sample expand to nothing.
run(g ${HOSTILE} ${OUT}/zero.pb.gz 2000000 200000 zero-first)
run(r ${PPRT} top ${OUT}/zero.pb.gz)
expect(r 3 "^pprt top: [^\n]*/zero.pb.gz: ${too_deep}\n$" "pprt top zero (default type)")
run(r ${PPRT} top ${OUT}/zero.pb.gz --sample-index zero)
expect(r 0 "^$" "pprt top zero --sample-index zero")
if(NOT r_out MATCHES "Type: zero \\(count\\)\nTotal zero = 0\n")
  message(FATAL_ERROR "pprt top --sample-index zero: want an empty table:\n${r_out}")
endif()
message(STATUS "beyond the bounds for one type, shown for another that is 0 there")
