/* The workload bench/cpu profiles: identical busy threads doing a fixed
 * amount of arithmetic, each under a call stack of a given depth and in a
 * leaf function of its own (leaf_a on even threads, leaf_b on odd ones).
 * Each leaf sits in a section of its own, whose bounds the linker gives us
 * (__start_/__stop_ symbols), so a profile's samples can be split between
 * the threads from the leaf pc alone, in any profile format.
 *
 * It knows nothing of pprt or gperftools, with two exceptions the bench
 * needs:
 *   - gperftools' per-thread timers tick only on threads that called
 *     ProfilerRegisterThread() (profile-handler.cc starts a thread's timer in
 *     RegisterThread and nowhere else); each worker calls it when the
 *     symbol is there, as gperftools tells its users to;
 *   - sampling signals (SIGPROF, or whatever signal a perf_event source
 *     chose) are counted per thread, by a counting handler put in front of
 *     the profiler's (bench/sigcount.h).
 *
 * Usage: cpu_work calibrate SECONDS
 *          prints "ips=N": leaf iterations per CPU-second, one thread
 *        cpu_work run THREADS ITERATIONS DEPTH
 *          prints one line: wall_ns (from the first worker's start to the
 *          last one's end), cpu_ns (the workers' CPU time over their work),
 *          process_cpu_ns (the whole process's over the same window:
 *          workers, main, any profiler thread), signals (sampling signals
 *          on the workers over their work), main_signals, preempted (the
 *          workers' involuntary context switches), leaf_a and leaf_b (as
 *          lo:hi), and each thread's cpu:signals */
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

extern const char __start_pprt_bench_leaf_a[], __stop_pprt_bench_leaf_a[];
extern const char __start_pprt_bench_leaf_b[], __stop_pprt_bench_leaf_b[];

/* The two leaves do the same work; their constants differ so that no
 * compiler folds them into one function. Each is in section
 * pprt_bench_<name>. */
#define LEAF(name, seed, increment)                                                                \
  __attribute__((noinline, section("pprt_bench_" #name))) uint64_t name(uint64_t n);               \
  uint64_t name(uint64_t n) {                                                                      \
    uint64_t x = UINT64_C(seed);                                                                   \
    for (uint64_t i = 0; i < n; i++) {                                                             \
      x = x * UINT64_C(6364136223846793005) + UINT64_C(increment);                                 \
      __asm__ volatile("" : "+r"(x));                                                              \
    }                                                                                              \
    return x;                                                                                      \
  }

LEAF(leaf_a, 88172645463325252, 1442695040888963407)
LEAF(leaf_b, 88172645463325253, 1442695040888963409)

typedef struct worker {
  int index;
  int depth;
  uint64_t iterations;
  pthread_barrier_t *start;
  uint64_t cpu_ns;       /* over its work */
  unsigned long signals; /* sampling signals delivered to it */
  long preempted;        /* involuntary context switches over its work */
  uint64_t result;
} worker;

/* depth frames of this function above the leaf. The asm after the call
 * keeps it from being a tail call (or a loop). */
__attribute__((noinline)) static uint64_t descend(const worker *w, int depth) {
  if (depth <= 0)
    return (w->index & 1) ? leaf_b(w->iterations) : leaf_a(w->iterations);
  uint64_t r = descend(w, depth - 1);
  __asm__ volatile("" : "+r"(r));
  return r;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  window_enter(w->start);
  struct rusage ru0, ru1;
  getrusage(RUSAGE_THREAD, &ru0);
  uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  unsigned long signals0 = sigcount_thread;
  w->result = descend(w, w->depth);
  w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  w->signals = sigcount_thread - signals0;
  getrusage(RUSAGE_THREAD, &ru1);
  w->preempted = ru1.ru_nivcsw - ru0.ru_nivcsw;
  window_leave();
  return NULL;
}

static int calibrate(double seconds) {
  uint64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID), spent;
  uint64_t n = 0, sink = 0;
  do {
    sink += leaf_a(1000000);
    n += 1000000;
  } while ((spent = clock_ns(CLOCK_THREAD_CPUTIME_ID) - start) < (uint64_t)(seconds * 1e9));
  printf("ips=%.0f sink=%d\n", (double)n / ((double)spent / 1e9), (int)(sink & 1));
  return 0;
}

static int run(int nthreads, uint64_t iterations, int depth) {
  static worker w[MAX_THREADS];
  static pthread_t th[MAX_THREADS];
  pthread_barrier_t start;
  char counted[256];
  sigcount_install(counted, sizeof counted);
  nworkers = nthreads;
  pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
  for (int i = 0; i < nthreads; i++) {
    w[i] = (worker){.index = i, .depth = depth, .iterations = iterations, .start = &start};
    if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
      fprintf(stderr, "cpu_work: pthread_create failed\n");
      return 1;
    }
  }
  pthread_barrier_wait(&start);
  for (int i = 0; i < nthreads; i++)
    pthread_join(th[i], NULL);
  uint64_t wall = window_t1 - window_t0, process_cpu = window_c1 - window_c0;
  uint64_t cpu = 0;
  unsigned long signals = 0;
  long preempted = 0;
  uint64_t sink = 0;
  for (int i = 0; i < nthreads; i++) {
    cpu += w[i].cpu_ns;
    signals += w[i].signals;
    preempted += w[i].preempted;
    sink += w[i].result;
  }
  printf("wall_ns=%llu cpu_ns=%llu process_cpu_ns=%llu signals=%lu main_signals=%lu "
         "preempted=%ld leaf_a=%p:%p leaf_b=%p:%p sink=%d",
         (unsigned long long)wall, (unsigned long long)cpu, (unsigned long long)process_cpu,
         signals, sigcount_thread, preempted, (const void *)__start_pprt_bench_leaf_a,
         (const void *)__stop_pprt_bench_leaf_a, (const void *)__start_pprt_bench_leaf_b,
         (const void *)__stop_pprt_bench_leaf_b, (int)(sink & 1));
  for (int i = 0; i < nthreads; i++)
    printf(" t%d=%llu:%lu", i, (unsigned long long)w[i].cpu_ns, w[i].signals);
  printf("\n");
  pthread_barrier_destroy(&start);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "calibrate") == 0)
    return calibrate(atof(argv[2]));
  if (argc == 5 && strcmp(argv[1], "run") == 0) {
    int nthreads = atoi(argv[2]), depth = atoi(argv[4]);
    uint64_t iterations = strtoull(argv[3], NULL, 10);
    if (nthreads >= 1 && nthreads <= MAX_THREADS && depth >= 0 && depth <= 1000)
      return run(nthreads, iterations, depth);
  }
  fprintf(stderr, "usage: %s calibrate SECONDS | run THREADS ITERATIONS DEPTH\n", argv[0]);
  return 2;
}
