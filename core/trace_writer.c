/* The trace encoder's writer thread: it drains every thread's committed
 * events into batch records (reading back each byte, to learn the ids and
 * threads a generation uses), and at each generation's end writes the
 * generation's tables (stacks with their function names and source lines,
 * strings, threads), its clock and its losses; then streams it to the
 * session's writer or keeps it for the flight recorder.
 *
 * Which thread: the writer thread alone (one per session), except
 * pprt__trace_clock_pair and pprt__trace_new_sync_point, which session
 * start runs before the writer exists, and pprt__trace_gen_release, which
 * whoever holds the last reference to a kept generation runs. It reads
 * other threads' chunks only up to their published lengths and gives
 * consumed chunks back through each thread's returned list.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/heap.h"
#include "core/platform.h"
#include "core/symbolize.h"
#include "core/table.h"
#include "core/trace_format.h"
#include "core/trace_internal.h"

#define STREAM_FLUSH_BYTES ((size_t)1 << 20)
/* The TSC's rate is measured over at least 5 ms (Go's minimum) and until its
 * error bound is 1/CALIBRATION_ERR_INV (10 ppm), but no longer than 1 s. */
#define MIN_CALIBRATION_NS 5000000ull
#define MAX_CALIBRATION_NS 1000000000ull
#define CALIBRATION_ERR_INV 100000u
/* A clock pair is retried up to PAIR_TRIES times until its bracket is at
 * most PAIR_WIDTH_NS (two monotonic reads and a counter read take ~70 ns
 * here; wider means an interrupt or a preemption came between them). */
#define PAIR_TRIES 16
#define PAIR_WIDTH_NS 250u

atomic_uint pprt__trace_wake_seq;
atomic_uint pprt__trace_writer_waiting;

/* ---- the writer -------------------------------------------------------------------------- */

static uint8_t *buf_reserve(buf *b, size_t n) {
  if (pprt__reserve((void **)&b->p, &b->cap, b->len + n, 1) != 0) {
    b->oom = 1;
    return NULL;
  }
  return b->p + b->len;
}

void pprt__trace_gen_release(gendata *d) {
  if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) == 1)
    free(d);
}

static void mark_string(session *s, uint32_t id) {
  if (id == 0 || id > pprt__trace_strings.max_ids || s->str_gen[id] == s->gen)
    return;
  s->str_gen[id] = s->gen;
  s->str_list[s->nstr++] = id;
}

static void mark_stack(session *s, uint32_t id) {
  if (id == 0 || id > pprt__trace_stacks.max_ids || s->stack_gen[id] == s->gen)
    return;
  s->stack_gen[id] = s->gen;
  s->stack_list[s->nstack++] = id;
}

static tinfo *thread_info(session *s, uint64_t tid) {
  int64_t idx =
      PPRT__TABLE_U64(&s->thread_index, s->threads, s->nthreads, s->threads_cap, tid, NULL);
  return idx >= 0 ? &s->threads[idx] : NULL;
}

static void thread_seen(session *s, uint64_t tid) {
  tinfo *ti = thread_info(s, tid);
  if (ti)
    ti->seen_gen = s->gen;
}

/* Skips a string argument; marks its id. NULL when malformed. */
static const uint8_t *scan_str(session *s, const uint8_t *p, const uint8_t *end, uint32_t *id) {
  uint64_t v;
  if ((p = pprt__get_uvarint(p, end, &v)) == NULL)
    return NULL;
  *id = (uint32_t)v;
  if (v != 0) {
    mark_string(s, (uint32_t)v);
    return p;
  }
  if ((p = pprt__get_uvarint(p, end, &v)) == NULL || v > (uint64_t)(end - p))
    return NULL;
  return p + v;
}

/* Reads back what a thread encoded, from [p, end): the timestamp after it
 * (from *ts) and the ids and threads it refers to. Returns the number of
 * bytes of whole events (== end - p unless the bytes are malformed, which
 * would be a bug in this file). */
