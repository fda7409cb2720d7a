/* End-to-end tests of the CPU profiler in this process: real timers, real
 * SIGPROF, real stacks, the profile decoded and checked.
 *
 *   accuracy     60/30/10 workloads whose truth is each function's CPU time
 *                measured around its calls: random order and lengths (1
 *                and 4 threads, every source), a fixed cycle and a cycle
 *                in lockstep with the wall clock (the sampling clock: the
 *                aliasing cases); shares within 4 standard deviations of
 *                the real samples; weights summing to the workers' CPU
 *                time; 1000 Hz asked gives 1000 per CPU-second
 *   sources      auto falls back under a seccomp filter that refuses perf
 *                events and says why; an unprivileged user-only clock
 *                still weighs kernel time in
 *   blocked      threads that block SIGPROF are charged to a synthetic
 *                frame with their CPU time
 *   fairness     2 identical threads: 50% +- 5 each with per-thread timers
 *                (the process timer's skew is printed, not asserted)
 *   stacks       300-deep recursion truncated at max depth; a leaf whose
 *                frame pointer is garbage still gives a sample
 *   the program  its own SIGPROF handler keeps working during and after;
 *                200 start/stop cycles leak no fd, timer, thread or memory;
 *                stop with ticks pending does not kill; fork and exec
 *
 * PPRT_TEST_CPU_SCALE (default 1) scales the workloads' length. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#endif

#include <cmocka.h>

#include "core/platform.h"
#include "core/profile.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tests/proc_counts.h"
#include "tests/profile_util.h"
#include "tests/workload.h"

/* Sanitizers keep freed memory in quarantine: RSS says nothing there, and
 * LeakSanitizer checks the same thing properly. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* ---- helpers ------------------------------------------------------------------- */


static double scale(void) {
  const char *s = getenv("PPRT_TEST_CPU_SCALE");
  double v = s ? atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static Pprt__Profile *stop_and_decode(membuf *m) {
  assert_int_equal(pprt_cpu_stop(), 0);
  Pprt__Profile *prof = NULL;
  char err[256];
  if (pprt__profile_decode(m->data, m->len, &prof, err, sizeof err) != 0)
    fail_msg("profile does not decode: %s", err);
  return prof;
}

/* Samples whose leaf is function `name`. */
static int64_t leaf_samples(const Pprt__Profile *p, const char *name) {
  int64_t n = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (p->sample[i]->n_location_id && name_is(fn_name(p, p->sample[i]->location_id[0]), name))
      n += p->sample[i]->value[0];
  return n;
}

static int64_t total_samples(const Pprt__Profile *p, int64_t *cpu_ns) {
  int64_t n = 0, ns = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    n += p->sample[i]->value[0];
    ns += p->sample[i]->value[1];
  }
  if (cpu_ns)
    *cpu_ns = ns;
  return n;
}

static int64_t label_num(const Pprt__Profile *p, const Pprt__Sample *s, const char *key) {
  for (size_t i = 0; i < s->n_label; i++)
    if (strcmp(p->string_table[s->label[i]->key], key) == 0)
      return s->label[i]->num;
  return -1;
}

/* ---- workloads ------------------------------------------------------------------ */

static volatile uint64_t sink;

/* The same loop in each function; different constants keep the compiler
 * from merging them. */
#define SPIN(iters, k)                                                                            \
  do {                                                                                            \
    uint64_t x_ = sink;                                                                           \
    for (long i_ = 0; i_ < (iters); i_++) {                                                       \
      x_ = x_ * 6364136223846793005u + (k);                                                       \
      __asm__ volatile("" : "+r"(x_));                                                            \
    }                                                                                             \
    sink = x_;                                                                                    \
  } while (0)

/* Workload functions keep one copy of their own code under their own name
 * at every optimization level (tests/workload.h); names are matched up to
 * a clone suffix anyway (name_is). */
#define WORKLOAD TEST_WORKLOAD

WORKLOAD void pprt_test_burn_60(long n);
WORKLOAD void pprt_test_burn_30(long n);
WORKLOAD void pprt_test_burn_10(long n);
void pprt_test_burn_60(long n) {
  SPIN(n, 1);
}
void pprt_test_burn_30(long n) {
  SPIN(n, 3);
}
void pprt_test_burn_10(long n) {
  SPIN(n, 5);
}

/* CPU work for tests that check no shares. */
static void mix(double seconds) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) {
    pprt_test_burn_60(120000);
    pprt_test_burn_30(60000);
    pprt_test_burn_10(20000);
  }
}

/* Whether this system has per-thread CPU timers (Linux). */
static int has_thread_timers(void) {
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 100, 0, PPRT_TIMER_PER_THREAD, 0, 0};
  int rc = pprt_cpu_start(&o, (pprt_writer){mem_write, &m});
  if (rc == 0)
    pprt_cpu_stop();
  free(m.data);
  assert_true(rc == 0 || rc == -ENOTSUP);
  return rc == 0;
}

/* Whether the perf task clock is available to this process. */
static int has_perf(void) {
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 100, 0, PPRT_TIMER_PERF, 0, 0};
  int rc = pprt_cpu_start(&o, (pprt_writer){mem_write, &m});
  if (rc == 0)
    pprt_cpu_stop();
  free(m.data);
  return rc == 0;
}

/* ---- accuracy: shares against each function's measured CPU time ---------------- */

#define NFN 3
static const char *const fn_names[NFN] = {"pprt_test_burn_60", "pprt_test_burn_30",
                                          "pprt_test_burn_10"};
static void (*const fns[NFN])(long) = {pprt_test_burn_60, pprt_test_burn_30, pprt_test_burn_10};

