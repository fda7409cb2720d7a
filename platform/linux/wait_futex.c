/* Reader wait/wake on a Linux futex (PPRT_READER=blocking). FUTEX_WAKE is a
 * plain system call, safe to make from a signal handler. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/platform.h"

const int pprt__os_reader_blocks = 1;

/* The futex syscall reads the word as a plain 32-bit integer; atomic_uint
 * has the same size and representation on every Linux ABI. */
_Static_assert(sizeof(atomic_uint) == 4, "futex word must be 32 bits");

int pprt__os_wait(atomic_uint *word, unsigned expected, uint64_t timeout_ns) {
  struct timespec ts, *tsp = NULL;
  if (timeout_ns != 0) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
    ts.tv_nsec = (long)(timeout_ns % 1000000000u);
    tsp = &ts;
  }
  /* EAGAIN (word changed), EINTR and ETIMEDOUT all mean "look again". */
  syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
  return 0;
}

void pprt__os_wake(atomic_uint *word) {
  int saved = errno; /* a signal handler must leave errno as it found it */
  syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
  errno = saved;
}