static size_t scan_events(session *s, uint64_t emitter, const uint8_t *p, const uint8_t *end,
                          uint64_t *ts) {
  const uint8_t *start = p;
  tinfo *self = NULL;
  while (p < end) {
    const uint8_t *ev = p;
    const pprt__trace_event_spec *spec = pprt__trace_spec(*p++);
    uint64_t v;
    if (spec == NULL || (p = pprt__get_uvarint(p, end, &v)) == NULL)
      return (size_t)(ev - start);
    *ts += v;
    uint8_t type = ev[0];
    for (unsigned i = 0; i < spec->nargs && p; i++) {
      uint32_t id;
      switch (spec->args[i]) {
      case PPRT__ARG_U:
      case PPRT__ARG_S:
        p = pprt__get_uvarint(p, end, &v);
        if (p && i == 0 &&
            (type == PPRT__EV_CPU_SAMPLE || type == PPRT__EV_ALLOC_SAMPLE ||
             type == PPRT__EV_FREE_SAMPLE))
          thread_seen(s, v);
        break;
      case PPRT__ARG_STR:
        p = scan_str(s, p, end, &id);
        if (p && type == PPRT__EV_THREAD_NAME && id != 0) {
          if (self == NULL)
            self = thread_info(s, emitter);
          if (self)
            self->name_id = id;
        }
        break;
      case PPRT__ARG_BYTES:
        if ((p = pprt__get_uvarint(p, end, &v)) != NULL)
          p = v <= (uint64_t)(end - p) ? p + v : NULL;
        break;
      case PPRT__ARG_STACK:
        if ((p = pprt__get_uvarint(p, end, &v)) == NULL)
          break;
        if (v != 0) {
          mark_stack(s, (uint32_t)v);
          break;
        }
        if ((p = pprt__get_uvarint(p, end, &v)) == NULL)
          break;
        for (uint64_t k = 0; k < v && p; k++) {
          uint64_t pc;
          p = pprt__get_uvarint(p, end, &pc);
        }
        break;
      }
    }
    if (p == NULL)
      return (size_t)(ev - start);
  }
  return (size_t)(p - start);
}

/* Opens a record; returns the offset of its length field, or SIZE_MAX. */
static size_t rec_open(session *s, uint8_t type, int batch, uint64_t tid, uint64_t ts) {
  uint8_t *p = buf_reserve(&s->gb, 1 + 3 * PPRT__VARINT_MAX + 4);
  if (p == NULL)
    return SIZE_MAX;
  uint8_t *q = p;
  *q++ = type;
  q = pprt__put_uvarint(q, s->gen);
  if (batch) {
    q = pprt__put_uvarint(q, tid);
    q = pprt__put_uvarint(q, ts);
  }
  s->gb.len += (size_t)(q - p);
  size_t at = s->gb.len;
  s->gb.len += 4;
  return at;
}

/* Patches the record's length (the bytes after the length field). */
static void rec_close(session *s, size_t at) {
  pprt__put_u32le(s->gb.p + at, (uint32_t)(s->gb.len - at - 4));
}

static int put_bytes(session *s, const void *data, size_t n) {
  uint8_t *p = buf_reserve(&s->gb, n);
  if (p == NULL)
    return -ENOMEM;
  memcpy(p, data, n);
  s->gb.len += n;
  return 0;
}

static int put_uv(session *s, uint64_t v) {
  uint8_t tmp[PPRT__VARINT_MAX];
  return put_bytes(s, tmp, (size_t)(pprt__put_uvarint(tmp, v) - tmp));
}

/* Copies t's committed bytes from its current read chunk out as one batch. */
static void emit_batch(session *s, tstate *t, chunk *c, size_t upto) {
  const uint8_t *from = c->data + t->rd_off;
  uint64_t ts0 = t->rd_ts;
  size_t n = scan_events(s, t->tid, from, c->data + upto, &t->rd_ts);
  if (n > 0) {
    size_t at = rec_open(s, PPRT__TR_BATCH, 1, t->tid, ts0);
    if (at != SIZE_MAX && put_bytes(s, from, n) == 0) {
      rec_close(s, at);
      s->stats.batches++;
      thread_seen(s, t->tid);
    }
  }
  /* Malformed bytes (never expected) are skipped, not written. */
  t->rd_off = upto;
}

static int generation_full(const session *s) {
  return s->gen_len + s->gb.len >= s->gen_bytes;
}

/* Takes what thread t has committed: sealed chunks, and the current one too
 * when all is set. With limited, stops once the generation is full.
 * Returns 1 when it took everything it was asked to. */
