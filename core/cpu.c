/* The CPU profiler: Go's runtime/pprof for any C program.
 *
 * Its files, one per role (the session's type and what they share are in
 * core/cpu_session.h):
 *   this file           session state, start and stop, the signal handler,
 *                       the hooks for threads that start, exit or exec, and
 *                       fork;
 *   core/cpu_sources.c  what sends SIGPROF to each thread (a sampling clock
 *                       or a per-thread CPU timer, the process timer as the
 *                       fallback) and `slots`, the lock-free table the
 *                       handler reads (Go's validSIGPROF);
 *   core/cpu_reader.c   the reader thread: drains the ring into the profile
 *                       builder, rescans threads, writes checkpoints;
 *   core/cpu_blocked.c  threads that block SIGPROF, charged to a synthetic
 *                       frame so the totals stay honest.
 *
 * Divisions of this file:
 *   session state   one session at a time (g_session), started and stopped
 *                   under g_control; the signal handler reaches it through
 *                   an atomic pointer and announces itself in g_inflight so
 *                   stop can wait for running handlers before freeing;
 *   threads         registration, exit and exec, under g_control;
 *   the handler     re-arm the clock, unwind, one ring write, nothing else;
 *   start and stop  the reader, the handler and the sources, in order.
 *
 * Which thread: the program's threads (start, stop, registration, exec),
 * the signal handler on any thread, and the reader for its rescans (under
 * g_control, through pprt__cpu_rescan_current).
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
/* Last: its type names (slot, session) are the CPU profiler's own. */
#include "core/cpu_session.h"

#define DEFAULT_HZ 100
#define MAX_HZ 10000
#define DEFAULT_DEPTH 64
#define RING_WORDS ((size_t)1 << 17) /* 1 MiB, as Go's profBuf */

static pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER;
static session *_Atomic g_session;
static int g_busy;            /* a start or stop is between its steps */
static atomic_int g_inflight; /* handlers running right now */
static _Atomic uintptr_t g_cookie;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
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

/* ---- threads (their sources: core/cpu_sources.c) ---------------------------------- */

void pprt__cpu_thread_started(uint64_t tid) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s && s->thread_timers)
    pprt__cpu_start_thread_timer(s, tid);
  pthread_mutex_unlock(&g_control);
}

void pprt__cpu_thread_exiting(uint64_t tid) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s && s->thread_timers)
    for (size_t i = 0; i < s->ntimers; i++)
      if (s->timers[i].tid == tid) {
        pprt__cpu_stop_timer_counted(s, i, 1);
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
  timer_entry *e = s->thread_timers ? pprt__cpu_find_timer(s, pprt__thread_id()) : NULL;
  if (e != NULL) {
    t->fd = e->clock.fd;
    pprt__cpu_stop_timer_at(s, (size_t)(e - s->timers));
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
      pprt__cpu_start_thread_timer(s, pprt__thread_id());
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
  uint64_t drawn = e->interval;
  uint64_t weight = e->last == UINT64_MAX || now < e->last ? drawn : now - e->last;
  e->last = now;
  /* A signal that comes whole periods late stands for the samples the
   * lateness would have drawn, as a timer's overrun does: the count is 1
   * plus the lateness in periods (rounded at random, so its mean is exact).
   * On a virtual machine whose host stops the vCPU, the guest's clocks leap
   * over the stop, the thread's CPU time with them, and the clock's timer
   * expires once when the vCPU runs again: 20 ms of the thread's CPU time
   * in one signal, measured under two CPU hogs here, and once 3.8 s. The
   * weight had that time; the count, one sample, did not, and the shares
   * of samples strayed 5 to 12 points from those of CPU time. Also a
   * period ended in the kernel by a user-only clock. */
  uint64_t count = 1;
  if (weight > drawn) {
    double late = (double)(weight - drawn) / (double)s->period_ns + 1.0 - draw_uniform(e);
    count += late < 0xffff ? (uint64_t)late : 0xffff;
  }
  /* The next period starts at the re-arm, after the signal's delivery: the
   * rate is the asked one per second of the clock, less that delivery
   * time (microseconds a sample). */
  e->interval = draw_interval(e, s->period_ns);
  pprt__os_sample_clock_rearm(&c, e->interval);
  record(s, ucontext, tid, count, weight);
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

/* ---- start and stop ------------------------------------------------------------------- */

void pprt__cpu_await_start(void) {
  pthread_mutex_lock(&g_control);
  pthread_mutex_unlock(&g_control);
}

void pprt__cpu_rescan_current(session *s) {
  pthread_mutex_lock(&g_control);
  if (atomic_load(&g_session) == s)
    pprt__cpu_rescan(s);
  pthread_mutex_unlock(&g_control);
}

/* fork: g_control is held across it (core/atfork.c). The child has one
 * thread, no timers and no reader: drop the session without touching it
 * and give the program its SIGPROF action back. */
static void atfork_child(void) {
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

static const pprt__fork_hooks fork_hooks = {NULL, NULL, atfork_child};

static void install_atfork(void) {
  pprt__fork_register_locked(PPRT__FORK_CPU, &g_control, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_atfork_once, install_atfork)

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
  int rc = pprt__sys_pthread_create(&s->reader, NULL, pprt__cpu_reader_main, s);
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

  rc = pprt__cpu_choose_source(s, o.timer);
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
  s->start_cpu = pprt__cpu_seconds();
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
      pprt__cpu_rescan(s);
    if (s->process_timer)
      pprt__os_process_timer_set(s->process_hz);
  }
  pthread_mutex_unlock(&g_control);
  return 0;
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
    pprt__cpu_stop_timer_counted(s, s->ntimers - 1, 0);
  pthread_mutex_unlock(&g_control);
  pprt__ring_close(&s->ring);
  pthread_join(s->reader, NULL);
  /* The reader is done: the last word on threads that block SIGPROF. */
  pprt__cpu_check_blocked_at_stop(s);
  /* A tick still pending now finds the program's latest action, or SIG_IGN
   * where that is SIG_DFL, and cannot kill the process (Go issue 19320). */
  int restored = pprt__sigprof_restore();

  double cpu = pprt__cpu_seconds() - s->start_cpu;
  pprt__profile_set_time(s->prof, s->start_wall,
                         (int64_t)(pprt__os_monotonic_ns() - s->start_mono));
  pprt__cpu_add_comments(s, cpu);
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
