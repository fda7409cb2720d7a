/* pprt_http_start in libpprt, the runtime library: the endpoint is in
 * libpprt_http (core/http.c), which a program that serves it links
 * instead, and which is built only with libmicrohttpd (PPRT_HTTP). */
#include <errno.h>

#include "pprt.h"

int pprt_http_start(const pprt_http_options *opts) {
  (void)opts;
  return -ENOTSUP;
}

int pprt_http_stop(void) {
  return -EPIPE;
}