enum shape {
  RANDOM,   /* random order and lengths: no cycle for any sampler to lock onto */
  PERIODIC, /* a fixed 60/30/10 cycle of ~0.6 ms of CPU: the aliasing case */
  LOCKSTEP  /* the three spin to 60/30/10% of each 4 ms of the wall clock */
};

struct work {
  enum shape shape;
  double seconds;    /* of the thread's CPU time */
  long iters_per_ms; /* the loop's speed, calibrated */
  double cpu[NFN];   /* out: CPU seconds measured around each function's calls */
  double total;      /* out: the thread's CPU time from start to end */
  int count_clock;   /* measure task_clock too */
  double task_clock; /* out: the thread's task clock over the same span */
  uint64_t tid;      /* out */
};

static uint64_t rng_next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One 4 ms cycle of the wall clock, its thirds in lockstep with it. */
static void lockstep_cycle(struct work *w) {
  static const double ends[NFN] = {0.6, 0.9, 1.0};
  double t0 = mono(), base = t0 - fmod(t0, 0.004);
  for (int f = 0; f < NFN; f++) {
    double a = thread_cpu(), until = base + 0.004 * ends[f];
    while (mono() < until)
      fns[f](200);
    w->cpu[f] += thread_cpu() - a;
  }
}

/* A counting (not sampling) task clock on the calling thread, or -1. */
static int open_task_clock(void) {
#if defined(__linux__)
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
#else
  return -1;
#endif
}

static double read_task_clock(int fd) {
  uint64_t v = 0;
  if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
    return 0;
  return (double)v / 1e9;
}

static void run_work(struct work *w) {
  static const int share[NFN] = {60, 30, 10};
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)pprt__os_thread_id();
  int clock_fd = w->count_clock ? open_task_clock() : -1;
  double clock0 = read_task_clock(clock_fd);
  double start = thread_cpu(), end = start + w->seconds;
  w->tid = pprt__os_thread_id();
  while (thread_cpu() < end) {
    if (w->shape == LOCKSTEP) {
      lockstep_cycle(w);
      continue;
    }
    for (int i = 0; i < NFN; i++) {
      int f = i;
      long n;
      if (w->shape == RANDOM) {
        /* 60/30/10 odds, 0.05 to 1.55 ms each */
        uint64_t r = rng_next(&seed);
        f = (int)(r % 10) < 6 ? 0 : (int)(r % 10) < 9 ? 1 : 2;
        n = (long)((0.05 + (double)((r >> 16) % 1000) / 1000.0 * 1.5) * (double)w->iters_per_ms);
      } else {
        n = (long)share[f] * w->iters_per_ms / 100; /* 0.6 / 0.3 / 0.1 ms */
      }
      double a = thread_cpu();
      fns[f](n);
      w->cpu[f] += thread_cpu() - a;
    }
  }
  w->total = thread_cpu() - start;
  w->task_clock = read_task_clock(clock_fd) - clock0;
  if (clock_fd >= 0)
    close(clock_fd);
}

static void *work_thread(void *arg) {
  pprt_thread_register(); /* as the preload library does for every thread */
  run_work(arg);
  return NULL;
}

/* Iterations of the loop per millisecond of CPU, measured here. */
static long calibrate(void) {
  for (long n = 100000;; n *= 4) {
    double a = thread_cpu();
    pprt_test_burn_10(n);
    double d = thread_cpu() - a;
    if (d > 0.02)
      return (long)((double)n / (d * 1000.0)) + 1;
  }
}

/* The number a comment gives right after its needle: "needle 1.234 s". */
static double comment_value(const Pprt__Profile *p, const char *needle) {
  double v = -1;
  const char *c = profile_comment(p, needle);
  assert_non_null(c);
  assert_int_equal(sscanf(strstr(c, needle) + strlen(needle), "%lf", &v), 1);
  return v;
}

static unsigned long long comment_count(const Pprt__Profile *p, const char *needle) {
  unsigned long long v = 0;
  const char *c = profile_comment(p, needle);
  assert_non_null(c);
  assert_non_null(strchr(c, '('));
  assert_int_equal(sscanf(strchr(c, '('), "(%llu", &v), 1);
  return v;
}

/* Runs `threads` workers of one shape under the profiler and checks each
 * function's share of the samples against its share of the CPU time the
 * workers measured around its calls. The tolerance is 4 standard
 * deviations of a share of n independent samples, sqrt(p(1-p)/n). A timer
 * tick that stands for k periods (overrun) is counted as k samples but is
 * one draw: a share's variance is then p(1-p) sum(k^2) / (sum k)^2, so the
 * deviation grows by sqrt(sum(k^2) / sum(k)), both sums from the
 * profile's comments. (The mean k understates it when k varies: a
 * loaded machine's ticks fold 1 to 5 periods.) */
