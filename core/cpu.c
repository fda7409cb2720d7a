/* The CPU profiler: Go's runtime/pprof for any C program.
 *
 * Divisions:
 *   session state   one session at a time (g_session), started and stopped
 *                   under g_control; the signal handler reaches it through
 *                   an atomic pointer and announces itself in g_inflight so
 *                   stop can wait for running handlers before freeing;
 *   sources         what sends SIGPROF to each thread, best first: a
 *                   sampling clock (Linux perf_event task clock) at
 *                   randomized intervals, or a per-thread CPU timer (Linux),
 *                   for every thread, found at start, on registration and by
 *                   the reader's rescans, with the process timer as the
 *                   fallback; `slots` is the lock-free table the handler
 *                   reads, to drop process-timer ticks for threads that have
 *                   their own source (Go's validSIGPROF) and to find a
 *                   thread's clock and its current interval;
 *   the handler     re-arm the clock, unwind, one ring write, nothing else;
 *   the reader      a thread that drains the ring into the profile builder,
 *                   rescans threads, writes checkpoints of the profile so
 *                   far when asked to, and at stop lets the profile be
 *                   written;
 *   blocked threads a thread that blocks SIGPROF gets no sample: the reader
 *                   finds it (its signal mask) and charges its CPU time to
 *                   a synthetic frame, so the totals stay honest
 *                   (core/cpu_blocked.c; the session's type is in
 *                   core/cpu_session.h).
 *
 * fork: the child keeps no session (its copy is dropped, not freed, since
 * another thread may have been inside it), restores the program's SIGPROF
 * action, and has no timers (fork does not inherit them).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/atfork.h"
#include "core/cpu.h"
#include "core/heap.h"
#include "core/platform.h"
#include "core/process.h"
#include "core/profile.h"
#include "core/ring.h"
#include "core/sigprof.h"
#include "core/syscalls.h"
#include "core/table.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/unwind.h"
#include "pprt.h"
/* Last: its type names (slot, session) are cpu.c's own. */
#include "core/cpu_session.h"

#define DEFAULT_HZ 100
#define MAX_HZ 10000
#define DEFAULT_DEPTH 64
#define MAX_DEPTH 256
#define RING_WORDS ((size_t)1 << 17) /* 1 MiB, as Go's profBuf */
#define RESCAN_NS 250000000ull
#define FALLBACK_HZ 100 /* at most, for the process timer beside per-thread sources */
/* The kernel's floor for a software clock's period (perf_swevent_start_hrtimer
 * raises anything shorter to 10 us). */
#define MIN_INTERVAL_NS 10000u

static pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER;
static session *_Atomic g_session;
static int g_busy;             /* a start or stop is between its steps */
static atomic_int g_inflight;  /* handlers running right now */
static _Atomic uintptr_t g_cookie;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static atomic_int g_threads_hooked; /* every thread registers as it starts */
/* Checkpoints for the next session (under g_control). */
static pprt__cpu_checkpoint g_checkpoint;

void pprt__cpu_set_checkpoint(const pprt__cpu_checkpoint *c) {
  pthread_mutex_lock(&g_control);
  if (c)
    g_checkpoint = *c;
  else
    memset(&g_checkpoint, 0, sizeof g_checkpoint);
  pthread_mutex_unlock(&g_control);
}

void pprt__cpu_threads_hooked(void) {
  atomic_store(&g_threads_hooked, 1);
}

/* ---- the slots of threads with their own source ------------------------------ */

static size_t tid_slot(uint64_t tid) {
  return (size_t)pprt__hash_finish(tid) & (SLOTS_CAP - 1);
}

/* The slot of thread tid, or NULL. AS-safe. */
static slot *slot_find(session *s, uint64_t tid) {
  for (size_t i = tid_slot(tid), n = 0; n < SLOTS_CAP; i = (i + 1) & (SLOTS_CAP - 1), n++) {
    uint64_t v = atomic_load_explicit(&s->slots[i].tid, memory_order_acquire);
    if (v == tid)
      return &s->slots[i];
    if (v == 0)
      return NULL;
  }
  return NULL;
}

/* splitmix64, to seed a slot's generator. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The next sampling interval of a clock, in ns. Exponential with mean
 * `mean`, shifted to start at the kernel's 10 us floor (which keeps the
 * mean): a memoryless wait, so where a sample lands does not depend on
 * where the last one did, and no periodic program can line up with the
 * samples (a fixed period, or a uniform jitter around one, stays
 * correlated with a program whose cycle divides it). The heap sampler
 * draws its byte distances the same way. AS-safe (xorshift64* and log). */
