/* Reader wait/wake by polling (PPRT_READER=poll): the reader sleeps at most
 * 100 ms at a time and writers never make a system call to wake it. The only
 * mode on Darwin, where no wakeup primitive is async-signal-safe (Go issue
 * 61768); available everywhere so it is tested on Linux too. */
#include <errno.h>
#include <time.h>

#include "core/platform.h"

const int pprt__os_reader_blocks = 0;

int pprt__os_wait(atomic_uint *word, unsigned expected, uint64_t timeout_ns) {
  if (atomic_load_explicit(word, memory_order_acquire) != expected)
    return 0;
  uint64_t ns = PPRT__OS_POLL_NS;
  if (timeout_ns != 0 && timeout_ns < ns)
    ns = timeout_ns;
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  nanosleep(&ts, NULL); /* EINTR just ends the nap early */
  return 0;
}

void pprt__os_wake(atomic_uint *word) {
  (void)word;
}