static void check_shares(pprt_timer_mode mode, int hz, enum shape shape, int threads,
                         double seconds) {
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, hz, 0, mode, 0, 0};
  struct work w[8];
  long ipm = calibrate();
  memset(w, 0, sizeof w);
  for (int i = 0; i < threads; i++) {
    w[i].shape = shape;
    w[i].seconds = seconds * scale() / threads;
    w[i].iters_per_ms = ipm;
  }
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  pthread_t th[8];
  for (int i = 0; i < threads; i++)
    assert_int_equal(pthread_create(&th[i], NULL, work_thread, &w[i]), 0);
  for (int i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  Pprt__Profile *p = stop_and_decode(&m);

  double truth[NFN] = {0}, truth_sum = 0, worker_cpu = 0;
  for (int i = 0; i < threads; i++) {
    for (int f = 0; f < NFN; f++)
      truth[f] += w[i].cpu[f];
    worker_cpu += w[i].total;
  }
  for (int f = 0; f < NFN; f++)
    truth_sum += truth[f];
  int64_t k[NFN] = {0}, n = 0, worker_ns = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *smp = p->sample[i];
    int64_t tid = label_num(p, smp, "thread_id");
    for (int t = 0; t < threads; t++)
      if (tid == (int64_t)w[t].tid)
        worker_ns += smp->value[1];
    if (smp->n_location_id == 0)
      continue;
    const char *leaf = fn_name(p, smp->location_id[0]);
    for (int f = 0; f < NFN; f++)
      if (name_is(leaf, fn_names[f])) {
        k[f] += smp->value[0];
        n += smp->value[0];
      }
  }
  unsigned long long samples = comment_count(p, "effective rate");
  unsigned long long signals = comment_count(p, "timer signals");
  double fold = profile_fold_factor(p);
  assert_true(fold > 0);
  const char *src = profile_comment(p, "source");
  print_message("%s, %d thread(s), %d Hz, %s: %lld samples in the workload (%.3f per signal, "
                "variance factor %.3f)\n",
                shape == RANDOM ? "random" : shape == PERIODIC ? "periodic" : "lockstep", threads,
                hz, src ? strstr(src, "source") : "?", (long long)n,
                signals ? (double)samples / (double)signals : 0.0, fold);
  assert_true(n > 0);
  for (int f = 0; f < NFN; f++) {
    double want = truth[f] / truth_sum, got = (double)k[f] / (double)n;
    double sigma = sqrt(want * (1 - want) * fold / (double)n);
    print_message("  %-18s %5.2f%% of samples, %5.2f%% of the CPU time (4 sigma: %.2f points)\n",
                  fn_names[f], 100 * got, 100 * want, 400 * sigma);
    assert_true(fabs(got - want) <= 4 * sigma);
  }
  /* The workers' weights add up to their CPU time: a sampling clock's
   * intervals tile it but for each thread's last, unfinished one and the
   * signals' own delivery (microseconds each); a timer's ticks stop up to
   * a period short. */
  double sampled = (double)worker_ns / 1e9;
  double slack = threads * 3.0 / hz + 0.02 * worker_cpu;
  print_message("  workers: %.3f s sampled, %.3f s of CPU measured\n", sampled, worker_cpu);
  assert_true(fabs(sampled - worker_cpu) <= slack);
  /* None of these threads blocks SIGPROF: one caught inside the handler,
   * where SIGPROF is blocked, must not be taken for one that does. */
  assert_int_equal(leaf_samples(p, "pprt_signals_blocked"), 0);
  pprt__profile_decoded_free(p);
  free(m.data);
}

static void test_accuracy_random_one_thread(void **state) {
  (void)state;
  check_shares(PPRT_TIMER_AUTO, 1000, RANDOM, 1, 4.0);
}

static void test_accuracy_random_four_threads(void **state) {
  (void)state;
  check_shares(PPRT_TIMER_AUTO, 1000, RANDOM, 4, 4.0);
}

/* The same random workload on the tick-driven per-thread timers (the
 * fallback where perf events are refused). */
static void test_accuracy_random_timers(void **state) {
  (void)state;
  if (!has_thread_timers()) {
    print_message("no per-thread CPU timers here: skipped\n");
    skip();
  }
  check_shares(PPRT_TIMER_PER_THREAD, 250, RANDOM, 2, 6.0);
}

/* Periodic programs against the sampling clock: the aliasing cases. The
 * tick-driven timers are not asserted on these (they alias; bench/cpu
 * prints by how much). */
static void test_periodic_not_aliased(void **state) {
  (void)state;
  if (!has_perf()) {
    print_message("perf task clock not available here: periodic cases skipped\n");
    skip();
  }
  check_shares(PPRT_TIMER_PERF, 1000, PERIODIC, 2, 4.0);
  check_shares(PPRT_TIMER_PERF, 1000, LOCKSTEP, 1, 3.0);
}

/* The rate asked is the rate delivered: 1000 Hz asked gives about 1,000
 * samples per second of the thread's time on a CPU, four times the
 * scheduler tick. Two of the kernel's clocks measure that time and, in a
 * virtual machine, disagree: the thread's CPU time and its perf task clock,
 * which also counts the time the host took. On a busy 2-vCPU guest the
 * task clock ran 5-13% ahead, and the samples have followed either one
 * (measured: 986 per CPU-second with the task clock 13% ahead; other runs
 * 1,000 per task-clock second). So the test measures both (the task clock
 * with a counting clock of its own) and wants the count between them. The
 * count of a Poisson process at rate r over time T has standard deviation
 * sqrt(rT); each signal's delivery takes a little time between intervals
 * (3% allowed for it). */
static void test_perf_rate_above_tick(void **state) {
  (void)state;
  if (!has_perf()) {
    print_message("perf task clock not available here: skipped\n");
    skip();
  }
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 1000, 0, PPRT_TIMER_PERF, 0, 0};
  struct work w;
  memset(&w, 0, sizeof w);
  w.shape = RANDOM;
  w.count_clock = 1;
  w.seconds = 3.0 * scale();
  w.iters_per_ms = calibrate();
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, work_thread, &w), 0);
  pthread_join(th, NULL);
  Pprt__Profile *p = stop_and_decode(&m);
  int64_t n = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (label_num(p, p->sample[i], "thread_id") == (int64_t)w.tid)
      n += p->sample[i]->value[0];
  double clock = w.task_clock > 0 ? w.task_clock : w.total;
  double lo = 1000 * fmin(clock, w.total), hi = 1000 * fmax(clock, w.total);
  double below = 4 * sqrt(lo) + 0.03 * lo, above = 4 * sqrt(hi);
  print_message("1000 Hz asked: %lld samples over %.3f s of the thread's task clock and %.3f s "
                "of its CPU time = %.1f per task-clock second, %.1f per CPU second (allowed: "
                "%.0f to %.0f)\n",
                (long long)n, clock, w.total, (double)n / clock, (double)n / w.total, lo - below,
                hi + above);
  assert_true((double)n >= lo - below && (double)n <= hi + above);
  assert_int_equal(leaf_samples(p, "pprt_signals_blocked"), 0);
  pprt__profile_decoded_free(p);
  free(m.data);
}

