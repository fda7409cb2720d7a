/* The trace encoder: annotations into per-thread buffers, a writer thread
 * that turns them into generations, and the flight recorder.
 *
 * Divisions:
 *   memory         64 KiB chunks, from mmap so
 *                  that a thread (even in a signal handler, even inside
 *                  malloc) can get one without a lock;
 *   (intern tables strings and stacks to ids: core/trace_intern.c);
 *   threads        one state per thread (initial-exec TLS pointer), kept in
 *                  a global list and reused after the thread exits;
 *   events         the write path: no lock, no atomic read-modify-write;
 *   annotations    the public functions and the samples' hooks;
 *   the writer     drains every thread's chunks into batch records, and at
 *                  each generation's end writes its tables, clock, threads
 *                  and losses; streams them or keeps them (flight recorder);
 *   sessions       start, stop, flight snapshots, fork.
 *
 * How a thread and the writer share a buffer without locks: a thread's
 * chunks form a list that only the thread appends to. After each event the
 * thread publishes the chunk's committed length (a release store), and when
 * a chunk is full it links the next one (a release store that seals it). The
 * writer copies committed bytes out whenever it likes (at a generation's
 * end, for a flight snapshot, at stop) and hands consumed chunks back to the
 * thread through a one-producer one-consumer list. So the writer never has
 * to take a buffer away from a thread, and the write path needs no atomic
 * read-modify-write (a locked instruction costs ~16 ns here, most of the
 * event budget).
 *
 * What may be freed when: a thread may be inside an event (it read the
 * session flag just before stop cleared it) at any moment, so the memory an
 * event touches is never freed while the thread lives: its state, its
 * current chunk and the intern tables. The rest (spare and consumed chunks)
 * is freed at stop, once no thread is in a slow path (g_slow, a Dekker
 * pair with the session flag, as cpu.c's g_inflight).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/atfork.h"
#include "core/heap.h"
#include "core/platform.h"
#include "core/symbolize.h"
#include "core/syscalls.h"
#include "core/table.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/trace_format.h"
#include "core/trace_intern.h"
#include "pprt.h"

#define CHUNK_BYTES ((size_t)65536) /* one mapping: header + events */
#define SMALL_EVENT 32              /* room that any event without strings needs */
#define NCACHE 64                   /* per-thread name cache entries */
#define TASK_ID_BLOCK 256           /* task ids a thread takes at a time */
#define DEFAULT_BUFFER_LIMIT ((size_t)64 << 20)
#define MIN_BUFFER_LIMIT ((size_t)256 << 10)
#define DEFAULT_GENERATION_NS 1000000000ull
#define MIN_GENERATION_NS 1000000ull
#define STREAM_GEN_BYTES ((size_t)16 << 20) /* a generation ends at this size too */
#define STREAM_FLUSH_BYTES ((size_t)1 << 20)
#define DEFAULT_FLIGHT_BYTES ((size_t)10 << 20)
#define DEFAULT_FLIGHT_AGE_NS 10000000000ull
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
#define QUIESCE_NS 10000000ull /* stop waits this long for events in flight */

/* ---- memory ------------------------------------------------------------------------ */

