/* The trace encoder's write path: events encoded into the calling thread's
 * current chunk with no lock and no atomic read-modify-write; the public
 * annotations (regions, logs, counters, tasks, thread names) and the hooks
 * through which the CPU profiler and the heap sampler add their samples.
 *
 * Which thread: any thread that annotates, writing only its own buffer;
 * signal handlers too (the CPU profiler's samples come from its reader, the
 * heap sampler's from inside malloc). Every entry point sets the thread's
 * busy flag, so a signal handler that interrupts an event drops its own.
 * What may be inlined where matters here: each annotation is a flag test
 * and a tail call (bench/trace); the helpers shared with the rest of the
 * encoder are in core/trace_internal.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/platform.h"
#include "core/trace_format.h"
#include "core/trace_internal.h"

#define SMALL_EVENT 32    /* room that any event without strings needs */
#define TASK_ID_BLOCK 256 /* task ids a thread takes at a time */

static _Atomic uint64_t g_task_next = 1;

/* ---- events ------------------------------------------------------------------------- */

/* A string argument: interned (id) or, when the table is full, inline. */
typedef struct strarg {
  uint32_t id;
  const char *s;
  size_t len;
} strarg;

static strarg str_prepare(const char *s) {
  strarg a;
  if (s == NULL)
    s = "";
  size_t len = strnlen(s, PPRT__TRACE_MAX_STRING + 1);
  len = pprt__utf8_truncate(s, len, PPRT__TRACE_MAX_STRING);
  const ientry *e =
      pprt__itable_intern(&pprt__trace_strings, s, (uint32_t)len, pprt__hash_bytes(s, len));
  a.id = e ? e->id : 0;
  a.s = s;
  a.len = len;
  return a;
}

/* The id of name through the thread's cache: a hit costs a pointer compare
 * and a strcmp against the interned copy (the same pointer may hold other
 * text by now). */
static inline strarg str_cached(tstate *t, const char *s) {
  if (s) {
    ncache *c = &t->cache[((uintptr_t)s >> 3) & (NCACHE - 1)];
    if (c->ptr == s && strcmp((const char *)c->e->bytes, s) == 0)
      return (strarg){c->e->id, s, c->e->len};
    strarg a = str_prepare(s);
    const ientry *e = a.id ? pprt__itable_entry(&pprt__trace_strings, a.id) : NULL;
    if (e) {
      c->ptr = s;
      c->e = e;
    }
    return a;
  }
  return str_prepare(s);
}

static uint8_t *put_str(uint8_t *p, const strarg *a) {
  p = pprt__put_uvarint(p, a->id);
  if (a->id == 0) {
    p = pprt__put_uvarint(p, a->len);
    memcpy(p, a->s, a->len);
    p += a->len;
  }
  return p;
}

static size_t str_size(const strarg *a) {
  return a->id ? 5 : PPRT__VARINT_MAX + a->len;
}

/* A stack argument: interned, or inline when the table is full. */
typedef struct stackarg {
  uint32_t id;
  const uint64_t *pcs;
  size_t n;
} stackarg;

static stackarg stack_prepare(const uint64_t *pcs, size_t n) {
  if (n > PPRT__TRACE_MAX_FRAMES)
    n = PPRT__TRACE_MAX_FRAMES;
  size_t len = n * sizeof pcs[0];
  const ientry *e =
      pprt__itable_intern(&pprt__trace_stacks, pcs, (uint32_t)len, pprt__hash_bytes(pcs, len));
  return (stackarg){e ? e->id : 0, pcs, n};
}

static uint8_t *put_stack(uint8_t *p, const stackarg *a) {
  p = pprt__put_uvarint(p, a->id);
  if (a->id == 0) {
    p = pprt__put_uvarint(p, a->n);
    for (size_t i = 0; i < a->n; i++)
      p = pprt__put_uvarint(p, a->pcs[i]);
  }
  return p;
}

static size_t stack_size(const stackarg *a) {
  return a->id ? 5 : PPRT__VARINT_MAX * (1 + a->n);
}

/* An event with no argument, or one number: type, delta[, a0]. */
static void emit_simple(unsigned s, uint8_t type, int nargs, uint64_t a0) {
  tstate *t = event_enter(s);
  if (t == NULL)
    return;
  if (room(t, SMALL_EVENT)) {
    uint8_t *p = t->pos;
    *p++ = type;
    p = pprt__put_uvarint(p, tick_delta(t));
    if (nargs > 0)
      p = pprt__put_uvarint(p, a0);
    commit(t, p);
  }
  event_leave(t);
}

/* One string argument, then optionally a number (zigzag or plain) before
 * or after it as the event's spec says. Inlined: the flags are constants at
 * every call. */
