/* The CPU profiler: Go's runtime/pprof for any C program.
 *
 * Divisions:
 *   session state   one session at a time (g_session), started and stopped
 *                   under g_control; the signal handler reaches it through
 *                   an atomic pointer and announces itself in g_inflight so
 *                   stop can wait for running handlers before freeing;
 *   timers          per-thread CPU timers (Linux) for every thread, found
 *                   at start, on registration and by the reader's rescans,
 *                   with the process timer as the fallback; timer_tids is
 *                   the lock-free set the handler reads to drop process-timer
 *                   ticks for threads that have their own (Go's validSIGPROF);
 *   the handler     unwind, one ring write, nothing else;
 *   the reader      a thread that drains the ring into the profile builder,
 *                   rescans threads, and at stop lets the profile be written.
 *
 * fork: the child keeps no session (its copy is dropped, not freed, since
 * another thread may have been inside it), restores the program's SIGPROF
 * action, and has no timers (fork does not inherit them).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/cpu.h"
#include "core/heap.h"
#include "core/platform.h"
#include "core/profile.h"
#include "core/ring.h"
#include "core/table.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/unwind.h"
#include "pprt.h"

#define DEFAULT_HZ 100
#define MAX_HZ 10000
#define DEFAULT_DEPTH 64
#define MAX_DEPTH 256
#define RING_WORDS ((size_t)1 << 17) /* 1 MiB, as Go's profBuf */
#define TIDSET_CAP 8192              /* threads with their own timer */
#define TID_GONE UINT64_MAX          /* a removed entry of the tid set */
#define RESCAN_NS 250000000ull

typedef struct timer_entry {
  uint64_t tid;
  pprt__os_thread_timer timer;
  int seen; /* found by the current rescan */
} timer_entry;

typedef struct name_entry {
  uint64_t tid;
  char *name; /* NULL: the thread had gone before we asked */
} name_entry;

typedef struct session {
  /* fixed at start */
  pprt_writer out;
  int hz, depth, symbolize;
  pprt_unwinder unwinder;
  int thread_timers, process_timer; /* which sources are armed */
  uint64_t period_ns;
  uintptr_t cookie;
  _Atomic uint64_t reader_tid; /* set by the reader when it starts */

  pprt__ring ring;
  pthread_t reader;

  /* per-thread timers: entries under g_control; timer_tids read lock-free */
  timer_entry *timers;
  size_t ntimers, timers_cap;
  _Atomic uint64_t timer_tids[TIDSET_CAP];
  int tidset_full_warned;

  /* the reader's */
  uint64_t *readbuf; /* one record */
  pprt__profile *prof;
  name_entry *names;
  size_t nnames, names_cap;
  pprt__table name_index;
  uint64_t samples, lost, external;
  uint64_t signals; /* records: one per timer signal taken */
  uint64_t last_rescan;

  int64_t start_wall;
  uint64_t start_mono;
  double start_cpu;
} session;

static pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER;
static session *_Atomic g_session;
static int g_busy;             /* a start or stop is between its steps */
static atomic_int g_inflight;  /* handlers running right now */
static pprt__os_sigsave g_sigsave;
static _Atomic uintptr_t g_cookie;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* ---- the set of threads with their own timer ----------------------------------- */

static size_t tid_slot(uint64_t tid) {
  return (size_t)pprt__hash_finish(tid) & (TIDSET_CAP - 1);
}

/* AS-safe. */
static int tidset_has(session *s, uint64_t tid) {
  for (size_t i = tid_slot(tid), n = 0; n < TIDSET_CAP; i = (i + 1) & (TIDSET_CAP - 1), n++) {
    uint64_t v = atomic_load_explicit(&s->timer_tids[i], memory_order_acquire);
    if (v == tid)
      return 1;
    if (v == 0)
      return 0;
  }
  return 0;
}

