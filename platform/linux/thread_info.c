/* What pprt learns about a Linux process's threads: the list of them
 * (/proc/self/task, so timers also cover threads pprt did not see start),
 * their names (/proc/self/task/<tid>/comm), the signals they block
 * (/proc/self/task/<tid>/status), their CPU time (the thread's CPU-time
 * clock) and the calling thread's stack bounds (pthread_getattr_np). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/syscalls.h"
#include "platform/linux/cpuclock.h"

int pprt__os_thread_each(int (*fn)(uint64_t tid, void *ctx), void *ctx) {
  /* /proc/self is the process (the thread group), whichever thread asks. */
  int fd = pprt__sys_open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  DIR *dir = fdopendir(fd);
  if (dir == NULL) {
    int err = errno;
    close(fd);
    return -err;
  }
  int r = 0;
  struct dirent *e;
  while (r == 0 && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue; /* "." and ".." */
    r = fn(strtoull(e->d_name, NULL, 10), ctx);
  }
  closedir(dir);
  return r;
}

int pprt__os_thread_name(uint64_t tid, char *buf, size_t len) {
  if (len == 0)
    return -EINVAL;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%llu/comm", (unsigned long long)tid);
  int fd = pprt__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return errno == ENOENT ? -ESRCH : -errno;
  char name[64]; /* comm holds at most 15 characters and a newline */
  ssize_t n;
  do
    n = read(fd, name, sizeof name - 1);
  while (n < 0 && errno == EINTR);
  int err = errno;
  close(fd);
  if (n < 0)
    return err == ESRCH ? -ESRCH : -err; /* the thread exited after open */
  if (n > 0 && name[n - 1] == '\n')
    n--;
  if ((size_t)n >= len)
    n = (ssize_t)len - 1;
  memcpy(buf, name, (size_t)n);
  buf[n] = '\0';
  return 0;
}

/* Reads /proc/self/task/<tid>/<file> into buf, NUL-terminated; its length,
 * or a negative errno (-ESRCH when the thread is gone). */
static ssize_t read_task_file(uint64_t tid, const char *file, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%llu/%s", (unsigned long long)tid, file);
  int fd = pprt__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return errno == ENOENT ? -ESRCH : -errno;
  size_t n = 0;
  while (n < len - 1) {
    ssize_t r = read(fd, buf + n, len - 1 - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int err = errno;
      close(fd);
      return err == ESRCH ? -ESRCH : -err; /* the thread exited after open */
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

int pprt__os_thread_blocks(uint64_t tid, int sig, int *blocked) {
  if (sig < 1 || sig > 64)
    return -EINVAL;
  char buf[4096]; /* status is about 1.5 KiB; SigBlk is in its first half */
  ssize_t n = read_task_file(tid, "status", buf, sizeof buf);
  if (n < 0)
    return (int)n;
  /* "SigBlk:\t" and 16 hex digits: bit sig - 1 is signal sig. */
  const char *p = strstr(buf, "\nSigBlk:");
  if (p == NULL)
    return -ENOTSUP;
  char *end;
  unsigned long long mask = strtoull(p + 8, &end, 16);
  if (end == p + 8)
    return -ENOTSUP;
  *blocked = (int)((mask >> (sig - 1)) & 1u);
  return 0;
}

int pprt__os_thread_cpu_ns(uint64_t tid, uint64_t *ns) {
  if (tid == 0 || tid > INT_MAX)
    return -ESRCH;
  struct timespec ts;
  /* The kernel answers EINVAL for a clock whose thread is not in this
   * process, which is what a thread that has exited looks like. */
  if (clock_gettime((clockid_t)pprt__linux_thread_cpu_clock(tid), &ts) != 0)
    return errno == EINVAL ? -ESRCH : -errno;
  *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  return 0;
}

int pprt__os_thread_stack(uintptr_t *lo, uintptr_t *hi) {
  pthread_attr_t attr;
  int err = pthread_getattr_np(pthread_self(), &attr);
  if (err != 0)
    return -err;
  void *addr = NULL;
  size_t size = 0;
  err = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (err != 0)
    return -err;
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
  return 0;
}