/* ---- when perf events are refused, or leave the kernel out ----------------------- */

#if defined(__linux__)
/* A seccomp filter that answers perf_event_open with EACCES, as container
 * runtimes' default profiles do. */
static int refuse_perf_events(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}
#endif

/* Runs fn in a child process; its exit status 0 passes, 77 skips, others
 * fail with the child's own message above. */
static void in_child(int (*fn)(void), const char *what) {
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int rc = fn();
    fflush(stdout);
    _exit(rc);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    print_message("%s: skipped\n", what);
    return;
  }
  assert_int_equal(WEXITSTATUS(status), 0);
}

#define CHILD_CHECK(cond)                                                                         \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      printf("%s:%d: %s\n", __FILE__, __LINE__, #cond);                                         \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

static int fallback_child(void) {
#if defined(__linux__)
  if (refuse_perf_events() != 0) {
    printf("no seccomp here (%s)\n", strerror(errno));
    return 77;
  }
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 250, 0, PPRT_TIMER_PERF, 0, 0};
  int rc = pprt_cpu_start(&o, (pprt_writer){mem_write, &m});
  printf("perf asked under a filter that refuses it: %s\n", pprt_strerror(rc));
  CHILD_CHECK(rc == -EACCES);
  o.timer = PPRT_TIMER_AUTO;
  CHILD_CHECK(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}) == 0);
  mix(0.3);
  CHILD_CHECK(pprt_cpu_stop() == 0);
  Pprt__Profile *p = NULL;
  char err[256];
  CHILD_CHECK(pprt__profile_decode(m.data, m.len, &p, err, sizeof err) == 0);
  const char *src = profile_comment(p, "source"), *why = profile_comment(p, "fallback");
  printf("%s\n%s\n", src ? src : "(no source comment)", why ? why : "(no fallback comment)");
  CHILD_CHECK(src && strstr(src, "source per-thread CPU timers"));
  CHILD_CHECK(why && strstr(why, "perf task clock not used: perf_event_open was refused"));
  CHILD_CHECK(total_samples(p, NULL) > 0);
  pprt__profile_decoded_free(p);
  free(m.data);
  return 0;
#else
  printf("perf events are Linux's\n");
  return 77;
#endif
}

/* auto falls back to the per-thread timers and says why in the profile. */
static void test_fallback_when_perf_refused(void **state) {
  (void)state;
  in_child(fallback_child, "fallback under seccomp");
}

/* Mostly kernel time: reading /dev/zero. */
static double kernel_heavy(double seconds) {
  static char buf[1 << 16];
  int fd = open("/dev/zero", O_RDONLY);
  double start = thread_cpu();
  while (thread_cpu() < start + seconds)
    if (fd < 0 || read(fd, buf, sizeof buf) < 0)
      pprt_test_burn_10(20000);
  if (fd >= 0)
    close(fd);
  return thread_cpu() - start;
}

/* A registered thread, so that its clock runs from its first instruction
 * of note to its exit, where pprt counts its tail. */
static void *kernel_heavy_thread(void *arg) {
  double *cpu = arg;
  if (pprt_thread_register() != 0)
    return NULL;
  *cpu = kernel_heavy(1.5 * scale());
  return NULL;
}

static int user_only_child(void) {
  FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
  int level = -9;
  if (f) {
    if (fscanf(f, "%d", &level) != 1)
      level = -9;
    fclose(f);
  }
  /* Only an unprivileged process at level 2 gets a user-only clock. */
  if (level != 2 || (geteuid() == 0 && setuid(65534) != 0) || geteuid() == 0) {
    printf("needs perf_event_paranoid 2 (here %d) and root to drop to\n", level);
    return 77;
  }
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 1000, 0, PPRT_TIMER_PERF, 0, 0};
  int rc = pprt_cpu_start(&o, (pprt_writer){mem_write, &m});
  if (rc != 0) {
    printf("no perf task clock unprivileged: %s\n", pprt_strerror(rc));
    return 77;
  }
  /* Two threads: this one, whose clock stops with the profile, and one
   * that exits before (its clock stops at its exit). */
  double start = thread_cpu(), worker = -1;
  pthread_t th;
  CHILD_CHECK(pthread_create(&th, NULL, kernel_heavy_thread, &worker) == 0);
  kernel_heavy(1.5 * scale());
  CHILD_CHECK(pthread_join(th, NULL) == 0);
  CHILD_CHECK(worker > 0);
  double cpu = thread_cpu() - start + worker;
  CHILD_CHECK(pprt_cpu_stop() == 0);
  Pprt__Profile *p = NULL;
  char err[256];
  CHILD_CHECK(pprt__profile_decode(m.data, m.len, &p, err, sizeof err) == 0);
  int64_t ns = 0, n = total_samples(p, &ns);
  const char *src = profile_comment(p, "source");
  printf("%s\nkernel-heavy threads: %lld samples, %.3f s sampled, %.3f s of CPU (%.3f s in the "
         "thread that exited)\n",
         src ? src : "(no source comment)", (long long)n, (double)ns / 1e9, cpu, worker);
  CHILD_CHECK(src && strstr(src, "user time only"));
  /* Kernel time is in the weights though most periods end in the kernel
   * and send nothing. What no weight has is the tail after the last
   * signal, which the profile states: a stretch between two signals of a
   * user-only clock is a drawn period times the number of periods that
   * ended in the kernel, so its tail is long (150-200 ms here, against a
   * mean gap of 20-35 ms) and no bound on it from the mean gap holds under
   * load. The weights and the tails add up to the threads' CPU time over
   * their clocks' lives (from pprt_cpu_start, or the thread's register, to
   * pprt_cpu_stop, or its exit), around the CPU time measured here: more
   * by what those calls used (a few ms at most), never less. */
  double tail = comment_value(p, "unsampled tails");
  double lost = comment_value(p, "lost samples");
  printf("unsampled tails %.3f s, lost samples %.0f: weights and tails %.3f ms over the CPU time\n",
         tail, lost, ((double)ns / 1e9 + tail - cpu) * 1e3);
  CHILD_CHECK(lost == 0); /* 1 MiB of ring for some 3,000 samples */
  CHILD_CHECK((double)ns / 1e9 + tail >= cpu - 1e-6);
  CHILD_CHECK((double)ns / 1e9 + tail <= cpu * 1.01 + 0.005);
  /* and the weights are there, not all in the tail */
  CHILD_CHECK(comment_count(p, "timer signals") == 0 || ns > 0);
  pprt__profile_decoded_free(p);
  free(m.data);
  return 0;
}

