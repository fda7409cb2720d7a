/* The command line (core/platform.h): sysctl KERN_PROC_ARGS gives the
 * arguments NUL-terminated, with no procfs needed. */
#include <errno.h>
#include <sys/types.h>
#include <sys/sysctl.h>
#include <unistd.h>

#include "core/platform.h"

int pprt__os_cmdline(char *buf, size_t len, size_t *outlen) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_ARGS, (int)getpid()};
  size_t n = len;
  if (sysctl(mib, 4, buf, &n, NULL, 0) != 0 && errno != ENOMEM)
    return -EIO;
  *outlen = n < len ? n : len;
  return 0;
}
