/* The trace decoder's state, shared by its two files and by nothing else:
 * read/trace_decode.c (memory, errors, the records of each generation and
 * its batches' events) and read/trace_tables.c (a generation's tables:
 * strings, source lines, stacks, threads, the clock). Each function fails
 * by setting the decoder's error (the first one wins) and returning it. */
#ifndef PPRT_READ_TRACE_DECODER_H
#define PPRT_READ_TRACE_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "core/table.h"
#include "read/trace_decode.h"

typedef struct str_entry {
  uint64_t id;
  pprt__trace_str str;
} str_entry;

typedef struct stack_entry {
  uint64_t id;
  int64_t index; /* into t->stacks */
} stack_entry;

/* A FRAMES entry: the source lines of one address of the generation. */
typedef struct frames_entry {
  uint64_t addr;
  uint16_t n;
  const pprt__trace_line *lines;
} frames_entry;

typedef struct tlast {
  uint64_t tid;
  int64_t ns;
} tlast;

typedef struct dec {
  pprt__trace *t;
  const uint8_t *data;
  size_t len;
  unsigned flags;
  char *err;
  size_t errlen;
  int rc;
  size_t cap_events, cap_stacks, cap_threads, cap_lost;

  /* The generation being decoded. */
  uint64_t gen;
  str_entry *strs;
  size_t nstrs, cap_strs;
  pprt__table str_index;
  stack_entry *stks;
  size_t nstks, cap_stks;
  pprt__table stack_index;
  frames_entry *frs;
  size_t nfrs, cap_frs;
  pprt__table fr_index;
  int have_freq;
  uint64_t hz, sync_ticks, sync_ns, sync_wall;

  /* Timestamps are signed nanoseconds on the monotonic clock until the
   * origin is known. */
  int64_t min_ns;
  int have_min;
  /* Each thread's last event time, to keep them strictly increasing. */
  tlast *tl;
  size_t ntl, cap_tl;
  pprt__table tl_index;
  pprt__table thread_index; /* into t->threads */
} dec;

/* A cursor over [p, end) that fails with the offset of what it reads. */
typedef struct cur {
  dec *d;
  const uint8_t *p, *end;
} cur;

static inline size_t off_of(const cur *c) {
  return (size_t)(c->p - c->d->data);
}

/* A key for the tables' indexes: an id (or address, or thread id) of the
 * generation being decoded. */
struct id_key {
  const dec *d;
  uint64_t id;
};

/* ---- read/trace_decode.c ---- */

/* An allocation that lives as long as the decoded trace. */
void *pprt__tdec_alloc(pprt__trace *t, size_t n);
/* Sets the error (unless one is set): "offset off: " and the message. */
int pprt__tdec_fail(dec *d, size_t off, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int pprt__tdec_oom(dec *d, size_t off);
/* A copy of bytes as a NUL-terminated string. */
int pprt__tdec_copy_str(dec *d, const uint8_t *p, size_t n, size_t off, pprt__trace_str *out);
/* A varint at the cursor; what names it in the error. */
int pprt__tdec_get_u(cur *c, uint64_t *v, const char *what);

/* ---- read/trace_tables.c ---- */

/* A string, a stack (its index in t->stacks, or -1) by id in this generation. */
const pprt__trace_str *pprt__tdec_find_str(dec *d, uint64_t id);
int64_t pprt__tdec_find_stack(dec *d, uint64_t id);
/* A new decoded stack with n frames; its arrays are filled by the caller.
 * Its index, or -1. */
int64_t pprt__tdec_new_stack(dec *d, size_t n, size_t off, uint64_t **pcs, pprt__trace_str **names);
/* Thread tid is in the trace, named name (NULL: no new name). */
int pprt__tdec_set_thread_name(dec *d, uint64_t tid, const pprt__trace_str *name, size_t off);
/* The tables' records, each read from its cursor. */
int pprt__tdec_strings(dec *d, cur *c);
int pprt__tdec_frames(dec *d, cur *c);
int pprt__tdec_stacks(dec *d, cur *c);
int pprt__tdec_threads(dec *d, cur *c);
int pprt__tdec_frequency(dec *d, cur *c, size_t off);

#endif /* PPRT_READ_TRACE_DECODER_H */
