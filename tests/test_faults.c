/* Fault injection through the system call table (core/syscalls.h), as
 * SQLite's tests do it: each call of the table is made to fail at its k-th
 * use, k = 1, 2, ..., on each start path (the CPU profile with each timer
 * source, heap sampling, a trace, the flight recorder, the HTTP endpoint
 * where built, pprt_thread_register), until the path succeeds without
 * reaching it; then the same over each stop. After every attempt: a failed
 * start returned the injected errno, negated, which pprt_strerror names;
 * pprt's SIGPROF handler is gone (the program's is back); no descriptor,
 * interval timer or alternate stack is left, nor a thread or POSIX timer
 * (counted where /proc shows them: Linux); no session runs. A start that
 * succeeds although its call failed (a documented fallback) must still
 * produce a profile or trace that decodes. Then failures in a session:
 * a full disk while a trace, a heap profile or a flight snapshot is
 * written, open failing while a profile is symbolized, mmap failing while a
 * trace runs.
 *
 * Each attempt runs on a fresh thread, so every one starts from the same
 * state (no alternate stack, not registered); only that thread's calls
 * count towards k, so pprt's own threads (the reader reading thread names)
 * do not make the walk depend on timing. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/profile.h"
#include "core/syscalls.h"
#include "core/trace.h"
#include "core/trace_format.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "read/trace_decode.h"
#include "tests/membuf.h"
#include "tests/proc_counts.h"

/* ---- the injector ------------------------------------------------------------------- */

/* The errno each call fails with: what it does fail with in the field. */
static const int fault_errno[PPRT__SYS_COUNT] = {
    [PPRT__SYS_TIMER_CREATE] = EAGAIN,    /* the timer limit */
    [PPRT__SYS_PERF_EVENT_OPEN] = EMFILE, /* out of descriptors */
    [PPRT__SYS_SIGACTION] = EINVAL,
    [PPRT__SYS_RT_SIGACTION] = EINVAL,
    [PPRT__SYS_SIGALTSTACK] = ENOMEM,
    [PPRT__SYS_MMAP] = ENOMEM,
    [PPRT__SYS_PTHREAD_CREATE] = EPERM, /* a policy against threads (EAGAIN: the limit) */
    [PPRT__SYS_OPEN] = EMFILE,
    [PPRT__SYS_WRITE] = ENOSPC,
};

static struct {
  atomic_int armed;
  int id; /* the call that fails */
  long k; /* its k-th call on the target thread; 0: every call, every thread */
  pthread_t target;
  atomic_long calls; /* of call id on the target thread while armed */
} g_fault;

static pprt__syscall_fn g_default[PPRT__SYS_COUNT];

static int should_fail(int id) {
  if (!atomic_load(&g_fault.armed) || id != g_fault.id)
    return 0;
  if (g_fault.k == 0)
    return 1;
  if (!pthread_equal(pthread_self(), g_fault.target))
    return 0;
  return atomic_fetch_add(&g_fault.calls, 1) + 1 == g_fault.k;
}

#define DEFAULT(id, type) ((type)g_default[id])

static long f_timer_create(int clockid, void *sevp, int *id) {
  if (should_fail(PPRT__SYS_TIMER_CREATE))
    return errno = fault_errno[PPRT__SYS_TIMER_CREATE], -1;
  return DEFAULT(PPRT__SYS_TIMER_CREATE, pprt__sys_timer_create_fn)(clockid, sevp, id);
}

static long f_perf_event_open(void *attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
  if (should_fail(PPRT__SYS_PERF_EVENT_OPEN))
    return errno = fault_errno[PPRT__SYS_PERF_EVENT_OPEN], -1;
  return DEFAULT(PPRT__SYS_PERF_EVENT_OPEN, pprt__sys_perf_event_open_fn)(attr, pid, cpu, group_fd,
                                                                          flags);
}

static int f_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (should_fail(PPRT__SYS_SIGACTION))
    return errno = fault_errno[PPRT__SYS_SIGACTION], -1;
  return DEFAULT(PPRT__SYS_SIGACTION, pprt__sys_sigaction_fn)(sig, act, old);
}

static long f_rt_sigaction(int sig, const void *act, void *old, size_t mask_bytes) {
  if (should_fail(PPRT__SYS_RT_SIGACTION))
    return errno = fault_errno[PPRT__SYS_RT_SIGACTION], -1;
  return DEFAULT(PPRT__SYS_RT_SIGACTION, pprt__sys_rt_sigaction_fn)(sig, act, old, mask_bytes);
}