static uint64_t draw_interval(slot *e, uint64_t mean) {
  uint64_t x = e->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  e->rng = x;
  double u = (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1p-53; /* (0, 1] */
  double floor_ns = mean > 2 * MIN_INTERVAL_NS ? MIN_INTERVAL_NS : (double)mean / 2;
  return (uint64_t)(floor_ns - log(u) * ((double)mean - floor_ns));
}

/* Under g_control: takes a slot for tid, filled before it is published.
 * Returns it, with the interval to start its clock with in *first, or NULL
 * when the table is full. */
static slot *slot_add(session *s, uint64_t tid, int fd, uint64_t *first) {
  slot *reuse = NULL;
  for (size_t i = tid_slot(tid), n = 0; n < SLOTS_CAP; i = (i + 1) & (SLOTS_CAP - 1), n++) {
    slot *e = &s->slots[i];
    uint64_t v = atomic_load_explicit(&e->tid, memory_order_relaxed);
    if (v == tid)
      return e; /* cannot happen: one entry per tid */
    if (v == TID_GONE && reuse == NULL)
      reuse = e;
    if (v == 0) {
      if (reuse == NULL)
        reuse = e;
      break;
    }
  }
  if (reuse == NULL)
    return NULL;
  atomic_store_explicit(&reuse->fd, fd, memory_order_relaxed);
  /* CPU time is counted from here: the clock starts right after. */
  uint64_t cpu = 0;
  if (fd >= 0 && pprt__os_thread_cpu_ns(tid, &cpu) != 0)
    cpu = UINT64_MAX; /* unknown: the first sample weighs its period */
  reuse->last = cpu;
  reuse->rng = mix64(tid ^ pprt__os_monotonic_ns() ^ (uintptr_t)reuse) | 1;
  reuse->interval = draw_interval(reuse, s->period_ns);
  /* Read before the slot is published: from then on the thread's handler
   * owns interval (a clock opened armed may fire before it is started). */
  *first = reuse->interval;
  atomic_store_explicit(&reuse->tid, tid, memory_order_release);
  return reuse;
}

static void slot_remove(session *s, uint64_t tid) {
  slot *e = slot_find(s, tid);
  if (e) {
    atomic_store_explicit(&e->fd, -1, memory_order_relaxed);
    atomic_store_explicit(&e->tid, TID_GONE, memory_order_release);
  }
}

/* ---- per-thread timers (under g_control) ----------------------------------------- */

static timer_entry *find_timer(session *s, uint64_t tid) {
  for (size_t i = 0; i < s->ntimers; i++)
    if (s->timers[i].tid == tid)
      return &s->timers[i];
  return NULL;
}

/* pprt's own threads besides the reader (cpu.h). */
#define MAX_IGNORED 8
static _Atomic uint64_t g_ignored[MAX_IGNORED];

int pprt__cpu_ignore_thread(uint64_t tid) {
  for (int i = 0; i < MAX_IGNORED; i++) {
    uint64_t zero = 0;
    if (atomic_compare_exchange_strong(&g_ignored[i], &zero, tid))
      return 0;
  }
  return -ENOSPC;
}

void pprt__cpu_unignore_thread(uint64_t tid) {
  for (int i = 0; i < MAX_IGNORED; i++) {
    uint64_t t = tid;
    atomic_compare_exchange_strong(&g_ignored[i], &t, 0);
  }
}

int pprt__cpu_is_ignored(uint64_t tid) {
  for (int i = 0; i < MAX_IGNORED; i++)
    if (atomic_load_explicit(&g_ignored[i], memory_order_relaxed) == tid)
      return 1;
  return 0;
}

static void stop_timer_at(session *s, size_t i);

/* Whether entry e's source died with an earlier thread of the same id:
 * pprt did not see that thread end, and its id was reused before the next
 * rescan. That source never fires again, and its slot makes the handler
 * drop the process timer's ticks on the new thread, which then had no
 * sample at all. Cheap first (the thread's CPU time, and whether the
 * source fired while it ran), then, for a source silent over several
 * periods of CPU (a thread that blocks SIGPROF is silent too), the
 * thread's start time (a /proc read, ~17 us here). */
static int source_outlived(session *s, timer_entry *e, uint64_t tid) {
  uint64_t cpu, start;
  if (pprt__os_thread_cpu_ns(tid, &cpu) != 0)
    return 0;
  slot *sl = slot_find(s, tid);
  uint32_t fired = sl ? atomic_load_explicit(&sl->fired, memory_order_relaxed) : e->fired;
  int silent = fired == e->fired && cpu - e->cpu_ns > 4 * s->period_ns;
  int backwards = cpu < e->cpu_ns; /* CPU time only grows: another thread */
  e->cpu_ns = cpu;
  e->fired = fired;
  if (backwards)
    return 1;
  return silent && e->start != 0 && pprt__os_thread_start_time(tid, &start) == 0 &&
         start != e->start;
}

/* Gives thread tid its own source, unless it has one. The tid goes into
 * the slots before the source starts, so no tick of it is ever counted
 * twice (a process-timer tick in between is dropped instead). */
static int start_thread_timer(session *s, uint64_t tid) {
  if (pprt__cpu_is_ignored(tid))
    return 0; /* not marked seen: a source it got before is stopped */
  timer_entry *e = find_timer(s, tid);
  if (e) {
    if (!source_outlived(s, e, tid)) {
      e->seen = 1;
      return 0;
    }
    stop_timer_at(s, (size_t)(e - s->timers)); /* and a source of its own */
  }
  if (tid == atomic_load(&s->reader_tid))
    return 0; /* it blocks SIGPROF; its ticks would only pile up */
  if (s->ntimers == SLOTS_CAP)
    return -ENOSPC; /* as slot_add would say */
  e = &s->timers[s->ntimers];
  memset(e, 0, sizeof *e);
  e->clock.fd = -1;
  if (pprt__os_thread_start_time(tid, &e->start) != 0)
    e->start = 0;
  if (pprt__os_thread_cpu_ns(tid, &e->cpu_ns) != 0)
    e->cpu_ns = 0;
  int rc = 0;
  if (s->source == SOURCE_CLOCK && s->nclocks < s->clock_budget) {
    rc = pprt__os_sample_clock_open(&e->clock, tid);
    if (rc == -ESRCH)
      return rc; /* it exited meanwhile */
    if (rc != 0 && !s->timers_ok)
      return rc;
  }
  /* Past the descriptor budget, or out of descriptors: this thread gets a
   * CPU timer, which takes none. */
  int clock = e->clock.fd >= 0;
  if (s->source == SOURCE_CLOCK && !clock)
    s->budget_timers++;
  uint64_t first = 0;
  slot *sl = slot_add(s, tid, e->clock.fd, &first);
  if (sl == NULL) {
    /* The thread stays on the process timer. */
    pprt__os_sample_clock_close(&e->clock);
    if (!s->tidset_full_warned)
      fprintf(stderr, "pprt: more than %d threads; the rest use the process timer\n", SLOTS_CAP);
    s->tidset_full_warned = 1;
    return -ENOSPC;
  }
  if (clock)
    rc = pprt__os_sample_clock_start(&e->clock, first);
  else
    rc = pprt__os_thread_timer_start(&e->timer, tid, s->hz, s->cookie);
  if (rc != 0) {
    slot_remove(s, tid);
    pprt__os_sample_clock_close(&e->clock);
    return rc; /* -ESRCH: it exited meanwhile */
  }
  s->nclocks += clock;
  e->tid = tid;
  e->seen = 1;
  s->ntimers++;
  return 0;
}

/* Stops entry i's source and forgets it. Called on the thread itself, for
 * a thread that is gone, or when no handler can be running (stop). The slot
 * goes first, so that a signal still pending finds no clock to re-arm. */
static void stop_timer_at(session *s, size_t i) {
  slot_remove(s, s->timers[i].tid);
  s->nclocks -= s->timers[i].clock.fd >= 0;
  pprt__os_thread_timer_stop(&s->timers[i].timer);
  pprt__os_sample_clock_close(&s->timers[i].clock);
  s->timers[i] = s->timers[--s->ntimers];
}

static int rescan_one(uint64_t tid, void *ctx) {
  start_thread_timer(ctx, tid);
  return 0;
}

/* Timers for threads that appeared, none for threads that are gone. Not
 * while an exec is under way: the exec'ing thread's source was stopped on
 * purpose (pprt__cpu_exec_prepare), and one started again would signal
 * into the new image. */
static void rescan(session *s) {
  if (s->execs > 0)
    return;
  for (size_t i = 0; i < s->ntimers; i++)
    s->timers[i].seen = 0;
  if (pprt__os_thread_each(rescan_one, s) != 0)
    return; /* keep what we have rather than drop timers on a failed read */
  for (size_t i = 0; i < s->ntimers;)
    if (!s->timers[i].seen)
      stop_timer_at(s, i);
    else
      i++;
}

void pprt__cpu_thread_started(uint64_t tid) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s && s->thread_timers)
    start_thread_timer(s, tid);
  pthread_mutex_unlock(&g_control);
}

