/* Where the main executable is (core/platform.h, "the program's files"):
 * dyld's _NSGetExecutablePath, resolved, as it can be the relative path
 * the program was started by. */
#include <errno.h>
#include <limits.h>
#include <mach-o/dyld.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"

int pprt__os_exe_path(char *buf, size_t len) {
  char raw[PATH_MAX], real[PATH_MAX];
  uint32_t size = sizeof raw;
  if (_NSGetExecutablePath(raw, &size) != 0)
    return -ENAMETOOLONG;
  if (realpath(raw, real) == NULL)
    return -errno;
  size_t n = strlen(real);
  if (n >= len)
    return -ENAMETOOLONG;
  memcpy(buf, real, n + 1);
  return 0;
}