static void *map_zeroed(size_t n) {
  void *p = pprt__sys_mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

typedef struct chunk {
  struct chunk *_Atomic next; /* set by the owner when it moves on: sealed */
  _Atomic size_t committed;   /* bytes of whole events in data */
  uint64_t base_ts;           /* the timestamp the first event's delta is from */
  struct chunk *link;         /* on a free list */
  uint8_t data[];
} chunk;

#define CHUNK_CAP (CHUNK_BYTES - offsetof(chunk, data))

static _Atomic size_t g_chunk_bytes; /* mapped by all chunks */
static _Atomic size_t g_chunk_limit = DEFAULT_BUFFER_LIMIT;
static _Atomic size_t g_batch_limit; /* test seam: 0 = CHUNK_CAP */

static chunk *chunk_new(void) {
  size_t limit = atomic_load_explicit(&g_chunk_limit, memory_order_relaxed);
  if (atomic_fetch_add_explicit(&g_chunk_bytes, CHUNK_BYTES, memory_order_relaxed) + CHUNK_BYTES >
      limit) {
    atomic_fetch_sub_explicit(&g_chunk_bytes, CHUNK_BYTES, memory_order_relaxed);
    return NULL;
  }
  chunk *c = map_zeroed(CHUNK_BYTES);
  if (c == NULL)
    atomic_fetch_sub_explicit(&g_chunk_bytes, CHUNK_BYTES, memory_order_relaxed);
  return c;
}

static void chunk_free(chunk *c) {
  munmap(c, CHUNK_BYTES);
  atomic_fetch_sub_explicit(&g_chunk_bytes, CHUNK_BYTES, memory_order_relaxed);
}

static void chunk_free_list(chunk *c) {
  while (c) {
    chunk *n = c->link;
    chunk_free(c);
    c = n;
  }
}

/* ---- threads ----------------------------------------------------------------------- */

/* A state's owner of the moment. Whoever frees a state's chunks first wins
 * it with one CAS into ST_BUSY (from ST_EXITED: the writer, stop or the
 * exiting thread itself; from ST_LIVE: stop), so no chunk is freed twice
 * (stop and an exit handler both freeing a spare list was a double munmap
 * and reads of unmapped memory). */
enum { ST_FREE = 0, ST_LIVE = 1, ST_EXITED = 2, ST_BUSY = 3 };
/* The status word: the state in the low 2 bits, above them a count of the
 * state's reuses, so that a CAS from a status seen earlier fails once the
 * state has gone to another thread meanwhile (ABA). */
#define ST_OF(v) ((v)&3u)
#define ST_WITH(v, st) (((v) & ~3u) | (unsigned)(st))

typedef struct ncache {
  const char *ptr;
  const ientry *e;
} ncache;

typedef struct tstate {
  /* The owner thread's. */
  uint8_t *pos, *end; /* where the next event goes; end of the chunk (soft) */
  chunk *cur;
  uint64_t last_ts;
  unsigned session; /* the session this thread writes for */
  _Atomic int busy; /* inside pprt: a signal handler's events are dropped */
  uint64_t task_next, task_end;
  chunk *spare;
  ncache cache[NCACHE];

  /* Shared. */
  _Alignas(64) chunk *_Atomic returned; /* consumed chunks, writer -> owner */
  _Atomic uint64_t dropped;             /* events not recorded this session */
  _Atomic unsigned status;              /* ST_OF() of it: see ST_WITH */
  _Atomic unsigned joined;              /* session whose chunks start at first */
  chunk *first;
  uint64_t tid;
  _Atomic uint32_t name_id;
  struct tstate *next_all; /* fixed once on the list */

  /* The writer's. */
  _Alignas(64) unsigned wr_session;
  chunk *rd;
  size_t rd_off;
  uint64_t rd_ts;
  uint64_t wr_dropped; /* already reported */
} tstate;

static tstate *_Atomic g_states;
static __thread tstate *tls_state __attribute__((tls_model("initial-exec")));
static pthread_key_t g_exit_key;
static pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;

/* The session: nonzero (its id) while events are recorded. The one load of
 * every annotation. */
static _Atomic unsigned g_on;
/* Threads in a slow path (join, refill): stop waits for none. */
static _Atomic int g_slow;
/* The session whose writer thread is alive, 0 if none. */
static _Atomic unsigned g_writer_session;
/* The writer sleeps on g_wake_seq; threads wake it when they seal a chunk. */
static atomic_uint g_wake_seq;
static atomic_uint g_writer_waiting;
static _Atomic uint64_t g_task_next = 1;
/* Events of threads that could not join the session: no memory for their
 * state or first chunk, so nothing of theirs to count them in. The writer
 * reports them as lost on thread 0 (drain_all). */
static _Atomic uint64_t g_join_dropped;
/* 1 when the trace clock is the monotonic clock itself (pprt__ticks_info):
 * a sample's offset is then taken from its event's own tick. Decided once
 * per process, before the first session turns g_on on. */
static atomic_int g_ticks_monotonic;

static void on_thread_exit(void *arg);

static void make_exit_key(void) {
  pthread_key_create(&g_exit_key, on_thread_exit);
}

/* A state for the calling thread: a free one from the list, or a new one.
 * Uses mmap, not malloc, so it works inside malloc hooks. */
static tstate *attach(void) {
  tstate *t;
  for (t = atomic_load_explicit(&g_states, memory_order_acquire); t; t = t->next_all) {
    unsigned v = atomic_load_explicit(&t->status, memory_order_relaxed);
    if (ST_OF(v) == ST_FREE &&
        atomic_compare_exchange_strong_explicit(&t->status, &v, ST_WITH(v + 4, ST_LIVE),
                                                memory_order_acquire, memory_order_relaxed))
      break;
  }
  if (t == NULL) {
    t = map_zeroed(sizeof *t);
    if (t == NULL)
      return NULL;
    atomic_init(&t->status, ST_LIVE);
    tstate *head = atomic_load_explicit(&g_states, memory_order_relaxed);
    do
      t->next_all = head;
    while (!atomic_compare_exchange_weak_explicit(&g_states, &head, t, memory_order_release,
                                                  memory_order_relaxed));
  }
  t->tid = pprt__thread_id();
  t->session = 0;
  atomic_store_explicit(&t->name_id, 0, memory_order_relaxed);
  tls_state = t;
  /* The key exists: every path here runs after pprt_trace_start,
   * pprt_flight_start or pprt_thread_name made it. */
  pthread_setspecific(g_exit_key, t);
  return t;
}

static void wake_writer(void) {
  if (atomic_fetch_or_explicit(&g_writer_waiting, 0, memory_order_acq_rel)) {
    atomic_fetch_add_explicit(&g_wake_seq, 1, memory_order_release);
    pprt__os_wake(&g_wake_seq);
  }
}

static void count_drop(tstate *t) {
  atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
}

static void set_busy(tstate *t, int v) {
  atomic_signal_fence(memory_order_seq_cst);
  atomic_store_explicit(&t->busy, v, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
}

static size_t batch_limit(void) {
  size_t l = atomic_load_explicit(&g_batch_limit, memory_order_relaxed);
  return l && l < CHUNK_CAP ? l : CHUNK_CAP;
}

/* Enters a slow path for session s. 0 when s is no longer the session. */
static int slow_enter(unsigned s) {
  atomic_fetch_add_explicit(&g_slow, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&g_on, memory_order_seq_cst) != s) {
    atomic_fetch_sub_explicit(&g_slow, 1, memory_order_release);
    return 0;
  }
  return 1;
}

static void slow_leave(void) {
  atomic_fetch_sub_explicit(&g_slow, 1, memory_order_release);
}

/* A chunk for the owner: a spare one, one the writer gave back, or a new
 * one within the limit. Inside a slow path. */
static chunk *take_chunk(tstate *t) {
  if (t->spare == NULL)
    t->spare = atomic_exchange_explicit(&t->returned, NULL, memory_order_acquire);
  chunk *c = t->spare;
  if (c)
    t->spare = c->link;
  else
    c = chunk_new();
  return c;
}

static void chunk_start(tstate *t, chunk *c, uint64_t base_ts) {
  atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
  atomic_store_explicit(&c->committed, 0, memory_order_relaxed);
  c->base_ts = base_ts;
  c->link = NULL;
  t->cur = c;
  t->pos = c->data;
  t->end = c->data + batch_limit();
}

static void emit_thread_name(tstate *t, uint32_t id);

/* Makes the calling thread write for session s: its state, a fresh chunk,
 * published to the writer. NULL when it cannot (the event is dropped). */
static tstate *join_dropped(void) {
  atomic_fetch_add_explicit(&g_join_dropped, 1, memory_order_relaxed);
  return NULL;
}

static tstate *join(unsigned s) {
  tstate *t = tls_state;
  if (t == NULL && (t = attach()) == NULL)
    return join_dropped();
  if (atomic_load_explicit(&t->busy, memory_order_relaxed)) {
    /* A signal handler interrupted this thread's join: the count survives,
     * as the join reset it before setting busy. */
    count_drop(t);
    return NULL;
  }
  atomic_store_explicit(&t->dropped, 0, memory_order_relaxed);
  set_busy(t, 1);
  if (t->session == s) {
    /* A signal handler joined while we were on the way here. */
    set_busy(t, 0);
    return t;
  }
  if (!slow_enter(s)) {
    set_busy(t, 0);
    return NULL;
  }
  chunk *c = t->cur ? t->cur : take_chunk(t);
  if (c == NULL) {
    slow_leave();
    set_busy(t, 0);
    return join_dropped();
  }
  chunk_start(t, c, pprt__os_ticks());
  t->last_ts = c->base_ts;
  t->first = c;
  t->task_next = t->task_end = 0;
  t->session = s;
  atomic_store_explicit(&t->joined, s, memory_order_release);
  slow_leave();
  set_busy(t, 0);
  uint32_t name = atomic_load_explicit(&t->name_id, memory_order_relaxed);
  if (name)
    emit_thread_name(t, name);
  return t;
}

/* Seals the current chunk and moves to a new one with room for need bytes.
 * 0 when there is none (the event is dropped and counted by the caller).
 * Called with busy set. An event bigger than the batch limit (a test seam)
 * goes alone into an empty chunk, past t->end: the next event's room check
 * then fails and moves on. */
static int refill(tstate *t, size_t need) {
  chunk *c = t->cur;
  if (need > CHUNK_CAP)
    return 0;
  if (t->pos == c->data)
    return 1;
  if (!slow_enter(t->session))
    return 0;
  chunk *n = take_chunk(t);
  if (n == NULL) {
    slow_leave();
    return 0;
  }
  chunk_start(t, n, t->last_ts);
  atomic_store_explicit(&c->next, n, memory_order_release);
  slow_leave();
  wake_writer();
  return 1;
}

/* ---- events ------------------------------------------------------------------------- */

/* The thread's state ready to write for session s, with busy set; NULL when
 * the event must be dropped (counted where the session can see it). */
static inline tstate *event_enter(unsigned s) {
  tstate *t = tls_state;
  if (__builtin_expect(t == NULL || t->session != s, 0)) {
    t = join(s);
    if (t == NULL)
      return NULL;
  }
  if (__builtin_expect(atomic_load_explicit(&t->busy, memory_order_relaxed), 0)) {
    count_drop(t);
    return NULL;
  }
  set_busy(t, 1);
  return t;
}

static inline void event_leave(tstate *t) {
  set_busy(t, 0);
}

/* Room for need bytes at t->pos; 0 when there is none (counted). */
static inline int room(tstate *t, size_t need) {
  /* Signed: pos may be past end (see refill). */
  if (__builtin_expect(t->end - t->pos >= (ptrdiff_t)need, 1))
    return 1;
  if (refill(t, need))
    return 1;
  count_drop(t);
  return 0;
}

/* The event's timestamp delta: strictly increasing per thread. */
static inline uint64_t tick_delta(tstate *t) {
  uint64_t d = pprt__os_ticks() - t->last_ts;
  if ((int64_t)d <= 0)
    d = 1;
  t->last_ts += d;
  return d;
}

static inline void commit(tstate *t, uint8_t *p) {
  t->pos = p;
  atomic_store_explicit(&t->cur->committed, (size_t)(p - t->cur->data), memory_order_release);
}

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

static void emit_thread_name(tstate *t, uint32_t id) {
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
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
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
    int mono = atomic_load_explicit(&g_ticks_monotonic, memory_order_relaxed);
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
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  region_begin_on(s, name);
}

static NOINLINE void region_end_on(unsigned s) {
  emit_simple(s, PPRT__EV_REGION_END, 0, 0);
}

void pprt_region_end(void) {
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
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
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  log_on(s, category, message);
}

static NOINLINE void counter_on(unsigned s, const char *name, int64_t value) {
  emit_named(s, PPRT__EV_COUNTER, name, 1, 0, pprt__zigzag(value));
}

void pprt_counter(const char *name, int64_t value) {
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return;
  counter_on(s, name, value);
}

static NOINLINE uint64_t task_begin_on(unsigned s, const char *name) {
  tstate *t = tls_state;
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
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (LIKELY_OFF(s))
    return 0;
  return task_begin_on(s, name);
}

static NOINLINE void task_end_on(unsigned s, uint64_t id) {
  emit_simple(s, PPRT__EV_TASK_END, 1, id);
}

void pprt_task_end(uint64_t id) {
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (LIKELY_OFF(s) || id == 0)
    return;
  task_end_on(s, id);
}

int pprt_thread_name(const char *name) {
  if (pprt__trace_tables_ready() != 0)
    return -ENOMEM;
  pthread_once(&g_exit_key_once, make_exit_key);
  tstate *t = tls_state;
  if (t == NULL && (t = attach()) == NULL)
    return -ENOMEM;
  strarg a = str_prepare(name);
  if (a.id == 0)
    return -ENOMEM; /* the string table is full */
  atomic_store_explicit(&t->name_id, a.id, memory_order_relaxed);
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (s != 0) {
    if (t->session != s)
      join(s); /* which records the name */
    else
      emit_thread_name(t, a.id);
  }
  return 0;
}

void pprt__trace_thread_start(void) {
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (s != 0)
    emit_simple(s, PPRT__EV_THREAD_START, 0, 0);
}

void pprt__trace_cpu_sample(uint64_t tid, uint64_t ts_ns, const uint64_t *pcs, size_t npcs,
                            uint64_t count) {
  emit_sample(PPRT__EV_CPU_SAMPLE, tid, ts_ns, 0, 0, pcs, npcs, count ? count : 1);
}

void pprt__trace_alloc_sample(uint64_t tid, uint64_t ts_ns, uint64_t addr, uint64_t size,
                              const uintptr_t *pcs, size_t npcs) {
  if (!atomic_load_explicit(&g_on, memory_order_relaxed))
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
  return atomic_load_explicit(&g_on, memory_order_relaxed) != 0;
}

void pprt__trace_set_batch_limit(size_t bytes) {
  atomic_store_explicit(&g_batch_limit, bytes, memory_order_relaxed);
}

size_t pprt__trace_chunk_bytes(void) {
  return atomic_load(&g_chunk_bytes);
}

/* Frees the chunks of t's list that come before `upto` (NULL: all of it),
 * from where its session's writer stopped reading (or its start, when that
 * writer never read it). Their events were not written: the writer gave up
 * (end_generation's bound) or is gone. The caller owns t (ST_BUSY). */
static void free_chain(tstate *t, chunk *upto) {
  unsigned j = atomic_load_explicit(&t->joined, memory_order_relaxed);
  chunk *c = j != 0 && t->wr_session == j ? t->rd : t->first;
  while (c != NULL && c != upto) {
    chunk *n = atomic_load_explicit(&c->next, memory_order_acquire);
    chunk_free(c);
    c = n;
  }
}

/* An exited thread, its status seen as `seen`: frees all its chunks and
 * the state, unless another reclaimer won it first. Its events are out
 * (the writer drained them) or nobody will write them (no writer for its
 * session). */
static void reclaim(tstate *t, unsigned seen) {
  unsigned v = seen;
  if (ST_OF(seen) != ST_EXITED ||
      !atomic_compare_exchange_strong_explicit(&t->status, &v, ST_WITH(seen, ST_BUSY),
                                               memory_order_acquire, memory_order_relaxed))
    return;
  if (t->cur)
    free_chain(t, NULL);
  chunk_free_list(t->spare);
  chunk_free_list(atomic_exchange_explicit(&t->returned, NULL, memory_order_acquire));
  t->cur = t->first = t->rd = NULL;
  t->spare = NULL;
  t->pos = t->end = NULL;
  t->wr_session = 0;
  atomic_store_explicit(&t->joined, 0, memory_order_relaxed);
  atomic_store_explicit(&t->status, ST_WITH(seen, ST_FREE), memory_order_release);
}

/* At stop, the writer gone, no slow path possible: a live thread keeps its
 * current chunk (it may still be finishing an event in it) and loses the
 * rest: what its list holds before it (left there when end_generation gave
 * up, and counted against the budget ever after), its spares and the
 * chunks given back. 0 when the thread is exiting meanwhile. */
static int trim_live(tstate *t, unsigned seen, unsigned session_id) {
  unsigned v = seen;
  if (ST_OF(seen) != ST_LIVE ||
      !atomic_compare_exchange_strong_explicit(&t->status, &v, ST_WITH(seen, ST_BUSY),
                                               memory_order_seq_cst, memory_order_relaxed))
    return 0;
  if (atomic_load_explicit(&t->joined, memory_order_relaxed) == session_id && t->cur) {
    free_chain(t, t->cur);
    t->first = t->rd = t->cur;
  }
  chunk_free_list(t->spare);
  t->spare = NULL;
  chunk_free_list(atomic_exchange_explicit(&t->returned, NULL, memory_order_acquire));
  t->wr_session = 0;
  atomic_store_explicit(&t->status, seen, memory_order_release);
  return 1;
}

/* The thread is exiting: record it, and hand its chunks to the writer (which
 * drains and frees them) or, with no writer, free them now. */
static void on_thread_exit(void *arg) {
  tstate *t = arg;
  unsigned s = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (s != 0 && t->session == s) {
    /* The OS's name for it, while it still exists to be asked (programs
     * name threads with pthread_setname_np, which pprt does not see). */
    char name[64];
    if (atomic_load_explicit(&t->name_id, memory_order_relaxed) == 0 &&
        pprt__os_thread_name(t->tid, name, sizeof name) == 0 && name[0] != '\0') {
      uint32_t id = str_prepare(name).id;
      if (id)
        emit_thread_name(t, id);
    }
    emit_simple(s, PPRT__EV_THREAD_END, 0, 0);
  }
  tls_state = NULL;
  /* Exited first, then the writer looked at, both seq_cst, against stop's
   * store of g_writer_session and load of the status (a store-buffering
   * pair): either we see the writer gone and free our chunks, or stop sees
   * us exited and frees them (a CAS decides which). A stop holding the
   * state (ST_BUSY) lets go within a few munmaps. */
  unsigned v = atomic_load_explicit(&t->status, memory_order_relaxed);
  for (;;) {
    if (ST_OF(v) == ST_BUSY) {
      sched_yield();
      v = atomic_load_explicit(&t->status, memory_order_relaxed);
    } else if (ST_OF(v) != ST_LIVE) {
      return; /* not a state this thread holds */
    } else if (atomic_compare_exchange_weak_explicit(&t->status, &v, ST_WITH(v, ST_EXITED),
                                                     memory_order_seq_cst, memory_order_relaxed)) {
      break;
    }
  }
  unsigned w = atomic_load_explicit(&g_writer_session, memory_order_seq_cst);
  if (w != 0 && atomic_load_explicit(&t->joined, memory_order_relaxed) == w) {
    wake_writer(); /* it drains and frees them */
    return;
  }
  reclaim(t, ST_WITH(v, ST_EXITED));
}

/* ---- the writer -------------------------------------------------------------------------- */

typedef struct buf {
  uint8_t *p;
  size_t len, cap;
  int oom;
} buf;

static uint8_t *buf_reserve(buf *b, size_t n) {
  if (pprt__reserve((void **)&b->p, &b->cap, b->len + n, 1) != 0) {
    b->oom = 1;
    return NULL;
  }
  return b->p + b->len;
}

/* A kept generation of the flight recorder. Its bytes are shared with the
 * snapshots being written (outside the session's locks), and freed by
 * the last one to let go. */
typedef struct gendata {
  atomic_size_t refs;
  uint8_t bytes[];
} gendata;

typedef struct genblob {
  gendata *data;
  size_t len;
  uint64_t end_ns;
} genblob;

static void gen_release(gendata *d) {
  if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) == 1)
    free(d);
}