void pprt__cpu_thread_exiting(uint64_t tid) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s && s->thread_timers)
    for (size_t i = 0; i < s->ntimers; i++)
      if (s->timers[i].tid == tid) {
        stop_timer_at(s, i);
        break;
      }
  pthread_mutex_unlock(&g_control);
}

/* What an exec'ing thread's pending SIGPROFs are checked against. */
struct exec_ticks {
  uintptr_t cookie;
  int fd; /* the thread's sampling clock, closed by now; -1 if none */
};

/* A pending SIGPROF taken off before an exec: 1 for a tick of pprt's, as
 * on_sigprof would have counted or dropped it; 0 for one it would have
 * forwarded. */
static int exec_own_tick(const siginfo_t *info, void *ctx) {
  const struct exec_ticks *t = ctx;
  int fd = pprt__os_sigprof_clock_fd(info);
  if (fd >= 0)
    return fd == t->fd;
  return pprt__os_sigprof_source(info, t->cookie) != PPRT__OS_SIGPROF_OTHER;
}

/* Stops what could signal the exec'ing thread while the exec runs in the
 * kernel, leaving its signal pending in the new image: the process timer
 * and the thread's own clock or timer (other threads' sources signal only
 * their threads, which the exec ends). Returns 0 where there is nothing to
 * stop: no profile, or a vfork child (the program's; posix_spawn's never
 * comes here), which shares this memory but is another process, with no
 * timers and nothing pending at birth: it must not touch the parent's
 * sources, nor ask its thread id, which would be cached in the parent
 * thread's slot. */
static int exec_stop(void *ctx) {
  struct exec_ticks *t = ctx;
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s == NULL || s->pid != getpid()) {
    pthread_mutex_unlock(&g_control);
    return 0;
  }
  if (s->execs++ == 0 && s->process_timer)
    pprt__os_process_timer_set(0);
  timer_entry *e = s->thread_timers ? find_timer(s, pprt__thread_id()) : NULL;
  if (e != NULL) {
    t->fd = e->clock.fd;
    stop_timer_at(s, (size_t)(e - s->timers));
  }
  t->cookie = s->cookie;
  pthread_mutex_unlock(&g_control);
  return 1;
}

void pprt__cpu_exec_prepare(void) {
  struct exec_ticks t = {0, -1};
  pprt__sigprof_exec_prepare(exec_stop, exec_own_tick, &t);
}

void pprt__cpu_exec_failed(void) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s != NULL && s->pid == getpid()) {
    if (s->execs > 0 && --s->execs == 0 && s->process_timer)
      pprt__os_process_timer_set(s->process_hz);
    if (s->thread_timers)
      start_thread_timer(s, pprt__thread_id());
  }
  pprt__sigprof_exec_failed(s != NULL && s->pid == getpid());
  pthread_mutex_unlock(&g_control);
}

int pprt__cpu_running(void) {
  return atomic_load_explicit(&g_session, memory_order_acquire) != NULL;
}

/* ---- the signal handler ------------------------------------------------------------ */

static void record(session *s, void *ucontext, uint64_t tid, uint64_t count, uint64_t weight) {
  uintptr_t pcs[MAX_DEPTH];
  size_t n = 0;
  uint64_t flags = 0;
  pprt__os_regs regs;
  if (s->unwinder == PPRT_UNWIND_LIBUNWIND) {
    int got = pprt__unwind_libunwind(ucontext, pcs, (size_t)s->depth);
    n = got > 0 ? (size_t)got : 0;
  } else if (pprt__os_context_regs(ucontext, &regs) != 0) {
    n = 0;
  } else if (s->unwinder == PPRT_UNWIND_CFI) {
    n = pprt__unwind_cfi(&regs, pprt__thread_self()->stack, pcs, (size_t)s->depth);
  } else {
    n = pprt__unwind_fp(&regs, pprt__thread_self()->stack, pcs, (size_t)s->depth);
  }
  if (n == 0)
    flags |= PPRT__CPU_FLAG_EXTERNAL;
  uint64_t hdr[PPRT__CPU_HDR_WORDS] = {tid, count | flags, weight};
  /* -ENOSPC is counted by the ring and reported as lost samples. */
  pprt__ring_write(&s->ring, pprt__os_monotonic_ns(), hdr, pcs, n);
}

/* A signal from a sampling clock: weigh the interval that ended, start the
 * next one at a fresh random length, then take the sample. The re-arm comes
 * first so the unwind's time counts in the next interval. Returns 1 when it
 * took the sample; -1 for a late signal of this thread's clock, closed as
 * the thread exits (dropped: a program whose SIGPROF handler ends the
 * process, as GNU sort's does, must not see it); 0 when the clock is not
 * pprt's (the program's own F_SETSIG use of SIGPROF). */
