/* When a Linux thread started: field 22 (starttime) of
 * /proc/self/task/<tid>/stat, in clock ticks since boot. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/syscalls.h"

int pprt__os_thread_start_time(uint64_t tid, uint64_t *start) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%llu/stat", (unsigned long long)tid);
  int fd = pprt__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return errno == ENOENT ? -ESRCH : -errno;
  ssize_t n;
  do
    n = read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  int e = errno;
  close(fd);
  if (n < 0)
    return e == ESRCH ? -ESRCH : -e;
  buf[n] = '\0';
  /* The name (field 2) is in parentheses and may hold spaces and ')':
   * fields are counted from the last ')', which is field 2's end. */
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return -EINVAL;
  p++;
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (p == NULL)
      return -EINVAL;
  }
  char *end;
  unsigned long long v = strtoull(p + 1, &end, 10);
  if (end == p + 1)
    return -EINVAL;
  *start = (uint64_t)v + 1; /* never 0: a thread started at boot's tick 0 */
  return 0;
}