/* What the writer knows of a thread id in this session. */
typedef struct tinfo {
  uint64_t tid;
  uint32_t name_id;
  int os_name_tried;
  uint64_t seen_gen;
} tinfo;

/* Events a thread could not record, for the generation's LOST record. */
typedef struct lost_count {
  uint64_t tid, count;
} lost_count;

/* A pc's function name as a string id (0: none). */
typedef struct pc_name {
  uint64_t pc;
  uint32_t name_id;
  uint32_t first;  /* its source lines: lines[first, first + nlines) */
  uint16_t nlines; /* 0: none known */
  uint64_t gen;    /* the generation whose FRAMES record has it, + 1 */
} pc_name;

/* One source line of a pc: function and file string ids, line. */
typedef struct pc_line {
  uint32_t func, file, line;
} pc_line;

typedef struct session {
  unsigned id;
  int flight;
  pprt_writer out;
  int symbolize;
  uint64_t gen_ns;
  size_t gen_bytes;
  size_t max_bytes;
  uint64_t max_age_ns;
  pthread_t thread;

  /* Requests from other threads, under mu. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop_req;
  uint64_t adv_req, adv_done;

  /* The clock. */
  uint64_t hz_exact; /* 0: the TSC, measured */
  int ticks_monotonic;
  uint64_t t0_ticks, t0_ns, t0_width;      /* the TSC measurement's start */
  uint64_t sync_ticks, sync_ns, sync_wall; /* this generation's */
  uint64_t gen_start_ns;
  uint64_t gen; /* the current generation's number */

  /* Output. */
  buf gb;         /* the current generation's bytes (streaming: since the last flush) */
  size_t gen_len; /* bytes of the current generation so far */
  int err;        /* the writer's first error: output stops */

  /* This generation's references. */
  uint64_t *str_gen, *stack_gen; /* by id: last generation that used it */
  uint32_t *str_list, *stack_list;
  size_t nstr, nstack;
  tinfo *threads;
  size_t nthreads, threads_cap;
  pprt__table thread_index;
  lost_count *lost;
  size_t nlost, lost_cap;
  tstate *drain_next; /* where the next drain starts */

  /* Names for pcs. */
  pprt__symbolizer *sym;
  int sym_tried;
  pprt__table pc_index;
  pc_name *pcs;
  size_t npcs, pcs_cap;
  pc_line *lines;
  size_t nlines, lines_cap;
  uint32_t *gen_pcs; /* the pcs with lines this generation's stacks use */
  size_t ngen_pcs, gen_pcs_cap;

  /* The flight recorder's generations, under gens_mu. */
  pthread_mutex_t gens_mu;
  genblob *gens;
  size_t ngens, gens_cap, gens_bytes;

  pprt__trace_stats stats;
} session;

static pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER;
static session *g_sess; /* under g_control */
static int g_starting;  /* under g_control: a start is between its steps */
static unsigned g_next_session;
static pprt__trace_stats g_last_stats; /* under g_control */
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

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

struct tid_key {
  const session *s;
  uint64_t tid;
};

static int tid_eq(const void *ctx, uint32_t idx) {
  const struct tid_key *k = ctx;
  return k->s->threads[idx].tid == k->tid;
}

static tinfo *thread_info(session *s, uint64_t tid) {
  struct tid_key k = {s, tid};
  uint64_t h = pprt__hash_finish(tid);
  int64_t idx = pprt__table_find(&s->thread_index, h, tid_eq, &k);
  if (idx >= 0)
    return &s->threads[idx];
  if (PPRT__RESERVE(s->threads, s->threads_cap, s->nthreads + 1) != 0 ||
      pprt__table_intern(&s->thread_index, h, tid_eq, &k, (uint32_t)s->nthreads) < 0)
    return NULL;
  tinfo *ti = &s->threads[s->nthreads++];
  memset(ti, 0, sizeof *ti);
  ti->tid = tid;
  return ti;
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
  uint64_t unjoined = atomic_exchange_explicit(&g_join_dropped, 0, memory_order_relaxed);
  if (unjoined) {
    lost_add(s, 0, unjoined);
    s->stats.events_dropped += unjoined;
  }
  tstate *head = atomic_load_explicit(&g_states, memory_order_acquire);
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
      reclaim(t, v); /* everything it wrote is out */
    t = t->next_all ? t->next_all : head;
    if (t == start)
      break;
  }
  s->drain_next = NULL;
  return 1;
}