static int on_clock(session *s, int fd, void *ucontext) {
  uint64_t tid = pprt__thread_id();
  slot *e = slot_find(s, tid);
  if (e == NULL || atomic_load_explicit(&e->fd, memory_order_relaxed) != fd)
    return pprt__thread_self()->clock_fd1 == fd + 1 ? -1 : 0;
  pprt__thread_self()->clock_fd1 = fd + 1;
  atomic_store_explicit(&e->fired, atomic_load_explicit(&e->fired, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  pprt__os_sample_clock c = {fd, 0};
  /* The weight is the thread's CPU time since its last sample, not the
   * period drawn: a period whose signal was lost (merged with a SIGPROF
   * already pending, throttled, or run out in the kernel by a user-only
   * clock) and the time between an expiry and this re-arm then still
   * count, so the weights add up to the thread's CPU time. Not the clock's
   * own count either: it runs ahead of CPU time by interrupt and steal
   * time (see pprt__os_sample_clock_rearm). Taking the drawn period saves
   * this system call but came out 0.7-2% short with busy threads on 2
   * cores (test_cpu's workers). */
  uint64_t now = pprt__os_thread_cpu_self_ns();
  uint64_t weight = e->last == UINT64_MAX || now < e->last ? e->interval : now - e->last;
  e->last = now;
  /* The next period starts at the re-arm, after the signal's delivery: the
   * rate is the asked one per second of the clock, less that delivery
   * time (microseconds a sample). */
  e->interval = draw_interval(e, s->period_ns);
  pprt__os_sample_clock_rearm(&c, e->interval);
  record(s, ucontext, tid, 1, weight);
  return 1;
}

static void on_sigprof(int sig, siginfo_t *info, void *ucontext) {
  int saved_errno = errno;
  /* A store-buffering pair with cpu_stop (store g_session, load
   * g_inflight): both sides seq_cst, so either stop sees this handler's
   * count or this handler sees the session gone. With acquire/release
   * alone, aarch64 may let both miss, and the handler use a session that
   * stop frees. */
  atomic_fetch_add_explicit(&g_inflight, 1, memory_order_seq_cst);
  session *s = atomic_load_explicit(&g_session, memory_order_seq_cst);
  uintptr_t cookie = s ? s->cookie : atomic_load_explicit(&g_cookie, memory_order_relaxed);
  int clock_fd = pprt__os_sigprof_clock_fd(info);
  enum pprt__os_sigprof_source src =
      clock_fd >= 0 ? PPRT__OS_SIGPROF_OTHER : pprt__os_sigprof_source(info, cookie);
  if (clock_fd >= 0 && s && s->source == SOURCE_CLOCK) {
    if (on_clock(s, clock_fd, ucontext) == 0)
      if (!pprt__thread_defer_signal(sig, info))
        pprt__sigprof_forward(sig, info, ucontext);
  } else if (clock_fd >= 0 && s == NULL) {
    /* A clock's signal left pending at stop. */
  } else if (src == PPRT__OS_SIGPROF_OTHER) {
    /* kill(), sigqueue(), the program's own timer: not ours to count. */
    if (!pprt__thread_defer_signal(sig, info))
      pprt__sigprof_forward(sig, info, ucontext);
  } else if (s) {
    uint64_t tid = pprt__thread_id();
    /* Go's validSIGPROF: a thread with its own source counts only its
     * ticks; the process timer's would count its CPU time twice. */
    int valid = src == PPRT__OS_SIGPROF_THREAD_TIMER ||
                (s->process_timer && !(s->thread_timers && slot_find(s, tid)));
    /* A per-thread tick may stand for several periods of CPU (see
     * pprt__os_sigprof_overrun): weight it, or busy threads sharing CPUs
     * are undercounted (measured: 76% of the CPU time with 4 threads on 2
     * cores at 250 Hz). */
    uint64_t count = 1;
    if (src == PPRT__OS_SIGPROF_THREAD_TIMER) {
      unsigned over = pprt__os_sigprof_overrun(info);
      count += over < 0xffff ? over : 0xffff;
      slot *e = slot_find(s, tid); /* its own: only this handler writes it */
      if (e)
        atomic_store_explicit(&e->fired, atomic_load_explicit(&e->fired, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    }
    if (valid)
      record(s, ucontext, tid, count,
             count * (src == PPRT__OS_SIGPROF_THREAD_TIMER ? s->period_ns : s->process_period_ns));
  }
  atomic_fetch_sub_explicit(&g_inflight, 1, memory_order_release);
  errno = saved_errno;
}

/* ---- the reader ---------------------------------------------------------------------- */

struct name_key {
  const session *s;
  uint64_t tid;
};

static int name_eq(const void *ctx, uint32_t idx) {
  const struct name_key *k = ctx;
  return k->s->names[idx].tid == k->tid;
}

/* The thread's name, asked once per thread; NULL when unknown. */
static const char *thread_name(session *s, uint64_t tid) {
  struct name_key k = {s, tid};
  uint64_t h = pprt__hash_finish(tid);
  int64_t idx = pprt__table_find(&s->name_index, h, name_eq, &k);
  if (idx >= 0)
    return s->names[idx].name;
  if (s->nnames == s->names_cap) {
    size_t ncap = s->names_cap ? 2 * s->names_cap : 64;
    name_entry *n = realloc(s->names, ncap * sizeof *n);
    if (n == NULL)
      return NULL;
    s->names = n;
    s->names_cap = ncap;
  }
  char buf[64];
  char *name = pprt__os_thread_name(tid, buf, sizeof buf) == 0 ? strdup(buf) : NULL;
  if (pprt__table_intern(&s->name_index, h, name_eq, &k, (uint32_t)s->nnames) < 0) {
    free(name);
    return NULL;
  }
  s->names[s->nnames++] = (name_entry){tid, name};
  return name;
}

/* Whether thread tid has had a sample (every sample's thread is named). */
int pprt__cpu_had_samples(session *s, uint64_t tid) {
  struct name_key k = {s, tid};
  return pprt__table_find(&s->name_index, pprt__hash_finish(tid), name_eq, &k) >= 0;
}

static void take_record(session *s, const pprt__ring_record *rec) {
  int64_t period = (int64_t)s->period_ns;
  if (rec->kind == PPRT__RING_OVERFLOW) {
    int64_t n = (int64_t)rec->pcs[0];
    int64_t v[2] = {n, n * period};
    s->lost += (uint64_t)n;
    pprt__label labels[PPRT__PROCESS_LABELS];
    size_t nlabels = pprt__process_labels(labels);
    pprt__profile_add_synthetic(s->prof, PPRT__FRAME_LOST, v, labels, nlabels);
    return;
  }
  if (rec->kind != PPRT__RING_DATA)
    return;
  uint64_t tid = rec->hdr[0];
  int64_t count = (int64_t)(rec->hdr[1] & 0xffffffffu);
  uint64_t weight = pprt__cpu_blocked_saw_sample(s, tid, rec->hdr[2]);
  int64_t v[2] = {count, (int64_t)weight};
  const char *name = thread_name(s, tid);
  pprt__label labels[2 + PPRT__PROCESS_LABELS] = {{"thread_id", NULL, (int64_t)tid, "id"},
                                                  {"thread_name", name, 0, NULL}};
  size_t nlabels = name ? 2 : 1;
  nlabels += pprt__process_labels(labels + nlabels);
  s->samples += (uint64_t)count;
  s->signals++;
  s->sample_ns += weight;
  /* Into a running trace too (it does nothing otherwise). */
  pprt__trace_cpu_sample(tid, rec->timestamp, rec->pcs, rec->npcs, (uint64_t)count);
  if (rec->hdr[1] & PPRT__CPU_FLAG_EXTERNAL) {
    s->external += (uint64_t)count;
    pprt__profile_add_synthetic(s->prof, PPRT__FRAME_EXTERNAL, v, labels, nlabels);
  } else {
    /* The ring holds 64-bit words; on 32-bit systems a pc is narrower. */
    uintptr_t pcs[MAX_DEPTH];
    size_t n = rec->npcs < MAX_DEPTH ? rec->npcs : MAX_DEPTH;
    for (size_t i = 0; i < n; i++)
      pcs[i] = (uintptr_t)rec->pcs[i];
    pprt__profile_add(s->prof, pcs, n, PPRT__STACK_LEAF_EXACT, v, labels, nlabels);
  }
}

static double cpu_seconds(void);
static void add_comments(session *s, double cpu);

/* Writes the profile so far through the checkpoint's writer: the comments
 * and mappings of a full profile are added for this write only. */
static void write_checkpoint(session *s, uint64_t now) {
  pprt_writer out;
  if (s->checkpoint.begin(s->checkpoint.ctx, &out) != 0)
    return;
  pprt__profile_mark mark = pprt__profile_get_mark(s->prof);
  double cpu = cpu_seconds() - s->start_cpu;
  pprt__profile_set_time(s->prof, s->start_wall, (int64_t)(now - s->start_mono));
  add_comments(s, cpu);
  char c[160];
  snprintf(c, sizeof c,
           "checkpoint %llu: the profile so far, at %.3f s of CPU and %.3f s of wall time; "
           "rewritten every %.3f s",
           (unsigned long long)++s->checkpoints, cpu, (double)(now - s->start_mono) / 1e9,
           (double)s->checkpoint.interval_ns / 1e9);
  pprt__profile_add_comment(s->prof, c);
  int rc = pprt__profile_add_os_mappings(s->prof);
  if (rc == 0)
    rc = pprt__profile_write_os(s->prof, s->symbolize, out);
  pprt__profile_rewind(s->prof, mark);
  s->checkpoint.end(s->checkpoint.ctx, rc);
}

static __thread int t_reader __attribute__((tls_model("initial-exec")));

int pprt__cpu_on_reader(void) {
  return t_reader;
}

static void *reader_main(void *arg) {
  session *s = arg;
  t_reader = 1;
  pprt__heap_ignore_thread(); /* the profile builder's memory is pprt's */
  atomic_store(&s->reader_tid, pprt__os_thread_id());
  /* cpu_start sets the session's start times after this thread exists,
   * under g_control: wait for it to let go (TSan saw the first pass race
   * with those writes). */
  pthread_mutex_lock(&g_control);
  pthread_mutex_unlock(&g_control);
  pprt__ring_record rec;
  for (;;) {
    int rc = pprt__ring_read(&s->ring, PPRT__RING_BLOCK, 100000000, s->readbuf, &rec);
    if (rc == 0)
      break;
    if (rc == 1)
      take_record(s, &rec);
    if (s->unwinder == PPRT_UNWIND_CFI && pprt__cfi_stale())
      pprt__cfi_refresh();
    uint64_t now = pprt__os_monotonic_ns();
    if (now - s->last_blocked_check >= BLOCKED_CHECK_NS) {
      s->last_blocked_check = now;
      pprt__cpu_check_blocked(s);
    }
    if (now - s->last_rescan >= RESCAN_NS) {
      s->last_rescan = now;
      pprt__cpu_update_known_blocked(s);
      /* Tables for images dlopen'ed since (cheap when there are none). */
      if (s->unwinder == PPRT_UNWIND_CFI)
        pprt__cfi_refresh();
      if (s->thread_timers) {
        pthread_mutex_lock(&g_control);
        if (atomic_load(&g_session) == s)
          rescan(s);
        pthread_mutex_unlock(&g_control);
      }
    }
    if (s->checkpoint.interval_ns && now - s->last_checkpoint >= s->checkpoint.interval_ns) {
      write_checkpoint(s, now);
      /* From the end of the write: a slow write never runs back to back. */
      s->last_checkpoint = pprt__os_monotonic_ns();
    }
  }
  return NULL;
}

/* ---- start and stop ------------------------------------------------------------------- */

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void atfork_prepare(void) {
  pthread_mutex_lock(&g_control);
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&g_control);
}

/* The child has one thread, no timers and no reader: drop the session
 * without touching it and give the program its SIGPROF action back. */
static void atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_control = fresh;
  pprt__thread_forget_id();
  session *s = atomic_load(&g_session);
  if (s != NULL) {
    /* The parent's clocks: descriptors the child inherited (fork keeps
     * them; only exec closes them). The list is whole: the parent held
     * g_control across the fork. */
    for (size_t i = 0; i < s->ntimers; i++)
      pprt__os_sample_clock_close(&s->timers[i].clock);
  }
  if (s != NULL || g_busy) {
    atomic_store(&g_session, NULL);
    g_busy = 0;
    atomic_store(&g_inflight, 0);
    pprt__sigprof_fork_child();
  }
}

static const pprt__fork_hooks fork_hooks = {atfork_prepare, atfork_parent, atfork_child};

static void install_atfork(void) {
  pprt__fork_register(PPRT__FORK_CPU, &fork_hooks);
}

static void session_free(session *s) {
  pprt__ring_destroy(&s->ring);
  pprt__profile_free(s->prof);
  for (size_t i = 0; i < s->nnames; i++)
    free(s->names[i].name);
  free(s->names);
  pprt__table_free(&s->name_index);
  free(s->timers);
  free(s->blocked);
  free(s->at_start);
  free(s->readbuf);
  free(s);
}

static int check_options(const pprt_cpu_options *o, pprt_cpu_options *out) {
  memset(out, 0, sizeof *out);
  if (o) {
    size_t n = o->size ? o->size : sizeof *o;
    if (n > sizeof *o)
      n = sizeof *o; /* a newer caller: use the fields this version knows */
    memcpy(out, o, n);
  }
  if (out->hz == 0)
    out->hz = DEFAULT_HZ;
  if (out->max_depth == 0)
    out->max_depth = DEFAULT_DEPTH;
  if (out->hz < 1 || out->hz > MAX_HZ || out->max_depth < 1 || out->max_depth > MAX_DEPTH)
    return -EINVAL;
  if (out->timer != PPRT_TIMER_AUTO && out->timer != PPRT_TIMER_PER_THREAD &&
      out->timer != PPRT_TIMER_PROCESS && out->timer != PPRT_TIMER_PERF)
    return -EINVAL;
  if (out->unwinder == PPRT_UNWIND_DEFAULT)
    out->unwinder = PPRT__DEFAULT_UNWINDER;
  if (out->unwinder != PPRT_UNWIND_FP && out->unwinder != PPRT_UNWIND_LIBUNWIND &&
      out->unwinder != PPRT_UNWIND_CFI)
    return -EINVAL;
  if ((out->unwinder == PPRT_UNWIND_LIBUNWIND && !pprt__have_libunwind) ||
      (out->unwinder == PPRT_UNWIND_CFI && !pprt__have_cfi))
    return -ENOTSUP;
  return 0;
}

/* Starts the reader with every signal blocked: it must never run the
 * handler (it would record itself) nor take the program's signals. A
 * fault of its own is left deliverable, so that a crash handler (the
 * preload library's) sees it rather than the kernel ending the process
 * under it. */
static int start_reader(session *s) {
  sigset_t all, old;
  sigfillset(&all);
  static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof faults / sizeof *faults; i++)
    sigdelset(&all, faults[i]);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* The preload library's pthread_create hook sees this flag and does not
   * register the thread: registration would wait for g_control, which we
   * hold until the reader has told us its id. */
  pprt__thread_self()->creating_internal = 1;
  int rc = pprt__sys_pthread_create(&s->reader, NULL, reader_main, s);
  pprt__thread_self()->creating_internal = 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0)
    return -rc;
  /* Its id, so the rescan does not give it a timer. */
  while (atomic_load(&s->reader_tid) == 0)
    sched_yield();
  return 0;
}

