/* The trace encoder's internal interface. The public API (pprt_trace_*,
 * pprt_flight_*, the annotations) is in pprt.h; the file format is
 * specified in docs/trace-format.md and its constants are in
 * core/trace_format.h. The decoder and the JSON exporter are readers, not
 * part of the runtime: read/trace_decode.h, read/trace_json.h.
 *
 * Divisions: hooks other components call to put samples into a running
 * trace; seams for tests. */
#ifndef PPRT_CORE_TRACE_H
#define PPRT_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "pprt.h"

/* ---- hooks for the profilers ---------------------------------------------------- */

/* A CPU sample of thread tid taken at ts_ns (pprt__os_monotonic_ns), stack
 * pcs[0..npcs) leaf first as the CPU profiler's ring holds them (64-bit
 * words; pcs[0] the interrupted instruction; npcs 0 for a stack that could
 * not be walked), standing for count ticks. Appended to
 * the calling thread's buffer (the CPU profiler's reader thread) while a
 * trace runs; does nothing otherwise. The stack is interned and the sample
 * keeps its own time exactly (an argument relative to the event's). */
void pprt__trace_cpu_sample(uint64_t tid, uint64_t ts_ns, const uint64_t *pcs, size_t npcs,
                            uint64_t count);

/* For the heap sampler: a sampled allocation of size bytes at addr by thread
 * tid at ts_ns, with its stack (every pc a return address, leaf first), and
 * the free of a sampled allocation (matched by address). Like
 * pprt__trace_cpu_sample they go into the calling thread's buffer, may be
 * called from any thread, including from inside malloc (no allocation, no
 * lock), and do nothing when no trace runs. */
void pprt__trace_alloc_sample(uint64_t tid, uint64_t ts_ns, uint64_t addr, uint64_t size,
                              const uintptr_t *pcs, size_t npcs);
void pprt__trace_free_sample(uint64_t tid, uint64_t ts_ns, uint64_t addr);

/* A thread created through the preload library's pthread_create hook is
 * starting: records its thread-start event (the end is recorded by the
 * thread-exit handler of every thread that traced). */
void pprt__trace_thread_start(void);

/* The process is about to exec (the preload library's exec wrappers): a
 * streaming trace ends its generation, so that the file is complete up to
 * here (the image's exit handlers will not run). Recording goes on, in case
 * the exec fails. */
void pprt__trace_exec_prepare(void);

/* 1 while a trace or flight recorder runs. */
int pprt__trace_running(void);

/* ---- seams for tests ------------------------------------------------------------ */

/* Ends the current generation now and returns once the writer has written
 * it (streaming) or kept it (flight). -EPIPE when no trace runs. */
int pprt__trace_advance(void);

/* Makes threads start a new buffer (a new batch) once the current one holds
 * bytes bytes (a soft limit; an event that alone exceeds it still goes into
 * an empty buffer); 0 restores the default. Takes effect for buffers started
 * afterwards. */
void pprt__trace_set_batch_limit(size_t bytes);

/* Bytes mapped by all threads' buffers now, as counted against the
 * buffer limit (for tests: it comes back to what live threads hold). */
size_t pprt__trace_chunk_bytes(void);

/* What the last session that stopped did, for tests and benchmarks. */
typedef struct pprt__trace_stats {
  uint64_t events_dropped; /* events threads could not record */
  uint64_t batches;        /* batch records written */
  uint64_t generations;    /* generations completed */
  uint64_t bytes;          /* bytes handed to the writer (streaming) */
} pprt__trace_stats;
void pprt__trace_get_stats(pprt__trace_stats *out);

#endif /* PPRT_CORE_TRACE_H */
