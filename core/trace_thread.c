/* The trace encoder's per-thread buffers: each thread's state (found
 * through an initial-exec TLS pointer, kept in a global list and reused
 * after its thread exits), its 64 KiB chunks, joining a session, moving to
 * a new chunk when one is full, and the thread's exit. The shared types and
 * the rules for who may free what are in core/trace_internal.h.
 *
 * Which thread: the owning thread runs everything here (in signal handlers
 * and malloc hooks too: memory comes from mmap, without a lock), except
 * pprt__trace_reclaim (also the writer, once it has drained an exited
 * thread, and stop) and pprt__trace_trim_live (stop); one CAS on a state's
 * status decides which of them frees its chunks.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "core/platform.h"
#include "core/syscalls.h"
#include "core/thread.h"
#include "core/trace_internal.h"

tstate *_Atomic pprt__trace_states;
__thread tstate *pprt__trace_self __attribute__((tls_model("initial-exec")));
_Atomic int pprt__trace_slow;
_Atomic uint64_t pprt__trace_join_dropped;
_Atomic size_t pprt__trace_chunk_limit = DEFAULT_BUFFER_LIMIT;
static _Atomic size_t g_chunk_bytes; /* mapped by all chunks */
static _Atomic size_t g_batch_limit; /* test seam: 0 = CHUNK_CAP */
static pthread_key_t g_exit_key;
static pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;

/* ---- memory ------------------------------------------------------------------------ */

static void *map_zeroed(size_t n) {
  void *p = pprt__sys_mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static chunk *chunk_new(void) {
  size_t limit = atomic_load_explicit(&pprt__trace_chunk_limit, memory_order_relaxed);
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

static void on_thread_exit(void *arg);

static void make_exit_key(void) {
  pthread_key_create(&g_exit_key, on_thread_exit);
}

void pprt__trace_thread_init(void) {
  pthread_once(&g_exit_key_once, make_exit_key);
}

/* A state for the calling thread: a free one from the list, or a new one.
 * Uses mmap, not malloc, so it works inside malloc hooks. */
tstate *pprt__trace_attach(void) {
  tstate *t;
  for (t = atomic_load_explicit(&pprt__trace_states, memory_order_acquire); t; t = t->next_all) {
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
    tstate *head = atomic_load_explicit(&pprt__trace_states, memory_order_relaxed);
    do
      t->next_all = head;
    while (!atomic_compare_exchange_weak_explicit(&pprt__trace_states, &head, t,
                                                  memory_order_release, memory_order_relaxed));
  }
  t->tid = pprt__thread_id();
  t->session = 0;
  atomic_store_explicit(&t->name_id, 0, memory_order_relaxed);
  pprt__trace_self = t;
  /* The key exists: every path here runs after pprt_trace_start,
   * pprt_flight_start or pprt_thread_name made it. */
  pthread_setspecific(g_exit_key, t);
  return t;
}

static size_t batch_limit(void) {
  size_t l = atomic_load_explicit(&g_batch_limit, memory_order_relaxed);
  return l && l < CHUNK_CAP ? l : CHUNK_CAP;
}

/* Enters a slow path for session s. 0 when s is no longer the session. */
static int slow_enter(unsigned s) {
  atomic_fetch_add_explicit(&pprt__trace_slow, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&pprt__trace_on, memory_order_seq_cst) != s) {
    atomic_fetch_sub_explicit(&pprt__trace_slow, 1, memory_order_release);
    return 0;
  }
  return 1;
}

static void slow_leave(void) {
  atomic_fetch_sub_explicit(&pprt__trace_slow, 1, memory_order_release);
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

static tstate *join_dropped(void) {
  atomic_fetch_add_explicit(&pprt__trace_join_dropped, 1, memory_order_relaxed);
  return NULL;
}

tstate *pprt__trace_join(unsigned s) {
  tstate *t = pprt__trace_self;
  if (t == NULL && (t = pprt__trace_attach()) == NULL)
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
    pprt__trace_emit_thread_name(t, name);
  return t;
}

/* Seals the current chunk and moves to a new one with room for need bytes.
 * 0 when there is none (the event is dropped and counted by the caller).
 * Called with busy set. An event bigger than the batch limit (a test seam)
 * goes alone into an empty chunk, past t->end: the next event's room check
 * then fails and moves on. */
int pprt__trace_refill(tstate *t, size_t need) {
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
void pprt__trace_reclaim(tstate *t, unsigned seen) {
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
int pprt__trace_trim_live(tstate *t, unsigned seen, unsigned session_id) {
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
  unsigned s = atomic_load_explicit(&pprt__trace_on, memory_order_relaxed);
  if (s != 0 && t->session == s)
    pprt__trace_emit_exit(t, s);
  pprt__trace_self = NULL;
  /* Exited first, then the writer looked at, both seq_cst, against stop's
   * store of pprt__trace_writer_session and load of the status (a
   * store-buffering pair): either we see the writer gone and free our chunks, or stop sees
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
  unsigned w = atomic_load_explicit(&pprt__trace_writer_session, memory_order_seq_cst);
  if (w != 0 && atomic_load_explicit(&t->joined, memory_order_relaxed) == w) {
    wake_writer(); /* it drains and frees them */
    return;
  }
  pprt__trace_reclaim(t, ST_WITH(v, ST_EXITED));
}
