/* Per-thread sampling clocks where the OS has none that pprt can use
 * (Darwin, FreeBSD): the CPU profiler uses its timers instead.
 *
 * FreeBSD's hwpmc needs a kernel module and root; Darwin's kperf is
 * private. Neither has a per-thread software CPU clock that signals. */
#include <errno.h>

#include "core/platform.h"

int pprt__os_sample_clock_open(pprt__os_sample_clock *c, uint64_t tid) {
  (void)tid;
  c->fd = -1;
  c->flags = 0;
  return -ENOTSUP;
}

int pprt__os_sample_clock_start(const pprt__os_sample_clock *c, uint64_t first_ns) {
  (void)c;
  (void)first_ns;
  return -ENOTSUP;
}

int pprt__os_sample_clock_rearm(const pprt__os_sample_clock *c, uint64_t period_ns) {
  (void)c;
  (void)period_ns;
  return -ENOTSUP;
}

void pprt__os_sample_clock_close(pprt__os_sample_clock *c) {
  c->fd = -1;
}

int pprt__os_sigprof_clock_fd(const siginfo_t *info) {
  (void)info;
  return -1;
}