/* ---- generation end -------------------------------------------------------------------- */

struct pc_key {
  const session *s;
  uint64_t pc;
};

static int pc_eq(const void *ctx, uint32_t idx) {
  const struct pc_key *k = ctx;
  return k->s->pcs[idx].pc == k->pc;
}

/* The pcs entry of frame i of a stack (symbolized the first time), or -1.
 * Frames after the leaf are return addresses: the call is at pc - 1. Its
 * name is the function the code is in; with debug information it also has
 * its source lines, inlined functions first, for the FRAMES record. */
static int64_t frame_entry(session *s, uint64_t pc, size_t i) {
  if (!s->symbolize || pc == 0)
    return -1;
  uint64_t addr = i == 0 ? pc : pc - 1;
  struct pc_key k = {s, addr};
  uint64_t h = pprt__hash_finish(addr);
  int64_t idx = pprt__table_find(&s->pc_index, h, pc_eq, &k);
  if (idx >= 0)
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
    e.name_id = str_prepare(fr[n - 1].name).id; /* the function the code is in */
  if (n > 0 && (flags & PPRT__FRAMES_DWARF) &&
      PPRT__RESERVE(s->lines, s->lines_cap, s->nlines + n) == 0) {
    e.first = (uint32_t)s->nlines;
    e.nlines = (uint16_t)n;
    for (size_t j = 0; j < n; j++) {
      pc_line l = {str_prepare(fr[j].name).id, fr[j].file ? str_prepare(fr[j].file).id : 0,
                   fr[j].line > 0 ? (uint32_t)fr[j].line : 0};
      if (l.func == 0) { /* the string table is full: no lines rather than a bad record */
        e.nlines = 0;
        break;
      }
      s->lines[e.first + j] = l;
    }
    s->nlines = e.first + e.nlines;
  }
  if (PPRT__RESERVE(s->pcs, s->pcs_cap, s->npcs + 1) != 0 ||
      pprt__table_intern(&s->pc_index, h, pc_eq, &k, (uint32_t)s->npcs) < 0)
    return -1;
  s->pcs[s->npcs] = e;
  return (int64_t)s->npcs++;
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
        ti->name_id = str_prepare(name).id;
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
static uint64_t clock_pair(const session *s, uint64_t *ticks, uint64_t *ns) {
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
    uint64_t w = clock_pair(s, &ticks, &ns);
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

static void new_sync_point(session *s) {
  clock_pair(s, &s->sync_ticks, &s->sync_ns);
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
    gen_release(g.data);
    return;
  }
  s->gens[s->ngens++] = g;
  s->gens_bytes += g.len;
  size_t drop = 0;
  while (s->ngens - drop > 1 &&
         (s->gens_bytes > s->max_bytes || g.end_ns - s->gens[drop].end_ns > s->max_age_ns)) {
    s->gens_bytes -= s->gens[drop].len;
    gen_release(s->gens[drop].data);
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
  new_sync_point(s);
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
  for (tstate *t = atomic_load_explicit(&g_states, memory_order_acquire); t; t = t->next_all) {
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

static void *writer_main(void *arg) {
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
    unsigned seq = atomic_load_explicit(&g_wake_seq, memory_order_acquire);
    atomic_exchange_explicit(&g_writer_waiting, 1, memory_order_acq_rel);
    pthread_mutex_lock(&s->mu);
    int pending = s->stop_req || s->adv_req > s->adv_done;
    pthread_mutex_unlock(&s->mu);
    pending = pending || sealed_waiting(s);
    now = pprt__os_monotonic_ns();
    uint64_t due = s->gen_start_ns + s->gen_ns;
    if (!pending && now < due)
      pprt__os_wait(&g_wake_seq, seq, due - now);
    atomic_store_explicit(&g_writer_waiting, 0, memory_order_relaxed);
  }
  return NULL;
}

/* ---- sessions ------------------------------------------------------------------------------ */

/* Magic, version (little-endian), flags and reserved bytes zero. */
static void file_header(uint8_t hdr[PPRT__TRACE_HEADER_LEN]) {
  memset(hdr, 0, PPRT__TRACE_HEADER_LEN);
  memcpy(hdr, PPRT__TRACE_MAGIC, PPRT__TRACE_MAGIC_LEN);
  hdr[8] = PPRT__TRACE_VERSION & 0xff;
  hdr[9] = PPRT__TRACE_VERSION >> 8;
}

static void poke_writer(void) {
  atomic_fetch_add_explicit(&g_wake_seq, 1, memory_order_release);
  pprt__os_wake(&g_wake_seq);
}

static void session_free(session *s) {
  free(s->gb.p);
  free(s->str_gen);
  free(s->stack_gen);
  free(s->str_list);
  free(s->stack_list);
  free(s->threads);
  pprt__table_free(&s->thread_index);
  free(s->lost);
  pprt__symbolizer_close(s->sym);
  pprt__table_free(&s->pc_index);
  free(s->pcs);
  free(s->lines);
  free(s->gen_pcs);
  for (size_t i = 0; i < s->ngens; i++)
    gen_release(s->gens[i].data);
  free(s->gens);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->gens_mu);
  free(s);
}

static void atfork_prepare(void) {
  pthread_mutex_lock(&g_control);
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&g_control);
}

/* The child has one thread and no writer: it does not trace. The session is
 * dropped, not freed (another thread may have been inside it); states of
 * the parent's other threads are free for the child's new threads. */
static void atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_control = fresh;
  atomic_store(&g_on, 0);
  atomic_store(&g_slow, 0);
  atomic_store(&g_writer_session, 0);
  atomic_store(&g_writer_waiting, 0);
  g_sess = NULL;
  g_starting = 0;
  tstate *self = tls_state;
  for (tstate *t = atomic_load(&g_states); t; t = t->next_all) {
    atomic_store(&t->joined, 0);
    t->session = 0;
    t->wr_session = 0;
    atomic_store(&t->busy, 0);
    unsigned v = atomic_load(&t->status);
    if (t != self && ST_OF(v) != ST_FREE) {
      /* Its chunks belong to a thread that does not exist here. */
      t->cur = NULL;
      t->spare = NULL;
      atomic_store(&t->returned, NULL);
      atomic_store(&t->status, ST_WITH(v, ST_FREE));
    }
  }
  pprt__thread_forget_id();
  if (self)
    self->tid = pprt__thread_id();
}

