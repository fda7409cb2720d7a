/* The periodic workload bench/cpu's parts 5-7 profile: threads that repeat
 * one short cycle of three functions, spin_60, spin_30 and spin_10, which
 * take 60%, 30% and 10% of it. Linux evaluates CPU timers on the scheduler
 * tick, so timer samples fall on a fixed grid of a thread's CPU time, and
 * a cycle commensurate with that grid is seen at a few phases only; this
 * program is how the bench shows it.
 *
 * Modes:
 *   work   each function runs a fixed number of loop iterations, its share
 *          of the cycle at the rate the bench calibrated (IPS): a fixed
 *          amount of work per cycle, whose length in CPU time drifts a
 *          little with the machine;
 *   clock  lockstep: cycle k is [k*P, (k+1)*P) of the monotonic clock, and
 *          each function spins until the CPU's counter reaches its
 *          boundary (0.6 P, 0.9 P, P), re-anchored to the clock each cycle:
 *          the program runs in phase with wall time, and so with the tick.
 *          The counter is read inline (rdtsc, cntvct_el0) so that the
 *          spinning function is the leaf; elsewhere clock_gettime stands in.
 *
 * The truth: each thread reads its CPU time (CLOCK_THREAD_CPUTIME_ID)
 * between the calls and adds each interval to the function called in it;
 * iteration counts are never trusted. The clock reads' own cost lands in
 * those intervals but outside the functions (read_ns says what one costs).
 * Each function sits in a section of its own whose bounds the linker gives
 * (__start_/__stop_), so a profile's pcs are matched by address range,
 * whatever the compiler names or does to the function.
 *
 * It knows nothing of the profilers, except what bench/cpu_work.c also
 * does: it calls gperftools' ProfilerRegisterThread() in each worker when
 * the symbol is there, and counts the sampling signals (bench/sigcount.h).
 *
 * Usage: cpu_periodic calibrate SECONDS
 *          prints "ips=N": loop iterations per CPU-second, one thread
 *        cpu_periodic work CYCLE_NS CYCLES THREADS IPS
 *        cpu_periodic clock CYCLE_NS CYCLES THREADS
 *          prints one line: ns_60, ns_30, ns_10 (each function's CPU time,
 *          all workers), cpu_ns (the workers' CPU time over their run),
 *          process_cpu_ns and wall_ns (the whole process's CPU time and the
 *          wall time from the first worker's start to the last one's end),
 *          signals (sampling signals delivered to the workers), counted
 *          (the signal numbers watched), cycles (per worker), f60, f30,
 *          f10 (each function's address range, lo:hi), read_ns (one read
 *          of the thread's CPU clock); in work mode also, of the cycles in
 *          which the thread was not switched out, the mean CPU time (middle
 *          80%) of one that took no signal and no interruption (clean_ns),
 *          of one that took no signal but was interrupted (irq_ns), of one
 *          that took exactly one signal (hit_ns), and how many of each
 *          (clean_n, irq_n, hit_n) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sigcount.h"
#include "workload_window.h"

#define MAX_THREADS 64
#define MAX_CYCLES 100000000ull

#if defined(__has_attribute)
#if __has_attribute(noclone)
#define NOCLONE noclone,
#endif
#endif
#ifndef NOCLONE
#define NOCLONE
#endif

extern const char __start_pprt_bench_spin_60[], __stop_pprt_bench_spin_60[];
extern const char __start_pprt_bench_spin_30[], __stop_pprt_bench_spin_30[];
extern const char __start_pprt_bench_spin_10[], __stop_pprt_bench_spin_10[];

/* The CPU's counter, read without a call; ticks_per_ns converts. */
static inline __attribute__((always_inline)) uint64_t counter(void) {
#if defined(__x86_64__) || defined(__i386__)
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return clock_ns(CLOCK_MONOTONIC);
#endif
}

static double ticks_per_ns = 1;

/* Work mode: the loops read the counter every 64 rounds, and a gap longer
 * than gap_ticks between two reads is an interruption (an interrupt, a
 * signal), counted per thread. */
#define GAP_NS 2000
static uint64_t gap_ticks = UINT64_MAX;
static _Thread_local uint64_t t_gaps;

