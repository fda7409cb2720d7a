/* The command line (core/platform.h): /proc/self/cmdline already holds the
 * arguments NUL-terminated, as the endpoint serves them. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/syscalls.h"

int pprt__os_cmdline(char *buf, size_t len, size_t *outlen) {
  int fd = pprt__sys_open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return -EIO;
  size_t n = 0;
  while (n < len) {
    ssize_t r = read(fd, buf + n, len - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  *outlen = n;
  return 0;
}
