/* A program that ends in a chosen way, for the pprt record tests: it burns
 * CPU in victim_burn for a moment (so a profile has samples), then
 *
 *   record_victim exit N    returns N from main (exit handlers run)
 *   record_victim _exit N   calls _exit(N) (exit handlers do not run; the
 *                           preload library's _exit writes)
 *   record_victim term      raises SIGTERM (default action: killed)
 *   record_victim kill      raises SIGKILL (nothing can write)
 *   record_victim abort     calls abort() (SIGABRT)
 *   record_victim trapterm  catches SIGTERM, raises it, exits 0 from the handler
 *                           through exit(), so the profile is written */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/workload.h"

static volatile unsigned long sink;

TEST_WORKLOAD void victim_burn(double seconds);
void victim_burn(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  double end = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + seconds, now;
  do {
    for (int i = 0; i < 100000; i++)
      sink = sink * 6364136223846793005ul + 1442695040888963407ul;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  } while (now < end);
}

static void on_term(int sig) {
  (void)sig;
  exit(0);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: record_victim exit N | _exit N | term | kill | abort | trapterm\n");
    return 2;
  }
  victim_burn(0.3);
  const char *how = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 0;
  if (strcmp(how, "exit") == 0)
    return n;
  if (strcmp(how, "_exit") == 0)
    _exit(n);
  if (strcmp(how, "term") == 0)
    raise(SIGTERM);
  if (strcmp(how, "kill") == 0)
    raise(SIGKILL);
  if (strcmp(how, "abort") == 0)
    abort();
  if (strcmp(how, "trapterm") == 0) {
    signal(SIGTERM, on_term);
    raise(SIGTERM);
  }
  return 99;
}
