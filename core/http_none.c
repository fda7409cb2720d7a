/* The HTTP endpoint in a build without libmicrohttpd (PPRT_HTTP off). */
#include <errno.h>

#include "pprt.h"

int pprt_http_start(const pprt_http_options *opts) {
  (void)opts;
  return -ENOTSUP;
}

int pprt_http_stop(void) {
  return -EPIPE;
}
