/* The trace encoder's state shared by its files, one per role:
 *   core/trace_thread.c  each thread's own buffers: its state, its chunks,
 *                        joining a session, refills, its exit (the owning
 *                        thread; reclaim also on the writer and at stop);
 *   core/trace_event.c   encoding events into them: the annotations and the
 *                        samples' hooks (any thread, signal handlers too);
 *   core/trace_writer.c  the writer thread: drains every thread's chunks
 *                        into generations and writes or keeps them;
 *   core/trace.c         sessions: start, stop, flight snapshots, fork
 *                        (the caller's thread, under g_control).
 * Also the write path's inline helpers, which must stay inlined into every
 * event (bench/trace). Internal to those files.
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
 * is freed at stop, once no thread is in a slow path (pprt__trace_slow, a
 * Dekker pair with the session flag, as cpu.c's g_inflight).
 */
#ifndef PPRT_CORE_TRACE_INTERNAL_H
#define PPRT_CORE_TRACE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/platform.h"
#include "core/symbolize.h"
#include "core/table.h"
#include "core/trace.h"
#include "core/trace_intern.h"
#include "pprt.h"

/* Declared hidden, as the definitions are: the write path reads these with
 * one PC-relative load, as it did when they were one file's statics. */
#define PPRT__TRACE_SHARED __attribute__((visibility("hidden")))

#define CHUNK_BYTES ((size_t)65536) /* one mapping: header + events */
#define NCACHE 64                   /* per-thread name cache entries */
#define DEFAULT_BUFFER_LIMIT ((size_t)64 << 20)

/* ---- a thread's buffers ---------------------------------------------------------------- */

typedef struct chunk {
  struct chunk *_Atomic next; /* set by the owner when it moves on: sealed */
  _Atomic size_t committed;   /* bytes of whole events in data */
  uint64_t base_ts;           /* the timestamp the first event's delta is from */
  struct chunk *link;         /* on a free list */
  uint8_t data[];
} chunk;

#define CHUNK_CAP (CHUNK_BYTES - offsetof(chunk, data))

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

/* Every state ever made, reused after its thread exits. */
extern tstate *_Atomic pprt__trace_states PPRT__TRACE_SHARED;
/* The calling thread's state, NULL before its first event. */
extern __thread tstate *pprt__trace_self PPRT__TRACE_SHARED
    __attribute__((tls_model("initial-exec")));

/* The session: nonzero (its id) while events are recorded. The one load of
 * every annotation. */
extern _Atomic unsigned pprt__trace_on PPRT__TRACE_SHARED;
/* Threads in a slow path (join, refill): stop waits for none. */
extern _Atomic int pprt__trace_slow PPRT__TRACE_SHARED;
/* The session whose writer thread is alive, 0 if none. */
extern _Atomic unsigned pprt__trace_writer_session PPRT__TRACE_SHARED;
/* The writer sleeps on pprt__trace_wake_seq; threads wake it when they
 * seal a chunk. */
extern atomic_uint pprt__trace_wake_seq PPRT__TRACE_SHARED;
extern atomic_uint pprt__trace_writer_waiting PPRT__TRACE_SHARED;
/* Events of threads that could not join the session: no memory for their
 * state or first chunk, so nothing of theirs to count them in. The writer
 * reports them as lost on thread 0 (drain_all). */
extern _Atomic uint64_t pprt__trace_join_dropped PPRT__TRACE_SHARED;
/* 1 when the trace clock is the monotonic clock itself (pprt__ticks_info):
 * a sample's offset is then taken from its event's own tick. Decided once
 * per process, before the first session turns pprt__trace_on on. */
extern atomic_int pprt__trace_ticks_monotonic PPRT__TRACE_SHARED;
/* What all chunks together may map: the session's buffer_limit. */
extern _Atomic size_t pprt__trace_chunk_limit PPRT__TRACE_SHARED;

/* trace_thread.c. */

/* Makes the key whose destructor sees threads exit, once. */
void pprt__trace_thread_init(void);
/* A state for the calling thread, NULL without memory. mmap, not malloc:
 * it works inside malloc hooks. */
tstate *pprt__trace_attach(void);
/* Makes the calling thread write for session s: its state, a fresh chunk,
 * published to the writer. NULL when it cannot (the event is dropped). */
tstate *pprt__trace_join(unsigned s);
/* Seals the current chunk and moves to a new one with room for need bytes.
 * 0 when there is none. Called with busy set. */
int pprt__trace_refill(tstate *t, size_t need);
/* An exited thread, its status seen as `seen`: frees its chunks and the
 * state, unless another reclaimer won it first. */
void pprt__trace_reclaim(tstate *t, unsigned seen);
/* At stop, the writer gone: a live thread keeps only its current chunk.
 * 0 when the thread is exiting meanwhile. */
int pprt__trace_trim_live(tstate *t, unsigned seen, unsigned session_id);

/* trace_event.c. */

/* The string's id in the intern table, 0 when the table is full. */
uint32_t pprt__trace_str_id(const char *s);
/* A THREAD_NAME event, unless a signal interrupted one of t's events. */
void pprt__trace_emit_thread_name(tstate *t, uint32_t id);
/* What an exiting thread records for session s: its OS name, if it never
 * named itself, and THREAD_END. */
void pprt__trace_emit_exit(tstate *t, unsigned s);

/* ---- the write path's helpers (inlined into every event) ----------------------------- */

static inline void count_drop(tstate *t) {
  atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
}

static inline void set_busy(tstate *t, int v) {
  atomic_signal_fence(memory_order_seq_cst);
  atomic_store_explicit(&t->busy, v, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
}

static inline void wake_writer(void) {
  if (atomic_fetch_or_explicit(&pprt__trace_writer_waiting, 0, memory_order_acq_rel)) {
    atomic_fetch_add_explicit(&pprt__trace_wake_seq, 1, memory_order_release);
    pprt__os_wake(&pprt__trace_wake_seq);
  }
}

/* The thread's state ready to write for session s, with busy set; NULL when
 * the event must be dropped (counted where the session can see it). */
static inline tstate *event_enter(unsigned s) {
  tstate *t = pprt__trace_self;
  if (__builtin_expect(t == NULL || t->session != s, 0)) {
    t = pprt__trace_join(s);
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
  /* Signed: pos may be past end (see pprt__trace_refill). */
  if (__builtin_expect(t->end - t->pos >= (ptrdiff_t)need, 1))
    return 1;
  if (pprt__trace_refill(t, need))
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

/* ---- the writer's session --------------------------------------------------------- */

typedef struct buf {
  uint8_t *p;
  size_t len, cap;
  int oom;
} buf;

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

/* trace_writer.c. */

/* The writer thread's body: runs until the session's stop request. */
void *pprt__trace_writer_main(void *arg);
/* The trace clock and the monotonic clock at one moment; returns the
 * pairing's error bound (see clock_pair). */
uint64_t pprt__trace_clock_pair(const session *s, uint64_t *ticks, uint64_t *ns);
/* Starts a generation's clock: its sync point. */
void pprt__trace_new_sync_point(session *s);
/* Lets go of one reference to a kept generation. */
void pprt__trace_gen_release(gendata *d);

#endif /* PPRT_CORE_TRACE_INTERNAL_H */
