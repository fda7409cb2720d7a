/* The trace encoder's sessions: starting and stopping a streamed trace or
 * the flight recorder, flight snapshots, the generation ends other
 * components ask for (tests, exec), and fork.
 *
 * The encoder's files, one per role (their shared state is in
 * core/trace_internal.h):
 *   core/trace_thread.c  each thread's buffers: state, chunks, join, exit;
 *   core/trace_event.c   the write path: annotations and samples' hooks;
 *   (intern tables       strings and stacks to ids: core/trace_intern.c);
 *   core/trace_writer.c  the writer thread: generations, streamed or kept;
 *   this file            sessions.
 *
 * Which thread: the program's threads that call the public start, stop and
 * snapshot functions, one at a time under g_control; never the write path.
 * The writer thread is started and joined from here.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/atfork.h"
#include "core/heap.h"
#include "core/platform.h"
#include "core/syscalls.h"
#include "core/thread.h"
#include "core/trace_format.h"
#include "core/trace_internal.h"
#include "pprt.h"

#define MIN_BUFFER_LIMIT ((size_t)256 << 10)
#define DEFAULT_GENERATION_NS 1000000000ull
#define MIN_GENERATION_NS 1000000ull
#define STREAM_GEN_BYTES ((size_t)16 << 20) /* a generation ends at this size too */
#define STREAM_FLUSH_BYTES ((size_t)1 << 20)
#define DEFAULT_FLIGHT_BYTES ((size_t)10 << 20)
#define DEFAULT_FLIGHT_AGE_NS 10000000000ull
#define QUIESCE_NS 10000000ull /* stop waits this long for events in flight */

_Atomic unsigned pprt__trace_on;
_Atomic unsigned pprt__trace_writer_session;
atomic_int pprt__trace_ticks_monotonic;

static pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER;
static session *g_sess; /* under g_control */
static int g_starting;  /* under g_control: a start is between its steps */
static unsigned g_next_session;
static pprt__trace_stats g_last_stats; /* under g_control */
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* ---- sessions ------------------------------------------------------------------------------ */

/* Magic, version (little-endian), flags and reserved bytes zero. */
static void file_header(uint8_t hdr[PPRT__TRACE_HEADER_LEN]) {
  memset(hdr, 0, PPRT__TRACE_HEADER_LEN);
  memcpy(hdr, PPRT__TRACE_MAGIC, PPRT__TRACE_MAGIC_LEN);
  hdr[8] = PPRT__TRACE_VERSION & 0xff;
  hdr[9] = PPRT__TRACE_VERSION >> 8;
}

static void poke_writer(void) {
  atomic_fetch_add_explicit(&pprt__trace_wake_seq, 1, memory_order_release);
  pprt__os_wake(&pprt__trace_wake_seq);
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
    pprt__trace_gen_release(s->gens[i].data);
  free(s->gens);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->gens_mu);
  free(s);
}

/* fork: g_control is held across it (core/atfork.c). The child has one
 * thread and no writer: it does not trace. The session is dropped, not
 * freed (another thread may have been inside it); states of the parent's
 * other threads are free for the child's new threads. */
static void atfork_child(void) {
  atomic_store(&pprt__trace_on, 0);
  atomic_store(&pprt__trace_slow, 0);
  atomic_store(&pprt__trace_writer_session, 0);
  atomic_store(&pprt__trace_writer_waiting, 0);
  g_sess = NULL;
  g_starting = 0;
  tstate *self = pprt__trace_self;
  for (tstate *t = atomic_load(&pprt__trace_states); t; t = t->next_all) {
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

static const pprt__fork_hooks fork_hooks = {NULL, NULL, atfork_child};

static void install_atfork(void) {
  pprt__fork_register_locked(PPRT__FORK_TRACE, &g_control, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_atfork_once, install_atfork)

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
  int rc = pprt__sys_pthread_create(&s->thread, NULL, pprt__trace_writer_main, s);
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
  pprt__trace_thread_init();
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
  atomic_store_explicit(&pprt__trace_ticks_monotonic, clock.monotonic, memory_order_relaxed);
  s->t0_width = pprt__trace_clock_pair(s, &s->t0_ticks, &s->t0_ns);
  pprt__trace_new_sync_point(s);

  if (!s->flight) {
    uint8_t hdr[PPRT__TRACE_HEADER_LEN];
    file_header(hdr);
    rc = s->out.write(s->out.ctx, hdr, sizeof hdr);
    if (rc != 0)
      return start_failed(s, rc);
    s->stats.bytes = sizeof hdr;
  }
  atomic_store(&pprt__trace_chunk_limit, a->buffer_limit);
  atomic_store(&pprt__trace_join_dropped, 0); /* a previous session's */
  atomic_store(&pprt__trace_writer_session, s->id);
  rc = start_writer(s);
  if (rc != 0) {
    atomic_store(&pprt__trace_writer_session, 0);
    return start_failed(s, rc);
  }
  pthread_mutex_lock(&g_control);
  g_starting = 0;
  g_sess = s;
  atomic_store_explicit(&pprt__trace_on, s->id, memory_order_seq_cst);
  pthread_mutex_unlock(&g_control);
  return 0;
}

/* Stops recording, lets the writer write everything, frees what no thread
 * can be touching. Under g_control. */
static int session_stop_locked(session *s) {
  atomic_store_explicit(&pprt__trace_on, 0, memory_order_seq_cst);
  /* Events that began before the flag fell: give them a moment to finish
   * so that they are written (best effort: a thread descheduled mid-event
   * writes into its buffer after we have gone, harmlessly). */
  uint64_t deadline = pprt__os_monotonic_ns() + QUIESCE_NS;
  for (tstate *t = atomic_load_explicit(&pprt__trace_states, memory_order_acquire); t;
       t = t->next_all)
    while (atomic_load_explicit(&t->joined, memory_order_relaxed) == s->id &&
           atomic_load_explicit(&t->busy, memory_order_relaxed) &&
           pprt__os_monotonic_ns() < deadline)
      sched_yield();
  /* seq_cst: with the store to pprt__trace_on above and slow_enter's pair, a
   * store-buffering pattern (either we see its count or it sees pprt__trace_on 0). */
  while (atomic_load_explicit(&pprt__trace_slow, memory_order_seq_cst) != 0)
    sched_yield();

  pthread_mutex_lock(&s->mu);
  s->stop_req = 1;
  pthread_mutex_unlock(&s->mu);
  poke_writer();
  pthread_join(s->thread, NULL);
  atomic_store_explicit(&pprt__trace_writer_session, 0, memory_order_seq_cst);

  /* No slow path can run for this session now: spare and consumed chunks
   * are nobody's. Exited threads' states are free again. A thread exiting
   * meanwhile is trimmed or reclaimed by us or by itself, never both. */
  for (tstate *t = atomic_load_explicit(&pprt__trace_states, memory_order_acquire); t;
       t = t->next_all)
    for (;;) {
      unsigned v = atomic_load_explicit(&t->status, memory_order_seq_cst);
      if (ST_OF(v) == ST_EXITED)
        pprt__trace_reclaim(t, v);
      else if (ST_OF(v) == ST_LIVE && !pprt__trace_trim_live(t, v, s->id))
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
    pprt__trace_gen_release(snap[i].data);
  }
  free(snap);
  return rc;
}

void pprt__trace_get_stats(pprt__trace_stats *out) {
  pthread_mutex_lock(&g_control);
  *out = g_last_stats;
  pthread_mutex_unlock(&g_control);
}