/* Under g_control. Returns 0, or -ENOSPC when the set is full. */
static int tidset_add(session *s, uint64_t tid) {
  size_t reuse = SIZE_MAX;
  for (size_t i = tid_slot(tid), n = 0; n < TIDSET_CAP; i = (i + 1) & (TIDSET_CAP - 1), n++) {
    uint64_t v = atomic_load_explicit(&s->timer_tids[i], memory_order_relaxed);
    if (v == tid)
      return 0;
    if (v == TID_GONE && reuse == SIZE_MAX)
      reuse = i;
    if (v == 0) {
      if (reuse == SIZE_MAX)
        reuse = i;
      break;
    }
  }
  if (reuse == SIZE_MAX)
    return -ENOSPC;
  atomic_store_explicit(&s->timer_tids[reuse], tid, memory_order_release);
  return 0;
}

static void tidset_remove(session *s, uint64_t tid) {
  for (size_t i = tid_slot(tid), n = 0; n < TIDSET_CAP; i = (i + 1) & (TIDSET_CAP - 1), n++) {
    uint64_t v = atomic_load_explicit(&s->timer_tids[i], memory_order_relaxed);
    if (v == tid) {
      atomic_store_explicit(&s->timer_tids[i], TID_GONE, memory_order_release);
      return;
    }
    if (v == 0)
      return;
  }
}

/* ---- per-thread timers (under g_control) ----------------------------------------- */

static timer_entry *find_timer(session *s, uint64_t tid) {
  for (size_t i = 0; i < s->ntimers; i++)
    if (s->timers[i].tid == tid)
      return &s->timers[i];
  return NULL;
}

/* Gives thread tid its timer, unless it has one. The tid goes into the set
 * before the timer starts, so no tick of it is ever counted twice (a
 * process-timer tick in between is dropped instead). */
static int start_thread_timer(session *s, uint64_t tid) {
  timer_entry *e = find_timer(s, tid);
  if (e) {
    e->seen = 1;
    return 0;
  }
  if (tid == atomic_load(&s->reader_tid))
    return 0; /* it blocks SIGPROF; its ticks would only pile up */
  if (s->ntimers == s->timers_cap) {
    size_t ncap = s->timers_cap ? 2 * s->timers_cap : 64;
    timer_entry *n = realloc(s->timers, ncap * sizeof *n);
    if (n == NULL)
      return -ENOMEM;
    s->timers = n;
    s->timers_cap = ncap;
  }
  int rc = tidset_add(s, tid);
  if (rc != 0) {
    /* The thread stays on the process timer. */
    if (!s->tidset_full_warned)
      fprintf(stderr, "pprt: more than %d threads; the rest use the process timer\n", TIDSET_CAP);
    s->tidset_full_warned = 1;
    return rc;
  }
  e = &s->timers[s->ntimers];
  memset(e, 0, sizeof *e);
  rc = pprt__os_thread_timer_start(&e->timer, tid, s->hz, s->cookie);
  if (rc != 0) {
    tidset_remove(s, tid);
    return rc; /* -ESRCH: it exited meanwhile */
  }
  e->tid = tid;
  e->seen = 1;
  s->ntimers++;
  return 0;
}

static void stop_timer_at(session *s, size_t i) {
  pprt__os_thread_timer_stop(&s->timers[i].timer);
  tidset_remove(s, s->timers[i].tid);
  s->timers[i] = s->timers[--s->ntimers];
}

static int rescan_one(uint64_t tid, void *ctx) {
  start_thread_timer(ctx, tid);
  return 0;
}

/* Timers for threads that appeared, none for threads that are gone. */
static void rescan(session *s) {
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

void pprt__cpu_exec_prepare(void) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s && s->process_timer)
    pprt__os_process_timer_set(0);
  pthread_mutex_unlock(&g_control);
}

void pprt__cpu_exec_failed(void) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s && s->process_timer)
    pprt__os_process_timer_set(s->hz);
  pthread_mutex_unlock(&g_control);
}

