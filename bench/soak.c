/* A bounded soak of the runtime through its public API: for N seconds,
 * threads start and stop CPU profiles, heap sampling and traces (streaming
 * and flight recorder) at random, take flight-recorder snapshots and heap
 * profiles through writers that allocate (and note those allocations to the
 * heap sampler, as a program's own allocator would), fork (then exec, or
 * call pprt in the child) and create and end threads that allocate and
 * annotate.
 *
 * It runs in rounds of 0.2-2 s. In a round every actor thread works at
 * once; at its end each stops what it started and waits for the next
 * round (actors live for the whole soak; workers come and go), and the
 * soak checks:
 *   - every profile and trace written decodes (core's decoders);
 *   - nothing runs any more (each stop says -EPIPE);
 *   - no file descriptor, thread or POSIX timer is left over (/proc/self/fd,
 *     /proc/self/task, /proc/self/timers, against the count before round 1);
 *   - every noted block was freed, so a heap profile shows nothing in use.
 * A watchdog thread aborts with the name of the stuck phase (the thread and
 * the call it is in) when a call takes longer than PPRT_SOAK_STALL seconds.
 *
 *   bench/soak [SECONDS]
 *
 * Environment: PPRT_SOAK_SECONDS (when no argument; default 10),
 * PPRT_SOAK_SEED (the random seed; printed so that a run can be repeated,
 * as far as thread timing allows), PPRT_SOAK_STALL (default 60),
 * PPRT_SOAK_SKIP: a comma-separated list of operations to leave out, for
 * runtime defects that are known and being fixed (SKIPS below names them).
 * A skip is printed, never silent. Exit status 0, or 1 with one line
 * "soak: FAIL ..." naming what went wrong (the watchdog aborts instead).
 *
 * Linux only: the leak checks read /proc. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/profile.h"
#include "core/trace.h"
#include "pprt.h"
#include "tests/proc_counts.h"
#include "tests/asan_fork.h"
#include "read/profile_decode.h"
#include "read/trace_decode.h"

/* ---- options, skips and failure ------------------------------------------------------ */

/* Operations PPRT_SOAK_SKIP can leave out, each for a known runtime defect
 * (issue 13), so that a CI run can keep soaking the rest while it is fixed. */
static const struct {
  const char *name, *why;
} SKIPS[] = {
    {"snapshot-alloc-note",
     "flight-recorder snapshot writers do not note their allocations to the heap sampler "
     "(issue 13 item 1: a snapshot writer that allocates while heap sampling runs "
     "deadlocks another thread's fork)"},
    {"inuse-check",
     "no check that a heap profile shows nothing in use once every block is freed (issue 13 "
     "item 2: frees inside pprt's writer callbacks are lost)"},
    {"fp-unwinder",
     "CPU profiles use the build's default unwinder only, never frame pointers (under "
     "AddressSanitizer, the frame-pointer walk in the SIGPROF handler reads stack memory "
     "in another frame's redzone when the interrupted code uses the frame pointer "
     "register for data, and ASan stops the program)"},
    {"cpu-perf-clock",
     "CPU profiles use timers only, never the perf_event clock (ThreadSanitizer: the "
     "clock's SIGPROF handler writes the thread's slot (core/cpu.c on_clock) while a "
     "rescan on another thread reads it (start_thread_timer), without synchronization)"},
    {"thread-exit-during-trace-stop",
     "no thread ends while a trace or flight recorder stops: workers end only at the end of "
     "a round, once every session has stopped, and a CPU profile (whose reader thread ends) "
     "never stops at the same time as a trace (issue 13 item 5: a thread that exits while a "
     "trace stops frees its chunk lists as the stop does)"},
};
enum {
  SKIP_SNAPSHOT_NOTE,
  SKIP_INUSE,
  SKIP_FP_UNWINDER,
  SKIP_PERF_CLOCK,
  SKIP_EXIT_IN_STOP,
  NSKIPS
};
static int g_skip[NSKIPS];

static double g_stall = 60;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "soak: FAIL %s\n", msg);
  fflush(stderr);
  _exit(1); /* other threads are inside pprt: exit handlers could hang */
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- actors and the watchdog ----------------------------------------------------------- */

/* A thread of the soak: what it is doing now (a static string, NULL when
 * between calls) and since when, for the watchdog. */