static int drain(session *s, tstate *t, int all, int limited) {
  if (t->wr_session != s->id) {
    t->wr_session = s->id;
    t->rd = t->first;
    t->rd_off = 0;
    t->rd_ts = t->rd->base_ts;
    t->wr_dropped = 0;
  }
  for (;;) {
    if (limited && generation_full(s))
      return 0;
    chunk *c = t->rd;
    chunk *next = atomic_load_explicit(&c->next, memory_order_acquire);
    size_t committed = atomic_load_explicit(&c->committed, memory_order_acquire);
    if (next == NULL && !all)
      return 1;
    if (committed > t->rd_off)
      emit_batch(s, t, c, committed);
    if (next == NULL)
      return 1;
    /* Sealed: committed was final before next was published. */
    t->rd = next;
    t->rd_off = 0;
    t->rd_ts = next->base_ts;
    chunk *head = atomic_load_explicit(&t->returned, memory_order_relaxed);
    do
      c->link = head;
    while (!atomic_compare_exchange_weak_explicit(&t->returned, &head, c, memory_order_release,
                                                  memory_order_relaxed));
  }
}

static void lost_add(session *s, uint64_t tid, uint64_t count) {
  if (PPRT__RESERVE(s->lost, s->lost_cap, s->nlost + 1) != 0) {
    /* Folded into the previous entry (there is one: the array starts with
     * room) rather than lost from the record. */
    s->lost[s->nlost - 1].count += count;
    return;
  }
  s->lost[s->nlost].tid = tid;
  s->lost[s->nlost].count = count;
  s->nlost++;
}

/* Drains every thread that writes for this session, round robin from
 * where a limited drain last stopped (so that a busy thread early in the
 * list cannot starve the others). Returns 1 when it took everything. */
static int drain_all(session *s, int all, int limited) {
  uint64_t unjoined = atomic_exchange_explicit(&pprt__trace_join_dropped, 0, memory_order_relaxed);
  if (unjoined) {
    lost_add(s, 0, unjoined);
    s->stats.events_dropped += unjoined;
  }
  tstate *head = atomic_load_explicit(&pprt__trace_states, memory_order_acquire);
  if (head == NULL)
    return 1;
  tstate *start = s->drain_next ? s->drain_next : head;
  tstate *t = start;
  for (;;) {
    unsigned v = atomic_load_explicit(&t->status, memory_order_acquire);
    unsigned st = ST_OF(v);
    int done = 1;
    if ((st == ST_LIVE || st == ST_EXITED) &&
        atomic_load_explicit(&t->joined, memory_order_acquire) == s->id) {
      /* An exited thread wrote its last event before its status. */
      done = drain(s, t, all || st == ST_EXITED, limited);
      uint64_t d = atomic_load_explicit(&t->dropped, memory_order_relaxed);
      if (d > t->wr_dropped) {
        lost_add(s, t->tid, d - t->wr_dropped);
        s->stats.events_dropped += d - t->wr_dropped;
        t->wr_dropped = d;
      }
    }
    if (!done) {
      s->drain_next = t;
      return 0;
    }
    if (st == ST_EXITED)
      pprt__trace_reclaim(t, v); /* everything it wrote is out */
    t = t->next_all ? t->next_all : head;
    if (t == start)
      break;
  }
  s->drain_next = NULL;
  return 1;
}

/* ---- generation end -------------------------------------------------------------------- */

/* The pcs entry of frame i of a stack (symbolized the first time), or -1.
 * Frames after the leaf are return addresses: the call is at pc - 1. Its
 * name is the function the code is in; with debug information it also has
 * its source lines, inlined functions first, for the FRAMES record. */