static inline __attribute__((always_inline)) void
emit_named(unsigned s, uint8_t type, const char *name, int has_num, int num_first, uint64_t num) {
  tstate *t = event_enter(s);
  if (t == NULL)
    return;
  strarg a = str_cached(t, name);
  if (room(t, SMALL_EVENT + str_size(&a))) {
    uint8_t *p = t->pos;
    *p++ = type;
    p = pprt__put_uvarint(p, tick_delta(t));
    if (has_num && num_first)
      p = pprt__put_uvarint(p, num);
    p = put_str(p, &a);
    if (has_num && !num_first)
      p = pprt__put_uvarint(p, num);
    commit(t, p);
  }
  event_leave(t);
}

void pprt__trace_emit_thread_name(tstate *t, uint32_t id) {
  if (atomic_load_explicit(&t->busy, memory_order_relaxed))
    return;
  set_busy(t, 1);
  if (room(t, SMALL_EVENT)) {
    uint8_t *p = t->pos;
    *p++ = PPRT__EV_THREAD_NAME;
    p = pprt__put_uvarint(p, tick_delta(t));
    p = pprt__put_uvarint(p, id);
    commit(t, p);
  }
  set_busy(t, 0);
}

/* A sample event: tid, time offset, then the rest by type. */
static void emit_sample(uint8_t type, uint64_t tid, uint64_t ts_ns, uint64_t addr, uint64_t size,
                        const uint64_t *pcs, size_t npcs, uint64_t count) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (s == 0)
    return;
  tstate *t = event_enter(s);
  if (t == NULL)
    return;
  stackarg st = {0, NULL, 0};
  if (type != PPRT__EV_FREE_SAMPLE)
    st = stack_prepare(pcs, npcs);
  if (room(t, SMALL_EVENT + 3 * PPRT__VARINT_MAX + stack_size(&st))) {
    /* The sample's time is stored relative to the event's. When the ticks
     * are monotonic nanoseconds, that is exact; else it is relative to a
     * monotonic read just before the tick read, and off by the time between
     * the two (docs/trace-format.md, "Clock error"). */
    int mono = atomic_load_explicit(&pprt__trace_ticks_monotonic, memory_order_relaxed);
    uint64_t now_ns = mono ? 0 : pprt__os_monotonic_ns();
    uint8_t *p = t->pos;
    *p++ = type;
    p = pprt__put_uvarint(p, tick_delta(t));
    if (mono)
      now_ns = t->last_ts; /* the event's tick as recorded */
    int64_t offset = (int64_t)(ts_ns - now_ns);
    p = pprt__put_uvarint(p, tid);
    p = pprt__put_uvarint(p, pprt__zigzag(offset));
    if (type == PPRT__EV_CPU_SAMPLE) {
      p = put_stack(p, &st);
      p = pprt__put_uvarint(p, count);
    } else if (type == PPRT__EV_ALLOC_SAMPLE) {
      p = pprt__put_uvarint(p, addr);
      p = pprt__put_uvarint(p, size);
      p = put_stack(p, &st);
    } else {
      p = pprt__put_uvarint(p, addr);
    }
    commit(t, p);
  }
  event_leave(t);
}

/* ---- annotations ---------------------------------------------------------------------- */

/* Each public annotation is the flag test and a tail call: the slow part is
 * out of line so that the off path stays one load and a branch. */
#define LIKELY_OFF(s) __builtin_expect((s) == 0, 1)
#define NOINLINE __attribute__((noinline))

static NOINLINE void region_begin_on(unsigned s, const char *name) {
  emit_named(s, PPRT__EV_REGION_BEGIN, name, 0, 0, 0);
}

void pprt_region_begin(const char *name) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  region_begin_on(s, name);
}

static NOINLINE void region_end_on(unsigned s) {
  emit_simple(s, PPRT__EV_REGION_END, 0, 0);
}

void pprt_region_end(void) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  region_end_on(s);
}

static NOINLINE void log_on(unsigned s, const char *category, const char *message) {
  tstate *t = event_enter(s);
  if (t == NULL)
    return;
  strarg cat = str_cached(t, category);
  if (message == NULL)
    message = "";
  size_t mlen = strnlen(message, PPRT__TRACE_MAX_STRING + 1);
  mlen = pprt__utf8_truncate(message, mlen, PPRT__TRACE_MAX_STRING);
  if (room(t, SMALL_EVENT + str_size(&cat) + PPRT__VARINT_MAX + mlen)) {
    uint8_t *p = t->pos;
    *p++ = PPRT__EV_LOG;
    p = pprt__put_uvarint(p, tick_delta(t));
    p = put_str(p, &cat);
    p = pprt__put_uvarint(p, mlen);
    memcpy(p, message, mlen);
    commit(t, p + mlen);
  }
  event_leave(t);
}

