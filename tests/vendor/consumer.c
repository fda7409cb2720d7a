/* A program that uses pprt the way a vendoring project does: through the
 * public header and the pprt::pprt target only. The runtime library has
 * no HTTP endpoint (that is libpprt_http), whatever the build. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pprt.h>

int main(void) {
  if (strcmp(pprt_version(), "") == 0)
    return 1;
  printf("pprt %s: %s\n", pprt_version(), pprt_strerror(-EBUSY));
  if (pprt_http_start(NULL) != -ENOTSUP)
    return 1;
  return strcmp(pprt_strerror(-EBUSY), "already in use") == 0 ? 0 : 1;
}