static int64_t frame_entry(session *s, uint64_t pc, size_t i) {
  if (!s->symbolize || pc == 0)
    return -1;
  uint64_t addr = i == 0 ? pc : pc - 1;
  int added;
  int64_t idx = PPRT__TABLE_U64(&s->pc_index, s->pcs, s->npcs, s->pcs_cap, addr, &added);
  if (idx < 0 || !added)
    return idx;
  if (!s->sym_tried) {
    s->sym_tried = 1;
    if (pprt__symbolizer_open(&s->sym, PPRT_SYMBOLIZE_DEFAULT) != 0)
      s->sym = NULL;
  }
  pc_name e = {addr, 0, 0, 0, 0};
  pprt__frame fr[PPRT__MAX_FRAMES];
  unsigned flags = 0;
  size_t n = s->sym ? pprt__symbolizer_frames(s->sym, addr, fr, PPRT__MAX_FRAMES, &flags) : 0;
  if (n > 0)
    e.name_id = pprt__trace_str_id(fr[n - 1].name); /* the function the code is in */
  if (n > 0 && (flags & PPRT__FRAMES_DWARF) &&
      PPRT__RESERVE(s->lines, s->lines_cap, s->nlines + n) == 0) {
    e.first = (uint32_t)s->nlines;
    e.nlines = (uint16_t)n;
    for (size_t j = 0; j < n; j++) {
      pc_line l = {pprt__trace_str_id(fr[j].name), fr[j].file ? pprt__trace_str_id(fr[j].file) : 0,
                   fr[j].line > 0 ? (uint32_t)fr[j].line : 0};
      if (l.func == 0) { /* the string table is full: no lines rather than a bad record */
        e.nlines = 0;
        break;
      }
      s->lines[e.first + j] = l;
    }
    s->nlines = e.first + e.nlines;
  }
  s->pcs[idx] = e;
  return idx;
}

/* The function name of frame i as a string id (0: unknown); a pc with
 * source lines joins the generation's FRAMES record, its strings marked. */
static uint32_t frame_name(session *s, uint64_t pc, size_t i) {
  int64_t idx = frame_entry(s, pc, i);
  if (idx < 0)
    return 0;
  pc_name *e = &s->pcs[idx];
  if (e->nlines && e->gen != s->gen + 1 &&
      PPRT__RESERVE(s->gen_pcs, s->gen_pcs_cap, s->ngen_pcs + 1) == 0) {
    e->gen = s->gen + 1;
    s->gen_pcs[s->ngen_pcs++] = (uint32_t)idx;
    for (size_t j = 0; j < e->nlines; j++) {
      mark_string(s, s->lines[e->first + j].func);
      mark_string(s, s->lines[e->first + j].file);
    }
  }
  return e->name_id;
}

/* Writes entries into records of one type, each at most MAX_RECORD bytes.
 * Returns the offset of the open record's length field. */
static size_t table_entry(session *s, uint8_t type, size_t at, size_t entry_len) {
  if (at != SIZE_MAX && s->gb.len - at - 4 + entry_len > PPRT__TRACE_MAX_RECORD) {
    rec_close(s, at);
    at = SIZE_MAX;
  }
  if (at == SIZE_MAX)
    at = rec_open(s, type, 0, 0, 0);
  return at;
}

static void write_stacks(session *s) {
  size_t at = SIZE_MAX;
  uint8_t tmp[PPRT__VARINT_MAX * (2 + 2 * PPRT__TRACE_MAX_FRAMES)];
  /* Names are marked as they are found, so the strings go after. */
  for (size_t i = 0; i < s->nstack; i++) {
    const ientry *e = pprt__itable_entry(&pprt__trace_stacks, s->stack_list[i]);
    if (e == NULL)
      continue;
    size_t n = e->len / sizeof(uint64_t);
    uint8_t *p = pprt__put_uvarint(tmp, e->id);
    p = pprt__put_uvarint(p, n);
    for (size_t f = 0; f < n; f++) {
      uint64_t pc;
      memcpy(&pc, e->bytes + f * sizeof pc, sizeof pc);
      uint32_t name = frame_name(s, pc, f);
      mark_string(s, name);
      p = pprt__put_uvarint(p, pc);
      p = pprt__put_uvarint(p, name);
    }
    at = table_entry(s, PPRT__TR_STACKS, at, (size_t)(p - tmp));
    if (at == SIZE_MAX || put_bytes(s, tmp, (size_t)(p - tmp)) != 0)
      return;
  }
  if (at != SIZE_MAX)
    rec_close(s, at);
}

/* FRAMES (format version 2): the source lines of the pcs this
 * generation's stacks use, where debug information gave them. */