static int cpu_start(const pprt_cpu_options *opts, pprt_writer out);
static int cpu_stop(void);

static const char *clock_error(int err) {
  switch (err) {
  case -ENOTSUP:
    return "perf events are not available (no perf_event_open, or a seccomp filter)";
  case -EACCES:
    return "perf_event_open was refused (perf_event_paranoid, or a seccomp filter)";
  default:
    return strerror(-err);
  }
}

/* Picks the per-thread source by trying it on this thread: the sampling
 * clock, then a per-thread CPU timer, as `mode` allows; the process timer
 * covers threads without one (auto and process). Records why a better
 * source was passed over. */
static int choose_source(session *s, pprt_timer_mode mode) {
  s->source = SOURCE_NONE;
  if (mode == PPRT_TIMER_AUTO || mode == PPRT_TIMER_PERF) {
    pprt__os_sample_clock probe;
    int rc = pprt__os_sample_clock_open(&probe, pprt__thread_id());
    if (rc == 0) {
      s->source = SOURCE_CLOCK;
      s->user_only = (probe.flags & PPRT__OS_CLOCK_USER_ONLY) != 0;
      pprt__os_sample_clock_close(&probe);
      /* A clock is a descriptor per thread. A program with many threads
       * and a low descriptor limit would find its own open() failing, and
       * one that select()s needs its descriptors below 1024: pprt keeps
       * to a quarter of the limit, and the threads past it get CPU
       * timers. */
      struct rlimit rl;
      s->clock_budget = 256;
      if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        s->clock_budget = rl.rlim_cur == RLIM_INFINITY ? SLOTS_CAP : (size_t)rl.rlim_cur / 4;
      pprt__os_thread_timer tprobe = {0};
      if (pprt__os_thread_timer_start(&tprobe, pprt__thread_id(), 1, 0) == 0) {
        pprt__os_thread_timer_stop(&tprobe);
        s->timers_ok = 1;
      }
    } else if (mode == PPRT_TIMER_PERF) {
      return rc; /* the platform already maps "no perf events" to -ENOTSUP */
    } else {
      snprintf(s->fallback, sizeof s->fallback, "perf task clock not used: %s", clock_error(rc));
    }
  }
  if (s->source == SOURCE_NONE && (mode == PPRT_TIMER_AUTO || mode == PPRT_TIMER_PER_THREAD)) {
    pprt__os_thread_timer probe = {0};
    int rc = pprt__os_thread_timer_start(&probe, pprt__thread_id(), 1, 0);
    if (rc == 0) {
      pprt__os_thread_timer_stop(&probe);
      s->source = SOURCE_TIMER;
    } else if (mode == PPRT_TIMER_PER_THREAD) {
      return rc;
    } else if (rc != -ENOTSUP || s->fallback[0] == '\0') {
      size_t n = strlen(s->fallback);
      snprintf(s->fallback + n, sizeof s->fallback - n, "%sper-thread CPU timers not used: %s",
               n ? "; " : "", rc == -ENOTSUP ? "none on this OS" : strerror(-rc));
    }
  }
  s->thread_timers = s->source != SOURCE_NONE;
  s->process_timer = mode == PPRT_TIMER_PROCESS || (mode == PPRT_TIMER_AUTO && !s->thread_timers);
  s->process_hz = s->hz;
  if (mode == PPRT_TIMER_AUTO && s->thread_timers &&
      !atomic_load_explicit(&g_threads_hooked, memory_order_relaxed)) {
    /* The process timer as the net for threads the program creates
     * between rescans: each of its ticks that lands on a thread with its
     * own source is delivered and dropped, so it runs at no more than
     * 100 Hz (at the asked rate it doubled the signals). Where every
     * thread is registered as it starts (the preload library's
     * pthread_create hook), there is nothing for it to catch. */
    s->process_timer = 1;
    s->process_hz = s->hz < FALLBACK_HZ ? s->hz : FALLBACK_HZ;
  }
  s->process_period_ns = 1000000000u / (uint64_t)s->process_hz;
  return 0;
}