typedef struct actor {
  char name[24];
  _Atomic(const char *) phase;
  _Atomic uint64_t since;
  uint64_t rng;
  pthread_t th;
  atomic_int done; /* workers: finished, ready to be joined */
  int live;
} actor;

#define NWORKERS 4
enum {
  A_MAIN,
  A_CPU,
  A_HEAP,
  A_TRACE,
  A_SNAP,
  A_FORK,
  A_SPAWN,
  A_WORKER0,
  NACTORS = A_WORKER0 + NWORKERS
};
static actor g_actors[NACTORS];
static atomic_int g_round_over;
/* With the thread-exit-during-trace-stop skip, workers live until this is
 * set, after the session actors have stopped everything. */
static atomic_int g_workers_may_end;
/* With the same skip, held around pprt_cpu_stop and the trace stops. */
static pthread_mutex_t g_stop_lock = PTHREAD_MUTEX_INITIALIZER;

static void stop_serialize(int lock) {
  if (g_skip[SKIP_EXIT_IN_STOP])
    (lock ? pthread_mutex_lock : pthread_mutex_unlock)(&g_stop_lock);
}

static void enter(actor *a, const char *phase) {
  atomic_store(&a->since, now_ns());
  atomic_store(&a->phase, phase);
}

static void leave(actor *a) {
  atomic_store(&a->phase, (const char *)NULL);
}

static uint64_t rnd(actor *a) { /* xorshift64* */
  a->rng ^= a->rng >> 12;
  a->rng ^= a->rng << 25;
  a->rng ^= a->rng >> 27;
  return a->rng * 0x2545f4914f6cdd1dull;
}

static unsigned pick(actor *a, unsigned n) {
  return (unsigned)(rnd(a) % n);
}

static atomic_int g_watchdog_off;

static void *watchdog(void *arg) {
  (void)arg;
  while (!atomic_load(&g_watchdog_off)) {
    sleep_ms(100);
    uint64_t now = now_ns();
    for (int i = 0; i < NACTORS; i++) {
      actor *a = &g_actors[i];
      const char *phase = atomic_load(&a->phase);
      uint64_t since = atomic_load(&a->since);
      if (phase == NULL || now < since || (double)(now - since) / 1e9 < g_stall)
        continue;
      fprintf(stderr, "soak: FAIL stuck: thread %s has been in '%s' for %.0f s; all threads:\n",
              a->name, phase, (double)(now - since) / 1e9);
      for (int j = 0; j < NACTORS; j++) {
        const char *p = atomic_load(&g_actors[j].phase);
        if (p)
          fprintf(stderr, "  %-10s %s (%.1f s)\n", g_actors[j].name, p,
                  (double)(now - atomic_load(&g_actors[j].since)) / 1e9);
      }
      fflush(stderr);
      abort(); /* a core or a sanitizer's report shows every thread's stack */
    }
  }
  return NULL;
}

/* ---- allocations the heap sampler sees ------------------------------------------------- */

static void *noted_malloc(size_t n) {
  void *p = malloc(n);
  pprt_alloc_note(p, n);
  return p;
}

static void noted_free(void *p) {
  pprt_free_note(p);
  free(p);
}

/* An output in memory. Its writer allocates (the buffer grows) and, when
 * noted, notes those allocations, as the writers of a program with its own
 * allocator would. */
typedef struct sink {
  unsigned char *data;
  size_t len, cap;
  int noted;
} sink;

static int sink_write(void *ctx, const void *data, size_t len) {
  sink *s = ctx;
  if (s->len + len > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + len)
      cap *= 2;
    unsigned char *p = s->noted ? noted_malloc(cap) : malloc(cap);
    if (p == NULL)
      return -ENOMEM;
    if (s->len)
      memcpy(p, s->data, s->len);
    if (s->noted)
      noted_free(s->data);
    else
      free(s->data);
    s->data = p;
    s->cap = cap;
  }
  memcpy(s->data + s->len, data, len);
  s->len += len;
  return 0;
}

/* The buffer is allocated here, before pprt calls the writer, as a
 * program's preallocated buffer would be: so a block the heap sampler saw
 * allocated outside pprt is freed inside its writer callback when it grows. */
static pprt_writer sink_open(sink *s, int noted) {
  memset(s, 0, sizeof *s);
  s->noted = noted;
  s->cap = 1024;
  s->data = s->noted ? noted_malloc(s->cap) : malloc(s->cap);
  if (s->data == NULL)
    fail("out of memory");
  return (pprt_writer){sink_write, s};
}

