/* Per-thread CPU timers where the OS has none that pprt can use (Darwin,
 * FreeBSD): the profiler falls back to the process timer.
 *
 * Darwin has no timer_create at all. FreeBSD has timer_create with
 * SIGEV_THREAD_ID, but its POSIX timers run only on CLOCK_REALTIME and
 * CLOCK_MONOTONIC, not on a thread's CPU-time clock (kern_time.c). */
#include <errno.h>

#include "core/platform.h"

int pprt__os_thread_timer_start(pprt__os_thread_timer *t, uint64_t tid, int hz, uintptr_t cookie) {
  (void)t;
  (void)tid;
  (void)hz;
  (void)cookie;
  return -ENOTSUP;
}

int pprt__os_thread_timer_stop(pprt__os_thread_timer *t) {
  t->armed = 0;
  return 0;
}