/* n rounds of an LCG, or (until != 0) rounds until the counter reaches
 * until; c differs per function so that no compiler folds them into one. */
static inline __attribute__((always_inline)) uint64_t spin(uint64_t n, uint64_t until,
                                                           uint64_t c) {
  uint64_t x = c;
  if (until == 0) {
    uint64_t last = counter();
    for (uint64_t i = 0; i < n; i++) {
      x = x * UINT64_C(6364136223846793005) + c;
      __asm__ volatile("" : "+r"(x));
      if ((i & 63) == 63) {
        uint64_t now = counter();
        t_gaps += now - last > gap_ticks;
        last = now;
      }
    }
    return x;
  }
  while (counter() < until)
    for (int i = 0; i < 64; i++) {
      x = x * UINT64_C(6364136223846793005) + c;
      __asm__ volatile("" : "+r"(x));
    }
  return x;
}

__attribute__((noinline, NOCLONE section("pprt_bench_spin_60"))) uint64_t spin_60(uint64_t n,
                                                                                 uint64_t until);
uint64_t spin_60(uint64_t n, uint64_t until) {
  return spin(n, until, UINT64_C(1442695040888963407));
}

__attribute__((noinline, NOCLONE section("pprt_bench_spin_30"))) uint64_t spin_30(uint64_t n,
                                                                                 uint64_t until);
uint64_t spin_30(uint64_t n, uint64_t until) {
  return spin(n, until, UINT64_C(1442695040888963409));
}

__attribute__((noinline, NOCLONE section("pprt_bench_spin_10"))) uint64_t spin_10(uint64_t n,
                                                                                 uint64_t until);
uint64_t spin_10(uint64_t n, uint64_t until) {
  return spin(n, until, UINT64_C(1442695040888963411));
}

static uint64_t (*const spins[3])(uint64_t, uint64_t) = {spin_60, spin_30, spin_10};
static const uint64_t share_permille[3] = {600, 300, 100};

/* Work mode's cycles, by what happened in them. */
enum { CY_CLEAN, CY_IRQ, CY_HIT, NCLASSES };

typedef struct worker {
  pthread_barrier_t *start;
  uint64_t ns[3];        /* CPU time in each function */
  uint64_t cpu_ns;       /* over the whole run */
  unsigned long signals; /* sampling signals delivered to it */
  uint64_t cycles;
  uint64_t sink;
  /* work mode: the CPU time of each cycle by class, up to cap of each */
  uint32_t *cyc[NCLASSES];
  size_t ncyc[NCLASSES], cap;
} worker;

/* What every worker does, fixed before they start. */
static int lockstep;
static uint64_t period_ns, ncycles, iterations[3];
static uint64_t end_cycle; /* lockstep: the clock cycle to stop at */

