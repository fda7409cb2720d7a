/* The command line (core/platform.h): the arguments dyld saved
 * (_NSGetArgv), joined with NULs. */
#include <crt_externs.h>
#include <string.h>

#include "core/platform.h"

int pprt__os_cmdline(char *buf, size_t len, size_t *outlen) {
  int argc = *_NSGetArgc();
  char **argv = *_NSGetArgv();
  size_t n = 0;
  for (int i = 0; i < argc && n < len; i++) {
    size_t k = strlen(argv[i]) + 1;
    if (k > len - n)
      k = len - n;
    memcpy(buf + n, argv[i], k);
    n += k;
  }
  *outlen = n;
  return 0;
}
