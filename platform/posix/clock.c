/* Clocks through clock_gettime, shared by Linux, FreeBSD and Darwin (10.12+). */
#include <time.h>

#include "core/platform.h"

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pprt__os_monotonic_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

uint64_t pprt__os_wall_ns(void) {
  return clock_ns(CLOCK_REALTIME);
}

uint64_t pprt__os_thread_cpu_self_ns(void) {
  return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}