static void write_frames(session *s) {
  size_t at = SIZE_MAX;
  uint8_t tmp[PPRT__VARINT_MAX * (2 + 3 * PPRT__MAX_FRAMES)];
  for (size_t i = 0; i < s->ngen_pcs; i++) {
    const pc_name *e = &s->pcs[s->gen_pcs[i]];
    uint8_t *p = pprt__put_uvarint(tmp, e->pc);
    p = pprt__put_uvarint(p, e->nlines);
    for (size_t j = 0; j < e->nlines; j++) {
      const pc_line *l = &s->lines[e->first + j];
      p = pprt__put_uvarint(p, l->func);
      p = pprt__put_uvarint(p, l->file);
      p = pprt__put_uvarint(p, l->line);
    }
    at = table_entry(s, PPRT__TR_FRAMES, at, (size_t)(p - tmp));
    if (at == SIZE_MAX || put_bytes(s, tmp, (size_t)(p - tmp)) != 0)
      break;
  }
  s->ngen_pcs = 0;
  if (at != SIZE_MAX)
    rec_close(s, at);
}

static void write_strings(session *s) {
  size_t at = SIZE_MAX;
  for (size_t i = 0; i < s->nstr; i++) {
    const ientry *e = pprt__itable_entry(&pprt__trace_strings, s->str_list[i]);
    if (e == NULL)
      continue;
    uint8_t hdr[2 * PPRT__VARINT_MAX];
    uint8_t *p = pprt__put_uvarint(hdr, e->id);
    p = pprt__put_uvarint(p, e->len);
    at = table_entry(s, PPRT__TR_STRINGS, at, (size_t)(p - hdr) + e->len);
    if (at == SIZE_MAX || put_bytes(s, hdr, (size_t)(p - hdr)) != 0 ||
        put_bytes(s, e->bytes, e->len) != 0)
      return;
  }
  if (at != SIZE_MAX)
    rec_close(s, at);
}

/* Names for the threads this generation mentions: what they called
 * themselves, else what the OS calls them (asked once). */
static void name_threads(session *s) {
  for (size_t i = 0; i < s->nthreads; i++) {
    tinfo *ti = &s->threads[i];
    if (ti->seen_gen != s->gen)
      continue;
    if (ti->name_id == 0 && !ti->os_name_tried) {
      ti->os_name_tried = 1;
      char name[64];
      if (pprt__os_thread_name(ti->tid, name, sizeof name) == 0 && name[0] != '\0')
        ti->name_id = pprt__trace_str_id(name);
    }
    mark_string(s, ti->name_id);
  }
}

static void write_threads(session *s) {
  size_t at = rec_open(s, PPRT__TR_THREADS, 0, 0, 0);
  if (at == SIZE_MAX || put_uv(s, (uint64_t)getpid()) != 0)
    return;
  for (size_t i = 0; i < s->nthreads; i++) {
    tinfo *ti = &s->threads[i];
    if (ti->seen_gen != s->gen)
      continue;
    at = table_entry(s, PPRT__TR_THREADS, at, 2 * PPRT__VARINT_MAX);
    if (at == SIZE_MAX || put_uv(s, ti->tid) != 0 || put_uv(s, ti->name_id) != 0)
      return;
  }
  rec_close(s, at);
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  nanosleep(&ts, NULL);
}

/* The trace clock and the monotonic clock at one moment. Where the trace
 * clock is the monotonic clock, one read is both. Else the tick read is
 * bracketed by two monotonic reads and paired with their midpoint, which is
 * off by at most half the bracket's width; the narrowest of a few tries.
 * Returns that width. */
uint64_t pprt__trace_clock_pair(const session *s, uint64_t *ticks, uint64_t *ns) {
  if (s->ticks_monotonic) {
    *ticks = *ns = pprt__os_ticks();
    return 0;
  }
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < PAIR_TRIES && best > PAIR_WIDTH_NS; i++) {
    uint64_t a = pprt__os_monotonic_ns();
    uint64_t t = pprt__os_ticks();
    uint64_t b = pprt__os_monotonic_ns();
    if (b - a < best) {
      best = b - a;
      *ticks = t;
      *ns = a + (b - a) / 2;
    }
  }
  return best;
}

/* Ticks per second: exact, or the TSC measured against the monotonic clock
 * since the session began. Each end of the measurement is a clock pair off
 * by at most half its width w, so the rate is off by at most
 * (w0 + w1) / 2 / elapsed: the measurement lasts until that is
 * 1/CALIBRATION_ERR_INV, within [MIN_CALIBRATION_NS, MAX_CALIBRATION_NS].
 * Integer arithmetic: exact however long the session. */
