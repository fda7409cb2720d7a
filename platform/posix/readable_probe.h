/* The loop behind pprt__os_readable on Linux and FreeBSD, whose probe is a
 * sigprocmask system call that reads an aligned block of `block` bytes (the
 * kernel's signal set) and fails with EFAULT when it cannot. An aligned
 * block never crosses a page; a word that straddles two blocks is probed
 * in both. AS-safe when faults() is, and leaves errno as it found it. */
#ifndef PPRT_PLATFORM_POSIX_READABLE_PROBE_H
#define PPRT_PLATFORM_POSIX_READABLE_PROBE_H

#include <errno.h>
#include <stdint.h>

/* faults(p): 1 when the block at p cannot be read. */
static inline int pprt__readable_by_probe(uintptr_t addr, uintptr_t block,
                                          int (*faults)(uintptr_t p)) {
  if (addr > UINTPTR_MAX - (sizeof(uintptr_t) - 1))
    return 0;
  uintptr_t first = addr & ~(block - 1);
  uintptr_t last = (addr + sizeof(uintptr_t) - 1) & ~(block - 1);
  /* A null set means "no new mask" to the kernel: nothing would be read. */
  if (first == 0)
    return 0;
  int saved = errno;
  int readable = 1;
  for (uintptr_t p = first; readable && p <= last; p += block)
    readable = !faults(p);
  errno = saved;
  return readable;
}

#endif /* PPRT_PLATFORM_POSIX_READABLE_PROBE_H */