static void sink_close(sink *s) {
  if (s->noted)
    noted_free(s->data);
  else
    free(s->data);
  memset(s, 0, sizeof *s);
}

/* ---- checks on outputs ----------------------------------------------------------------- */

static atomic_ulong g_profiles, g_traces, g_snapshots, g_forks, g_threads, g_sessions;
static atomic_ullong g_bytes;

/* Keeps a copy of an output that did not decode, for the report. */
static void keep(const char *what, const sink *s) {
  char path[64];
  snprintf(path, sizeof path, "soak-failed-%s.bin", what);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(s->data, 1, s->len, f);
    fclose(f);
  }
}

/* Decodes a profile; returns the sum of sample type `type`'s values (0 when
 * type is NULL or absent). */
static int64_t check_profile(actor *a, const char *what, const sink *s, const char *type) {
  enter(a, "decoding a profile");
  Pprt__Profile *p;
  char err[256];
  if (pprt__profile_decode(s->data, s->len, &p, err, sizeof err) != 0) {
    keep(what, s);
    fail("%s: %s profile of %zu bytes does not decode: %s", a->name, what, s->len, err);
  }
  int64_t sum = 0;
  for (size_t t = 0; type && t < p->n_sample_type; t++)
    if (strcmp(p->string_table[p->sample_type[t]->type], type) == 0)
      for (size_t i = 0; i < p->n_sample; i++)
        sum += p->sample[i]->value[t];
  pprt__profile_decoded_free(p);
  atomic_fetch_add(&g_profiles, 1);
  atomic_fetch_add(&g_bytes, s->len);
  leave(a);
  return sum;
}

static void check_trace(actor *a, const char *what, const sink *s) {
  enter(a, "decoding a trace");
  pprt__trace *t;
  char err[256];
  if (pprt__trace_decode(s->data, s->len, 0, &t, err, sizeof err) != 0) {
    keep(what, s);
    fail("%s: %s of %zu bytes does not decode: %s", a->name, what, s->len, err);
  }
  pprt__trace_free(t);
  atomic_fetch_add(&g_traces, 1);
  atomic_fetch_add(&g_bytes, s->len);
  leave(a);
}

/* A call that must succeed. */
static void must(actor *a, int rc, const char *call) {
  if (rc != 0)
    fail("%s: %s: %s", a->name, call, pprt_strerror(rc));
}

/* A pprt call that must succeed, as the actor's phase while it runs. */
#define MUST(a, name, call)                                                                        \
  do {                                                                                             \
    enter(a, name);                                                                                \
    must(a, call, name);                                                                           \
    leave(a);                                                                                      \
  } while (0)

/* Sleeps up to ms, in steps, returning early when the round ends. */
static void pause_ms(actor *a, unsigned ms) {
  (void)a;
  for (unsigned t = 0; t < ms && !atomic_load(&g_round_over); t += 5)
    sleep_ms(5);
}

/* ---- the actors ------------------------------------------------------------------------ */

static void *cpu_actor(void *arg) {
  actor *a = arg;
  static const int hz[] = {100, 250, 1000};
  while (!atomic_load(&g_round_over)) {
    pprt_cpu_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.hz = hz[pick(a, 3)];
    /* AUTO takes the perf_event clock where the system allows it. */
    o.timer = g_skip[SKIP_PERF_CLOCK] ? (pick(a, 2) ? PPRT_TIMER_PER_THREAD : PPRT_TIMER_PROCESS)
                                      : (pprt_timer_mode)pick(a, 4);
    o.unwinder = pick(a, 2) || g_skip[SKIP_FP_UNWINDER] ? PPRT_UNWIND_DEFAULT : PPRT_UNWIND_FP;
    o.no_symbolize = (int)pick(a, 2);
    sink s;
    pprt_writer w = sink_open(&s, 1);
    enter(a, "pprt_cpu_start");
    int rc = pprt_cpu_start(&o, w);
    leave(a);
    if (rc == -EACCES || rc == -ENOTSUP) { /* perf events refused here */
      sink_close(&s);
      continue;
    }
    must(a, rc, "pprt_cpu_start");
    atomic_fetch_add(&g_sessions, 1);
    enter(a, "pprt_cpu_start while running");
    rc = pprt_cpu_start(NULL, w);
    leave(a);
    if (rc != -EBUSY)
      fail("%s: a second pprt_cpu_start gave %d, want -EBUSY", a->name, rc);
    pause_ms(a, pick(a, 300));
    stop_serialize(1);
    MUST(a, "pprt_cpu_stop", pprt_cpu_stop());
    stop_serialize(0);
    check_profile(a, "cpu", &s, NULL);
    sink_close(&s);
    pause_ms(a, pick(a, 50));
  }
  return NULL;
}