static uint64_t ticks_hz(session *s) {
  if (s->hz_exact)
    return s->hz_exact;
  uint64_t ticks = 0, ns = 0, elapsed = 0; /* set by the first clock_pair */
  for (;;) {
    uint64_t w = pprt__trace_clock_pair(s, &ticks, &ns);
    uint64_t err = s->t0_width / 2 + w / 2; /* ns, at either end together */
    uint64_t need = err > MAX_CALIBRATION_NS / CALIBRATION_ERR_INV ? MAX_CALIBRATION_NS
                                                                   : err * CALIBRATION_ERR_INV;
    if (need < MIN_CALIBRATION_NS)
      need = MIN_CALIBRATION_NS;
    elapsed = ns - s->t0_ns;
    if (elapsed >= need)
      break;
    sleep_ns(need - elapsed);
  }
  uint64_t rem, hz = pprt__muldiv(ticks - s->t0_ticks, 1000000000u, elapsed, &rem);
  if (hz < UINT64_MAX && rem >= elapsed - rem)
    hz++; /* to the nearest */
  return hz ? hz : 1;
}

static void write_frequency(session *s) {
  size_t at = rec_open(s, PPRT__TR_FREQUENCY, 0, 0, 0);
  if (at == SIZE_MAX || put_uv(s, ticks_hz(s)) != 0 || put_uv(s, s->sync_ticks) != 0 ||
      put_uv(s, s->sync_ns) != 0 || put_uv(s, s->sync_wall) != 0)
    return;
  rec_close(s, at);
}

static void write_lost(session *s) {
  if (s->nlost == 0)
    return;
  size_t at = SIZE_MAX;
  for (size_t i = 0; i < s->nlost; i++) {
    at = table_entry(s, PPRT__TR_LOST, at, 2 * PPRT__VARINT_MAX);
    if (at == SIZE_MAX || put_uv(s, s->lost[i].tid) != 0 || put_uv(s, s->lost[i].count) != 0)
      return;
  }
  rec_close(s, at);
  s->nlost = 0;
}

/* Hands the bytes gathered so far to the output (streaming). */
static void flush_out(session *s) {
  if (s->gb.len == 0)
    return;
  if (s->err == 0 && s->gb.oom)
    s->err = -ENOMEM;
  if (s->err == 0) {
    int rc = s->out.write(s->out.ctx, s->gb.p, s->gb.len);
    if (rc != 0)
      s->err = rc;
    else
      s->stats.bytes += s->gb.len;
  }
  s->gen_len += s->gb.len;
  s->gb.len = 0;
  s->gb.oom = 0;
}

void pprt__trace_new_sync_point(session *s) {
  pprt__trace_clock_pair(s, &s->sync_ticks, &s->sync_ns);
  s->sync_wall = pprt__os_wall_ns();
  s->gen_start_ns = s->sync_ns;
}

/* Keeps the generation just completed (flight recorder) and drops the
 * oldest ones beyond the budgets, always keeping the newest. */
static void keep_generation(session *s) {
  genblob g = {NULL, s->gb.len, pprt__os_monotonic_ns()};
  if (s->gb.oom || (g.data = malloc(sizeof *g.data + g.len)) == NULL) {
    s->gb.len = 0;
    s->gb.oom = 0;
    return; /* the generation is lost: snapshots hold the others */
  }
  atomic_init(&g.data->refs, 1);
  memcpy(g.data->bytes, s->gb.p, g.len);
  s->gb.len = 0;
  pthread_mutex_lock(&s->gens_mu);
  if (PPRT__RESERVE(s->gens, s->gens_cap, s->ngens + 1) != 0) {
    pthread_mutex_unlock(&s->gens_mu);
    pprt__trace_gen_release(g.data);
    return;
  }
  s->gens[s->ngens++] = g;
  s->gens_bytes += g.len;
  size_t drop = 0;
  while (s->ngens - drop > 1 &&
         (s->gens_bytes > s->max_bytes || g.end_ns - s->gens[drop].end_ns > s->max_age_ns)) {
    s->gens_bytes -= s->gens[drop].len;
    pprt__trace_gen_release(s->gens[drop].data);
    drop++;
  }
  memmove(s->gens, s->gens + drop, (s->ngens - drop) * sizeof *s->gens);
  s->ngens -= drop;
  pthread_mutex_unlock(&s->gens_mu);
}

