/* A program that serves /debug/pprof/ the way a user's would: through the
 * public header and pprt::http (or pkg-config pprt-http) only. It starts
 * the endpoint on a free loopback port and stops it. */
#include <stdio.h>

#include <pprt.h>

int main(void) {
  int port = 0;
  pprt_http_options o = {.size = sizeof o, .bound_port = &port};
  int rc = pprt_http_start(&o);
  if (rc != 0) {
    fprintf(stderr, "pprt_http_start: %s\n", pprt_strerror(rc));
    return 1;
  }
  printf("pprt %s: serving on 127.0.0.1:%d\n", pprt_version(), port);
  return port > 0 && pprt_http_stop() == 0 ? 0 : 1;
}