/* ---- the signal handler ------------------------------------------------------------ */

static void record(session *s, void *ucontext, uint64_t tid, uint64_t count) {
  uintptr_t pcs[MAX_DEPTH];
  size_t n = 0;
  uint64_t flags = 0;
  pprt__os_regs regs;
  if (s->unwinder == PPRT_UNWIND_LIBUNWIND) {
    int got = pprt__unwind_libunwind(ucontext, pcs, (size_t)s->depth);
    n = got > 0 ? (size_t)got : 0;
  } else if (pprt__os_context_regs(ucontext, &regs) == 0) {
    n = pprt__unwind_fp(&regs, pprt__thread_self()->stack, pcs, (size_t)s->depth);
  }
  if (n == 0)
    flags |= PPRT__CPU_FLAG_EXTERNAL;
  uint64_t hdr[PPRT__CPU_HDR_WORDS] = {tid, count | flags};
  /* -ENOSPC is counted by the ring and reported as lost samples. */
  pprt__ring_write(&s->ring, pprt__os_monotonic_ns(), hdr, pcs, n);
}

static void on_sigprof(int sig, siginfo_t *info, void *ucontext) {
  int saved_errno = errno;
  atomic_fetch_add_explicit(&g_inflight, 1, memory_order_acquire);
  session *s = atomic_load_explicit(&g_session, memory_order_acquire);
  uintptr_t cookie = s ? s->cookie : atomic_load_explicit(&g_cookie, memory_order_relaxed);
  enum pprt__os_sigprof_source src = pprt__os_sigprof_source(info, cookie);
  if (src == PPRT__OS_SIGPROF_OTHER) {
    /* kill(), sigqueue(), the program's own timer: not ours to count. */
    pprt__os_signal_forward(&g_sigsave, sig, info, ucontext);
  } else if (s) {
    uint64_t tid = pprt__thread_id();
    /* Go's validSIGPROF: a thread with its own timer counts only those
     * ticks; the process timer's would count its CPU time twice. */
    int valid = src == PPRT__OS_SIGPROF_THREAD_TIMER ||
                (s->process_timer && !(s->thread_timers && tidset_has(s, tid)));
    /* A per-thread tick may stand for several periods of CPU (see
     * pprt__os_sigprof_overrun): weight it, or busy threads sharing CPUs
     * are undercounted (measured: 76% of the CPU time with 4 threads on 2
     * cores at 250 Hz). */
    uint64_t count = 1;
    if (src == PPRT__OS_SIGPROF_THREAD_TIMER) {
      unsigned over = pprt__os_sigprof_overrun(info);
      count += over < 0xffff ? over : 0xffff;
    }
    if (valid)
      record(s, ucontext, tid, count);
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

static void take_record(session *s, const pprt__ring_record *rec) {
  int64_t period = (int64_t)s->period_ns;
  if (rec->kind == PPRT__RING_OVERFLOW) {
    int64_t n = (int64_t)rec->pcs[0];
    int64_t v[2] = {n, n * period};
    s->lost += (uint64_t)n;
    pprt__profile_add_synthetic(s->prof, PPRT__FRAME_LOST, v, NULL, 0);
    return;
  }
  if (rec->kind != PPRT__RING_DATA)
    return;
  uint64_t tid = rec->hdr[0];
  int64_t count = (int64_t)(rec->hdr[1] & 0xffffffffu);
  int64_t v[2] = {count, count * period};
  const char *name = thread_name(s, tid);
  pprt__label labels[2] = {{"thread_id", NULL, (int64_t)tid, "id"},
                           {"thread_name", name, 0, NULL}};
  size_t nlabels = name ? 2 : 1;
  s->samples += (uint64_t)count;
  s->signals++;
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

static void *reader_main(void *arg) {
  session *s = arg;
  pprt__heap_ignore_thread(); /* the profile builder's memory is pprt's */
  atomic_store(&s->reader_tid, pprt__os_thread_id());
  pprt__ring_record rec;
  for (;;) {
    int rc = pprt__ring_read(&s->ring, PPRT__RING_BLOCK, 100000000, s->readbuf, &rec);
    if (rc == 0)
      break;
    if (rc == 1)
      take_record(s, &rec);
    uint64_t now = pprt__os_monotonic_ns();
    if (s->thread_timers && now - s->last_rescan >= RESCAN_NS) {
      s->last_rescan = now;
      pthread_mutex_lock(&g_control);
      if (atomic_load(&g_session) == s)
        rescan(s);
      pthread_mutex_unlock(&g_control);
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
  if (atomic_load(&g_session) != NULL || g_busy) {
    atomic_store(&g_session, NULL);
    g_busy = 0;
    atomic_store(&g_inflight, 0);
    if (g_sigsave.installed)
      pprt__os_signal_restore(SIGPROF, &g_sigsave);
  }
}

static void install_atfork(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void session_free(session *s) {
  pprt__ring_destroy(&s->ring);
  pprt__profile_free(s->prof);
  for (size_t i = 0; i < s->nnames; i++)
    free(s->names[i].name);
  free(s->names);
  pprt__table_free(&s->name_index);
  free(s->timers);
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
      out->timer != PPRT_TIMER_PROCESS)
    return -EINVAL;
  if (out->unwinder == PPRT_UNWIND_DEFAULT)
    out->unwinder = PPRT__DEFAULT_UNWINDER;
  if (out->unwinder != PPRT_UNWIND_FP && out->unwinder != PPRT_UNWIND_LIBUNWIND)
    return -EINVAL;
  if (out->unwinder == PPRT_UNWIND_LIBUNWIND && !pprt__have_libunwind)
    return -ENOTSUP;
  return 0;
}

/* Starts the reader with every signal blocked: it must never run the
 * handler (it would record itself) nor take the program's signals. */
static int start_reader(session *s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* The preload library's pthread_create hook sees this flag and does not
   * register the thread: registration would wait for g_control, which we
   * hold until the reader has told us its id. */
  pprt__thread_self()->creating_internal = 1;
  int rc = pthread_create(&s->reader, NULL, reader_main, s);
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

  pthread_mutex_lock(&g_control);
  if (atomic_load(&g_session) != NULL || g_busy) {
    pthread_mutex_unlock(&g_control);
    return -EBUSY;
  }
  session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    pthread_mutex_unlock(&g_control);
    return -ENOMEM;
  }
  s->out = out;
  s->hz = o.hz;
  s->depth = o.max_depth;
  s->symbolize = !o.no_symbolize;
  s->unwinder = o.unwinder;
  s->period_ns = 1000000000u / (uint64_t)o.hz;
  s->cookie = (uintptr_t)s;
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

  /* Which timers: a trial per-thread timer on this thread tells whether the
   * OS has them. */
  if (o.timer != PPRT_TIMER_PROCESS) {
    pprt__os_thread_timer probe = {0};
    int prc = pprt__os_thread_timer_start(&probe, pprt__thread_id(), 1, 0);
    if (prc == 0) {
      pprt__os_thread_timer_stop(&probe);
      s->thread_timers = 1;
    } else if (o.timer == PPRT_TIMER_PER_THREAD) {
      session_free(s);
      pthread_mutex_unlock(&g_control);
      return prc == -ENOTSUP ? -ENOTSUP : prc;
    }
  }
  s->process_timer = o.timer != PPRT_TIMER_PER_THREAD;

  atomic_store(&g_cookie, s->cookie);
  rc = pprt__os_signal_install(SIGPROF, on_sigprof, &g_sigsave);
  if (rc == 0 && (rc = start_reader(s)) != 0)
    pprt__os_signal_restore(SIGPROF, &g_sigsave);
  if (rc != 0) {
    session_free(s);
    pthread_mutex_unlock(&g_control);
    return rc;
  }

  s->start_wall = (int64_t)pprt__os_wall_ns();
  s->start_mono = pprt__os_monotonic_ns();
  s->start_cpu = cpu_seconds();
  s->last_rescan = s->start_mono;
  atomic_store(&g_session, s);
  pthread_mutex_unlock(&g_control);

  /* The caller gets an alternate stack and known stack bounds. */
  pprt_thread_register();

  pthread_mutex_lock(&g_control);
  if (atomic_load(&g_session) == s) {
    if (s->thread_timers)
      rescan(s);
    if (s->process_timer)
      pprt__os_process_timer_set(s->hz);
  }
  pthread_mutex_unlock(&g_control);
  return 0;
}

/* What the kernel delivered, for the profile's comments: Linux evaluates CPU
 * timers on the scheduler tick, so a thread gets at most CONFIG_HZ samples
 * per CPU-second whatever rate is asked. */
static void add_comments(session *s, double cpu) {
  char c[256];
  const char *timers = s->thread_timers ? (s->process_timer ? "per-thread, process fallback"
                                                            : "per-thread")
                                        : "process";
  snprintf(c, sizeof c, "pprt %s: asked %d Hz, timers %s, unwinder %s", pprt_version(), s->hz,
           timers, s->unwinder == PPRT_UNWIND_LIBUNWIND ? "libunwind" : "frame pointers");
  pprt__profile_add_comment(s->prof, c);
  snprintf(c, sizeof c,
           "effective rate %.1f samples per CPU-second (%llu samples over %.3f s of CPU)",
           cpu > 0 ? (double)s->samples / cpu : 0.0, (unsigned long long)s->samples, cpu);
  pprt__profile_add_comment(s->prof, c);
  /* What the kernel delivered: a per-thread tick that folded several
   * periods (si_overrun) is one signal weighted as several samples. */
  snprintf(c, sizeof c, "timer signals %.1f per CPU-second (%llu signals)",
           cpu > 0 ? (double)s->signals / cpu : 0.0, (unsigned long long)s->signals);
  pprt__profile_add_comment(s->prof, c);
  snprintf(c, sizeof c, "lost samples %llu, unwalkable stacks %llu",
           (unsigned long long)s->lost, (unsigned long long)s->external);
  pprt__profile_add_comment(s->prof, c);
}

static int cpu_stop(void) {
  pthread_mutex_lock(&g_control);
  session *s = atomic_load(&g_session);
  if (s == NULL) {
    pthread_mutex_unlock(&g_control);
    return -EPIPE;
  }
  /* No new ticks: disarm every timer, then detach the session. */
  if (s->process_timer)
    pprt__os_process_timer_set(0);
  while (s->ntimers > 0)
    stop_timer_at(s, s->ntimers - 1);
  atomic_store(&g_session, NULL);
  g_busy = 1;
  pthread_mutex_unlock(&g_control);

  /* Handlers that loaded the session before it was detached finish first. */
  while (atomic_load_explicit(&g_inflight, memory_order_acquire) != 0)
    sched_yield();
  pprt__ring_close(&s->ring);
  pthread_join(s->reader, NULL);
  /* A tick still pending now finds the program's action, or SIG_IGN where
   * that was SIG_DFL, and cannot kill the process (Go issue 19320). */
  pprt__os_signal_restore(SIGPROF, &g_sigsave);

  double cpu = cpu_seconds() - s->start_cpu;
  pprt__profile_set_time(s->prof, s->start_wall,
                         (int64_t)(pprt__os_monotonic_ns() - s->start_mono));
  add_comments(s, cpu);
  int rc = pprt__profile_add_os_mappings(s->prof);
  if (rc == 0)
    rc = pprt__profile_write_os(s->prof, s->symbolize, s->out);
  session_free(s);

  pthread_mutex_lock(&g_control);
  g_busy = 0;
  pthread_mutex_unlock(&g_control);
  return rc;
}