/* Writes the generation's tables and end, hands it on, starts the next. */
static void finish_generation(session *s) {
  name_threads(s);
  write_stacks(s); /* marks the function names */
  write_frames(s);
  write_strings(s);
  write_threads(s);
  write_frequency(s);
  write_lost(s);
  size_t at = rec_open(s, PPRT__TR_GEN_END, 0, 0, 0);
  if (at != SIZE_MAX)
    rec_close(s, at);
  if (s->flight)
    keep_generation(s);
  else
    flush_out(s);
  s->stats.generations++;
  s->gen++;
  s->gen_len = 0;
  s->nstr = s->nstack = 0;
  pprt__trace_new_sync_point(s);
}

/* Ends the generation with what fits in its size budget. full (a snapshot,
 * a test, stop): goes on ending generations until every thread's committed
 * events are out, so a snapshot holds all that was recorded before it was
 * asked for, in generations of the usual size; bounded, so that threads that
 * outpace the writer cannot keep it here forever. */
static void end_generation(session *s, int full) {
  for (int rounds = 0;; rounds++) {
    int done = drain_all(s, 1, 1);
    finish_generation(s);
    if (done || !full || rounds == 256)
      break;
  }
}

/* 1 when a thread has sealed a chunk the writer has not taken. */
static int sealed_waiting(session *s) {
  for (tstate *t = atomic_load_explicit(&pprt__trace_states, memory_order_acquire); t;
       t = t->next_all) {
    unsigned st = ST_OF(atomic_load_explicit(&t->status, memory_order_acquire));
    if ((st != ST_LIVE && st != ST_EXITED) ||
        atomic_load_explicit(&t->joined, memory_order_acquire) != s->id)
      continue;
    chunk *c = t->wr_session == s->id ? t->rd : t->first;
    if (atomic_load_explicit(&c->next, memory_order_acquire) != NULL)
      return 1;
  }
  return 0;
}

static int generation_due(session *s, uint64_t now) {
  return now - s->gen_start_ns >= s->gen_ns || generation_full(s);
}

void *pprt__trace_writer_main(void *arg) {
  session *s = arg;
  pprt__heap_ignore_thread(); /* its buffers are pprt's, not the program's */
  for (;;) {
    /* Read the requests before draining: everything recorded before a
     * request was made is in this drain. */
    pthread_mutex_lock(&s->mu);
    int stop = s->stop_req;
    uint64_t adv = s->adv_req;
    pthread_mutex_unlock(&s->mu);
    int all_taken = drain_all(s, 0, 1);
    if (!s->flight && s->gb.len >= STREAM_FLUSH_BYTES)
      flush_out(s);
    uint64_t now = pprt__os_monotonic_ns();
    int full = stop || adv > s->adv_done;
    if (full || generation_due(s, now)) {
      end_generation(s, full);
      if (adv > s->adv_done) {
        pthread_mutex_lock(&s->mu);
        s->adv_done = adv;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
      }
    }
    if (stop)
      break;
    if (!all_taken)
      continue; /* sealed chunks are still waiting */
    /* Sleep until a thread seals a chunk, a request, or the generation is
     * due. Announce the sleep first, then look once more: a thread that
     * sealed a chunk before our announcement did not wake us, but its chunk
     * is visible now (see ring.c's notify_reader for why RMWs and not
     * fences). */
    unsigned seq = atomic_load_explicit(&pprt__trace_wake_seq, memory_order_acquire);
    atomic_exchange_explicit(&pprt__trace_writer_waiting, 1, memory_order_acq_rel);
    pthread_mutex_lock(&s->mu);
    int pending = s->stop_req || s->adv_req > s->adv_done;
    pthread_mutex_unlock(&s->mu);
    pending = pending || sealed_waiting(s);
    now = pprt__os_monotonic_ns();
    uint64_t due = s->gen_start_ns + s->gen_ns;
    if (!pending && now < due)
      pprt__os_wait(&pprt__trace_wake_seq, seq, due - now);
    atomic_store_explicit(&pprt__trace_writer_waiting, 0, memory_order_relaxed);
  }
  return NULL;
}