static const pprt__fork_hooks fork_hooks = {atfork_prepare, atfork_parent, atfork_child};

static void install_atfork(void) {
  pprt__fork_register(PPRT__FORK_TRACE, &fork_hooks);
}

typedef struct start_args {
  int flight;
  size_t buffer_limit;
  uint64_t gen_ns;
  size_t gen_bytes;
  size_t max_bytes;
  uint64_t max_age_ns;
  int symbolize;
  pprt_writer out;
} start_args;

/* Starts the writer with every signal blocked (it must not run the
 * program's handlers) and unregistered by the preload hook. */
static int start_writer(session *s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pprt__thread_self()->creating_internal = 1;
  int rc = pprt__sys_pthread_create(&s->thread, NULL, writer_main, s);
  pprt__thread_self()->creating_internal = 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return -rc;
}

/* Under g_control: frees s, gives the start reservation back. */
static int start_failed(session *s, int rc) {
  pthread_mutex_lock(&g_control);
  g_starting = 0;
  pthread_mutex_unlock(&g_control);
  if (s)
    session_free(s);
  return rc;
}

/* The session is made and its header written outside g_control (the
 * writer is the program's: never called under pprt's locks), with g_control
 * held only to reserve the start and to publish the session. */
static int session_start(const start_args *a) {
  int rc = pprt__trace_tables_ready();
  if (rc != 0)
    return rc;
  pthread_once(&g_exit_key_once, make_exit_key);
  pthread_once(&g_atfork_once, install_atfork);

  pthread_mutex_lock(&g_control);
  if (g_sess != NULL || g_starting) {
    pthread_mutex_unlock(&g_control);
    return -EBUSY;
  }
  g_starting = 1;
  if (++g_next_session == 0)
    g_next_session = 1;
  unsigned id = g_next_session;
  pthread_mutex_unlock(&g_control);

  session *s = calloc(1, sizeof *s);
  if (s == NULL)
    return start_failed(NULL, -ENOMEM);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_mutex_init(&s->gens_mu, NULL);
  s->flight = a->flight;
  s->out = a->out;
  s->symbolize = a->symbolize;
  s->gen_ns = a->gen_ns;
  s->gen_bytes = a->gen_bytes;
  s->max_bytes = a->max_bytes;
  s->max_age_ns = a->max_age_ns;
  s->str_gen = calloc((size_t)pprt__trace_strings.max_ids + 1, sizeof *s->str_gen);
  s->stack_gen = calloc((size_t)pprt__trace_stacks.max_ids + 1, sizeof *s->stack_gen);
  s->str_list = malloc(((size_t)pprt__trace_strings.max_ids + 1) * sizeof *s->str_list);
  s->stack_list = malloc(((size_t)pprt__trace_stacks.max_ids + 1) * sizeof *s->stack_list);
  s->lost_cap = 16;
  s->lost = malloc(s->lost_cap * sizeof *s->lost);
  if (!s->str_gen || !s->stack_gen || !s->str_list || !s->stack_list || !s->lost)
    return start_failed(s, -ENOMEM);
  s->id = id;
  s->gen = 1;
  pprt__ticks_info clock = pprt__os_ticks_init();
  s->hz_exact = clock.hz;
  s->ticks_monotonic = clock.monotonic;
  atomic_store_explicit(&g_ticks_monotonic, clock.monotonic, memory_order_relaxed);
  s->t0_width = clock_pair(s, &s->t0_ticks, &s->t0_ns);
  new_sync_point(s);

  if (!s->flight) {
    uint8_t hdr[PPRT__TRACE_HEADER_LEN];
    file_header(hdr);
    rc = s->out.write(s->out.ctx, hdr, sizeof hdr);
    if (rc != 0)
      return start_failed(s, rc);
    s->stats.bytes = sizeof hdr;
  }
  atomic_store(&g_chunk_limit, a->buffer_limit);
  atomic_store(&g_join_dropped, 0); /* a previous session's */
  atomic_store(&g_writer_session, s->id);
  rc = start_writer(s);
  if (rc != 0) {
    atomic_store(&g_writer_session, 0);
    return start_failed(s, rc);
  }
  pthread_mutex_lock(&g_control);
  g_starting = 0;
  g_sess = s;
  atomic_store_explicit(&g_on, s->id, memory_order_seq_cst);
  pthread_mutex_unlock(&g_control);
  return 0;
}

