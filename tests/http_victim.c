/* An ordinary program that knows nothing of pprt, for the HTTP endpoint's
 * tests and bench/http: for SECONDS of wall time it spends its CPU in
 * http_hot_loop and allocates in http_alloc_site (keeping the last 256
 * blocks live), then prints how many rounds of work it did per second of
 * wall time and per second of the whole process's CPU time (pprt's threads
 * included), the figure a loaded machine disturbs least.
 *
 * With TICK_MS, it also prints a line every TICK_MS milliseconds as it
 * goes: "tick ROUNDS PROCESS_CPU THREAD_CPU MONOTONIC" (seconds; the
 * monotonic clock is the machine's, so a reader compares it with its own),
 * for bench/http, which changes what it asks of the endpoint while the
 * same process runs.
 *
 * Usage: http_victim SECONDS [TICK_MS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "spin.h"

static volatile unsigned long sink;
static void *kept[256];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void http_hot_loop(void);
void http_hot_loop(void) {
  unsigned long x = sink;
  LCG_ROUNDS(x, 20000);
  sink = x;
}

__attribute__((noinline)) void http_alloc_site(unsigned long round);
void http_alloc_site(unsigned long round) {
  size_t i = round % 256;
  free(kept[i]);
  kept[i] = malloc(4096 + (round % 7) * 1024);
  if (kept[i])
    memset(kept[i], 1, 64);
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: http_victim SECONDS [TICK_MS]\n");
    return 2;
  }
  double seconds = atof(argv[1]), start = now(), end = start + seconds;
  double tick = argc == 3 ? atof(argv[2]) / 1000 : 0, next_tick = start;
  unsigned long rounds = 0;
  for (double t = start; t < end; t = now()) {
    if (tick > 0 && t >= next_tick) {
      printf("tick %lu %.6f %.9f %.9f\n", rounds, process_cpu(), thread_cpu(), t);
      fflush(stdout);
      next_tick += tick;
    }
    for (int k = 0; k < 16; k++, rounds++) {
      http_hot_loop();
      http_alloc_site(rounds);
    }
  }
  double cpu = process_cpu(), mine = thread_cpu();
  /* other_cpu: what threads other than this one (pprt's) used, per second
   * of this one's CPU time. */
  printf("rounds %lu\nrate %.1f\ncpu_rate %.1f\nother_cpu %.6f\n", rounds,
         (double)rounds / (now() - start), (double)rounds / cpu, (cpu - mine) / mine);
  for (size_t i = 0; i < 256; i++)
    free(kept[i]);
  return 0;
}