/* The public entry points: pprt's own allocations on the program's thread
 * (the ring, the profile) are not the program's, and not sampled. */
int pprt_cpu_start(const pprt_cpu_options *opts, pprt_writer out) {
  int paused = pprt__heap_pause();
  int rc = cpu_start(opts, out);
  pprt__heap_resume(paused);
  return rc;
}

int pprt_cpu_stop(void) {
  int paused = pprt__heap_pause();
  int rc = cpu_stop();
  pprt__heap_resume(paused);
  return rc;
}

static int cpu_start(const pprt_cpu_options *opts, pprt_writer out) {
  pprt_cpu_options o;
  int rc = check_options(opts, &o);
  if (rc != 0)
    return rc;
  if (out.write == NULL)
    return -EINVAL;
  pthread_once(&g_atfork_once, install_atfork);
  /* The images loaded now get their tables before the first tick, outside
   * g_control (a large program's take tens of ms); a failure leaves frame
   * pointers for the images without one. */
  if (o.unwinder == PPRT_UNWIND_CFI)
    pprt__cfi_refresh();

  session *s = calloc(1, sizeof *s);
  if (s == NULL || (s->timers = calloc(SLOTS_CAP, sizeof *s->timers)) == NULL) {
    free(s);
    return -ENOMEM;
  }
  pthread_mutex_lock(&g_control);
  if (atomic_load(&g_session) != NULL || g_busy) {
    pthread_mutex_unlock(&g_control);
    free(s->timers);
    free(s);
    return -EBUSY;
  }
  s->out = out;
  s->hz = o.hz;
  s->depth = o.max_depth;
  s->symbolize = !o.no_symbolize;
  s->unwinder = o.unwinder;
  s->period_ns = 1000000000u / (uint64_t)o.hz;
  s->cookie = (uintptr_t)s;
  s->pid = getpid();
  if (g_checkpoint.interval_ns && g_checkpoint.begin && g_checkpoint.end)
    s->checkpoint = g_checkpoint;
  static const pprt__value_type types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  rc = pprt__ring_init(&s->ring, RING_WORDS, PPRT__CPU_HDR_WORDS, (uint64_t)o.hz);
  /* The reader wakes at half full or every 100 ms (its read timeout), not
   * on every sample: a wake-up costs the handler ~17 us (bench/cpu). */
  if (rc == 0)
    pprt__ring_set_wake_threshold(&s->ring, RING_WORDS / 2);
  if (rc == 0 && (s->readbuf = malloc(s->ring.max_record * sizeof *s->readbuf)) == NULL)
    rc = -ENOMEM;
  if (rc == 0)
    rc = pprt__profile_new(&s->prof, types, 2, types[1], (int64_t)s->period_ns);
  if (rc != 0) {
    session_free(s);
    pthread_mutex_unlock(&g_control);
    return rc;
  }

  rc = choose_source(s, o.timer);
  if (rc != 0) {
    session_free(s);
    pthread_mutex_unlock(&g_control);
    return rc;
  }

  pprt__os_thread_each(pprt__cpu_snapshot_one, s);
  atomic_store(&g_cookie, s->cookie);
  rc = pprt__sigprof_install(on_sigprof);
  if (rc == 0 && (rc = start_reader(s)) != 0)
    pprt__sigprof_restore();
  if (rc != 0) {
    session_free(s);
    pthread_mutex_unlock(&g_control);
    return rc;
  }

  s->start_wall = (int64_t)pprt__os_wall_ns();
  s->start_mono = pprt__os_monotonic_ns();
  s->start_cpu = cpu_seconds();
  s->last_rescan = s->start_mono;
  s->last_blocked_check = s->start_mono;
  s->last_checkpoint = s->start_mono;
  atomic_store(&g_session, s);
  pthread_mutex_unlock(&g_control);

  /* The caller gets an alternate stack and known stack bounds (unless it
   * is pprt's own: registering would unblock SIGPROF on it). */
  if (!pprt__cpu_is_ignored(pprt__thread_id()))
    pprt_thread_register();

  pthread_mutex_lock(&g_control);
  if (atomic_load(&g_session) == s) {
    if (s->thread_timers)
      rescan(s);
    if (s->process_timer)
      pprt__os_process_timer_set(s->process_hz);
  }
  pthread_mutex_unlock(&g_control);
  return 0;
}