static int f_sigaltstack(const stack_t *ss, stack_t *old) {
  if (should_fail(PPRT__SYS_SIGALTSTACK))
    return errno = fault_errno[PPRT__SYS_SIGALTSTACK], -1;
  return DEFAULT(PPRT__SYS_SIGALTSTACK, pprt__sys_sigaltstack_fn)(ss, old);
}

static void *f_mmap(void *addr, size_t len, int prot, int flags, int fd, int64_t offset) {
  if (should_fail(PPRT__SYS_MMAP))
    return errno = fault_errno[PPRT__SYS_MMAP], MAP_FAILED;
  return DEFAULT(PPRT__SYS_MMAP, pprt__sys_mmap_fn)(addr, len, prot, flags, fd, offset);
}

static int f_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                            void *arg) {
  if (should_fail(PPRT__SYS_PTHREAD_CREATE))
    return fault_errno[PPRT__SYS_PTHREAD_CREATE];
  return DEFAULT(PPRT__SYS_PTHREAD_CREATE, pprt__sys_pthread_create_fn)(t, attr, fn, arg);
}

static int f_open(const char *path, int flags, mode_t mode) {
  if (should_fail(PPRT__SYS_OPEN))
    return errno = fault_errno[PPRT__SYS_OPEN], -1;
  return DEFAULT(PPRT__SYS_OPEN, pprt__sys_open_fn)(path, flags, mode);
}

static ssize_t f_write(int fd, const void *data, size_t len) {
  if (should_fail(PPRT__SYS_WRITE))
    return errno = fault_errno[PPRT__SYS_WRITE], -1;
  return DEFAULT(PPRT__SYS_WRITE, pprt__sys_write_fn)(fd, data, len);
}

static const pprt__syscall_fn injectors[PPRT__SYS_COUNT] = {
    [PPRT__SYS_TIMER_CREATE] = (pprt__syscall_fn)f_timer_create,
    [PPRT__SYS_PERF_EVENT_OPEN] = (pprt__syscall_fn)f_perf_event_open,
    [PPRT__SYS_SIGACTION] = (pprt__syscall_fn)f_sigaction,
    [PPRT__SYS_RT_SIGACTION] = (pprt__syscall_fn)f_rt_sigaction,
    [PPRT__SYS_SIGALTSTACK] = (pprt__syscall_fn)f_sigaltstack,
    [PPRT__SYS_MMAP] = (pprt__syscall_fn)f_mmap,
    [PPRT__SYS_PTHREAD_CREATE] = (pprt__syscall_fn)f_pthread_create,
    [PPRT__SYS_OPEN] = (pprt__syscall_fn)f_open,
    [PPRT__SYS_WRITE] = (pprt__syscall_fn)f_write,
};

static const char *call_name(int id) {
  const char *n = pprt__syscall_next(NULL);
  for (int i = 0; i < id && n; i++)
    n = pprt__syscall_next(n);
  return n;
}

/* Every call of the table through the injector, none failing yet. */
static void install_injectors(void) {
  for (int i = 0; i < PPRT__SYS_COUNT; i++) {
    const char *name = call_name(i);
    assert_non_null(name);
    g_default[i] = pprt__syscall_get_default(name);
    assert_non_null(g_default[i]);
    assert_int_equal(pprt__syscall_set(name, injectors[i]), 0);
    assert_true(pprt__syscall_get(name) == injectors[i]);
  }
}

static void remove_injectors(void) {
  for (int i = 0; i < PPRT__SYS_COUNT; i++)
    assert_int_equal(pprt__syscall_set(call_name(i), NULL), 0);
}

/* Fails call id at its k-th use on thread t (k = 0: every use, everywhere). */
static void arm(int id, long k, pthread_t t) {
  g_fault.id = id;
  g_fault.k = k;
  g_fault.target = t;
  atomic_store(&g_fault.calls, 0);
  atomic_store(&g_fault.armed, 1);
}

static void disarm(void) {
  atomic_store(&g_fault.armed, 0);
}

/* ---- what must be left as it was -------------------------------------------------------- */

static atomic_int g_marker_calls;

/* The program's own SIGPROF handler, which pprt must put back. */
static void marker(int sig, siginfo_t *info, void *uc) {
  (void)sig, (void)info, (void)uc;
  atomic_fetch_add(&g_marker_calls, 1);
}

/* Open descriptors, on every OS (fcntl on each possible one). */
static int count_fds(void) {
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536)
    max = 65536;
  int n = 0;
  for (int fd = 0; fd < (int)max; fd++)
    n += fcntl(fd, F_GETFD) != -1;
  return n;
}

typedef struct baseline {
  int fds, threads, timers;
} baseline;

static baseline take_baseline(void) {
  baseline b = {count_fds(), count_dir("/proc/self/task"), count_timers()};
  return b;
}