/* Stops recording, lets the writer write everything, frees what no thread
 * can be touching. Under g_control. */
static int session_stop_locked(session *s) {
  atomic_store_explicit(&g_on, 0, memory_order_seq_cst);
  /* Events that began before the flag fell: give them a moment to finish
   * so that they are written (best effort: a thread descheduled mid-event
   * writes into its buffer after we have gone, harmlessly). */
  uint64_t deadline = pprt__os_monotonic_ns() + QUIESCE_NS;
  for (tstate *t = atomic_load_explicit(&g_states, memory_order_acquire); t; t = t->next_all)
    while (atomic_load_explicit(&t->joined, memory_order_relaxed) == s->id &&
           atomic_load_explicit(&t->busy, memory_order_relaxed) &&
           pprt__os_monotonic_ns() < deadline)
      sched_yield();
  /* seq_cst: with the store to g_on above and slow_enter's pair, a
   * store-buffering pattern (either we see its count or it sees g_on 0). */
  while (atomic_load_explicit(&g_slow, memory_order_seq_cst) != 0)
    sched_yield();

  pthread_mutex_lock(&s->mu);
  s->stop_req = 1;
  pthread_mutex_unlock(&s->mu);
  poke_writer();
  pthread_join(s->thread, NULL);
  atomic_store_explicit(&g_writer_session, 0, memory_order_seq_cst);

  /* No slow path can run for this session now: spare and consumed chunks
   * are nobody's. Exited threads' states are free again. A thread exiting
   * meanwhile is trimmed or reclaimed by us or by itself, never both. */
  for (tstate *t = atomic_load_explicit(&g_states, memory_order_acquire); t; t = t->next_all)
    for (;;) {
      unsigned v = atomic_load_explicit(&t->status, memory_order_seq_cst);
      if (ST_OF(v) == ST_EXITED)
        reclaim(t, v);
      else if (ST_OF(v) == ST_LIVE && !trim_live(t, v, s->id))
        continue; /* it began to exit: look again */
      break;
    }
  g_last_stats = s->stats;
  g_sess = NULL;
  int rc = s->err;
  session_free(s);
  return rc;
}

