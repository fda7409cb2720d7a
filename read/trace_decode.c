/* The trace decoder (read/trace_decode.h).
 *
 * Divisions:
 *   memory      every allocation of a decoded trace hangs off one list;
 *   errors      the first problem, with its byte offset;
 *   events      a batch's events, decoded against the generation's tables
 *               (read/trace_tables.c reads those);
 *   records     the header, then one generation at a time: a first pass
 *               over its records finds and checks its tables (they follow
 *               its batches), a second decodes them, then its events; every
 *               rule of docs/trace-format.md is checked.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace_format.h"
#include "read/trace_decoder.h"

/* ---- memory ------------------------------------------------------------------------- */

typedef struct block {
  struct block *next;
  _Alignas(8) unsigned char data[];
} block;

void *pprt__tdec_alloc(pprt__trace *t, size_t n) {
  block *b = malloc(sizeof *b + (n ? n : 1));
  if (b == NULL)
    return NULL;
  b->next = t->mem_;
  t->mem_ = b;
  return b->data;
}

void pprt__trace_free(pprt__trace *t) {
  if (t == NULL)
    return;
  for (block *b = t->mem_; b;) {
    block *n = b->next;
    free(b);
    b = n;
  }
  free(t->events);
  free(t->stacks);
  free(t->threads);
  free(t->lost);
  free(t);
}

/* ---- errors ------------------------------------------------------------------------- */

