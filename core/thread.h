/* What pprt keeps per thread, and thread registration (pprt_thread_register,
 * the preload library's pthread_create hook, pprt_cpu_start for its
 * caller): the alternate signal stack, the stack bounds the unwinder trusts,
 * and the cached thread id. */
#ifndef PPRT_CORE_THREAD_H
#define PPRT_CORE_THREAD_H

#include <stdint.h>

#include "core/platform.h"
#include "core/unwind.h"

typedef struct pprt__thread {
  uint64_t tid;              /* 0 until first asked (and after fork) */
  pprt__stack_bounds stack;  /* 0, 0 unless registered */
  pprt__os_altstack alt;
  int registered;
  int creating_internal; /* inside pprt's own pthread_create (the reader) */
} pprt__thread;

/* The calling thread's state. AS-safe: initial-exec TLS, no allocation. */
pprt__thread *pprt__thread_self(void);

/* The calling thread's id, cached. AS-safe. */
uint64_t pprt__thread_id(void);

/* After fork, in the child: the forking thread has a new id. */
void pprt__thread_forget_id(void);

#endif /* PPRT_CORE_THREAD_H */
