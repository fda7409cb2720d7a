# Allocation samples go into a running trace: heap_sites under the preload
# library with both PPRT_HEAPPROFILE and PPRT_TRACE; the trace must hold
# alloc and free sample events (trace_check counts them).
file(REMOVE ${OUT}.pprt ${OUT}.pb.gz)
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} PPRT_TRACE=${OUT}.pprt
                        PPRT_HEAPPROFILE=${OUT}.pb.gz PPRT_HEAP_RATE=65536 ${SITES} 8
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "heap_sites failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${CHECK} ${OUT}.pprt RESULT_VARIABLE rc OUTPUT_VARIABLE summary
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the trace does not decode: ${err}")
endif()
string(REGEX MATCH "alloc_sample ([0-9]+)" _ "${summary}")
set(allocs ${CMAKE_MATCH_1})
string(REGEX MATCH "free_sample ([0-9]+)" _ "${summary}")
set(frees ${CMAKE_MATCH_1})
if(NOT allocs GREATER 100 OR NOT frees GREATER 50)
  message(FATAL_ERROR "too few allocation events in the trace:\n${summary}")
endif()
message(STATUS "trace holds ${allocs} alloc and ${frees} free samples")