/* Everything pprt may have started is gone. what: for the message. */
static void check_clean(const baseline *b, const char *what) {
  struct sigaction sa;
  assert_int_equal(sigaction(SIGPROF, NULL, &sa), 0);
  if (sa.sa_sigaction != marker || !(sa.sa_flags & SA_SIGINFO))
    fail_msg("%s: SIGPROF's action is not the program's", what);
  struct itimerval it;
  assert_int_equal(getitimer(ITIMER_PROF, &it), 0);
  if (it.it_value.tv_sec || it.it_value.tv_usec || it.it_interval.tv_sec || it.it_interval.tv_usec)
    fail_msg("%s: the interval timer is still armed", what);
  assert_int_equal(pprt_cpu_stop(), -EPIPE);
  assert_int_equal(pprt_trace_stop(), -EPIPE);
  assert_int_equal(pprt_flight_stop(), -EPIPE);
#ifdef PPRT_TEST_HTTP
  assert_int_equal(pprt_http_stop(), -EPIPE);
#endif
  assert_int_equal(pprt_heap_rate(), 0);
  /* A joined thread can stay listed for a moment while the kernel lets go. */
  baseline now = take_baseline();
  for (int i = 0; i < 200 && (now.threads != b->threads || now.fds != b->fds); i++) {
    usleep(10000);
    now = take_baseline();
  }
  if (now.fds != b->fds)
    fail_msg("%s: %d descriptors open, %d before", what, now.fds, b->fds);
  if (now.threads != b->threads)
    fail_msg("%s: %d threads, %d before", what, now.threads, b->threads);
  if (now.timers != b->timers)
    fail_msg("%s: %d POSIX timers, %d before", what, now.timers, b->timers);
}

/* ---- start paths ---------------------------------------------------------------------- */

/* What a path's worker thread saw; checked on the test's thread (cmocka's
 * assertions must not run elsewhere). */
typedef struct attempt {
  int start_rc;
  int stop_rc;    /* after a successful start */
  int alt_before; /* the thread had an alternate stack before / after */
  int alt_after;
  int fd;     /* the file every session writes to */
  membuf out; /* what it held after the attempt */
} attempt;

typedef struct path {
  const char *name;
  int (*start)(attempt *a);
  int (*stop)(attempt *a);
  unsigned must_fail; /* calls whose first failure must fail the start */
  int output;         /* what the file holds: 1 a profile, 2 a trace, 0 nothing */
} path;

#define BIT(id) (1u << (id))
#define SIGNAL_CALLS (BIT(PPRT__SYS_SIGACTION) | BIT(PPRT__SYS_RT_SIGACTION))

static int cpu_start_with(attempt *a, pprt_timer_mode mode) {
  pprt_cpu_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.hz = 1000;
  o.timer = mode;
  return pprt_cpu_start(&o, pprt_writer_fd(a->fd));
}

static int start_cpu_perf(attempt *a) {
  return cpu_start_with(a, PPRT_TIMER_PERF);
}

static int start_cpu_timer(attempt *a) {
  return cpu_start_with(a, PPRT_TIMER_PER_THREAD);
}

static int start_cpu_process(attempt *a) {
  return cpu_start_with(a, PPRT_TIMER_PROCESS);
}

static int start_cpu_auto(attempt *a) {
  return cpu_start_with(a, PPRT_TIMER_AUTO);
}

static int stop_cpu(attempt *a) {
  (void)a;
  return pprt_cpu_stop();
}

static int start_heap(attempt *a) {
  (void)a;
  return pprt_heap_set_rate(1);
}

static int stop_heap(attempt *a) {
  static char block;
  pprt_alloc_note(&block, 64);
  int rc = pprt_heap_write(pprt_writer_fd(a->fd));
  pprt_free_note(&block);
  pprt_heap_set_rate(0);
  return rc;
}

static int start_trace(attempt *a) {
  return pprt_trace_start(NULL, pprt_writer_fd(a->fd));
}

static int stop_trace(attempt *a) {
  (void)a;
  pprt_region_begin("faults");
  pprt_region_end();
  return pprt_trace_stop();
}

static int start_flight(attempt *a) {
  (void)a;
  return pprt_flight_start(NULL);
}

static int stop_flight(attempt *a) {
  pprt_region_begin("faults");
  pprt_region_end();
  int rc = pprt_flight_write(pprt_writer_fd(a->fd));
  int rc2 = pprt_flight_stop();
  return rc ? rc : rc2;
}

#ifdef PPRT_TEST_HTTP
static int start_http(attempt *a) {
  (void)a;
  pprt_http_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.port = 0; /* any free port */
  return pprt_http_start(&o);
}