static void *heap_actor(void *arg) {
  actor *a = arg;
  static const size_t rates[] = {0, 1, 512, 4096, 65536, 524288};
  while (!atomic_load(&g_round_over)) {
    MUST(a, "pprt_heap_set_rate", pprt_heap_set_rate(rates[pick(a, 6)]));
    for (unsigned n = pick(a, 4); n > 0 && !atomic_load(&g_round_over); n--) {
      pause_ms(a, pick(a, 100));
      sink s;
      pprt_writer w = sink_open(&s, 1);
      MUST(a, "pprt_heap_write", pprt_heap_write(w));
      check_profile(a, "heap", &s, NULL);
      sink_close(&s);
    }
  }
  return NULL;
}

static void *trace_actor(void *arg) {
  actor *a = arg;
  while (!atomic_load(&g_round_over)) {
    if (pick(a, 2)) {
      pprt_trace_options o;
      memset(&o, 0, sizeof o);
      o.size = sizeof o;
      o.generation_ns = pick(a, 2) ? 1000000u * (1 + pick(a, 50)) : 0;
      o.buffer_limit = pick(a, 2) ? 256u << 10 : 0;
      o.no_symbolize = (int)pick(a, 2);
      sink s;
      pprt_writer w = sink_open(&s, 1);
      MUST(a, "pprt_trace_start", pprt_trace_start(&o, w));
      atomic_fetch_add(&g_sessions, 1);
      pause_ms(a, pick(a, 300));
      stop_serialize(1);
      MUST(a, "pprt_trace_stop", pprt_trace_stop());
      stop_serialize(0);
      check_trace(a, "trace", &s);
      sink_close(&s);
    } else {
      pprt_flight_options o;
      memset(&o, 0, sizeof o);
      o.size = sizeof o;
      o.max_bytes = pick(a, 2) ? 1u << 20 : 0;
      o.max_age_ns = pick(a, 2) ? 200000000u : 0;
      o.buffer_limit = pick(a, 2) ? 256u << 10 : 0;
      MUST(a, "pprt_flight_start", pprt_flight_start(&o));
      atomic_fetch_add(&g_sessions, 1);
      pause_ms(a, pick(a, 400));
      stop_serialize(1);
      MUST(a, "pprt_flight_stop", pprt_flight_stop());
      stop_serialize(0);
    }
    pause_ms(a, pick(a, 50));
  }
  return NULL;
}

/* Snapshots of whatever flight recorder runs; -EPIPE when none does. */
static void *snap_actor(void *arg) {
  actor *a = arg;
  while (!atomic_load(&g_round_over)) {
    pause_ms(a, pick(a, 60));
    sink s;
    pprt_writer w = sink_open(&s, !g_skip[SKIP_SNAPSHOT_NOTE]);
    enter(a, "pprt_flight_write");
    int rc = pprt_flight_write(w);
    leave(a);
    if (rc == 0) {
      check_trace(a, "snapshot", &s);
      atomic_fetch_add(&g_snapshots, 1);
    } else if (rc != -EPIPE) {
      fail("%s: pprt_flight_write: %s", a->name, pprt_strerror(rc));
    }
    sink_close(&s);
  }
  return NULL;
}

/* Under AddressSanitizer a child only execs (tests/asan_fork.h); the child
 * that calls pprt is covered by the other builds' soak and by test_heap's
 * and preload_exits' fork tests. */

/* fork, then exec /bin/true, or call pprt in the child: the child of a
 * profiled process keeps no CPU session, and its allocation notes and
 * annotations must not hang on locks that another thread held at fork. */
