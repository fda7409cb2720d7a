/* The Linux-only entries of the system call table (core/syscalls.h): raw
 * system calls, made directly because glibc before 2.34 keeps timer_create
 * in librt, has no perf_event_open wrapper, and its sigaction adds a
 * restorer of its own that the raw installer (signal_raw.c) replaces. */
#include <sys/syscall.h>
#include <unistd.h>

#include "core/syscalls.h"

long pprt__sys_default_timer_create(int clockid, void *sevp, int *id) {
  return syscall(SYS_timer_create, clockid, sevp, id);
}

long pprt__sys_default_perf_event_open(void *attr, pid_t pid, int cpu, int group_fd,
                                       unsigned long flags) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

long pprt__sys_default_rt_sigaction(int sig, const void *act, void *old, size_t mask_bytes) {
  return syscall(SYS_rt_sigaction, sig, act, old, mask_bytes);
}
