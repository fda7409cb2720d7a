/* Linux thread ids: the kernel's tid, as gettid(2) returns it. */
#include <sys/syscall.h>
#include <unistd.h>

#include "core/platform.h"

uint64_t pprt__os_thread_id(void) {
  /* The raw syscall: glibc only gained a gettid() wrapper in 2.30. */
  return (uint64_t)syscall(SYS_gettid);
}