static void *fork_actor(void *arg) {
  actor *a = arg;
  while (!atomic_load(&g_round_over)) {
    pause_ms(a, pick(a, 80));
    int exec = !CHILD_MAY_ALLOCATE || (int)pick(a, 2);
    enter(a, "fork");
    pid_t pid = fork();
    if (pid == 0) {
      if (exec) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
      }
      void *p = noted_malloc(100);
      pprt_region_begin("child");
      noted_free(p);
      pprt_region_end();
      _exit(pprt_cpu_stop() == -EPIPE ? 0 : 3);
    }
    leave(a);
    if (pid < 0)
      fail("%s: fork: %s", a->name, strerror(errno));
    enter(a, exec ? "waitpid (child execs /bin/true)" : "waitpid (child calls pprt after fork)");
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    leave(a);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("%s: child (%s) ended with status %#x%s", a->name, exec ? "exec" : "pprt calls", st,
           !exec && WIFEXITED(st) && WEXITSTATUS(st) == 3
               ? ": pprt_cpu_stop in the child did not say -EPIPE"
               : "");
    atomic_fetch_add(&g_forks, 1);
  }
  return NULL;
}

/* A short-lived thread: allocates and frees (noted), annotates, burns CPU,
 * registers and names itself at random. */
static void *worker(void *arg) {
  actor *a = arg;
  enum { NB = 32 };
  void *blocks[NB] = {0};
  static const size_t sizes[] = {16, 100, 1000, 8192, 65536};
  uint64_t end = now_ns() + 1000000u * (5 + pick(a, 300));
  if (pick(a, 2)) {
    MUST(a, "pprt_thread_register", pprt_thread_register());
  }
  if (pick(a, 2)) {
    MUST(a, "pprt_thread_name", pprt_thread_name(a->name));
  }
  volatile uint64_t burn = 0;
  while (g_skip[SKIP_EXIT_IN_STOP] ? !atomic_load(&g_workers_may_end)
                                   : now_ns() < end && !atomic_load(&g_round_over)) {
    unsigned i = pick(a, NB);
    enter(a, "allocating (noted)");
    if (blocks[i]) {
      noted_free(blocks[i]);
      blocks[i] = NULL;
    } else {
      blocks[i] = noted_malloc(sizes[pick(a, 5)]);
    }
    enter(a, "annotating");
    switch (pick(a, 4)) {
    case 0:
      pprt_region_begin("work");
      for (int k = 0; k < 20000; k++)
        burn += (uint64_t)k * k;
      pprt_region_end();
      break;
    case 1:
      pprt_log("soak", "a message");
      break;
    case 2:
      pprt_counter("blocks", (int64_t)i);
      break;
    default:
      pprt_task_end(pprt_task_begin("task"));
    }
    leave(a);
  }
  (void)burn; /* clang counts a volatile that is only written as unused */
  enter(a, "freeing its blocks");
  for (int i = 0; i < NB; i++)
    if (blocks[i])
      noted_free(blocks[i]);
  if (pick(a, 2))
    pprt_thread_unregister();
  leave(a);
  atomic_store(&a->done, 1);
  return NULL;
}

static void join_workers(actor *a, int all) {
  for (int i = 0; i < NWORKERS; i++) {
    actor *w = &g_actors[A_WORKER0 + i];
    if (w->live && (all || atomic_load(&w->done))) {
      enter(a, "joining a worker");
      pthread_join(w->th, NULL);
      leave(a);
      w->live = 0;
    }
  }
}

static void *spawn_actor(void *arg) {
  actor *a = arg;
  while (!atomic_load(&g_round_over)) {
    join_workers(a, 0);
    for (int i = 0; i < NWORKERS; i++) {
      actor *w = &g_actors[A_WORKER0 + i];
      if (w->live || pick(a, 3) == 0)
        continue;
      atomic_store(&w->done, 0);
      w->rng = rnd(a) | 1;
      enter(a, "pthread_create");
      int rc = pthread_create(&w->th, NULL, worker, w);
      leave(a);
      if (rc != 0)
        fail("%s: pthread_create: %s", a->name, strerror(rc));
      w->live = 1;
      atomic_fetch_add(&g_threads, 1);
    }
    pause_ms(a, pick(a, 30));
  }
  join_workers(a, 1);
  return NULL;
}

/* ---- what the process holds ------------------------------------------------------------ */

typedef struct holdings {
  long fds, threads, timers;
} holdings;

static holdings hold(void) {
  holdings h = {count_dir("/proc/self/fd") - 1 /* the directory being read */,
                count_dir("/proc/self/task"), count_timers()};
  return h;
}

/* ---- rounds ------------------------------------------------------------------------------ */

static void *(*const ACTOR_FN[])(void *) = {NULL,       cpu_actor,  heap_actor, trace_actor,
                                            snap_actor, fork_actor, spawn_actor};
