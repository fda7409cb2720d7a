/* The file-descriptor writer, the pprt_writer most programs use. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "pprt.h"
#include "core/syscalls.h"

static int fd_write(void *ctx, const void *data, size_t len) {
  int fd = (int)(intptr_t)ctx;
  const char *p = data;
  while (len > 0) {
    ssize_t n = pprt__sys_write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (n == 0)
      return -EIO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

pprt_writer pprt_writer_fd(int fd) {
  pprt_writer w = {fd_write, (void *)(intptr_t)fd};
  return w;
}