/* The thread's context switches so far. */
static long switches(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* One cycle of fixed work; the truth is the CPU clock between the calls.
 * The cycle's own CPU time is kept by what happened in it: the same work
 * with and without a signal, or an interrupt, in the same run, is what one
 * costs the thread (bench/cpu part 7). Cycles in which the thread was
 * switched out are not kept: the tick that switches a thread out is also
 * the one that fires its CPU timer, and the cold caches it comes back to
 * would be charged to the signal. switched: the count at the cycle's
 * start, updated. */
static void cycle_work(worker *w, long *switched) {
  uint64_t t[4], gaps0 = t_gaps;
  unsigned long signals0 = sigcount_thread;
  t[0] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (int f = 0; f < 3; f++) {
    w->sink += spins[f](iterations[f], 0);
    t[f + 1] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  }
  unsigned long got = sigcount_thread - signals0;
  for (int f = 0; f < 3; f++)
    w->ns[f] += t[f + 1] - t[f];
  long before = *switched;
  *switched = switches();
  uint64_t took = t[3] - t[0];
  if (took > UINT32_MAX || *switched != before || got > 1)
    return;
  int cls = got ? CY_HIT : t_gaps != gaps0 ? CY_IRQ : CY_CLEAN;
  if (w->ncyc[cls] < w->cap)
    w->cyc[cls][w->ncyc[cls]++] = (uint32_t)took;
}

/* One cycle in lockstep with the monotonic clock; 0 once past the end. */
static int cycle_clock(worker *w) {
  uint64_t now = clock_ns(CLOCK_MONOTONIC), c = counter();
  uint64_t k = now / period_ns, base = k * period_ns;
  if (k >= end_cycle)
    return 0;
  uint64_t until[3], t[4];
  for (int f = 0, edge = 0; f < 3; f++) {
    edge += (int)share_permille[f];
    uint64_t boundary = base + period_ns * (uint64_t)edge / 1000;
    /* A counter value past now: 0 means "iterations", so never 0. */
    until[f] = boundary > now ? c + (uint64_t)((double)(boundary - now) * ticks_per_ns) : c | 1;
  }
  t[0] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (int f = 0; f < 3; f++) {
    w->sink += spins[f](0, until[f]);
    t[f + 1] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  }
  for (int f = 0; f < 3; f++)
    w->ns[f] += t[f + 1] - t[f];
  return 1;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  window_enter(w->start);
  unsigned long signals0 = sigcount_thread;
  uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (lockstep) {
    while (cycle_clock(w))
      w->cycles++;
  } else {
    long switched = switches();
    for (; w->cycles < ncycles; w->cycles++)
      cycle_work(w, &switched);
  }
  w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  w->signals = sigcount_thread - signals0;
  window_leave();
  return NULL;
}

/* The counter's rate against the monotonic clock, over 20 ms asleep. */
static void calibrate_counter(void) {
  uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = counter();
  struct timespec nap = {0, 20000000};
  nanosleep(&nap, NULL);
  uint64_t t1 = clock_ns(CLOCK_MONOTONIC), c1 = counter();
  if (t1 > t0 && c1 > c0)
    ticks_per_ns = (double)(c1 - c0) / (double)(t1 - t0);
}

/* CPU ns per read of the thread's CPU clock. */
static double read_cost_ns(void) {
  uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t = t0;
  for (int i = 0; i < 1000; i++)
    t = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  return (double)(t - t0) / 1000;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The mean CPU time of all workers' cycles of a cls, over the middle 80%
 * of them: the times come in steps (what else the core runs), so a median
 * jumps, and a few cycles can be long for reasons of their own. 0 when
 * there are none. */
static double pooled_mean(const worker *w, int nthreads, int cls, size_t *count) {
  size_t n = 0;
  for (int i = 0; i < nthreads; i++)
    n += w[i].ncyc[cls];
  *count = n;
  uint32_t *all = n ? malloc(n * sizeof *all) : NULL;
  if (all == NULL)
    return 0;
  size_t k = 0;
  for (int i = 0; i < nthreads; i++) {
    size_t m = w[i].ncyc[cls];
    memcpy(all + k, w[i].cyc[cls], m * sizeof *all);
    k += m;
  }
  qsort(all, n, sizeof *all, cmp_u32);
  double sum = 0;
  size_t lo = n / 10, hi = n - n / 10;
  for (size_t i = lo; i < hi; i++)
    sum += all[i];
  free(all);
  return sum / (double)(hi - lo);
}

static int calibrate(double seconds) {
  uint64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID), spent;
  uint64_t n = 0, sink = 0;
  do {
    sink += spin_60(1000000, 0);
    n += 1000000;
  } while ((spent = clock_ns(CLOCK_THREAD_CPUTIME_ID) - start) < (uint64_t)(seconds * 1e9));
  printf("ips=%.0f sink=%d\n", (double)n / ((double)spent / 1e9), (int)(sink & 1));
  return 0;
}

static int run(int nthreads) {
  static worker w[MAX_THREADS];
  static pthread_t th[MAX_THREADS];
  char counted[256];
  sigcount_install(counted, sizeof counted);
  double read_ns = read_cost_ns();
  calibrate_counter();
  gap_ticks = (uint64_t)(GAP_NS * ticks_per_ns);
  if (lockstep) {
    end_cycle = clock_ns(CLOCK_MONOTONIC) / period_ns + 1 + ncycles;
  }
  pthread_barrier_t start;
  nworkers = nthreads;
  pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
  size_t cap = lockstep ? 0 : ncycles < (1u << 20) ? (size_t)ncycles : (1u << 20);
  for (int i = 0; i < nthreads; i++) {
    w[i] = (worker){.start = &start, .cap = cap};
    for (int cls = 0; cls < NCLASSES && cap; cls++)
      if ((w[i].cyc[cls] = malloc(cap * sizeof(uint32_t))) == NULL) {
        fprintf(stderr, "cpu_periodic: out of memory\n");
        return 1;
      }
    if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
      fprintf(stderr, "cpu_periodic: pthread_create failed\n");
      return 1;
    }
  }
  pthread_barrier_wait(&start);
  for (int i = 0; i < nthreads; i++)
    pthread_join(th[i], NULL);
  uint64_t ns[3] = {0, 0, 0}, cpu = 0, cycles = 0, sink = 0;
  unsigned long signals = 0;
  for (int i = 0; i < nthreads; i++) {
    for (int f = 0; f < 3; f++)
      ns[f] += w[i].ns[f];
    cpu += w[i].cpu_ns;
    signals += w[i].signals;
    cycles += w[i].cycles;
    sink += w[i].sink;
  }
  size_t ncyc[NCLASSES];
  double mean[NCLASSES];
  for (int cls = 0; cls < NCLASSES; cls++)
    mean[cls] = pooled_mean(w, nthreads, cls, &ncyc[cls]);
  printf("ns_60=%llu ns_30=%llu ns_10=%llu cpu_ns=%llu process_cpu_ns=%llu wall_ns=%llu "
         "signals=%lu counted=%s cycles=%llu f60=%p:%p f30=%p:%p f10=%p:%p read_ns=%.0f "
         "clean_ns=%.0f clean_n=%zu irq_ns=%.0f irq_n=%zu hit_ns=%.0f hit_n=%zu sink=%d\n",
         (unsigned long long)ns[0], (unsigned long long)ns[1], (unsigned long long)ns[2],
         (unsigned long long)cpu, (unsigned long long)(window_c1 - window_c0),
         (unsigned long long)(window_t1 - window_t0), signals, counted,
         (unsigned long long)(cycles / (uint64_t)nthreads),
         (const void *)__start_pprt_bench_spin_60, (const void *)__stop_pprt_bench_spin_60,
         (const void *)__start_pprt_bench_spin_30, (const void *)__stop_pprt_bench_spin_30,
         (const void *)__start_pprt_bench_spin_10, (const void *)__stop_pprt_bench_spin_10, read_ns,
         mean[CY_CLEAN], ncyc[CY_CLEAN], mean[CY_IRQ], ncyc[CY_IRQ], mean[CY_HIT], ncyc[CY_HIT],
         (int)(sink & 1));
  pthread_barrier_destroy(&start);
  for (int i = 0; i < nthreads; i++) {
    for (int cls = 0; cls < NCLASSES; cls++)
      free(w[i].cyc[cls]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "calibrate") == 0)
    return calibrate(atof(argv[2]));
  int work = argc == 6 && strcmp(argv[1], "work") == 0;
  int in_lockstep = argc == 5 && strcmp(argv[1], "clock") == 0;
  if (work || in_lockstep) {
    period_ns = strtoull(argv[2], NULL, 10);
    ncycles = strtoull(argv[3], NULL, 10);
    int nthreads = atoi(argv[4]);
    double ips = work ? atof(argv[5]) : 0;
    lockstep = in_lockstep;
    for (int f = 0; f < 3; f++)
      iterations[f] = (uint64_t)(ips * (double)period_ns / 1e9 * (double)share_permille[f] / 1000);
    if (period_ns >= 1000 && period_ns <= 1000000000 && ncycles >= 1 && ncycles <= MAX_CYCLES &&
        nthreads >= 1 && nthreads <= MAX_THREADS && (in_lockstep || ips > 0))
      return run(nthreads);
  }
  fprintf(stderr,
          "usage: %s calibrate SECONDS | work CYCLE_NS CYCLES THREADS IPS |"
          " clock CYCLE_NS CYCLES THREADS\n",
          argv[0]);
  return 2;
}