static const char *const ACTOR_NAME[] = {"main",     "cpu",  "heap",   "trace",
                                         "snapshot", "fork", "spawner"};

/* Actors live for the whole soak and run one round at a time: a round
 * starts when g_round_no moves on; each actor marks the round it finished
 * in `parked`. (Actors that ended each round would race every trace stop
 * with their own thread exits, which the thread-exit-during-trace-stop skip
 * must be able to rule out.) */
static pthread_mutex_t g_round_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_round_cond = PTHREAD_COND_INITIALIZER;
static int g_round_no, g_quit, g_parked[NACTORS];

static void *actor_main(void *arg) {
  actor *a = arg;
  int i = (int)(a - g_actors), seen = 0;
  for (;;) {
    pthread_mutex_lock(&g_round_lock);
    while (g_round_no == seen && !g_quit)
      pthread_cond_wait(&g_round_cond, &g_round_lock);
    int quit = g_quit;
    seen = g_round_no;
    pthread_mutex_unlock(&g_round_lock);
    if (quit)
      return NULL;
    ACTOR_FN[i](a);
    pthread_mutex_lock(&g_round_lock);
    g_parked[i] = seen;
    pthread_cond_broadcast(&g_round_cond);
    pthread_mutex_unlock(&g_round_lock);
  }
}

/* Waits until actors [from, to) have finished round r. */
static void wait_parked(int from, int to, int r) {
  pthread_mutex_lock(&g_round_lock);
  for (int i = from; i < to; i++)
    while (g_parked[i] != r)
      pthread_cond_wait(&g_round_cond, &g_round_lock);
  pthread_mutex_unlock(&g_round_lock);
}

static void round_end_checks(actor *m, int round, holdings base) {
  enter(m, "checking that nothing runs");
  int rc;
  if ((rc = pprt_cpu_stop()) != -EPIPE)
    fail("round %d: after every actor stopped, pprt_cpu_stop gave %d, want -EPIPE", round, rc);
  if ((rc = pprt_trace_stop()) != -EPIPE)
    fail("round %d: pprt_trace_stop gave %d, want -EPIPE", round, rc);
  if ((rc = pprt_flight_stop()) != -EPIPE)
    fail("round %d: pprt_flight_stop gave %d, want -EPIPE", round, rc);
  leave(m);

  /* Every noted block is freed: whatever was sampled shows no longer in
   * use. Written to an unnoted sink, so the check counts only the soak's
   * blocks. */
  if (!g_skip[SKIP_INUSE]) {
    sink s;
    pprt_writer w = sink_open(&s, 0);
    enter(m, "pprt_heap_write (in-use check)");
    must(m, pprt_heap_write(w), "pprt_heap_write");
    leave(m);
    int64_t inuse = check_profile(m, "heap-inuse", &s, "inuse_objects");
    sink_close(&s);
    if (inuse != 0)
      fail("round %d: every noted block was freed, yet the heap profile has %lld objects "
           "in use (a free was lost)",
           round, (long long)inuse);
  }

  /* pprt's threads end when their session stops, though the kernel may
   * take a moment to reap one that was not joined: a second's grace. */
  enter(m, "counting fds, threads and timers");
  holdings h = hold();
  for (int i = 0; i < 100 && (h.threads != base.threads || h.fds != base.fds); i++) {
    sleep_ms(10);
    h = hold();
  }
  leave(m);
  if (h.fds != base.fds || h.threads != base.threads || h.timers != base.timers)
    fail("round %d: left over: %ld fds (had %ld), %ld threads (had %ld), %ld timers (had %ld)",
         round, h.fds, base.fds, h.threads, base.threads, h.timers, base.timers);
}

