/* Thread start times where pprt has none to read (FreeBSD, Darwin): the
 * CPU profiler then does not check a thread id for reuse. */
#include <errno.h>

#include "core/platform.h"

int pprt__os_thread_start_time(uint64_t tid, uint64_t *start) {
  (void)tid;
  (void)start;
  return -ENOTSUP;
}
