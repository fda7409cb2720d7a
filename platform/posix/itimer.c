/* The process-wide CPU timer, setitimer(ITIMER_PROF), on every OS: SIGPROF
 * each time the process has used another period of CPU time, delivered to
 * whichever thread is running then.
 *
 * The first expiry is drawn at random in (0, period]; the later ones are a
 * period apart. Kernels check this timer on their clock tick (Linux's
 * scheduler tick, FreeBSD's statclock, XNU's AST on the tick), so a sample
 * lands on the tick grid whatever expiry is asked, and re-arming with a
 * random period from the handler would cost a system call per sample
 * without moving a sample off that grid; it would also lose the kernel's
 * exact accounting of whole periods that the weights rely on. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/platform.h"

int pprt__os_process_timer_set(int hz) {
  if (hz < 0)
    return -EINVAL;
  struct itimerval it = {{0, 0}, {0, 0}};
  if (hz > 0) {
    long us = 1000000 / hz;
    if (us < 1)
      us = 1;
    it.it_interval.tv_sec = us / 1000000;
    it.it_interval.tv_usec = (suseconds_t)(us % 1000000);
    /* splitmix64 of the time and a counter: the first expiry in (0, us]. */
    static atomic_uint calls;
    uint64_t x = pprt__os_monotonic_ns() ^ ((uint64_t)getpid() << 20) ^
                 ((uint64_t)atomic_fetch_add(&calls, 1) << 40);
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    long first = 1 + (long)(x % (uint64_t)us);
    it.it_value.tv_sec = first / 1000000;
    it.it_value.tv_usec = (suseconds_t)(first % 1000000);
  }
  if (setitimer(ITIMER_PROF, &it, NULL) != 0)
    return -errno;
  return 0;
}