/* An unprivileged process where perf_event_paranoid is 2 (the kernel's
 * default) gets a clock that leaves the kernel out; its weights still
 * count kernel time. */
static void test_user_only_clock_counts_kernel_time(void **state) {
  (void)state;
  in_child(user_only_child, "user-only clock");
}

/* ---- threads that block SIGPROF ------------------------------------------------------ */

struct blocker {
  int how;          /* 0: created under a full mask; 1: blocks every signal itself */
  double seconds;
  double cpu;       /* out: its CPU time while it spun */
  uint64_t tid;     /* out */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, release;
};

static void *blocker_thread(void *arg) {
  struct blocker *b = arg;
  if (b->how == 1) {
    /* Straight to the kernel, past any interposer: what the reader must
     * find by itself. */
#if defined(__linux__)
    uint64_t all = ~(uint64_t)0;
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof all);
#else
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
#endif
  }
  b->tid = pprt__os_thread_id();
  double a = thread_cpu();
  mix(b->seconds);
  b->cpu = thread_cpu() - a;
  pthread_mutex_lock(&b->mu);
  b->done = 1;
  pthread_cond_broadcast(&b->cv);
  while (!b->release) /* alive until the profile is written */
    pthread_cond_wait(&b->cv, &b->mu);
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* Threads that block SIGPROF get no sample, so the reader charges their CPU
 * time to a synthetic frame with their labels, and the comments list them:
 * nearly all of it (at least 90%), and no more than they used. */
