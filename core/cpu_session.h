/* The CPU profiler's session, shared by its files: core/cpu.c (session
 * control, the handler), core/cpu_sources.c (each thread's source and the
 * slots), core/cpu_reader.c (the reader thread) and core/cpu_blocked.c
 * (threads that block SIGPROF); and the slot helpers the handler inlines.
 * Internal to them. */
#ifndef PPRT_CORE_CPU_SESSION_H
#define PPRT_CORE_CPU_SESSION_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/cpu.h"
#include "core/platform.h"
#include "core/profile.h"
#include "core/ring.h"
#include "core/table.h"
#include "pprt.h"

#define MAX_DEPTH 256                  /* frames a sample may have */
#define SLOTS_CAP 8192                 /* threads with their own source */
#define TID_GONE UINT64_MAX            /* a removed slot */
#define BLOCKED_CHECK_NS 1000000000ull /* a /proc read per thread: once a second */
/* The kernel's floor for a software clock's period (perf_swevent_start_hrtimer
 * raises anything shorter to 10 us). */
#define MIN_INTERVAL_NS 10000u

/* Which per-thread source a session uses. */
enum thread_source { SOURCE_NONE, SOURCE_CLOCK, SOURCE_TIMER };

/* One thread with its own source, as its SIGPROF handler sees it. The
 * control side fills a slot before it publishes the tid (release) and only
 * empties it when no handler can be using it: from the thread itself, for a
 * thread that is gone, or after stop has waited for running handlers. The
 * fields after fd belong to the thread's own handler once published. */
typedef struct slot {
  _Atomic uint64_t tid; /* 0 never used, TID_GONE removed */
  _Atomic int fd;       /* its sampling clock, -1 for a CPU timer */
  uint64_t interval;    /* ns: the period running now */
  uint64_t last;        /* the clock's count at the previous sample */
  uint64_t rng;         /* xorshift64* state for the next interval */
  /* Signals its source delivered: written by its handler alone, read by
   * the rescan (a source that has stopped firing while its thread runs). */
  _Atomic uint32_t fired;
} slot;

typedef struct timer_entry {
  uint64_t tid;
  pprt__os_thread_timer timer; /* SOURCE_TIMER */
  pprt__os_sample_clock clock; /* SOURCE_CLOCK */
  int seen;                    /* found by the current rescan */
  uint64_t start;              /* when its thread started, 0 unknown */
  uint64_t cpu_ns;             /* its thread's CPU time when its source last fired */
  uint32_t fired;              /* its slot's count then */
} timer_entry;

/* A thread seen blocking SIGPROF, as the reader accounts for it. */
typedef struct blocked_entry {
  uint64_t tid;
  uint64_t cpu_ns;    /* its CPU time at the last check */
  uint64_t seen_ns;   /* weights of its samples since then */
  uint64_t charged;   /* CPU time charged to the synthetic frame, in all */
  uint64_t credit;    /* of which a late sample may still claim: not counted twice */
  uint64_t latest_ns; /* suspected: its CPU time at the last rescan */
  int blocks;         /* BLOCKS_NO, BLOCKS_SUSPECTED or BLOCKS_YES */
} blocked_entry;

enum { BLOCKS_NO, BLOCKS_SUSPECTED, BLOCKS_YES };

typedef struct name_entry {
  uint64_t tid;
  char *name; /* NULL: the thread had gone before we asked */
} name_entry;

typedef struct session {
  /* fixed at start */
  pprt_writer out;
  int hz, depth, symbolize;
  pprt_unwinder unwinder;
  enum thread_source source; /* per-thread source */
  int process_timer;         /* the process timer is armed too */
  int process_hz;            /* its rate */
  uint64_t process_period_ns;
  int thread_timers;    /* source != SOURCE_NONE */
  char fallback[192];   /* why a better source was not used, or "" */
  int user_only;        /* the clocks had to leave kernel time out */
  int timers_ok;        /* per-thread CPU timers work too */
  size_t nclocks;       /* clocks open now */
  size_t clock_budget;  /* at most this many: a quarter of RLIMIT_NOFILE */
  size_t budget_timers; /* threads given a timer instead, for that */
  uint64_t period_ns;
  uintptr_t cookie;
  pid_t pid;                   /* the process profiled (a vfork child shares this) */
  _Atomic uint64_t reader_tid; /* set by the reader when it starts */

  pprt__ring ring;
  pthread_t reader;

  /* per-thread sources: entries under g_control; slots read lock-free.
   * timers has room for SLOTS_CAP from the start: no allocation under
   * g_control, where a sampled one would take the heap lock. */
  timer_entry *timers;
  size_t ntimers;
  slot slots[SLOTS_CAP];
  int tidset_full_warned;
  int execs; /* exec calls under way, which disarmed the process timer */

  /* the reader's */
  uint64_t *readbuf; /* one record */
  pprt__profile *prof;
  name_entry *names;
  size_t nnames, names_cap;
  pprt__table name_index;
  uint64_t samples, lost, external;
  uint64_t signals;   /* records: one per timer signal taken */
  uint64_t folds_sq;  /* the sum over records of their samples squared: a
                         share's variance grows by folds_sq / samples */
  uint64_t sample_ns; /* the weights' sum */
  blocked_entry *blocked;
  size_t nblocked, blocked_cap;
  uint64_t blocked_ns; /* charged to PPRT__FRAME_BLOCKED */
  uint64_t unsampled_ns; /* under g_control: clocks' tails, in no weight */
  uint64_t last_blocked_check;
  blocked_entry *at_start; /* each thread's CPU time when the session started */
  size_t nat_start, at_start_cap;
  uint64_t last_rescan;
  pprt__cpu_checkpoint checkpoint; /* fixed at start */
  uint64_t last_checkpoint, checkpoints;

  int64_t start_wall;
  uint64_t start_mono;
  double start_cpu;
} session;