static int stop_http(attempt *a) {
  (void)a;
  return pprt_http_stop();
}
#endif

static int start_register(attempt *a) {
  (void)a;
  return pprt_thread_register();
}

static int stop_register(attempt *a) {
  (void)a;
  return pprt_thread_unregister();
}

static const path paths[] = {
    {"cpu perf clock", start_cpu_perf, stop_cpu,
     BIT(PPRT__SYS_PERF_EVENT_OPEN) | SIGNAL_CALLS | BIT(PPRT__SYS_PTHREAD_CREATE), 1},
    {"cpu per-thread timers", start_cpu_timer, stop_cpu,
     BIT(PPRT__SYS_TIMER_CREATE) | SIGNAL_CALLS | BIT(PPRT__SYS_PTHREAD_CREATE), 1},
    {"cpu process timer", start_cpu_process, stop_cpu, SIGNAL_CALLS | BIT(PPRT__SYS_PTHREAD_CREATE),
     1},
    {"cpu auto", start_cpu_auto, stop_cpu, SIGNAL_CALLS | BIT(PPRT__SYS_PTHREAD_CREATE), 1},
    {"heap sampling", start_heap, stop_heap, 0, 1},
    {"trace", start_trace, stop_trace, BIT(PPRT__SYS_WRITE) | BIT(PPRT__SYS_PTHREAD_CREATE), 2},
    {"flight recorder", start_flight, stop_flight, BIT(PPRT__SYS_PTHREAD_CREATE), 2},
#ifdef PPRT_TEST_HTTP
    {"http", start_http, stop_http, BIT(PPRT__SYS_PTHREAD_CREATE), 0},
#endif
    {"thread register", start_register, stop_register,
     BIT(PPRT__SYS_SIGALTSTACK) | BIT(PPRT__SYS_MMAP), 0},
};

typedef struct job {
  const path *p;
  int id;
  long k;
  int in_stop; /* the fault is armed for the stop, not the start */
  attempt *a;
} job;

static int has_altstack(void) {
  stack_t cur;
  return sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE);
}

/* One attempt, on its own thread: the start with the fault armed, then (if
 * it succeeded) the stop without it. */
static void *attempt_main(void *arg) {
  job *j = arg;
  attempt *a = j->a;
  a->alt_before = has_altstack();
  if (j->id >= 0 && !j->in_stop)
    arm(j->id, j->k, pthread_self());
  a->start_rc = j->p->start(a);
  disarm();
  if (a->start_rc == 0) {
    if (j->id >= 0 && j->in_stop)
      arm(j->id, j->k, pthread_self());
    a->stop_rc = j->p->stop(a);
    disarm();
  }
  a->alt_after = has_altstack();
  return NULL;
}

static void attempt_init(attempt *a) {
  memset(a, 0, sizeof *a);
  char tmpl[] = "/tmp/pprt-faults-XXXXXX";
  a->fd = mkstemp(tmpl);
  assert_true(a->fd >= 0);
  unlink(tmpl);
}

static void attempt_free(attempt *a) {
  mem_free(&a->out);
  close(a->fd);
}

static void run_attempt_at(const path *p, int id, long k, int in_stop, attempt *a) {
  job j = {p, id, k, in_stop, a};
  a->start_rc = a->stop_rc = 0;
  assert_int_equal(ftruncate(a->fd, 0), 0);
  assert_int_equal(lseek(a->fd, 0, SEEK_SET), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, attempt_main, &j), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  off_t n = lseek(a->fd, 0, SEEK_END);
  assert_true(n >= 0);
  a->out.len = 0;
  if (n > 0) {
    unsigned char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(pread(a->fd, buf, (size_t)n, 0), n);
    assert_int_equal(mem_write(&a->out, buf, (size_t)n), 0);
    free(buf);
  }
}

static void run_attempt(const path *p, int id, long k, attempt *a) {
  run_attempt_at(p, id, k, 0, a);
}

/* The session's output decodes. */
static void check_output(const path *p, const attempt *a, const char *what) {
  char err[256] = "";
  if (p->output == 1) {
    Pprt__Profile *prof = NULL;
    if (pprt__profile_decode(a->out.data, a->out.len, &prof, err, sizeof err) != 0)
      fail_msg("%s: the profile does not decode: %s", what, err);
    pprt__profile_decoded_free(prof);
  } else if (p->output == 2) {
    pprt__trace *t = NULL;
    if (pprt__trace_decode(a->out.data, a->out.len, 0, &t, err, sizeof err) != 0)
      fail_msg("%s: the trace does not decode: %s", what, err);
    int found = 0;
    for (size_t i = 0; i < t->nevents; i++)
      found |= t->events[i].name.s && strcmp(t->events[i].name.s, "faults") == 0;
    /* Without memory for a buffer the region is lost, and counted. */
    uint64_t lost = 0;
    for (size_t i = 0; i < t->nlost; i++)
      lost += t->lost[i].count;
    pprt__trace_free(t);
    if (!found && lost == 0)
      fail_msg("%s: the trace lacks the region recorded and counts no loss", what);
  }
}

