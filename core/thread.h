/* What pprt keeps per thread, and thread registration (pprt_thread_register,
 * the preload library's pthread_create hook, pprt_cpu_start for its
 * caller): the alternate signal stack, the stack bounds the unwinder trusts,
 * the cached thread id, and what the program's signal mask says of SIGPROF
 * while pprt keeps SIGPROF deliverable (core/sigmask.c). */
#ifndef PPRT_CORE_THREAD_H
#define PPRT_CORE_THREAD_H

#include <signal.h>
#include <stdint.h>

#include "core/platform.h"
#include "core/unwind.h"

typedef struct pprt__thread {
  uint64_t tid;              /* 0 until first asked (and after fork) */
  pprt__stack_bounds stack;  /* 0, 0 unless registered */
  pprt__os_altstack alt;
  int registered;
  int creating_internal; /* inside pprt's own pthread_create (the reader) */
  int clock_fd1;         /* 1 + the last sampling clock this thread's handler served, or 0 */
  /* core/sigmask.c: written by the thread, read by its signal handler. */
  volatile sig_atomic_t sigprof_lifted; /* the program's mask blocks SIGPROF;
                                           the kernel's does not */
  volatile sig_atomic_t sigprof_held;   /* a SIGPROF not pprt's came meanwhile */
  struct {                              /* what its siginfo said */
    int code;
    pid_t pid;
    uid_t uid;
    union sigval value;
  } sigprof_info;
} pprt__thread;

/* The calling thread's state. AS-safe: initial-exec TLS, no allocation. */
pprt__thread *pprt__thread_self(void);

/* The calling thread's id, cached. AS-safe. */
uint64_t pprt__thread_id(void);

/* After fork, in the child: the forking thread has a new id. */
void pprt__thread_forget_id(void);

/* For the CPU profiler's handler, given a signal that is not pprt's: 1 when
 * the calling thread's program mask blocks it, in which case it is held
 * (with its siginfo; a second one merges with it, as the kernel merges a
 * pending signal) and delivered when the program unblocks it, and the
 * handler must not forward it now; 0 when it should be forwarded. AS-safe.
 * Implemented in core/sigmask.c. */
int pprt__thread_defer_signal(int sig, const siginfo_t *info);

#endif /* PPRT_CORE_THREAD_H */