/* The profile's comments: which source sampled and why a better one did
 * not, and what it delivered against the CPU time the process used. */
static void add_comments(session *s, double cpu) {
  char c[320];
  const char *source = s->source == SOURCE_CLOCK
                           ? (s->user_only ? "perf task clock (user time only)" : "perf task clock")
                       : s->source == SOURCE_TIMER ? "per-thread CPU timers"
                                                   : "process timer";
  char net[64] = "";
  if (s->thread_timers && s->process_timer)
    snprintf(net, sizeof net, " (process timer at %d Hz for threads not yet seen)", s->process_hz);
  snprintf(c, sizeof c, "pprt %s: asked %d Hz, source %s%s, unwinder %s", pprt_version(), s->hz,
           source, net,
           s->unwinder == PPRT_UNWIND_LIBUNWIND ? "libunwind"
           : s->unwinder == PPRT_UNWIND_CFI     ? "cfi (DWARF tables, frame pointers where none)"
                                                : "frame pointers");
  pprt__profile_add_comment(s->prof, c);
  if (s->unwinder == PPRT_UNWIND_CFI) {
    pprt__cfi_describe(c, sizeof c);
    pprt__profile_add_comment(s->prof, c);
  }
  if (s->source == SOURCE_CLOCK)
    snprintf(c, sizeof c,
             "sampling intervals: exponential, mean %.3f ms of the thread's CPU time, at least "
             "%.3f ms; each sample weighted by the CPU time its clock counted%s",
             (double)s->period_ns / 1e6,
             (double)(s->period_ns > 2 * MIN_INTERVAL_NS ? MIN_INTERVAL_NS : s->period_ns / 2) / 1e6,
             s->user_only ? " (kernel time, not sampled, goes to the next sample)" : "");
  else
    snprintf(c, sizeof c,
             "sampling on the scheduler tick: every %.3f ms of CPU, a tick that folds several "
             "periods weighted by them; periodic programs can alias with the tick",
             (double)s->period_ns / 1e6);
  pprt__profile_add_comment(s->prof, c);
  if (s->fallback[0]) {
    snprintf(c, sizeof c, "fallback: %s", s->fallback);
    pprt__profile_add_comment(s->prof, c);
  }
  if (s->budget_timers) {
    snprintf(c, sizeof c,
             "fallback: %zu thread(s) got per-thread CPU timers instead of a perf task clock: "
             "at most %zu clocks (a quarter of the descriptor limit) or out of descriptors",
             s->budget_timers, s->clock_budget);
    pprt__profile_add_comment(s->prof, c);
  }
  snprintf(c, sizeof c,
           "effective rate %.1f samples per CPU-second (%llu samples over %.3f s of CPU, "
           "%.3f s sampled)",
           cpu > 0 ? (double)s->samples / cpu : 0.0, (unsigned long long)s->samples, cpu,
           (double)s->sample_ns / 1e9);
  pprt__profile_add_comment(s->prof, c);
  /* What the kernel delivered: a per-thread tick that folded several
   * periods (si_overrun) is one signal weighted as several samples. */
  snprintf(c, sizeof c, "timer signals %.1f per CPU-second (%llu signals)",
           cpu > 0 ? (double)s->signals / cpu : 0.0, (unsigned long long)s->signals);
  pprt__profile_add_comment(s->prof, c);
  snprintf(c, sizeof c, "lost samples %llu, unwalkable stacks %llu",
           (unsigned long long)s->lost, (unsigned long long)s->external);
  pprt__profile_add_comment(s->prof, c);
  if (s->blocked_ns == 0)
    return;
  size_t n = 0, listed = 0;
  for (size_t i = 0; i < s->nblocked; i++)
    n += s->blocked[i].charged > 0;
  snprintf(c, sizeof c,
           "signals blocked: %zu thread(s) blocked SIGPROF; %.3f s of their CPU time is under "
           PPRT__FRAME_BLOCKED,
           n, (double)s->blocked_ns / 1e9);
  pprt__profile_add_comment(s->prof, c);
  for (size_t i = 0; i < s->nblocked && listed < 16; i++) {
    const blocked_entry *b = &s->blocked[i];
    if (b->charged == 0)
      continue;
    const char *name = thread_name(s, b->tid);
    snprintf(c, sizeof c, "signals blocked: thread %llu (%s) %.3f s",
             (unsigned long long)b->tid, name ? name : "?", (double)b->charged / 1e9);
    pprt__profile_add_comment(s->prof, c);
    listed++;
  }
  if (n > listed) {
    snprintf(c, sizeof c, "signals blocked: %zu more thread(s)", n - listed);
    pprt__profile_add_comment(s->prof, c);
  }
}

