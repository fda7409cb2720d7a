/* End-to-end tests of the CPU profiler in this process: real timers, real
 * SIGPROF, real stacks, the profile decoded and checked.
 *
 *   accuracy     60/30/10% workloads in 1 and 4 threads: shares within 3
 *                points over >= 3,000 samples; samples x period within 5%
 *                of the CPU time getrusage reports
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
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/platform.h"
#include "core/profile.h"
#include "pprt.h"
#include "tests/membuf.h"

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

static const char *fn_name(const Pprt__Profile *p, uint64_t loc_id) {
  for (size_t i = 0; i < p->n_location; i++) {
    const Pprt__Location *l = p->location[i];
    if (l->id != loc_id)
      continue;
    if (l->n_line == 0)
      return "?";
    for (size_t j = 0; j < p->n_function; j++)
      if (p->function[j]->id == l->line[0]->function_id)
        return p->string_table[p->function[j]->name];
  }
  return "?";
}

/* Whether a function's name is `want` or a compiler's clone of it
 * (want.constprop.0, want.isra.0, want.part.0): optimizers rename. */
static int name_is(const char *name, const char *want) {
  size_t n = strlen(want);
  return strncmp(name, want, n) == 0 && (name[n] == '\0' || name[n] == '.');
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

/* Workload functions keep their own code at every optimization level: not
 * inlined, and not cloned (GCC's .constprop/.isra copies) where the
 * compiler knows the attribute; names are matched up to a clone suffix
 * anyway (name_is). */
#if defined(__GNUC__) && !defined(__clang__)
#define WORKLOAD __attribute__((noinline, noclone))
#else
#define WORKLOAD __attribute__((noinline))
#endif

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

static void run_work(struct work *w) {
  static const int share[NFN] = {60, 30, 10};
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)pprt__os_thread_id();
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

static const char *comment_with(const Pprt__Profile *p, const char *needle) {
  for (size_t i = 0; i < p->n_comment; i++)
    if (strstr(p->string_table[p->comment[i]], needle))
      return p->string_table[p->comment[i]];
  return NULL;
}

static unsigned long long comment_count(const Pprt__Profile *p, const char *needle) {
  unsigned long long v = 0;
  const char *c = comment_with(p, needle);
  assert_non_null(c);
  assert_non_null(strchr(c, '('));
  assert_int_equal(sscanf(strchr(c, '('), "(%llu", &v), 1);
  return v;
}

/* Runs `threads` workers of one shape under the profiler and checks each
 * function's share of the samples against its share of the CPU time the
 * workers measured around its calls. The tolerance is 4 standard
 * deviations of a share of n independent samples, sqrt(p(1-p)/n). A timer
 * tick that stands for several periods (overrun) is counted as several
 * samples but is one draw: there the deviation grows by the samples per
 * signal, from the profile's comments. */
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
  double fold = signals ? (double)samples / (double)signals : 1.0;
  const char *src = comment_with(p, "source");
  print_message("%s, %d thread(s), %d Hz, %s: %lld samples in the workload (%.3f per signal)\n",
                shape == RANDOM ? "random" : shape == PERIODIC ? "periodic" : "lockstep", threads,
                hz, src ? strstr(src, "source") : "?", (long long)n, fold);
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
  pprt__profile_decoded_free(p);
  free(m.data);
}

static void test_accuracy_random_one_thread(void **state) {
  (void)state;
  check_shares(PPRT_TIMER_AUTO, 250, RANDOM, 1, 12.0);
}

static void test_accuracy_random_four_threads(void **state) {
  (void)state;
  check_shares(PPRT_TIMER_AUTO, 250, RANDOM, 4, 12.0);
}

/* The same random workload on the tick-driven per-thread timers (the
 * fallback where perf events are refused). */
static void test_accuracy_random_timers(void **state) {
  (void)state;
  if (!has_thread_timers()) {
    print_message("no per-thread CPU timers here: skipped\n");
    skip();
  }
  check_shares(PPRT_TIMER_PER_THREAD, 250, RANDOM, 2, 8.0);
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
  check_shares(PPRT_TIMER_PERF, 1000, PERIODIC, 2, 6.0);
  check_shares(PPRT_TIMER_PERF, 1000, LOCKSTEP, 1, 5.0);
}

/* The rate asked is the rate delivered: 1000 Hz asked gives about 1,000
 * samples per CPU-second of each thread, four times the scheduler tick.
 * The count of a Poisson process at rate r over CPU time T has standard
 * deviation sqrt(rT); each signal's delivery takes a little CPU time
 * between intervals (1% allowed for it). */
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
  double want = 1000 * w.total, sigma = sqrt(want);
  print_message("1000 Hz asked: %lld samples over %.3f s of the thread's CPU = %.1f per second "
                "(allowed: %.0f +- %.0f)\n",
                (long long)n, w.total, (double)n / w.total, want, 4 * sigma + 0.01 * want);
  assert_true(fabs((double)n - want) <= 4 * sigma + 0.01 * want);
  pprt__profile_decoded_free(p);
  free(m.data);
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

/* Percent of samples of the first of two threads. */
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
        n[t] += p->sample[i]->value[0];
  }
  pprt__profile_decoded_free(p);
  free(m.data);
  assert_true(n[0] + n[1] > 0);
  print_message("%s timer: %lld / %lld samples\n",
                mode == PPRT_TIMER_PROCESS ? "process" : "per-thread",
                (long long)n[0], (long long)n[1]);
  return 100.0 * (double)n[0] / (double)(n[0] + n[1]);
}

static void test_fairness(void **state) {
  (void)state;
  if (has_thread_timers()) {
    double share = first_share(PPRT_TIMER_PER_THREAD, 3.0 * scale());
    assert_true(share > 45 && share < 55);
  } else {
    print_message("no per-thread timers here: fairness not asserted\n");
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

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d && strcmp(path, "/proc/self/fd") == 0)
    d = opendir("/dev/fd"); /* macOS, FreeBSD */
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int count_timers(void) {
  FILE *f = fopen("/proc/self/timers", "r");
  if (!f)
    return -1;
  int n = 0;
  char line[256];
  while (fgets(line, sizeof line, f))
    n += strncmp(line, "ID:", 3) == 0;
  fclose(f);
  return n;
}

static long rss_kib(void) {
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
      cmocka_unit_test_teardown(test_fairness, stop_leftover),
      cmocka_unit_test_teardown(test_accuracy_random_one_thread, stop_leftover),
      cmocka_unit_test_teardown(test_accuracy_random_four_threads, stop_leftover),
      cmocka_unit_test_teardown(test_accuracy_random_timers, stop_leftover),
      cmocka_unit_test_teardown(test_periodic_not_aliased, stop_leftover),
      cmocka_unit_test_teardown(test_perf_rate_above_tick, stop_leftover),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