static void test_blocked_threads_counted(void **state) {
  (void)state;
  int blocks;
  if (pprt__os_thread_blocks(pprt__os_thread_id(), SIGPROF, &blocks) == -ENOTSUP) {
    print_message("this OS shows no other thread's signal mask: skipped\n");
    skip();
  }
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 250, 0, PPRT_TIMER_AUTO, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  struct blocker b[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    memset(&b[i], 0, sizeof b[i]);
    b[i].how = i;
    b[i].seconds = 1.5 * scale();
    pthread_mutex_init(&b[i].mu, NULL);
    pthread_cond_init(&b[i].cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    if (i == 0)
      pthread_sigmask(SIG_SETMASK, &all, &old); /* as liblzma starts its workers */
    assert_int_equal(pthread_create(&th[i], NULL, blocker_thread, &b[i]), 0);
    if (i == 0)
      pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  for (int i = 0; i < 2; i++) {
    pthread_mutex_lock(&b[i].mu);
    while (!b[i].done)
      pthread_cond_wait(&b[i].cv, &b[i].mu);
    pthread_mutex_unlock(&b[i].mu);
  }
  Pprt__Profile *p = stop_and_decode(&m);
  for (int i = 0; i < 2; i++) {
    int64_t blocked_ns = 0, sampled_ns = 0;
    for (size_t j = 0; j < p->n_sample; j++) {
      const Pprt__Sample *smp = p->sample[j];
      if (label_num(p, smp, "thread_id") != (int64_t)b[i].tid)
        continue;
      if (smp->n_location_id && strcmp(fn_name(p, smp->location_id[0]), "pprt_signals_blocked") == 0)
        blocked_ns += smp->value[1];
      else
        sampled_ns += smp->value[1];
    }
    double got = (double)(blocked_ns + sampled_ns) / 1e9;
    print_message("%s: %.3f s of CPU, %.3f s under pprt_signals_blocked, %.3f s sampled\n",
                  i == 0 ? "created under a full mask" : "blocks every signal itself", b[i].cpu,
                  (double)blocked_ns / 1e9, (double)sampled_ns / 1e9);
    assert_true(got >= 0.9 * b[i].cpu);
    assert_true(got <= 1.05 * b[i].cpu + 0.01);
  }
  const char *c = profile_comment(p, "signals blocked:");
  print_message("%s\n", c ? c : "(no comment)");
  assert_non_null(c);
  pprt__profile_decoded_free(p);
  free(m.data);
  for (int i = 0; i < 2; i++) {
    pthread_mutex_lock(&b[i].mu);
    b[i].release = 1;
    pthread_cond_broadcast(&b[i].cv);
    pthread_mutex_unlock(&b[i].mu);
    pthread_join(th[i], NULL);
  }
}

/* ---- fairness ------------------------------------------------------------------- */

struct fair_arg {
  double seconds;
  uint64_t tid;
};

static void *fair_thread(void *p) {
  struct fair_arg *a = p;
  double end = thread_cpu() + a->seconds;
  a->tid = pprt__os_thread_id();
  while (thread_cpu() < end)
    pprt_test_burn_10(20000);
  return NULL;
}

/* Percent of the sampled CPU time that went to the first of two threads,
 * which used the same CPU time. */
static double first_share(pprt_timer_mode mode, double seconds) {
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 100, 0, mode, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  struct fair_arg args[2] = {{seconds, 0}, {seconds, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, fair_thread, &args[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  Pprt__Profile *p = stop_and_decode(&m);
  int64_t n[2] = {0, 0};
  for (size_t i = 0; i < p->n_sample; i++) {
    int64_t tid = label_num(p, p->sample[i], "thread_id");
    for (int t = 0; t < 2; t++)
      if (tid == (int64_t)args[t].tid)
        n[t] += p->sample[i]->value[1];
  }
  pprt__profile_decoded_free(p);
  free(m.data);
  assert_true(n[0] + n[1] > 0);
  print_message("%s: %.3f / %.3f s sampled\n",
                mode == PPRT_TIMER_PROCESS ? "process timer"
                : mode == PPRT_TIMER_AUTO  ? "auto"
                                           : "per-thread timers",
                (double)n[0] / 1e9, (double)n[1] / 1e9);
  return 100.0 * (double)n[0] / (double)(n[0] + n[1]);
}

/* Asserted on the source auto picks (what users get): the task clock where
 * perf events are allowed, else per-thread timers. Per-thread timers beside
 * the clock are printed: under ASan they once split 470 / 369 samples for
 * 2 x 3 s at 100 Hz (more than the 300 each that their CPU time allows),
 * not seen in other runs; kept in view, not asserted. */
static void test_fairness(void **state) {
  (void)state;
  if (has_perf() || has_thread_timers()) {
    double share = first_share(PPRT_TIMER_AUTO, 3.0 * scale());
    assert_true(share > 45 && share < 55);
    if (has_perf() && has_thread_timers())
      print_message("per-thread timers: first thread %.1f%% (not asserted)\n",
                    first_share(PPRT_TIMER_PER_THREAD, 3.0 * scale()));
  } else {
    print_message("no per-thread sources here: fairness not asserted\n");
  }
  double skew = first_share(PPRT_TIMER_PROCESS, 3.0 * scale());
  print_message("process timer: first thread %.1f%% (known to be uneven; not asserted)\n", skew);
}

/* ---- stacks ---------------------------------------------------------------------- */

__attribute__((noinline)) static int recurse(int depth, double seconds) {
  if (depth == 0) {
    mix(seconds);
    return 0;
  }
  int r = recurse(depth - 1, seconds);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return r + 1;
}

static void test_deep_recursion_truncated(void **state) {
  (void)state;
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 250, 0, 0, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  recurse(300, 0.5);
  Pprt__Profile *p = stop_and_decode(&m);
  size_t deepest = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (p->sample[i]->n_location_id > deepest)
      deepest = p->sample[i]->n_location_id;
  assert_int_equal(deepest, 64);
  /* Caller frames are right too, not only the leaf: samples taken inside
   * the recursion show `recurse` above the leaf (this caught pcs read as
   * the wrong width on i386). */
  int caller_named = 0;
  for (size_t i = 0; i < p->n_sample && !caller_named; i++)
    for (size_t j = 1; j < p->sample[i]->n_location_id; j++)
      if (strncmp(fn_name(p, p->sample[i]->location_id[j]), "recurse", 7) == 0)
        caller_named = 1;
  assert_true(caller_named);
  /* and no frame is a null or near-null address, which is what pcs read
   * at the wrong width give */
  for (size_t i = 0; i < p->n_location; i++)
    if (p->location[i]->mapping_id != 0)
      assert_true(p->location[i]->address >= 4096);
  pprt__profile_decoded_free(p);
  free(m.data);
}

/* A leaf that uses the frame pointer register for data: the walk must stop
 * at the garbage, and the sample still counts with its leaf pc. */
WORKLOAD void pprt_test_garbage_fp(double seconds);
void pprt_test_garbage_fp(double seconds) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) {
#if defined(__x86_64__)
    /* rbp is saved in r8 rather than pushed: no stack writes here. */
    __asm__ volatile("mov %%rbp, %%r8\n\t"
                     "mov $0x7ffffff0dea8, %%rbp\n\t"
                     "mov $2000000, %%ecx\n"
                     "1: dec %%ecx\n\t"
                     "jnz 1b\n\t"
                     "mov %%r8, %%rbp" ::: "rcx", "r8", "memory", "cc");
#elif defined(__i386__)
    __asm__ volatile("mov %%ebp, %%edx\n\t"
                     "mov $0xbadf00d0, %%ebp\n\t"
                     "mov $2000000, %%ecx\n"
                     "1: dec %%ecx\n\t"
                     "jnz 1b\n\t"
                     "mov %%edx, %%ebp" ::: "ecx", "edx", "memory", "cc");
#elif defined(__aarch64__)
    __asm__ volatile("mov x9, x29\n\t"
                     "mov x29, #0xdea8\n\t"
                     "movk x29, #0x7fff, lsl #32\n\t"
                     "movz x10, #0x8480\n\t"
                     "movk x10, #0x1e, lsl #16\n" /* 2,000,000 */
                     "1: subs x10, x10, #1\n\t"
                     "b.ne 1b\n\t"
                     "mov x29, x9" ::: "x9", "x10", "memory", "cc");
#else
    SPIN(2000000, 7);
#endif
  }
}

static void test_leaf_without_frame_pointer(void **state) {
  (void)state;
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 250, 0, 0, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  pprt_test_garbage_fp(1.0 * scale());
  Pprt__Profile *p = stop_and_decode(&m);
  int64_t n = leaf_samples(p, "pprt_test_garbage_fp");
  print_message("%lld samples with a garbage frame pointer\n", (long long)n);
  assert_true(n > 50);
  pprt__profile_decoded_free(p);
  free(m.data);
}

/* ---- the program's own SIGPROF, cycles, pending ticks, fork ------------------------ */

static volatile sig_atomic_t own_hits;
static void own_handler(int sig) {
  (void)sig;
  own_hits++;
}

static void test_program_handler_kept(void **state) {
  (void)state;
  struct sigaction sa, old, now;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = own_handler;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGPROF, &sa, &old), 0);
  membuf m = {0};
  assert_int_equal(pprt_cpu_start(NULL, (pprt_writer){mem_write, &m}), 0);
  own_hits = 0;
  for (int i = 0; i < 5; i++)
    raise(SIGPROF); /* not a profiling tick: the program's */
  assert_int_equal(own_hits, 5);
  mix(0.2);
  Pprt__Profile *p = stop_and_decode(&m);
  pprt__profile_decoded_free(p);
  free(m.data);
  assert_int_equal(sigaction(SIGPROF, NULL, &now), 0);
  assert_ptr_equal(now.sa_handler, own_handler);
  raise(SIGPROF);
  assert_int_equal(own_hits, 6);
  sigaction(SIGPROF, &old, NULL);
}

/* Resident KiB, after handing free memory back: each session's reader is
 * a new thread, and glibc may give each its own malloc arena, which keeps
 * what libdw's large buffers used at a write (9-14 MiB more over 200
 * cycles, none of it live: 0.5 MiB with MALLOC_ARENA_MAX=1). */
static long rss_kib(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
      rss = 0;
    fclose(f);
  }
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_start_stop_cycles_leak_nothing(void **state) {
  (void)state;
  membuf m = {0};
  /* One cycle first, so lazily created things exist before counting. */
  assert_int_equal(pprt_cpu_start(NULL, (pprt_writer){mem_write, &m}), 0);
  assert_int_equal(pprt_cpu_stop(), 0);
  int fds = count_dir("/proc/self/fd"), tasks = count_dir("/proc/self/task");
  int timers = count_timers();
  long rss = rss_kib();
  for (int i = 0; i < 200; i++) {
    m.len = 0;
    assert_int_equal(pprt_cpu_start(NULL, (pprt_writer){mem_write, &m}), 0);
    assert_int_equal(pprt_cpu_start(NULL, (pprt_writer){mem_write, &m}), -EBUSY);
    pprt_test_burn_10(20000);
    assert_int_equal(pprt_cpu_stop(), 0);
  }
  assert_int_equal(pprt_cpu_stop(), -EPIPE);
  print_message("after 200 cycles: fds %d->%d, threads %d->%d, timers %d->%d, rss %ld->%ld KiB\n",
                fds, count_dir("/proc/self/fd"), tasks, count_dir("/proc/self/task"), timers,
                count_timers(), rss, rss_kib());
  assert_int_equal(count_dir("/proc/self/fd"), fds);
  assert_int_equal(count_dir("/proc/self/task"), tasks);
  assert_int_equal(count_timers(), timers);
  if (!UNDER_ASAN)
    assert_true(rss_kib() - rss < 4096);
  free(m.data);
}

static void *register_and_spin(void *arg) {
  (void)arg;
  pprt_thread_register();
  mix(0.05);
  return NULL;
}

/* Descriptors that are perf events (the reader's own transient /proc
 * reads are not counted). */
static int count_perf_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char path[300], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = '\0';
      n += strstr(target, "perf_event") != NULL;
    }
  }
  closedir(d);
  return n;
}