int main(int argc, char **argv) {
  double seconds = 10;
  const char *env = getenv("PPRT_SOAK_SECONDS");
  if (argc > 1)
    seconds = atof(argv[1]);
  else if (env)
    seconds = atof(env);
  if (!(seconds > 0)) {
    fprintf(stderr, "usage: soak [SECONDS]  (or PPRT_SOAK_SECONDS)\n");
    return 2;
  }
  if ((env = getenv("PPRT_SOAK_STALL")) && atof(env) > 0)
    g_stall = atof(env);
  uint64_t seed = (env = getenv("PPRT_SOAK_SEED")) ? strtoull(env, NULL, 0) : now_ns();
  if ((env = getenv("PPRT_SOAK_SKIP")) && *env) {
    char *list = strdup(env), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int found = 0;
      for (int i = 0; i < NSKIPS; i++)
        if (strcmp(t, SKIPS[i].name) == 0) {
          g_skip[i] = found = 1;
          printf("soak: skipping %s: %s\n", SKIPS[i].name, SKIPS[i].why);
        }
      if (!found) {
        fprintf(stderr, "soak: PPRT_SOAK_SKIP: unknown '%s' (known:", t);
        for (int i = 0; i < NSKIPS; i++)
          fprintf(stderr, " %s", SKIPS[i].name);
        fprintf(stderr, ")\n");
        return 2;
      }
    }
    free(list);
  }
  printf("soak: %.0f s, seed %llu, a call stuck for %.0f s aborts\n", seconds,
         (unsigned long long)seed, g_stall);
  fflush(stdout);

  actor *m = &g_actors[A_MAIN];
  for (int i = 0; i < NACTORS; i++) {
    actor *a = &g_actors[i];
    if (i < A_WORKER0)
      snprintf(a->name, sizeof a->name, "%s", ACTOR_NAME[i]);
    else
      snprintf(a->name, sizeof a->name, "worker%d", i - A_WORKER0);
    a->rng = (seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) | 1;
  }
  pthread_t wd;
  if (pthread_create(&wd, NULL, watchdog, NULL) != 0)
    fail("cannot start the watchdog");
  /* Each part of pprt registers its fork handlers when first used, and
   * their order decides which lock a fork takes first. The flight recorder
   * before the heap sampler is the order in which a snapshot writer that
   * allocates can meet a fork (issue 13 item 1): use it, every run. */
  enter(m, "first use: flight recorder, then heap sampler");
  must(m, pprt_flight_start(NULL), "pprt_flight_start");
  must(m, pprt_flight_stop(), "pprt_flight_stop");
  must(m, pprt_heap_set_rate(0), "pprt_heap_set_rate");
  leave(m);
  for (int i = A_CPU; i < A_WORKER0; i++)
    if (pthread_create(&g_actors[i].th, NULL, actor_main, &g_actors[i]) != 0)
      fail("cannot start actor %s", g_actors[i].name);
  holdings base = hold();
  if (base.fds < 0 || base.threads < 0 || base.timers < 0)
    fail("cannot read /proc/self/fd, /proc/self/task or /proc/self/timers");

  uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
  int round = 0;
  while (now_ns() < end) {
    round++;
    pthread_mutex_lock(&g_round_lock);
    atomic_store(&g_round_over, 0);
    atomic_store(&g_workers_may_end, 0);
    g_round_no = round;
    pthread_cond_broadcast(&g_round_cond);
    pthread_mutex_unlock(&g_round_lock);
    uint64_t left = (end - now_ns()) / 1000000u;
    unsigned ms = 200 + pick(m, 1800);
    sleep_ms(ms < left ? ms : (unsigned)left);
    atomic_store(&g_round_over, 1);
    /* Each actor stops what it started and parks; the watchdog names the
     * one that does not. Then the spawner joins the workers. */
    enter(m, "waiting for the actors to stop");
    wait_parked(A_CPU, A_SPAWN, round);
    atomic_store(&g_workers_may_end, 1);
    wait_parked(A_SPAWN, A_WORKER0, round);
    leave(m);
    round_end_checks(m, round, base);
  }
  pthread_mutex_lock(&g_round_lock);
  g_quit = 1;
  pthread_cond_broadcast(&g_round_cond);
  pthread_mutex_unlock(&g_round_lock);
  for (int i = A_CPU; i < A_WORKER0; i++)
    pthread_join(g_actors[i].th, NULL);
  pprt_heap_set_rate(0);
  atomic_store(&g_watchdog_off, 1);
  pthread_join(wd, NULL);
  printf("soak: PASS %d rounds in %.0f s: %lu sessions, %lu profiles and %lu traces decoded "
         "(%llu bytes), %lu snapshots, %lu forks, %lu threads; nothing left over\n",
         round, seconds, atomic_load(&g_sessions), atomic_load(&g_profiles), atomic_load(&g_traces),
         atomic_load(&g_bytes), atomic_load(&g_snapshots), atomic_load(&g_forks),
         atomic_load(&g_threads));
  return 0;
}