/* Walks call id over path p: fails its k-th call for k = 1, 2, ... until
 * the start succeeds without reaching it. Returns how many starts failed. */
static int walk(const path *p, int id, const baseline *b, attempt *a) {
  const char *name = call_name(id);
  int failed = 0, tolerated = 0;
  long k;
  for (k = 1; k < 1000; k++) {
    char what[160];
    snprintf(what, sizeof what, "%s, %s failing at call %ld", p->name, name, k);
    run_attempt(p, id, k, a);
    int reached = atomic_load(&g_fault.calls) >= k;
    if (a->start_rc != 0) {
      if (!reached)
        fail_msg("%s: the start failed (%d) without the fault", what, a->start_rc);
      if (a->start_rc != -fault_errno[id])
        fail_msg("%s: returned %d (%s), not -%d", what, a->start_rc, pprt_strerror(a->start_rc),
                 fault_errno[id]);
      assert_string_not_equal(pprt_strerror(a->start_rc), "unknown error");
      failed++;
    } else {
      if (reached && k == 1 && (p->must_fail & BIT(id)))
        fail_msg("%s: the start succeeded although it cannot work without the call", what);
      if (a->stop_rc != 0)
        fail_msg("%s: the session's stop or write failed: %d (%s)", what, a->stop_rc,
                 pprt_strerror(a->stop_rc));
      check_output(p, a, what);
      tolerated += reached;
    }
    /* A start that succeeded registered the thread on purpose (cpu). */
    if ((a->start_rc != 0 || p->stop == stop_register) && a->alt_after != a->alt_before)
      fail_msg("%s: the thread's alternate stack was %s", what,
               a->alt_after ? "left installed" : "taken away");
    check_clean(b, what);
    if (a->start_rc == 0 && !reached)
      break;
  }
  assert_true(k < 1000);
  printf("  %-22s x %-15s %3ld call(s): %d start(s) failed cleanly, %d went on without the "
         "call\n",
         p->name, name, k - 1, failed, tolerated);
  return failed;
}

/* Walks call id over p's stop (or write): the start succeeds, the stop's
 * k-th call fails. The stop returns 0 (it did without the call) or the
 * injected errno, and leaves nothing behind either way. */
static void walk_stop(const path *p, int id, const baseline *b, attempt *a) {
  const char *name = call_name(id);
  int failed = 0, tolerated = 0;
  long k;
  for (k = 1; k < 1000; k++) {
    char what[160];
    snprintf(what, sizeof what, "%s stop, %s failing at call %ld", p->name, name, k);
    run_attempt_at(p, id, k, 1, a);
    assert_int_equal(a->start_rc, 0);
    int reached = atomic_load(&g_fault.calls) >= k;
    if (a->stop_rc != 0) {
      if (!reached)
        fail_msg("%s: the stop failed (%d) without the fault", what, a->stop_rc);
      if (a->stop_rc != -fault_errno[id])
        fail_msg("%s: returned %d (%s), not -%d", what, a->stop_rc, pprt_strerror(a->stop_rc),
                 fault_errno[id]);
      failed++;
      if (BIT(id) & SIGNAL_CALLS) {
        /* The handler could not be taken out: it stays, and the next
         * session (which must be able to start) takes it out. */
        struct sigaction sa;
        assert_int_equal(sigaction(SIGPROF, NULL, &sa), 0);
        assert_true(sa.sa_sigaction != marker);
        run_attempt(p, -1, 0, a);
        if (a->start_rc != 0 || a->stop_rc != 0)
          fail_msg("%s: the next session failed: %d, %d", what, a->start_rc, a->stop_rc);
      }
    } else {
      check_output(p, a, what);
      tolerated += reached;
    }
    check_clean(b, what);
    if (!reached)
      break;
  }
  assert_true(k < 1000);
  if (k > 1)
    printf("  %-22s x %-15s %3ld call(s) in the stop: %d stop(s) failed cleanly, %d went on "
           "without the call\n",
           p->name, name, k - 1, failed, tolerated);
}

/* ---- the tests --------------------------------------------------------------------------- */

static int setup(void **state) {
  (void)state;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = marker;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0)
    return -1;
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  disarm();
  for (int i = 0; i < PPRT__SYS_COUNT; i++)
    pprt__syscall_set(call_name(i), NULL);
  return 0;
}

