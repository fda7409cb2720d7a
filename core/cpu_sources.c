/* The CPU profiler's per-thread sources: what sends SIGPROF to each
 * thread, best first a sampling clock (Linux perf_event task clock) at
 * randomized intervals, else a per-thread CPU timer; which one a session
 * uses (tried on the starting thread); the threads that get one (found at
 * start, on registration and by the reader's rescans); and `slots`, the
 * lock-free table the handler reads to drop process-timer ticks for
 * threads with their own source (Go's validSIGPROF) and to find a thread's
 * clock and its current interval (slot_find, draw_interval: in
 * core/cpu_session.h, inlined into the handler).
 *
 * Which thread: whichever holds core/cpu.c's g_control: the program's
 * threads starting a session, registering, exiting or exec'ing, and the
 * reader on its rescans. The ignored-thread list is lock-free.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "core/platform.h"
#include "core/thread.h"
#include "pprt.h"
/* Last: its type names (slot, session) are the CPU profiler's own. */
#include "core/cpu_session.h"

#define FALLBACK_HZ 100 /* at most, for the process timer beside per-thread sources */

static atomic_int g_threads_hooked; /* every thread registers as it starts */

void pprt__cpu_threads_hooked(void) {
  atomic_store(&g_threads_hooked, 1);
}

/* ---- the slots of threads with their own source ------------------------------ */

/* splitmix64, to seed a slot's generator. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
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

timer_entry *pprt__cpu_find_timer(session *s, uint64_t tid) {
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
  if (cpu < e->cpu_ns)
    return 1; /* CPU time only grows: another thread */
  /* Silent over 4 periods of CPU since the source last fired, however
   * many rescans that took: measured between rescans, a thread that gets
   * little of a busy machine's CPU (15 ms per 250 ms rescan at load 30)
   * never looked silent, and a reused id kept a dead source for good. */
  if (fired != e->fired) {
    e->fired = fired;
    e->cpu_ns = cpu;
  }
  int silent = cpu - e->cpu_ns > 4 * s->period_ns;
  return silent && e->start != 0 && pprt__os_thread_start_time(tid, &start) == 0 &&
         start != e->start;
}

/* Gives thread tid its own source, unless it has one. The tid goes into
 * the slots before the source starts, so no tick of it is ever counted
 * twice (a process-timer tick in between is dropped instead). */
int pprt__cpu_start_thread_timer(session *s, uint64_t tid) {
  if (pprt__cpu_is_ignored(tid))
    return 0; /* not marked seen: a source it got before is stopped */
  timer_entry *e = pprt__cpu_find_timer(s, tid);
  if (e) {
    if (!source_outlived(s, e, tid)) {
      e->seen = 1;
      return 0;
    }
    pprt__cpu_stop_timer_at(s, (size_t)(e - s->timers)); /* and a source of its own */
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
void pprt__cpu_stop_timer_at(session *s, size_t i) {
  slot_remove(s, s->timers[i].tid);
  s->nclocks -= s->timers[i].clock.fd >= 0;
  pprt__os_thread_timer_stop(&s->timers[i].timer);
  pprt__os_sample_clock_close(&s->timers[i].clock);
  s->timers[i] = s->timers[--s->ntimers];
}

/* A sampling clock's tail: the CPU time its thread used since the last
 * signal, which no sample weighs (the next signal would have). With a
 * clock that counts all CPU time it is under a period; a user-only clock
 * signals only where its period ends in user code, and a thread that
 * lives in the kernel goes long without: reading /dev/zero, one signal per
 * 20-35 ms of CPU, and stretches of 150-200 ms between two (the stretch is
 * a drawn period times the number of periods that ended in the kernel, a
 * product with a long tail). The tail of a short profile is then a part of
 * its CPU time worth saying. Not for a thread that blocks SIGPROF: the
 * blocked accounting charges that time (cpu_blocked.c). */
void pprt__cpu_stop_timer_counted(session *s, size_t i, int self) {
  uint64_t tid = s->timers[i].tid;
  slot *sl = s->timers[i].clock.fd >= 0 ? slot_find(s, tid) : NULL;
  pprt__cpu_stop_timer_at(s, i);
  /* Read after the slot is gone, so that no handler of this thread can
   * weigh the time after it. */
  uint64_t last = sl ? sl->last : UINT64_MAX, cpu = 0;
  if (last == UINT64_MAX)
    return;
  int blocks = 0;
  if (self) {
    sigset_t now;
    cpu = pprt__os_thread_cpu_self_ns();
    blocks = pthread_sigmask(SIG_BLOCK, NULL, &now) == 0 && sigismember(&now, SIGPROF) == 1;
  } else if (pprt__os_thread_cpu_ns(tid, &cpu) != 0 ||
             pprt__os_thread_blocks(tid, SIGPROF, &blocks) != 0) {
    return;
  }
  if (!blocks && cpu > last)
    s->unsampled_ns += cpu - last;
}

static int rescan_one(uint64_t tid, void *ctx) {
  pprt__cpu_start_thread_timer(ctx, tid);
  return 0;
}

/* Timers for threads that appeared, none for threads that are gone. Not
 * while an exec is under way: the exec'ing thread's source was stopped on
 * purpose (pprt__cpu_exec_prepare), and one started again would signal
 * into the new image. */
void pprt__cpu_rescan(session *s) {
  if (s->execs > 0)
    return;
  for (size_t i = 0; i < s->ntimers; i++)
    s->timers[i].seen = 0;
  if (pprt__os_thread_each(rescan_one, s) != 0)
    return; /* keep what we have rather than drop timers on a failed read */
  for (size_t i = 0; i < s->ntimers;)
    if (!s->timers[i].seen)
      pprt__cpu_stop_timer_at(s, i);
    else
      i++;
}

/* ---- choosing the source ------------------------------------------------------------ */

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
int pprt__cpu_choose_source(session *s, pprt_timer_mode mode) {
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