static int session_stop(int flight) {
  pthread_mutex_lock(&g_control);
  session *s = g_sess;
  if (s == NULL || s->flight != flight) {
    pthread_mutex_unlock(&g_control);
    return -EPIPE;
  }
  int rc = session_stop_locked(s);
  pthread_mutex_unlock(&g_control);
  return rc;
}

/* Options of a newer caller are read up to the fields this version has. */
static void copy_options(void *dst, size_t dst_size, const void *src, size_t src_size) {
  memset(dst, 0, dst_size);
  if (src) {
    size_t n = src_size ? src_size : dst_size;
    memcpy(dst, src, n < dst_size ? n : dst_size);
  }
}

static int check_limit(size_t *limit) {
  if (*limit == 0)
    *limit = DEFAULT_BUFFER_LIMIT;
  return *limit < MIN_BUFFER_LIMIT ? -EINVAL : 0;
}

/* session_start with the allocation sampler paused: the session's buffers
 * are pprt's memory, not the program's. */
static int session_start_paused(const start_args *a) {
  int paused = pprt__heap_pause();
  int rc = session_start(a);
  pprt__heap_resume(paused);
  return rc;
}

int pprt_trace_start(const pprt_trace_options *opts, pprt_writer out) {
  pprt_trace_options o;
  copy_options(&o, sizeof o, opts, opts ? opts->size : 0);
  if (out.write == NULL || check_limit(&o.buffer_limit) != 0)
    return -EINVAL;
  if (o.generation_ns == 0)
    o.generation_ns = DEFAULT_GENERATION_NS;
  if (o.generation_ns < MIN_GENERATION_NS)
    return -EINVAL;
  start_args a = {0, o.buffer_limit, o.generation_ns, STREAM_GEN_BYTES, 0, 0, !o.no_symbolize, out};
  return session_start_paused(&a);
}

int pprt_trace_stop(void) {
  int paused = pprt__heap_pause();
  int rc = session_stop(0);
  pprt__heap_resume(paused);
  return rc;
}

int pprt_flight_start(const pprt_flight_options *opts) {
  pprt_flight_options o;
  copy_options(&o, sizeof o, opts, opts ? opts->size : 0);
  if (check_limit(&o.buffer_limit) != 0)
    return -EINVAL;
  if (o.max_bytes == 0)
    o.max_bytes = DEFAULT_FLIGHT_BYTES;
  if (o.max_age_ns == 0)
    o.max_age_ns = DEFAULT_FLIGHT_AGE_NS;
  if (o.max_bytes < 4096 || o.max_age_ns < 4 * MIN_GENERATION_NS)
    return -EINVAL;
  pprt_writer none = {NULL, NULL};
  start_args a = {1,           o.buffer_limit, o.max_age_ns / 4, o.max_bytes / 4,
                  o.max_bytes, o.max_age_ns,   !o.no_symbolize,  none};
  return session_start_paused(&a);
}

int pprt_flight_stop(void) {
  int paused = pprt__heap_pause();
  int rc = session_stop(1);
  pprt__heap_resume(paused);
  return rc;
}

/* Asks the writer to end the generation; waits until it has. Under
 * g_control. */
static void advance_locked(session *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t ticket = ++s->adv_req;
  pthread_mutex_unlock(&s->mu);
  poke_writer();
  pthread_mutex_lock(&s->mu);
  while (s->adv_done < ticket)
    pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

int pprt__trace_advance(void) {
  pthread_mutex_lock(&g_control);
  if (g_sess == NULL) {
    pthread_mutex_unlock(&g_control);
    return -EPIPE;
  }
  advance_locked(g_sess);
  pthread_mutex_unlock(&g_control);
  return 0;
}

void pprt__trace_exec_prepare(void) {
  pthread_mutex_lock(&g_control);
  if (g_sess != NULL && !g_sess->flight)
    advance_locked(g_sess);
  pthread_mutex_unlock(&g_control);
}

/* The generations are taken (a reference each) under the locks and
 * written after: the program's writer never runs under pprt's locks, where
 * one that allocates would wait for the heap sampler's lock in the wrong
 * order (core/atfork.h). */
int pprt_flight_write(pprt_writer out) {
  if (out.write == NULL)
    return -EINVAL;
  int paused = pprt__heap_pause(); /* the copy is pprt's memory */
  pthread_mutex_lock(&g_control);
  session *s = g_sess;
  if (s == NULL || !s->flight) {
    pthread_mutex_unlock(&g_control);
    pprt__heap_resume(paused);
    return -EPIPE;
  }
  advance_locked(s);
  /* The writer thread may drop old generations meanwhile, but not while we
   * hold gens_mu: the snapshot is a consistent run of generations. */
  pthread_mutex_lock(&s->gens_mu);
  size_t n = s->ngens;
  genblob *snap = malloc((n ? n : 1) * sizeof *snap);
  for (size_t i = 0; snap && i < n; i++) {
    snap[i] = s->gens[i];
    atomic_fetch_add_explicit(&snap[i].data->refs, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&s->gens_mu);
  pthread_mutex_unlock(&g_control);
  pprt__heap_resume(paused);
  if (snap == NULL)
    return -ENOMEM;
  uint8_t hdr[PPRT__TRACE_HEADER_LEN];
  file_header(hdr);
  int rc = out.write(out.ctx, hdr, sizeof hdr);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0)
      rc = out.write(out.ctx, snap[i].data->bytes, snap[i].len);
    gen_release(snap[i].data);
  }
  free(snap);
  return rc;
}

void pprt__trace_get_stats(pprt__trace_stats *out) {
  pthread_mutex_lock(&g_control);
  *out = g_last_stats;
  pthread_mutex_unlock(&g_control);
}
