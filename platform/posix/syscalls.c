/* The system call table (core/syscalls.h): its defaults, the libc calls
 * every POSIX system has, and the entries' names for tests. The Linux-only
 * entries' defaults come from the backend (platform/linux/syscalls.c, or
 * platform/posix/syscalls_none.c elsewhere). */
#include "core/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *default_mmap(void *addr, size_t len, int prot, int flags, int fd, int64_t offset) {
  return mmap(addr, len, prot, flags, fd, (off_t)offset);
}

static int default_open(const char *path, int flags, mode_t mode) {
  return open(path, flags, mode);
}

#define ENTRY(fn) ((pprt__syscall_fn)(fn))

static const struct {
  const char *name;
  pprt__syscall_fn fn;
} defaults[PPRT__SYS_COUNT] = {
    [PPRT__SYS_TIMER_CREATE] = {"timer_create", ENTRY(pprt__sys_default_timer_create)},
    [PPRT__SYS_PERF_EVENT_OPEN] = {"perf_event_open", ENTRY(pprt__sys_default_perf_event_open)},
    [PPRT__SYS_SIGACTION] = {"sigaction", ENTRY(sigaction)},
    [PPRT__SYS_RT_SIGACTION] = {"rt_sigaction", ENTRY(pprt__sys_default_rt_sigaction)},
    [PPRT__SYS_SIGALTSTACK] = {"sigaltstack", ENTRY(sigaltstack)},
    [PPRT__SYS_MMAP] = {"mmap", ENTRY(default_mmap)},
    [PPRT__SYS_PTHREAD_CREATE] = {"pthread_create", ENTRY(pthread_create)},
    [PPRT__SYS_OPEN] = {"open", ENTRY(default_open)},
    [PPRT__SYS_WRITE] = {"write", ENTRY(write)},
};

_Atomic(pprt__syscall_fn) pprt__syscalls[PPRT__SYS_COUNT] = {
    [PPRT__SYS_TIMER_CREATE] = ENTRY(pprt__sys_default_timer_create),
    [PPRT__SYS_PERF_EVENT_OPEN] = ENTRY(pprt__sys_default_perf_event_open),
    [PPRT__SYS_SIGACTION] = ENTRY(sigaction),
    [PPRT__SYS_RT_SIGACTION] = ENTRY(pprt__sys_default_rt_sigaction),
    [PPRT__SYS_SIGALTSTACK] = ENTRY(sigaltstack),
    [PPRT__SYS_MMAP] = ENTRY(default_mmap),
    [PPRT__SYS_PTHREAD_CREATE] = ENTRY(pthread_create),
    [PPRT__SYS_OPEN] = ENTRY(default_open),
    [PPRT__SYS_WRITE] = ENTRY(write),
};

static int find(const char *name) {
  for (int i = 0; name && i < PPRT__SYS_COUNT; i++)
    if (strcmp(defaults[i].name, name) == 0)
      return i;
  return -1;
}

int pprt__syscall_set(const char *name, pprt__syscall_fn fn) {
  int i = find(name);
  if (i < 0)
    return -ENOENT;
  atomic_store(&pprt__syscalls[i], fn ? fn : defaults[i].fn);
  return 0;
}

pprt__syscall_fn pprt__syscall_get(const char *name) {
  int i = find(name);
  return i < 0 ? NULL : atomic_load(&pprt__syscalls[i]);
}

pprt__syscall_fn pprt__syscall_get_default(const char *name) {
  int i = find(name);
  return i < 0 ? NULL : defaults[i].fn;
}

const char *pprt__syscall_next(const char *name) {
  int i = name ? find(name) + 1 : 0;
  return (name && i == 0) || i >= PPRT__SYS_COUNT ? NULL : defaults[i].name;
}
