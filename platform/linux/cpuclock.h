/* The clock id of a Linux thread's CPU time, for timer_create (timer.c) and
 * clock_gettime (thread_info.c): any thread of the process may name another
 * thread's clock this way, which pthread_getcpuclockid cannot do for a
 * thread pprt did not create. */
#ifndef PPRT_PLATFORM_LINUX_CPUCLOCK_H
#define PPRT_PLATFORM_LINUX_CPUCLOCK_H

#include <stdint.h>

/* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of the kernel's
 * posix-timers.h: the inverted id shifted left by 3, with the per-thread
 * bit (4) and the scheduler-runtime clock (2). */
static inline int pprt__linux_thread_cpu_clock(uint64_t tid) {
  return (int)((~(unsigned)tid << 3) | 6u);
}

#endif /* PPRT_PLATFORM_LINUX_CPUCLOCK_H */
