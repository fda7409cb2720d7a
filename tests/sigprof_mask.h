/* SIGPROF in signal masks, for the tests of a program that blocks it
 * (sigmask_victim.c, test_cpu_sigmask.c). */
#ifndef PPRT_TESTS_SIGPROF_MASK_H
#define PPRT_TESTS_SIGPROF_MASK_H

#include <pthread.h>
#include <signal.h>

/* A set of SIGPROF alone. */
static inline sigset_t prof_set(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPROF);
  return s;
}

/* Whether pthread_sigmask reports SIGPROF blocked for the calling thread:
 * the kernel's mask, or under the preload library, which interposes
 * pthread_sigmask, the mask the program is told it has. */
static inline int prof_masked(void) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  return sigismember(&cur, SIGPROF) == 1;
}

#endif /* PPRT_TESTS_SIGPROF_MASK_H */
