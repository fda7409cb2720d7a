/* The process-wide CPU timer, setitimer(ITIMER_PROF), on every OS: SIGPROF
 * each time the process has used another period of CPU time, delivered to
 * whichever thread is running then. */
#include <errno.h>
#include <sys/time.h>

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
    it.it_value = it.it_interval;
  }
  if (setitimer(ITIMER_PROF, &it, NULL) != 0)
    return -errno;
  return 0;
}
