/* The trace decoder (read/trace_decode.c): a trace file (docs/trace-format.md)
 * validated and decoded into events, stacks and threads. Part of the
 * readers' library (pprt_read), which the pprt command, the tests, the
 * fuzzers and the benchmarks link; the runtime links it only for the HTTP
 * endpoint's JSON form of a trace. */
#ifndef PPRT_READ_TRACE_DECODE_H
#define PPRT_READ_TRACE_DECODE_H

#include <stddef.h>
#include <stdint.h>

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

#endif /* PPRT_READ_TRACE_DECODE_H */