/* ---- the slots, as the handler reads them (AS-safe, inlined) -------------------- */

static inline size_t tid_slot(uint64_t tid) {
  return (size_t)pprt__hash_finish(tid) & (SLOTS_CAP - 1);
}

/* The slot of thread tid, or NULL. AS-safe. */
static inline slot *slot_find(session *s, uint64_t tid) {
  for (size_t i = tid_slot(tid), n = 0; n < SLOTS_CAP; i = (i + 1) & (SLOTS_CAP - 1), n++) {
    uint64_t v = atomic_load_explicit(&s->slots[i].tid, memory_order_acquire);
    if (v == tid)
      return &s->slots[i];
    if (v == 0)
      return NULL;
  }
  return NULL;
}

/* A uniform draw in (0, 1] from the slot's xorshift64* state. AS-safe. */
static inline double draw_uniform(slot *e) {
  uint64_t x = e->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  e->rng = x;
  return (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1p-53;
}

/* The next sampling interval of a clock, in ns. Exponential with mean
 * `mean`, shifted to start at the kernel's 10 us floor (which keeps the
 * mean): a memoryless wait, so where a sample lands does not depend on
 * where the last one did, and no periodic program can line up with the
 * samples (a fixed period, or a uniform jitter around one, stays
 * correlated with a program whose cycle divides it). The heap sampler
 * draws its byte distances the same way. AS-safe (xorshift64* and log). */
static inline uint64_t draw_interval(slot *e, uint64_t mean) {
  double u = draw_uniform(e);
  double floor_ns = mean > 2 * MIN_INTERVAL_NS ? MIN_INTERVAL_NS : (double)mean / 2;
  return (uint64_t)(floor_ns - log(u) * ((double)mean - floor_ns));
}

/* cpu.c: what the reader needs of the session control. */

/* Returns once the session's start has let go of g_control. */
void pprt__cpu_await_start(void);
/* The sources' rescan, under g_control, while s is still the session. */
void pprt__cpu_rescan_current(session *s);

/* cpu_sources.c, all under g_control but pprt__cpu_is_ignored. */

/* Whether tid is one of pprt's own threads (not profiled). */
int pprt__cpu_is_ignored(uint64_t tid);
/* Picks the session's per-thread source by trying it on this thread. */
int pprt__cpu_choose_source(session *s, pprt_timer_mode mode);
/* Gives thread tid its own source, unless it has one. */
int pprt__cpu_start_thread_timer(session *s, uint64_t tid);
/* Stops entry i's source and forgets it. */
void pprt__cpu_stop_timer_at(session *s, size_t i);
/* The same, for a thread that ends (on the thread itself, self 1) or at
 * stop (no handler running, self 0): its clock's unweighed tail goes into
 * s->unsampled_ns. */
void pprt__cpu_stop_timer_counted(session *s, size_t i, int self);
/* tid's entry, or NULL. */
timer_entry *pprt__cpu_find_timer(session *s, uint64_t tid);
/* Sources for threads that appeared, none for threads that are gone. */
void pprt__cpu_rescan(session *s);

/* cpu_reader.c. */

/* The reader thread's body: runs until stop closes the ring. */
void *pprt__cpu_reader_main(void *arg);
/* Whether thread tid has had a sample this session (the reader's). */
int pprt__cpu_had_samples(session *s, uint64_t tid);
/* The process's CPU time so far (getrusage), in seconds. */
double pprt__cpu_seconds(void);
/* The profile's comments: sources, rates, losses; cpu is the CPU seconds
 * the session saw. */
void pprt__cpu_add_comments(session *s, double cpu);

/* cpu_blocked.c, all the reader's (or stop's, once the reader is done). */

/* A sample of thread tid arrived with this weight: the weight to count. */
uint64_t pprt__cpu_blocked_saw_sample(session *s, uint64_t tid, uint64_t weight);
/* Every thread's mask (a file read each: once a second). */
void pprt__cpu_check_blocked(session *s);
/* The last word, at stop, with the sources disarmed. */
void pprt__cpu_check_blocked_at_stop(session *s);
/* The CPU time of threads known or suspected to block, at each rescan. */
void pprt__cpu_update_known_blocked(session *s);
/* For pprt__os_thread_each at start: each thread's CPU time then. */
int pprt__cpu_snapshot_one(uint64_t tid, void *ctx);

#endif /* PPRT_CORE_CPU_SESSION_H */