/* A thread that exits gives back its sampling clock's descriptor at once,
 * not at stop; a running session owns one per live thread. */
static void test_thread_exit_releases_clock(void **state) {
  (void)state;
  if (!has_perf()) {
    print_message("perf task clock not available here: skipped\n");
    skip();
  }
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 100, 0, PPRT_TIMER_PERF, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  mix(0.01);
  int fds = count_perf_fds();
  for (int i = 0; i < 20; i++) {
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, register_and_spin, NULL), 0);
    pthread_join(th, NULL);
  }
  int after = count_perf_fds();
  print_message("perf event descriptors with the session running: %d before 20 threads, %d "
                "after\n", fds, after);
  assert_true(fds >= 1); /* this thread's clock */
  assert_true(after <= fds);
  Pprt__Profile *p = stop_and_decode(&m);
  pprt__profile_decoded_free(p);
  free(m.data);
}

struct spinner {
  double cpu;
  uint64_t tid;
};

static void *register_and_measure(void *arg) {
  struct spinner *sp = arg;
  pprt_thread_register();
  sp->tid = pprt__os_thread_id();
  double a = thread_cpu();
  mix(0.2);
  sp->cpu = thread_cpu() - a;
  return NULL;
}

static int budget_child(void) {
  struct rlimit rl = {32, 32};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 1;
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 1000, 0, PPRT_TIMER_AUTO, 0, 0};
  CHILD_CHECK(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}) == 0);
  struct spinner sp[12];
  pthread_t th[12];
  for (int i = 0; i < 12; i++)
    CHILD_CHECK(pthread_create(&th[i], NULL, register_and_measure, &sp[i]) == 0);
  for (int i = 0; i < 12; i++)
    pthread_join(th[i], NULL);
  CHILD_CHECK(pprt_cpu_stop() == 0);
  Pprt__Profile *p = NULL;
  char err[256];
  CHILD_CHECK(pprt__profile_decode(m.data, m.len, &p, err, sizeof err) == 0);
  const char *why = profile_comment(p, "got per-thread CPU timers");
  printf("%s\n", why ? why : "(no budget comment)");
  CHILD_CHECK(why != NULL);
  /* every thread sampled, whichever source it got */
  for (int i = 0; i < 12; i++) {
    int64_t ns = 0;
    for (size_t j = 0; j < p->n_sample; j++)
      if (label_num(p, p->sample[j], "thread_id") == (int64_t)sp[i].tid)
        ns += p->sample[j]->value[1];
    printf("thread %d: %.3f s of CPU, %.3f s sampled\n", i, sp[i].cpu, (double)ns / 1e9);
    CHILD_CHECK(ns > 0);
  }
  pprt__profile_decoded_free(p);
  free(m.data);
  return 0;
}

