/* The number parser of core/parse.h. */
#include <errno.h>
#include <stdlib.h>

#include "core/parse.h"

int pprt__parse_int(const char *s, long long lo, long long hi, long long *out) {
  int saved = errno;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  int bad = errno != 0 || end == s || *end != '\0' || v < lo || v > hi;
  errno = saved;
  if (bad)
    return -EINVAL;
  *out = v;
  return 0;
}