static void test_table_names_every_call(void **state) {
  (void)state;
  static const char *const want[] = {
      "timer_create", "perf_event_open", "sigaction", "rt_sigaction", "sigaltstack",
      "mmap",         "pthread_create",  "open",      "write"};
  const char *n = NULL;
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    n = pprt__syscall_next(n);
    assert_non_null(n);
    assert_string_equal(n, want[i]);
    assert_true(pprt__syscall_get(n) == pprt__syscall_get_default(n));
  }
  assert_null(pprt__syscall_next(n));
  assert_int_equal(pprt__syscall_set("fork", (pprt__syscall_fn)f_write), -ENOENT);
  assert_null(pprt__syscall_get("fork"));
  /* An override is called, and NULL puts the default back. */
  install_injectors();
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pprt_writer w = pprt_writer_fd(fds[1]);
  arm(PPRT__SYS_WRITE, 0, pthread_self());
  assert_int_equal(w.write(w.ctx, "x", 1), -ENOSPC);
  disarm();
  remove_injectors();
  assert_true(pprt__syscall_get("write") == pprt__syscall_get_default("write"));
  assert_int_equal(w.write(w.ctx, "x", 1), 0);
  close(fds[0]);
  close(fds[1]);
}

/* Each call x each start path. */
static void test_every_start_path_fails_cleanly(void **state) {
  (void)state;
  attempt a;
  attempt_init(&a);
  install_injectors();
  baseline b = take_baseline();
  int failed = 0;
  for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
    /* A path this system cannot run at all (no perf events) is skipped. */
    run_attempt(&paths[p], -1, 0, &a);
    if (a.start_rc != 0) {
      printf("  %-22s not available here: %s\n", paths[p].name, pprt_strerror(a.start_rc));
      check_clean(&b, paths[p].name);
      continue;
    }
    check_clean(&b, paths[p].name);
    for (int id = 0; id < PPRT__SYS_COUNT; id++)
      failed += walk(&paths[p], id, &b, &a);
  }
  remove_injectors();
  attempt_free(&a);
  /* At least the starts that cannot do without a call failed. */
  assert_true(failed >= 8);
}

/* Each call x each stop. */
static void test_every_stop_path_cleans_up(void **state) {
  (void)state;
  attempt a;
  attempt_init(&a);
  install_injectors();
  baseline b = take_baseline();
  for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
    run_attempt(&paths[p], -1, 0, &a);
    check_clean(&b, paths[p].name);
    if (a.start_rc != 0)
      continue;
    for (int id = 0; id < PPRT__SYS_COUNT; id++)
      walk_stop(&paths[p], id, &b, &a);
  }
  remove_injectors();
  attempt_free(&a);
}

/* The same, for pprt_thread_register while a CPU profile runs: the
 * thread's timer is the extra call; a failure there is retried by the
 * reader's rescan, so registration itself still succeeds. */
static void test_register_while_profiling(void **state) {
  (void)state;
  attempt a;
  attempt_init(&a);
  install_injectors();
  membuf prof = {0};
  pprt_cpu_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.timer = PPRT_TIMER_PER_THREAD;
  assert_int_equal(pprt_cpu_start(&o, mem_writer(&prof)), 0);
  const path *reg = &paths[sizeof paths / sizeof *paths - 1];
  for (int id = 0; id < PPRT__SYS_COUNT; id++) {
    for (long k = 1; k < 100; k++) {
      run_attempt(reg, id, k, &a);
      int reached = atomic_load(&g_fault.calls) >= k;
      if (a.start_rc != 0)
        assert_int_equal(a.start_rc, -fault_errno[id]);
      assert_int_equal(a.alt_after, a.alt_before);
      if (a.start_rc == 0 && !reached)
        break;
    }
  }
  assert_int_equal(pprt_cpu_stop(), 0);
  remove_injectors();
  char err[256];
  Pprt__Profile *p = NULL;
  assert_int_equal(pprt__profile_decode(prof.data, prof.len, &p, err, sizeof err), 0);
  pprt__profile_decoded_free(p);
  mem_free(&prof);
  attempt_free(&a);
}

/* ---- failures in the middle of a session ----------------------------------------------- */

static unsigned char *read_all(int fd, size_t *len) {
  off_t n = lseek(fd, 0, SEEK_END);
  assert_true(n >= 0);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
  *len = (size_t)n;
  return buf;
}

/* Regions named name that the trace shows begun. */
static size_t count_named(const pprt__trace *t, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < t->nevents; i++)
    n += t->events[i].type == PPRT__EV_REGION_BEGIN && t->events[i].name.s &&
         strcmp(t->events[i].name.s, name) == 0;
  return n;
}

