/* The timed window of a bench/cpu workload (cpu_work.c, cpu_periodic.c):
 * from the first worker past the start barrier to the last one done, as
 * the workers see it (main may wake late on a busy machine), in wall time
 * and in the process's CPU time. Each worker calls window_enter before its
 * work and window_leave after it; main sets nworkers first. */
#ifndef PPRT_BENCH_WORKLOAD_WINDOW_H
#define PPRT_BENCH_WORKLOAD_WINDOW_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static atomic_int started, finished;
static int nworkers;
static uint64_t window_t0, window_c0, window_t1, window_c1;

/* gperftools' per-thread timers tick only on threads that called
 * ProfilerRegisterThread(), so a worker calls it when the symbol is there;
 * then it waits for the others at start. */
static void window_enter(pthread_barrier_t *start) {
  void (*register_thread)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "ProfilerRegisterThread");
  if (register_thread)
    register_thread();
  pthread_barrier_wait(start);
  if (atomic_fetch_add(&started, 1) == 0) {
    window_t0 = clock_ns(CLOCK_MONOTONIC);
    window_c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  }
}

static void window_leave(void) {
  if (atomic_fetch_add(&finished, 1) == nworkers - 1) {
    window_t1 = clock_ns(CLOCK_MONOTONIC);
    window_c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  }
}

#endif /* PPRT_BENCH_WORKLOAD_WINDOW_H */
