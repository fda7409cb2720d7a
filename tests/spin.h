/* Busy work for the test programs and the clocks it is measured with:
 * the calling thread's and the process's CPU time, rounds of arithmetic
 * that no compiler removes, and a spin for some CPU time. The tests look
 * for samples in the functions that do this work, so the rounds are
 * inlined into the function that asks for them. */
#ifndef PPRT_TESTS_SPIN_H
#define PPRT_TESTS_SPIN_H

#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

/* The calling thread's CPU time, in nanoseconds and in seconds. */
static inline uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The whole process's CPU time in seconds: user and system, every thread
 * (pprt's included). */
static inline double process_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* n steps of an LCG from x; the empty asm keeps each step. */
static inline __attribute__((always_inline)) unsigned long lcg_rounds(unsigned long x, int n) {
  for (int i = 0; i < n; i++) {
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

/* Spins for ns of the calling thread's CPU time, reading the clock every
 * `rounds` steps; the steps' result goes to *sink. */
static inline __attribute__((always_inline)) void spin_cpu(uint64_t ns, int rounds,
                                                           volatile unsigned long *sink) {
  uint64_t end = thread_cpu_ns() + ns;
  unsigned long x = *sink;
  while (thread_cpu_ns() < end)
    x = lcg_rounds(x, rounds);
  *sink = x;
}

#endif /* PPRT_TESTS_SPIN_H */
