/* The Linux-only entries of the system call table (core/syscalls.h) on the
 * other systems, which never call them: -1 with ENOSYS. */
#include <errno.h>

#include "core/syscalls.h"

long pprt__sys_default_timer_create(int clockid, void *sevp, int *id) {
  (void)clockid, (void)sevp, (void)id;
  errno = ENOSYS;
  return -1;
}

long pprt__sys_default_perf_event_open(void *attr, pid_t pid, int cpu, int group_fd,
                                       unsigned long flags) {
  (void)attr, (void)pid, (void)cpu, (void)group_fd, (void)flags;
  errno = ENOSYS;
  return -1;
}

long pprt__sys_default_rt_sigaction(int sig, const void *act, void *old, size_t mask_bytes) {
  (void)sig, (void)act, (void)old, (void)mask_bytes;
  errno = ENOSYS;
  return -1;
}