static int cpu_stop(void) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s == NULL) {
    pthread_mutex_unlock(&g_control);
    return -EPIPE;
  }
  /* No new ticks: disarm every timer, then detach the session. A sampling
   * clock is closed only once no handler can be about to re-arm it (a
   * closed descriptor's number may be reused meanwhile); its signals that
   * are still pending find no session and are dropped. */
  if (s->process_timer)
    pprt__os_process_timer_set(0);
  for (size_t i = 0; i < s->ntimers; i++)
    pprt__os_thread_timer_stop(&s->timers[i].timer);
  atomic_store_explicit(&g_session, NULL, memory_order_seq_cst);
  g_busy = 1;
  pthread_mutex_unlock(&g_control);

  /* Handlers that loaded the session before it was detached finish first
   * (seq_cst: the other half of on_sigprof's pair). */
  while (atomic_load_explicit(&g_inflight, memory_order_seq_cst) != 0)
    sched_yield();
  pthread_mutex_lock(&g_control);
  while (s->ntimers > 0)
    stop_timer_at(s, s->ntimers - 1);
  pthread_mutex_unlock(&g_control);
  pprt__ring_close(&s->ring);
  pthread_join(s->reader, NULL);
  /* The reader is done: the last word on threads that block SIGPROF. */
  pprt__cpu_check_blocked_at_stop(s);
  /* A tick still pending now finds the program's latest action, or SIG_IGN
   * where that is SIG_DFL, and cannot kill the process (Go issue 19320). */
  int restored = pprt__sigprof_restore();

  double cpu = cpu_seconds() - s->start_cpu;
  pprt__profile_set_time(s->prof, s->start_wall,
                         (int64_t)(pprt__os_monotonic_ns() - s->start_mono));
  add_comments(s, cpu);
  const char *ending = pprt__profile_ending();
  if (ending) {
    char c[160];
    snprintf(c, sizeof c, "ending: written %s", ending);
    pprt__profile_add_comment(s->prof, c);
  }
  int rc = pprt__profile_add_os_mappings(s->prof);
  if (rc == 0)
    rc = pprt__profile_write_os(s->prof, s->symbolize, s->out);
  session_free(s);

  pthread_mutex_lock(&g_control);
  g_busy = 0;
  pthread_mutex_unlock(&g_control);
  /* The profile is written either way; a handler that could not be taken
   * out is reported too (sigprof.h says what happens to it). */
  return rc != 0 ? rc : restored;
}
