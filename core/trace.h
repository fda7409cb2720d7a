/* The trace encoder's and decoder's internal interface. The public API
 * (pprt_trace_*, pprt_flight_*, the annotations) is in pprt.h; the file
 * format is specified in docs/trace-format.md and its constants are in
 * core/trace_format.h.
 *
 * Divisions: hooks other components call to put samples into a running
 * trace; seams for tests; the decoded form of a trace file, the decoder and
 * the Chrome Trace Event JSON exporter. */
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

/* ---- the decoded form -------------------------------------------------------------- */

/* Strings are NUL-terminated copies (a string read from a file may itself
 * contain NULs: len is the truth). */
typedef struct pprt__trace_str {
  const char *s; /* NULL: absent */
  size_t len;
} pprt__trace_str;

/* One source line of a stack frame (format version 2's FRAMES). */
typedef struct pprt__trace_line {
  pprt__trace_str function, file; /* file.s NULL: unknown */
  uint64_t line;                  /* 0: unknown */
} pprt__trace_line;

typedef struct pprt__trace_stack {
  size_t n;
  const uint64_t *pcs;          /* leaf first */
  const pprt__trace_str *names; /* per frame; s NULL when the trace has no name */
  /* Per frame, where the trace has them (NULL when no frame has): its
   * source lines, innermost (inlined) first, nlines[f] of them at lines[f]. */
  const uint16_t *nlines;
  const pprt__trace_line *const *lines;
} pprt__trace_stack;

typedef struct pprt__trace_event {
  uint8_t type;         /* enum pprt__trace_event_type */
  uint64_t gen;         /* generation number */
  uint64_t ts;          /* nanoseconds since the trace's origin (see pprt__trace) */
  uint64_t tid;         /* the thread the event is about */
  uint64_t emitter;     /* the thread whose batch carried it (differs for samples) */
  uint64_t id;          /* task id; sample address */
  int64_t value;        /* counter value; CPU sample count; allocation size */
  pprt__trace_str name; /* region, counter, task or thread name; log category */
  pprt__trace_str msg;  /* log message */
  int64_t stack;        /* index into pprt__trace.stacks, -1 for none */
  size_t offset;        /* byte offset of the event in the file */
} pprt__trace_event;

typedef struct pprt__trace_thread {
  uint64_t tid;
  pprt__trace_str name; /* the latest name the trace gives it */
} pprt__trace_thread;

/* Events a thread could not record in a generation; ts is the generation's
 * last event time, where the exporter shows the loss. */
typedef struct pprt__trace_lost {
  uint64_t gen, tid, count, ts;
} pprt__trace_lost;

typedef struct pprt__trace {
  unsigned version;
  uint64_t pid;
  uint64_t first_gen, ngens;
  /* ts 0 is the earliest timestamp in the file (event or clock sync point);
   * these give it on the monotonic and the wall clock. */
  uint64_t origin_mono_ns, origin_wall_ns;
  pprt__trace_event *events; /* file order: generation, batch, event */
  size_t nevents;
  pprt__trace_stack *stacks;
  size_t nstacks;
  pprt__trace_thread *threads; /* sorted by tid */
  size_t nthreads;
  pprt__trace_lost *lost;
  size_t nlost;
  /* With PPRT__TRACE_DECODE_PARTIAL: where the incomplete tail that was left
   * out begins, and why it was incomplete; 0 / "" when the file is whole. */
  size_t truncated_at;
  char truncated_reason[160];
  void *mem_; /* the decoder's allocations */
} pprt__trace;

/* Largest trace file the decoder accepts. */
#define PPRT__TRACE_MAX_BYTES ((size_t)1 << 30)

/* Decoding flags. */
enum {
  /* Accept a file whose last generation is incomplete (a program that died
   * mid-trace): decode the complete generations before it and report where
   * the rest began in truncated_at. Every other problem is still an error. */
  PPRT__TRACE_DECODE_PARTIAL = 1,
};

/* Decodes and validates a trace file (the rules in docs/trace-format.md).
 * On error returns -EINVAL (malformed), -ENOTSUP (a newer format version) or
 * -ENOMEM, with "offset N: reason" in err and *out NULL. Free the result
 * with pprt__trace_free. */
int pprt__trace_decode(const void *data, size_t len, unsigned flags, pprt__trace **out, char *err,
                       size_t errlen);
void pprt__trace_free(pprt__trace *t);

/* Writes t as Chrome Trace Event JSON (object form) to out: regions as B/E,
 * properly nested per thread (a region_end with no open region on its
 * thread closes a region "(begun before the trace)" that opens just before
 * the thread's first event; regions still open at the end close just after
 * the thread's last event, innermost first; docs/trace-format.md has the
 * details), thread names as M metadata,
 * counters as C, logs as instant events, tasks as async b/e with their ids,
 * CPU and allocation samples as instant events with their stacks (function
 * names where the trace has them, else hex pcs) in args, lost events as
 * instant events. Timestamps in microseconds. Returns 0 or the writer's
 * error (-ENOMEM). */
int pprt__trace_export_json(const pprt__trace *t, pprt_writer out);
/* The same for the n traces of a process tree in one document: each
 * process its own pid, named (process_name metadata) after its main
 * thread, all on one time axis (their origins on the monotonic clock,
 * which every process shares; otherData.origin_wall_ns is the earliest). */
int pprt__trace_export_json_many(const pprt__trace *const *ts, size_t n, pprt_writer out);

#endif /* PPRT_CORE_TRACE_H */