int pprt__tdec_fail(dec *d, size_t off, int rc, const char *fmt, ...) {
  if (d->rc == 0) {
    int n = snprintf(d->err, d->errlen, "offset %zu: ", off);
    if (n >= 0 && (size_t)n < d->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(d->err + n, d->errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
    d->rc = rc;
  }
  return d->rc;
}

int pprt__tdec_oom(dec *d, size_t off) {
  return pprt__tdec_fail(d, off, -ENOMEM, "out of memory");
}

static void see_ns(dec *d, int64_t ns) {
  if (!d->have_min || ns < d->min_ns) {
    d->min_ns = ns;
    d->have_min = 1;
  }
}

/* A copy of bytes as a NUL-terminated string. */
int pprt__tdec_copy_str(dec *d, const uint8_t *p, size_t n, size_t off, pprt__trace_str *out) {
  char *s = pprt__tdec_alloc(d->t, n + 1);
  if (s == NULL)
    return pprt__tdec_oom(d, off);
  memcpy(s, p, n);
  s[n] = '\0';
  out->s = s;
  out->len = n;
  return 0;
}

int pprt__tdec_get_u(cur *c, uint64_t *v, const char *what) {
  const uint8_t *q = pprt__get_uvarint(c->p, c->end, v);
  if (q == NULL) {
    if (c->end - c->p >= PPRT__VARINT_MAX)
      return pprt__tdec_fail(c->d, off_of(c), -EINVAL, "%s: malformed varint", what);
    /* A varint that runs off the end may be truncated or too long. */
    const uint8_t *s = c->p;
    while (s < c->end && (*s & 0x80))
      s++;
    if (s == c->end)
      return pprt__tdec_fail(c->d, off_of(c), -EINVAL, "%s: varint runs past the end of its record",
                             what);
    return pprt__tdec_fail(c->d, off_of(c), -EINVAL, "%s: malformed varint", what);
  }
  c->p = q;
  return 0;
}

/* ---- events ---- */

/* Times stay within +-PPRT__TRACE_NS_LIMIT (2^61 ns, 73 years) so that
 * differences of two never overflow, whatever a malformed file says. */
#define NS_LIMIT PPRT__TRACE_NS_LIMIT

/* The generation's sync time, within the limit. */
static int64_t sync_ns(const dec *d) {
  return d->sync_ns > (uint64_t)NS_LIMIT ? NS_LIMIT : (int64_t)d->sync_ns;
}

/* Monotonic nanoseconds of a tick count in this generation: exact integer
 * arithmetic (docs/trace-format.md, "Clock error"). */
static int64_t ticks_to_ns(const dec *d, uint64_t ticks) {
  int64_t delta = pprt__trace_ticks_to_ns((int64_t)(ticks - d->sync_ticks), d->hz);
  return pprt__trace_add_ns(sync_ns(d), delta);
}

static int tl_eq(const void *ctx, uint32_t idx) {
  const struct id_key *k = ctx;
  return k->d->tl[idx].tid == k->id;
}

/* ns for the next event of thread tid, strictly after its previous one:
 * ticks increase strictly per thread, but two generations' calibrations
 * (or ticks finer than a nanosecond) can map neighbours onto one ns or, by
 * a few ns, out of order. -1 when out of memory. */
static int monotonic_ns(dec *d, uint64_t tid, int64_t *ns, size_t off) {
  struct id_key k = {d, tid};
  uint64_t h = pprt__hash_finish(tid);
  int64_t i = pprt__table_find(&d->tl_index, h, tl_eq, &k);
  if (i < 0) {
    if (PPRT__RESERVE(d->tl, d->cap_tl, d->ntl + 1) != 0 ||
        pprt__table_intern(&d->tl_index, h, tl_eq, &k, (uint32_t)d->ntl) < 0)
      return pprt__tdec_oom(d, off);
    d->tl[d->ntl].tid = tid;
    d->tl[d->ntl].ns = *ns;
    d->ntl++;
    return 0;
  }
  if (*ns <= d->tl[i].ns && d->tl[i].ns < NS_LIMIT)
    *ns = d->tl[i].ns + 1;
  d->tl[i].ns = *ns;
  return 0;
}

/* A length-prefixed string (at most 1024 bytes) inside the batch. */
static int read_bytes_arg(cur *c, pprt__trace_str *out, const char *what) {
  dec *d = c->d;
  size_t off = off_of(c);
  uint64_t n;
  if (pprt__tdec_get_u(c, &n, what))
    return d->rc;
  if (n > PPRT__TRACE_MAX_STRING)
    return pprt__tdec_fail(d, off, -EINVAL, "%s: string of %" PRIu64 " bytes (at most %d)", what, n,
                           PPRT__TRACE_MAX_STRING);
  if (n > (uint64_t)(c->end - c->p))
    return pprt__tdec_fail(d, off_of(c), -EINVAL, "%s: string runs past the end of its batch",
                           what);
  if (pprt__tdec_copy_str(d, c->p, (size_t)n, off, out) != 0)
    return d->rc;
  c->p += n;
  return 0;
}

/* A string id of the generation, or 0 and the string inline. */
static int read_str_arg(cur *c, pprt__trace_str *out, const char *what) {
  dec *d = c->d;
  size_t off = off_of(c);
  uint64_t id;
  if (pprt__tdec_get_u(c, &id, what))
    return d->rc;
  if (id == 0)
    return read_bytes_arg(c, out, what);
  const pprt__trace_str *s = pprt__tdec_find_str(d, id);
  if (s == NULL)
    return pprt__tdec_fail(d, off, -EINVAL,
                           "%s: string id %" PRIu64 " is not in generation %" PRIu64 "'s strings",
                           what, id, d->gen);
  *out = *s;
  return 0;
}

static int read_stack_arg(cur *c, int64_t *out) {
  dec *d = c->d;
  size_t off = off_of(c);
  uint64_t id;
  if (pprt__tdec_get_u(c, &id, "stack"))
    return d->rc;
  if (id != 0) {
    if ((*out = pprt__tdec_find_stack(d, id)) < 0)
      return pprt__tdec_fail(d, off, -EINVAL,
                             "stack id %" PRIu64 " is not in generation %" PRIu64 "'s stacks", id,
                             d->gen);
    return 0;
  }
  uint64_t n;
  if (pprt__tdec_get_u(c, &n, "inline stack depth"))
    return d->rc;
  if (n > PPRT__TRACE_MAX_FRAMES)
    return pprt__tdec_fail(d, off, -EINVAL, "inline stack of %" PRIu64 " frames (at most %d)", n,
                           PPRT__TRACE_MAX_FRAMES);
  if (n > (uint64_t)(c->end - c->p))
    return pprt__tdec_fail(d, off_of(c), -EINVAL, "inline stack runs past the end of its batch");
  uint64_t *pcs;
  pprt__trace_str *names;
  if ((*out = pprt__tdec_new_stack(d, (size_t)n, off, &pcs, &names)) < 0)
    return d->rc;
  for (uint64_t f = 0; f < n; f++)
    if (pprt__tdec_get_u(c, &pcs[f], "stack pc"))
      return d->rc;
  return 0;
}

static int parse_batch(dec *d, cur *c, uint64_t tid, uint64_t ts, uint64_t *gen_max_ts) {
  pprt__trace *t = d->t;
  while (c->p < c->end) {
    size_t off = off_of(c);
    uint8_t type = *c->p++;
    const pprt__trace_event_spec *spec = pprt__trace_spec(type);
    if (spec == NULL)
      return pprt__tdec_fail(d, off, -EINVAL, "unknown event type %u", type);
    uint64_t delta;
    if (pprt__tdec_get_u(c, &delta, spec->name))
      return d->rc;
    if (delta == 0)
      return pprt__tdec_fail(d, off, -EINVAL,
                             "%s: timestamp delta 0 (timestamps increase strictly)", spec->name);
    if (ts + delta < ts)
      return pprt__tdec_fail(d, off, -EINVAL, "%s: timestamp overflows", spec->name);
    ts += delta;
    if (PPRT__RESERVE(t->events, d->cap_events, t->nevents + 1) != 0)
      return pprt__tdec_oom(d, off);
    pprt__trace_event *e = &t->events[t->nevents];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->gen = d->gen;
    e->tid = e->emitter = tid;
    e->stack = -1;
    e->offset = off;
    int64_t ns = ticks_to_ns(d, ts);
    uint64_t u[PPRT__TRACE_MAX_ARGS] = {0};
    for (unsigned i = 0; i < spec->nargs; i++) {
      switch (spec->args[i]) {
      case PPRT__ARG_U:
      case PPRT__ARG_S:
        if (pprt__tdec_get_u(c, &u[i], spec->name))
          return d->rc;
        break;
      case PPRT__ARG_STR:
        if (read_str_arg(c, &e->name, spec->name))
          return d->rc;
        break;
      case PPRT__ARG_BYTES:
        if (read_bytes_arg(c, &e->msg, "log message"))
          return d->rc;
        break;
      case PPRT__ARG_STACK:
        if (read_stack_arg(c, &e->stack))
          return d->rc;
        break;
      }
    }
    switch (type) {
    case PPRT__EV_COUNTER:
      e->value = pprt__unzigzag(u[1]);
      break;
    case PPRT__EV_TASK_BEGIN:
    case PPRT__EV_TASK_END:
      if (u[0] == 0)
        return pprt__tdec_fail(d, off, -EINVAL, "%s: task id 0", spec->name);
      e->id = u[0];
      break;
    case PPRT__EV_CPU_SAMPLE:
    case PPRT__EV_ALLOC_SAMPLE:
    case PPRT__EV_FREE_SAMPLE:
      if (u[0] == 0)
        return pprt__tdec_fail(d, off, -EINVAL, "%s: thread id 0", spec->name);
      e->tid = u[0];
      ns = pprt__trace_add_ns(ns, pprt__unzigzag(u[1]));
      if (type == PPRT__EV_CPU_SAMPLE) {
        if (u[3] == 0)
          return pprt__tdec_fail(d, off, -EINVAL, "cpu_sample: count 0");
        e->value = (int64_t)u[3];
      } else {
        e->id = u[2];
        e->value = type == PPRT__EV_ALLOC_SAMPLE ? (int64_t)u[3] : 0;
      }
      break;
    case PPRT__EV_THREAD_NAME:
      if (pprt__tdec_set_thread_name(d, tid, &e->name, off) != 0)
        return d->rc;
      break;
    }
    if (e->tid == tid && monotonic_ns(d, tid, &ns, off) != 0)
      return d->rc;
    /* Until the origin is known, ts holds signed monotonic nanoseconds. */
    e->ts = (uint64_t)ns;
    see_ns(d, ns);
    if (!*gen_max_ts || ns > (int64_t)*gen_max_ts)
      *gen_max_ts = (uint64_t)ns;
    t->nevents++;
  }
  return 0;
}

/* ---- records ---- */

typedef struct rec {
  uint8_t type;
  uint64_t gen, tid, ts;
  size_t off;          /* of the type byte */
  const uint8_t *body; /* payload */
  size_t len;
} rec;

/* Reads the record at *pos. 1: a record; 0: the end of the input at a
 * record boundary; < 0: an error (truncated is set when the record was cut
 * short by the end of the input). */
static int read_record(dec *d, size_t *pos, rec *r, int *truncated) {
  *truncated = 0;
  if (*pos == d->len)
    return 0;
  cur c = {d, d->data + *pos, d->data + d->len};
  r->off = *pos;
  r->type = *c.p++;
  unsigned last = d->t->version >= 2 ? PPRT__TR_FRAMES : PPRT__TR_GEN_END;
  if (r->type < PPRT__TR_BATCH || r->type > last) {
    if (pprt__trace_spec(r->type))
      return pprt__tdec_fail(d, r->off, -EINVAL, "event type %u outside a batch", r->type);
    return pprt__tdec_fail(d, r->off, -EINVAL, "unknown record type %u", r->type);
  }
  static const char *const names[] = {"",        "batch",     "strings", "stacks",
                                      "threads", "frequency", "lost",    "end of generation",
                                      "frames"};
  const char *what = names[r->type];
  r->tid = r->ts = 0;
  if (pprt__tdec_get_u(&c, &r->gen, what) ||
      (r->type == PPRT__TR_BATCH && (pprt__tdec_get_u(&c, &r->tid, "batch thread id") ||
                                     pprt__tdec_get_u(&c, &r->ts, "batch timestamp")))) {
    *truncated = c.p + PPRT__VARINT_MAX > c.end;
    return d->rc;
  }
  if (c.end - c.p < 4) {
    *truncated = 1;
    return pprt__tdec_fail(d, off_of(&c), -EINVAL,
                           "%s record: length cut short by the end of the file", what);
  }
  uint32_t len = pprt__get_u32le(c.p);
  c.p += 4;
  if (len > PPRT__TRACE_MAX_RECORD)
    return pprt__tdec_fail(d, off_of(&c) - 4, -EINVAL,
                           "%s record of %" PRIu32 " bytes (at most %d)", what, len,
                           PPRT__TRACE_MAX_RECORD);
  if (len > (size_t)(c.end - c.p)) {
    *truncated = 1;
    return pprt__tdec_fail(d, off_of(&c) - 4, -EINVAL,
                           "%s record of %" PRIu32 " bytes, but the file ends %zu bytes later",
                           what, len, (size_t)(c.end - c.p));
  }
  if (r->type == PPRT__TR_GEN_END && len != 0)
    return pprt__tdec_fail(d, off_of(&c) - 4, -EINVAL, "end-of-generation record with a payload");
  r->body = c.p;
  r->len = len;
  *pos = off_of(&c) + len;
  return 1;
}

static void reset_generation(dec *d) {
  d->nstrs = d->nstks = d->nfrs = 0;
  pprt__table_free(&d->str_index);
  pprt__table_free(&d->stack_index);
  pprt__table_free(&d->fr_index);
  d->have_freq = 0;
}

/* Decodes the generation at *pos. 1: decoded; 0: the input ended inside it
 * (with PARTIAL: the caller stops; else an error was set). < 0: error. */
static int decode_generation(dec *d, size_t *pos, int first) {
  size_t start = *pos;
  size_t p = start;
  rec r;
  int truncated;
  size_t end_pos = 0;
  /* Pass 1: find the end of the generation, check every record's framing,
   * read the strings (stacks and threads need them). */
  for (;;) {
    int rc = read_record(d, &p, &r, &truncated);
    if (rc == 0) {
      if (p == start && !first)
        return 2; /* the input ends after a complete generation */
      truncated = 1;
      if (p == start)
        pprt__tdec_fail(d, p, -EINVAL, "no generation: the file ends after its header");
      else
        pprt__tdec_fail(d, p, -EINVAL,
                        "generation %" PRIu64 " has no end-of-generation record "
                        "(the file is cut short)",
                        d->gen);
      rc = d->rc;
    }
    if (rc < 0) {
      if (truncated && (d->flags & PPRT__TRACE_DECODE_PARTIAL) && !first) {
        d->t->truncated_at = start;
        snprintf(d->t->truncated_reason, sizeof d->t->truncated_reason, "%s", d->err);
        d->rc = 0;
        d->err[0] = '\0';
        return 0;
      }
      return d->rc;
    }
    if (r.off == start) {
      /* The first record gives the generation's number. */
      if (first)
        d->gen = r.gen;
      else if (r.gen != d->gen)
        return pprt__tdec_fail(d, r.off, -EINVAL,
                               "generation %" PRIu64 " follows generation %" PRIu64, r.gen,
                               d->gen - 1);
    }
    if (r.gen != d->gen)
      return pprt__tdec_fail(d, r.off, -EINVAL,
                             "record of generation %" PRIu64 " inside generation %" PRIu64, r.gen,
                             d->gen);
    cur c = {d, r.body, r.body + r.len};
    if (r.type == PPRT__TR_STRINGS && pprt__tdec_strings(d, &c) != 0)
      return d->rc;
    if (r.type == PPRT__TR_FREQUENCY && pprt__tdec_frequency(d, &c, r.off) != 0)
      return d->rc;
    if (r.type == PPRT__TR_BATCH && r.tid == 0)
      return pprt__tdec_fail(d, r.off, -EINVAL, "batch of thread id 0");
    if (r.type == PPRT__TR_GEN_END) {
      end_pos = p;
      break;
    }
  }
  if (!d->have_freq)
    return pprt__tdec_fail(d, r.off, -EINVAL, "generation %" PRIu64 " has no frequency record",
                           d->gen);
  see_ns(d, sync_ns(d));

  /* Pass 2: source lines, stacks, threads, lost counts, then the events. */
  uint64_t gen_max = 0;
  size_t lost_from = d->t->nlost;
  for (int phase = 0; phase < 3; phase++) {
    p = start;
    while (p < end_pos) {
      read_record(d, &p, &r, &truncated); /* checked in pass 1 */
      cur c = {d, r.body, r.body + r.len};
      if (phase == 0 && r.type == PPRT__TR_FRAMES && pprt__tdec_frames(d, &c) != 0)
        return d->rc;
      if (phase == 1 && r.type == PPRT__TR_STACKS && pprt__tdec_stacks(d, &c) != 0)
        return d->rc;
      if (phase == 2 && r.type == PPRT__TR_THREADS && pprt__tdec_threads(d, &c) != 0)
        return d->rc;
      if (phase == 2 && r.type == PPRT__TR_BATCH && parse_batch(d, &c, r.tid, r.ts, &gen_max) != 0)
        return d->rc;
      if (phase == 2 && r.type == PPRT__TR_LOST) {
        while (c.p < c.end) {
          size_t off = off_of(&c);
          uint64_t tid, n;
          if (pprt__tdec_get_u(&c, &tid, "lost thread id") ||
              pprt__tdec_get_u(&c, &n, "lost count"))
            return d->rc;
          if (n == 0)
            return pprt__tdec_fail(d, off, -EINVAL, "lost count 0");
          pprt__trace *t = d->t;
          if (PPRT__RESERVE(t->lost, d->cap_lost, t->nlost + 1) != 0)
            return pprt__tdec_oom(d, off);
          t->lost[t->nlost++] = (pprt__trace_lost){d->gen, tid, n, 0};
        }
      }
    }
  }
  for (size_t i = lost_from; i < d->t->nlost; i++)
    d->t->lost[i].ts = gen_max ? gen_max : d->sync_ns;
  if (d->t->ngens == 0) {
    d->t->first_gen = d->gen;
    d->t->origin_mono_ns = d->sync_ns;
    d->t->origin_wall_ns = d->sync_wall;
  }
  d->t->ngens++;
  d->gen++;
  reset_generation(d);
  *pos = end_pos;
  return 1;
}

static int tid_cmp(const void *a, const void *b) {
  const pprt__trace_thread *x = a, *y = b;
  return x->tid < y->tid ? -1 : x->tid > y->tid;
}

int pprt__trace_decode(const void *data, size_t len, unsigned flags, pprt__trace **out, char *err,
                       size_t errlen) {
  char dummy[1];
  if (err == NULL || errlen == 0) {
    err = dummy;
    errlen = sizeof dummy;
  }
  err[0] = '\0';
  *out = NULL;
  dec d = {0};
  d.data = data;
  d.len = len;
  d.flags = flags;
  d.err = err;
  d.errlen = errlen;
  d.t = calloc(1, sizeof *d.t);
  if (d.t == NULL)
    return pprt__tdec_oom(&d, 0);
  const uint8_t *p = data;
  if (len > PPRT__TRACE_MAX_BYTES)
    pprt__tdec_fail(&d, 0, -EFBIG, "trace of %zu bytes (at most %zu)", len, PPRT__TRACE_MAX_BYTES);
  else if (len < PPRT__TRACE_HEADER_LEN)
    pprt__tdec_fail(&d, len, -EINVAL, "file of %zu bytes is shorter than the %d-byte header", len,
                    PPRT__TRACE_HEADER_LEN);
  else if (memcmp(p, PPRT__TRACE_MAGIC, PPRT__TRACE_MAGIC_LEN) != 0)
    pprt__tdec_fail(&d, 0, -EINVAL, "not a pprt trace (bad magic)");
  if (d.rc == 0) {
    unsigned version = (unsigned)p[8] | (unsigned)p[9] << 8;
    d.t->version = version;
    if (version == 0)
      pprt__tdec_fail(&d, 8, -EINVAL, "trace format version 0 does not exist");
    else if (version > PPRT__TRACE_VERSION)
      pprt__tdec_fail(
          &d, 8, -ENOTSUP,
          "trace format version %u is newer than this reader (version %d): read it with a "
          "newer pprt",
          version, PPRT__TRACE_VERSION);
    else if (p[10] != 0 || p[11] != 0)
      pprt__tdec_fail(&d, 10, -EINVAL, "header flags %u are not defined in version %u",
                      (unsigned)p[10] | (unsigned)p[11] << 8, version);
    else
      for (int i = 12; i < 16; i++)
        if (p[i] != 0) {
          pprt__tdec_fail(&d, (size_t)i, -EINVAL, "reserved header byte is %u, not 0", p[i]);
          break;
        }
  }
  size_t pos = PPRT__TRACE_HEADER_LEN;
  for (int first = 1; d.rc == 0; first = 0) {
    int rc = decode_generation(&d, &pos, first);
    if (rc != 1)
      break;
  }
  reset_generation(&d);
  free(d.strs);
  free(d.stks);
  free(d.frs);
  free(d.tl);
  pprt__table_free(&d.tl_index);
  pprt__table_free(&d.thread_index);
  if (d.rc != 0) {
    pprt__trace_free(d.t);
    return d.rc;
  }
  pprt__trace *t = d.t;
  /* The origin: the earliest time in the file. */
  int64_t origin = d.have_min ? d.min_ns : 0;
  for (size_t i = 0; i < t->nevents; i++)
    t->events[i].ts = (uint64_t)((int64_t)t->events[i].ts - origin);
  for (size_t i = 0; i < t->nlost; i++)
    t->lost[i].ts = (uint64_t)((int64_t)t->lost[i].ts - origin);
  /* Unsigned: a malformed file's clocks may be anything; wrap, not UB. */
  t->origin_wall_ns += (uint64_t)origin - t->origin_mono_ns;
  t->origin_mono_ns = (uint64_t)origin;
  if (t->nthreads > 1)
    qsort(t->threads, t->nthreads, sizeof *t->threads, tid_cmp);
  *out = t;
  return 0;
}