/* The disk fills while a trace streams: stop says so, and what was written
 * before (whole generations) still decodes. */
static void test_trace_disk_full(void **state) {
  (void)state;
  baseline b = take_baseline();
  char tmpl[] = "/tmp/pprt-faults-XXXXXX";
  int fd = mkstemp(tmpl);
  assert_true(fd >= 0);
  unlink(tmpl);
  install_injectors();
  assert_int_equal(pprt_trace_start(NULL, pprt_writer_fd(fd)), 0);
  for (int i = 0; i < 100; i++) {
    pprt_region_begin("before");
    pprt_region_end();
  }
  assert_int_equal(pprt__trace_advance(), 0); /* a generation ends: it is written */
  arm(PPRT__SYS_WRITE, 0, pthread_self());
  for (int i = 0; i < 100; i++) {
    pprt_region_begin("after");
    pprt_region_end();
  }
  assert_int_equal(pprt__trace_advance(), 0);
  int rc = pprt_trace_stop();
  disarm();
  remove_injectors();
  assert_int_equal(rc, -ENOSPC);
  size_t len;
  unsigned char *data = read_all(fd, &len);
  pprt__trace *t = NULL;
  char err[256];
  if (pprt__trace_decode(data, len, PPRT__TRACE_DECODE_PARTIAL, &t, err, sizeof err) != 0)
    fail_msg("the trace written before the disk filled does not decode: %s", err);
  assert_int_equal(count_named(t, "before"), 100);
  pprt__trace_free(t);
  free(data);
  close(fd);
  check_clean(&b, "trace, disk full");
}

/* A heap profile that cannot be written loses nothing: the next one has
 * every sample. */
static void test_heap_write_disk_full(void **state) {
  (void)state;
  baseline b = take_baseline();
  static char blocks[16][64];
  install_injectors();
  assert_int_equal(pprt_heap_set_rate(1), 0);
  for (int i = 0; i < 16; i++)
    pprt_alloc_note(blocks[i], sizeof blocks[i]);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  arm(PPRT__SYS_WRITE, 0, pthread_self());
  assert_int_equal(pprt_heap_write(pprt_writer_fd(fds[1])), -ENOSPC);
  disarm();
  close(fds[0]);
  close(fds[1]);
  membuf out = {0};
  assert_int_equal(pprt_heap_write(mem_writer(&out)), 0);
  remove_injectors();
  char err[256];
  Pprt__Profile *p = NULL;
  assert_int_equal(pprt__profile_decode(out.data, out.len, &p, err, sizeof err), 0);
  int64_t inuse = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    inuse += p->sample[i]->value[2];
  assert_int_equal(inuse, 16);
  pprt__profile_decoded_free(p);
  mem_free(&out);
  for (int i = 0; i < 16; i++)
    pprt_free_note(blocks[i]);
  assert_int_equal(pprt_heap_set_rate(0), 0);
  check_clean(&b, "heap, disk full");
}

/* A flight snapshot that cannot be written: the recorder keeps its
 * generations and the next snapshot has them. */
static void test_flight_write_disk_full(void **state) {
  (void)state;
  baseline b = take_baseline();
  install_injectors();
  assert_int_equal(pprt_flight_start(NULL), 0);
  for (int i = 0; i < 50; i++) {
    pprt_region_begin("kept");
    pprt_region_end();
  }
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  arm(PPRT__SYS_WRITE, 0, pthread_self());
  assert_int_equal(pprt_flight_write(pprt_writer_fd(fds[1])), -ENOSPC);
  disarm();
  close(fds[0]);
  close(fds[1]);
  membuf out = {0};
  assert_int_equal(pprt_flight_write(mem_writer(&out)), 0);
  assert_int_equal(pprt_flight_stop(), 0);
  remove_injectors();
  pprt__trace *t = NULL;
  char err[256];
  if (pprt__trace_decode(out.data, out.len, 0, &t, err, sizeof err) != 0)
    fail_msg("the snapshot after the failed one does not decode: %s", err);
  assert_int_equal(count_named(t, "kept"), 50);
  pprt__trace_free(t);
  mem_free(&out);
  check_clean(&b, "flight recorder, disk full");
}

/* open fails (out of descriptors) while a profile is symbolized: the
 * profile is still written, with every sample and mapping. */
