/* Reader wait/wake on FreeBSD's umtx (PPRT_READER=blocking): the futex
 * equivalent. UMTX_OP_WAKE_PRIVATE is a plain system call, safe to make from
 * a signal handler. */
#include <errno.h>
#include <limits.h>
#include <sys/types.h>
#include <sys/umtx.h>
#include <time.h>

#include "core/platform.h"

const int pprt__os_reader_blocks = 1;

_Static_assert(sizeof(atomic_uint) == sizeof(u_int), "umtx word must be a u_int");

int pprt__os_wait(atomic_uint *word, unsigned expected, uint64_t timeout_ns) {
  struct timespec ts;
  void *size = NULL, *tsp = NULL;
  if (timeout_ns != 0) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
    ts.tv_nsec = (long)(timeout_ns % 1000000000u);
    /* A relative timespec: uaddr carries its size, uaddr2 points to it. */
    size = (void *)(uintptr_t)sizeof ts;
    tsp = &ts;
  }
  _umtx_op((void *)word, UMTX_OP_WAIT_UINT_PRIVATE, expected, size, tsp);
  return 0;
}

void pprt__os_wake(atomic_uint *word) {
  int saved = errno;
  _umtx_op((void *)word, UMTX_OP_WAKE_PRIVATE, INT_MAX, NULL, NULL);
  errno = saved;
}
