/* What pprt learns about a Linux process's threads: the list of them
 * (/proc/self/task, so timers also cover threads pprt did not see start),
 * their names (/proc/self/task/<tid>/comm) and the calling thread's stack
 * bounds (pthread_getattr_np). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/platform.h"

int pprt__os_thread_each(int (*fn)(uint64_t tid, void *ctx), void *ctx) {
  /* /proc/self is the process (the thread group), whichever thread asks. */
  DIR *dir = opendir("/proc/self/task");
  if (dir == NULL)
    return -errno;
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
  int fd = open(path, O_RDONLY | O_CLOEXEC);
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