static void test_open_fails_while_writing(void **state) {
  (void)state;
  baseline b = take_baseline();
  static char blocks[8][32];
  install_injectors();
  assert_int_equal(pprt_heap_set_rate(1), 0);
  for (int i = 0; i < 8; i++)
    pprt_alloc_note(blocks[i], sizeof blocks[i]);
  membuf clean = {0}, faulty = {0};
  assert_int_equal(pprt_heap_write(mem_writer(&clean)), 0);
  arm(PPRT__SYS_OPEN, 0, pthread_self());
  assert_int_equal(pprt_heap_write(mem_writer(&faulty)), 0);
  disarm();
  remove_injectors();
  char err[256];
  Pprt__Profile *p = NULL, *q = NULL;
  assert_int_equal(pprt__profile_decode(clean.data, clean.len, &p, err, sizeof err), 0);
  assert_int_equal(pprt__profile_decode(faulty.data, faulty.len, &q, err, sizeof err), 0);
  assert_int_equal(q->n_sample, p->n_sample);
  assert_int_equal(q->n_mapping, p->n_mapping);
  assert_int_equal(q->n_location, p->n_location);
  pprt__profile_decoded_free(p);
  pprt__profile_decoded_free(q);
  mem_free(&clean);
  mem_free(&faulty);
  for (int i = 0; i < 8; i++)
    pprt_free_note(blocks[i]);
  assert_int_equal(pprt_heap_set_rate(0), 0);
  check_clean(&b, "open failing while writing");
}

#define STARVED 20000

/* Records one event with a buffer, then many more with no memory to be had
 * for the next buffers. */
static void *emit_many(void *arg) {
  (void)arg;
  pprt_region_begin("warm");
  pprt_region_end();
  arm(PPRT__SYS_MMAP, 0, pthread_self());
  for (int i = 0; i < STARVED; i++) {
    pprt_region_begin("starved");
    pprt_region_end();
  }
  disarm();
  return NULL;
}

/* mmap fails while a trace runs: a thread that needs a buffer loses its
 * events, counted as lost; the trace still decodes and the session stops
 * normally. */
static void test_trace_mmap_fails(void **state) {
  (void)state;
  baseline b = take_baseline();
  install_injectors();
  membuf out = {0};
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&out)), 0);
  pprt_region_begin("fed");
  pprt_region_end();
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, emit_many, NULL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(pprt_trace_stop(), 0);
  remove_injectors();
  pprt__trace *tr = NULL;
  char err[256];
  if (pprt__trace_decode(out.data, out.len, 0, &tr, err, sizeof err) != 0)
    fail_msg("the trace does not decode: %s", err);
  assert_int_equal(count_named(tr, "fed"), 1);
  assert_int_equal(count_named(tr, "warm"), 1);
  size_t kept = count_named(tr, "starved"), ends = 0;
  for (size_t i = 0; i < tr->nevents; i++)
    ends += tr->events[i].type == PPRT__EV_REGION_END;
  ends -= 2; /* "fed" and "warm" */
  uint64_t lost = 0;
  for (size_t i = 0; i < tr->nlost; i++)
    lost += tr->lost[i].count;
  /* Buffers the writer gave back are used again; the events that found
   * none are lost, and every one is counted. */
  printf("  %zu of %d regions begun in the trace, %llu events lost\n", kept, STARVED,
         (unsigned long long)lost);
  assert_true(lost > 0);
  assert_int_equal(kept + ends + lost, 2 * STARVED);
  pprt__trace_free(tr);
  mem_free(&out);
  check_clean(&b, "mmap failing in a trace");
}

/* The program goes on: after all of the above, a profile starts, samples
 * and stops as ever. */
static void test_program_continues(void **state) {
  (void)state;
  membuf out = {0};
  assert_int_equal(pprt_cpu_start(NULL, mem_writer(&out)), 0);
  volatile uint64_t x = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 100000; i++)
      x += (uint64_t)i * i;
    clock_gettime(CLOCK_MONOTONIC, &t1);
  } while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 200000000L);
  (void)x; /* clang counts a volatile that is only written as unused */
  assert_int_equal(pprt_cpu_stop(), 0);
  char err[256];
  Pprt__Profile *p = NULL;
  assert_int_equal(pprt__profile_decode(out.data, out.len, &p, err, sizeof err), 0);
  pprt__profile_decoded_free(p);
  mem_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_names_every_call),
      cmocka_unit_test(test_every_start_path_fails_cleanly),
      cmocka_unit_test(test_every_stop_path_cleans_up),
      cmocka_unit_test(test_register_while_profiling),
      cmocka_unit_test(test_trace_disk_full),
      cmocka_unit_test(test_heap_write_disk_full),
      cmocka_unit_test(test_flight_write_disk_full),
      cmocka_unit_test(test_open_fails_while_writing),
      cmocka_unit_test(test_trace_mmap_fails),
      cmocka_unit_test(test_program_continues),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
