/* Busy work for the test programs and the clocks it is measured with:
 * the calling thread's and the process's CPU time, rounds of arithmetic
 * that no compiler removes, and a spin for some CPU time. The tests look
 * for samples in the functions that do this work, so the rounds expand in
 * the function that asks for them. */
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

/* n steps of an LCG on the unsigned long lvalue x; the empty asm keeps
 * each step. Macros, not functions: inlined functions are frames of their
 * own in a profile's lines, and the work must be in the function the tests
 * name. */
#define LCG_ROUNDS(x, n)                                                                           \
  do {                                                                                             \
    for (int lcg_i_ = 0; lcg_i_ < (n); lcg_i_++) {                                                 \
      (x) = (x)*6364136223846793005ul + 1442695040888963407ul;                                     \
      __asm__ volatile("" : "+r"(x));                                                              \
    }                                                                                              \
  } while (0)

/* Spins for ns of the calling thread's CPU time, reading the clock every
 * `rounds` steps; the steps' result goes to the volatile unsigned long
 * sink. */
#define SPIN_CPU(ns, rounds, sink)                                                                 \
  do {                                                                                             \
    uint64_t spin_end_ = thread_cpu_ns() + (ns);                                                   \
    unsigned long spin_x_ = (sink);                                                                \
    while (thread_cpu_ns() < spin_end_)                                                            \
      LCG_ROUNDS(spin_x_, rounds);                                                                 \
    (sink) = spin_x_;                                                                              \
  } while (0)

#endif /* PPRT_TESTS_SPIN_H */