/* Clocks are descriptors: with a limit of 32, at most 8 threads get one and
 * the rest CPU timers, all sampled, and the comments say so. */
static void test_clock_descriptor_budget(void **state) {
  (void)state;
  if (!has_perf()) {
    print_message("perf task clock not available here: skipped\n");
    skip();
  }
  in_child(budget_child, "descriptor budget");
}

static void test_bad_options(void **state) {
  (void)state;
  membuf m = {0};
  pprt_writer w = {mem_write, &m};
  pprt_cpu_options o = {sizeof o, -1, 0, 0, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, w), -EINVAL);
  o.hz = 100;
  o.max_depth = 1000;
  assert_int_equal(pprt_cpu_start(&o, w), -EINVAL);
  o.max_depth = 0;
  o.timer = (pprt_timer_mode)7;
  assert_int_equal(pprt_cpu_start(&o, w), -EINVAL);
  assert_int_equal(pprt_cpu_start(NULL, (pprt_writer){NULL, NULL}), -EINVAL);
}

/* From SIG_DFL: ticks left pending at stop find SIG_IGN, not death. */
static void test_stop_with_ticks_pending(void **state) {
  (void)state;
  signal(SIGPROF, SIG_DFL);
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 1000, 0, PPRT_TIMER_PROCESS, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, (pprt_writer){mem_write, &m}), 0);
  sigset_t prof, old;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, &old);
  mix(0.1); /* ticks arrive and stay pending */
  sigset_t pending;
  sigpending(&pending);
  int was_pending = sigismember(&pending, SIGPROF);
  assert_int_equal(pprt_cpu_stop(), 0);
  pthread_sigmask(SIG_SETMASK, &old, NULL); /* delivered now */
  raise(SIGPROF);
  print_message("a tick was pending at stop: %s; still alive\n", was_pending ? "yes" : "no");
  struct sigaction now;
  sigaction(SIGPROF, NULL, &now);
  assert_ptr_equal(now.sa_handler, SIG_IGN);
  free(m.data);
  signal(SIGPROF, SIG_DFL);
}

static void test_fork_and_exec(void **state) {
  (void)state;
  membuf m = {0};
  assert_int_equal(pprt_cpu_start(NULL, (pprt_writer){mem_write, &m}), 0);
  mix(0.1);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: no session, nothing written into the parent's output. */
    mix(0.1);
    if (pprt_cpu_stop() != -EPIPE)
      _exit(3);
    if (pprt_cpu_start(NULL, (pprt_writer){mem_write, &m}) != 0 || pprt_cpu_stop() != 0)
      _exit(4);
    execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
    _exit(5);
  }
  assert_true(pid > 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 7);
  mix(0.1);
  Pprt__Profile *p = stop_and_decode(&m);
  assert_true(total_samples(p, NULL) > 0);
  pprt__profile_decoded_free(p);
  free(m.data);
}

/* A failed assertion leaves its session running; stop it so the next test
 * starts clean instead of failing with -EBUSY. */
static int stop_leftover(void **state) {
  (void)state;
  pprt_cpu_stop();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_bad_options, stop_leftover),
      cmocka_unit_test_teardown(test_program_handler_kept, stop_leftover),
      cmocka_unit_test_teardown(test_stop_with_ticks_pending, stop_leftover),
      cmocka_unit_test_teardown(test_fork_and_exec, stop_leftover),
      cmocka_unit_test_teardown(test_deep_recursion_truncated, stop_leftover),
      cmocka_unit_test_teardown(test_leaf_without_frame_pointer, stop_leftover),
      cmocka_unit_test_teardown(test_start_stop_cycles_leak_nothing, stop_leftover),
      cmocka_unit_test_teardown(test_thread_exit_releases_clock, stop_leftover),
      cmocka_unit_test_teardown(test_clock_descriptor_budget, stop_leftover),
      cmocka_unit_test_teardown(test_fairness, stop_leftover),
      cmocka_unit_test_teardown(test_accuracy_random_one_thread, stop_leftover),
      cmocka_unit_test_teardown(test_accuracy_random_four_threads, stop_leftover),
      cmocka_unit_test_teardown(test_accuracy_random_timers, stop_leftover),
      cmocka_unit_test_teardown(test_periodic_not_aliased, stop_leftover),
      cmocka_unit_test_teardown(test_perf_rate_above_tick, stop_leftover),
      cmocka_unit_test_teardown(test_fallback_when_perf_refused, stop_leftover),
      cmocka_unit_test_teardown(test_blocked_threads_counted, stop_leftover),
      cmocka_unit_test_teardown(test_user_only_clock_counts_kernel_time, stop_leftover),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
