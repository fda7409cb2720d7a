/* The system calls pprt makes through one table, so that tests can make
 * them fail (SQLite's os_unix.c aSyscall, without linker tricks: -Wl,--wrap
 * is GNU-only and macOS's ld has nothing like it).
 *
 * The calls are those that a start path or a write depends on and that can
 * fail for reasons outside the program's control: timer_create and
 * perf_event_open (Linux, raw system calls), sigaction and the raw
 * rt_sigaction (Linux x86_64/i386), sigaltstack, mmap, pthread_create, open
 * and write. Each entry behaves exactly as the call it stands for (-1 and
 * errno, or pthread_create's error number), so a call site changes only in
 * the name it calls. Entries that an OS does not use (the Linux ones
 * elsewhere) fail with ENOSYS.
 *
 * Cost: a relaxed atomic load of a pointer and an indirect call, on paths
 * that make a system call anyway; none of them is on the signal handler's
 * per-sample path. AS-safe wherever the call it stands for is.
 *
 * Internal: not in include/pprt.h, and every name is pprt__-prefixed. */
#ifndef PPRT_CORE_SYSCALLS_H
#define PPRT_CORE_SYSCALLS_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The table's entries, in the order pprt__syscall_next walks them. */
enum pprt__syscall_id {
  PPRT__SYS_TIMER_CREATE,    /* long (int clockid, void *kernel_sigevent, int *id) */
  PPRT__SYS_PERF_EVENT_OPEN, /* long (void *attr, pid_t pid, int cpu, int group, unsigned long) */
  PPRT__SYS_SIGACTION,       /* libc sigaction */
  PPRT__SYS_RT_SIGACTION,    /* long (int sig, const void *act, void *old, size_t mask_bytes) */
  PPRT__SYS_SIGALTSTACK,
  PPRT__SYS_MMAP, /* the offset as int64_t, whatever off_t is */
  PPRT__SYS_PTHREAD_CREATE,
  PPRT__SYS_OPEN, /* mode always given: open(path, flags, mode) */
  PPRT__SYS_WRITE,
  PPRT__SYS_COUNT
};

/* Any entry, stored untyped; each call site casts to its own type. */
typedef void (*pprt__syscall_fn)(void);

typedef long (*pprt__sys_timer_create_fn)(int clockid, void *sevp, int *id);
typedef long (*pprt__sys_perf_event_open_fn)(void *attr, pid_t pid, int cpu, int group_fd,
                                             unsigned long flags);
typedef int (*pprt__sys_sigaction_fn)(int sig, const struct sigaction *act, struct sigaction *old);
typedef long (*pprt__sys_rt_sigaction_fn)(int sig, const void *act, void *old, size_t mask_bytes);
typedef int (*pprt__sys_sigaltstack_fn)(const stack_t *ss, stack_t *old);
typedef void *(*pprt__sys_mmap_fn)(void *addr, size_t len, int prot, int flags, int fd,
                                   int64_t offset);
typedef int (*pprt__sys_pthread_create_fn)(pthread_t *t, const pthread_attr_t *attr,
                                           void *(*fn)(void *), void *arg);
typedef int (*pprt__sys_open_fn)(const char *path, int flags, mode_t mode);
typedef ssize_t (*pprt__sys_write_fn)(int fd, const void *data, size_t len);

extern _Atomic(pprt__syscall_fn) pprt__syscalls[PPRT__SYS_COUNT];

/* For tests (SQLite's xSetSystemCall, xGetSystemCall, xNextSystemCall).
 * Entries are named as the call: "timer_create", "perf_event_open",
 * "sigaction", "rt_sigaction", "sigaltstack", "mmap", "pthread_create",
 * "open", "write".
 *
 * set: installs fn for the named entry; NULL puts the default back.
 * Errors: -ENOENT (no such entry). Takes effect for calls that start after
 * it; a test changes entries while none of pprt's threads depends on them
 * or accepts that a call in flight uses either.
 * get: the entry's current function, NULL for an unknown name.
 * get_default: what the entry calls when nothing is installed.
 * next: the name after `name` (the first for NULL), NULL after the last. */
int pprt__syscall_set(const char *name, pprt__syscall_fn fn);
pprt__syscall_fn pprt__syscall_get(const char *name);
pprt__syscall_fn pprt__syscall_get_default(const char *name);
const char *pprt__syscall_next(const char *name);

#define PPRT__SYSCALL(id, type)                                                                    \
  ((type)atomic_load_explicit(&pprt__syscalls[id], memory_order_relaxed))

/* The call sites' names. */
static inline long pprt__sys_timer_create(int clockid, void *sevp, int *id) {
  return PPRT__SYSCALL(PPRT__SYS_TIMER_CREATE, pprt__sys_timer_create_fn)(clockid, sevp, id);
}

static inline long pprt__sys_perf_event_open(void *attr, pid_t pid, int cpu, int group_fd,
                                             unsigned long flags) {
  return PPRT__SYSCALL(PPRT__SYS_PERF_EVENT_OPEN, pprt__sys_perf_event_open_fn)(attr, pid, cpu,
                                                                                group_fd, flags);
}

static inline int pprt__sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  return PPRT__SYSCALL(PPRT__SYS_SIGACTION, pprt__sys_sigaction_fn)(sig, act, old);
}

static inline long pprt__sys_rt_sigaction(int sig, const void *act, void *old, size_t mask_bytes) {
  return PPRT__SYSCALL(PPRT__SYS_RT_SIGACTION, pprt__sys_rt_sigaction_fn)(sig, act, old,
                                                                          mask_bytes);
}

static inline int pprt__sys_sigaltstack(const stack_t *ss, stack_t *old) {
  return PPRT__SYSCALL(PPRT__SYS_SIGALTSTACK, pprt__sys_sigaltstack_fn)(ss, old);
}

static inline void *pprt__sys_mmap(void *addr, size_t len, int prot, int flags, int fd,
                                   int64_t offset) {
  return PPRT__SYSCALL(PPRT__SYS_MMAP, pprt__sys_mmap_fn)(addr, len, prot, flags, fd, offset);
}

static inline int pprt__sys_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                                           void *(*fn)(void *), void *arg) {
  return PPRT__SYSCALL(PPRT__SYS_PTHREAD_CREATE, pprt__sys_pthread_create_fn)(t, attr, fn, arg);
}

static inline int pprt__sys_open(const char *path, int flags, mode_t mode) {
  return PPRT__SYSCALL(PPRT__SYS_OPEN, pprt__sys_open_fn)(path, flags, mode);
}

static inline ssize_t pprt__sys_write(int fd, const void *data, size_t len) {
  return PPRT__SYSCALL(PPRT__SYS_WRITE, pprt__sys_write_fn)(fd, data, len);
}

/* The defaults of the OS-specific entries, from the backend (Linux: the raw
 * system calls; elsewhere: -1 with ENOSYS). */
long pprt__sys_default_timer_create(int clockid, void *sevp, int *id);
long pprt__sys_default_perf_event_open(void *attr, pid_t pid, int cpu, int group_fd,
                                       unsigned long flags);
long pprt__sys_default_rt_sigaction(int sig, const void *act, void *old, size_t mask_bytes);

#endif /* PPRT_CORE_SYSCALLS_H */