void pprt_log(const char *category, const char *message) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  log_on(s, category, message);
}

static NOINLINE void counter_on(unsigned s, const char *name, int64_t value) {
  emit_named(s, PPRT__EV_COUNTER, name, 1, 0, pprt__zigzag(value));
}

void pprt_counter(const char *name, int64_t value) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  counter_on(s, name, value);
}

static NOINLINE uint64_t task_begin_on(unsigned s, const char *name) {
  tstate *t = pprt__trace_self;
  /* Ids come in blocks per thread: one atomic add per TASK_ID_BLOCK tasks.
   * Taken before the event so that a dropped event still returns an id the
   * caller can end. */
  uint64_t id;
  if (t && t->session == s && !atomic_load_explicit(&t->busy, memory_order_relaxed)) {
    set_busy(t, 1); /* a signal handler's task takes a global id meanwhile */
    if (t->task_next == t->task_end) {
      t->task_next = atomic_fetch_add_explicit(&g_task_next, TASK_ID_BLOCK, memory_order_relaxed);
      t->task_end = t->task_next + TASK_ID_BLOCK;
    }
    id = t->task_next++;
    set_busy(t, 0);
  } else {
    id = atomic_fetch_add_explicit(&g_task_next, 1, memory_order_relaxed);
  }
  emit_named(s, PPRT__EV_TASK_BEGIN, name, 1, 1, id);
  return id;
}

uint64_t pprt_task_begin(const char *name) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return 0;
  return task_begin_on(s, name);
}

static NOINLINE void task_end_on(unsigned s, uint64_t id) {
  emit_simple(s, PPRT__EV_TASK_END, 1, id);
}

void pprt_task_end(uint64_t id) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (LIKELY_OFF(s) || id == 0)
    return;
  task_end_on(s, id);
}

int pprt_thread_name(const char *name) {
  if (pprt__trace_tables_ready() != 0)
    return -ENOMEM;
  pprt__trace_thread_init();
  tstate *t = pprt__trace_self;
  if (t == NULL && (t = pprt__trace_attach()) == NULL)
    return -ENOMEM;
  strarg a = str_prepare(name);
  if (a.id == 0)
    return -ENOMEM; /* the string table is full */
  atomic_store_explicit(&t->name_id, a.id, memory_order_relaxed);
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (s != 0) {
    if (t->session != s)
      pprt__trace_join(s); /* which records the name */
    else
      pprt__trace_emit_thread_name(t, a.id);
  }
  return 0;
}

void pprt__trace_thread_start(void) {
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (s != 0)
    emit_simple(s, PPRT__EV_THREAD_START, 0, 0);
}

void pprt__trace_cpu_sample(uint64_t tid, uint64_t ts_ns, const uint64_t *pcs, size_t npcs,
                            uint64_t count) {
  emit_sample(PPRT__EV_CPU_SAMPLE, tid, ts_ns, 0, 0, pcs, npcs, count ? count : 1);
}

void pprt__trace_alloc_sample(uint64_t tid, uint64_t ts_ns, uint64_t addr, uint64_t size,
                              const uintptr_t *pcs, size_t npcs) {
  if (!atomic_load_explicit(&pprt__trace_on, memory_order_relaxed))
    return;
  uint64_t words[PPRT__TRACE_MAX_FRAMES];
  if (npcs > PPRT__TRACE_MAX_FRAMES)
    npcs = PPRT__TRACE_MAX_FRAMES;
  for (size_t i = 0; i < npcs; i++)
    words[i] = (uint64_t)pcs[i];
  emit_sample(PPRT__EV_ALLOC_SAMPLE, tid, ts_ns, addr, size, words, npcs, 0);
}

void pprt__trace_free_sample(uint64_t tid, uint64_t ts_ns, uint64_t addr) {
  emit_sample(PPRT__EV_FREE_SAMPLE, tid, ts_ns, addr, 0, NULL, 0, 0);
}

int pprt__trace_running(void) {
  return atomic_load_explicit(&pprt__trace_on, memory_order_relaxed) != 0;
}

uint32_t pprt__trace_str_id(const char *s) {
  return str_prepare(s).id;
}

void pprt__trace_emit_exit(tstate *t, unsigned s) {
  /* The OS's name for it, while it still exists to be asked (programs
   * name threads with pthread_setname_np, which pprt does not see). */
  char name[64];
  if (atomic_load_explicit(&t->name_id, memory_order_relaxed) == 0 &&
      pprt__os_thread_name(t->tid, name, sizeof name) == 0 && name[0] != '\0') {
    uint32_t id = str_prepare(name).id;
    if (id)
      pprt__trace_emit_thread_name(t, id);
  }
  emit_simple(s, PPRT__EV_THREAD_END, 0, 0);
}
