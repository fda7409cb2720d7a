/* The program of the source-lines tests (tests/lines_test.cmake), built
 * -O2 -g: a CPU profile of a hot loop in a function that is always inlined
 * into its caller, a trace with the same CPU samples, and a heap profile of
 * one allocation site. The test finds
 * the lines it expects by the markers in the comments (LINES_LOOP,
 * LINES_CALL, LINES_ALLOC).
 *
 * Usage: lines_victim OUTDIR   (writes OUTDIR/cpu.pb.gz, OUTDIR/heap.pb.gz,
 *                               OUTDIR/trace.pprt) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pprt.h"

static volatile uint64_t sink;

static inline __attribute__((always_inline)) uint64_t lines_mix(uint64_t x, int n) {
  for (int i = 0; i < n; i++)
    x = (x * 6364136223846793005u + 1442695040888963407u) ^ (x >> 29); /* LINES_LOOP */
  return x;
}

__attribute__((noinline)) void lines_caller(int rounds);
void lines_caller(int rounds) {
  uint64_t x = sink;
  for (int r = 0; r < rounds; r++)
    x = lines_mix(x, 1000); /* LINES_CALL */
  sink = x;
}

static void *kept[64];

__attribute__((noinline)) void lines_alloc(void);
void lines_alloc(void) {
  for (int i = 0; i < 64; i++) {
    kept[i] = malloc(4096);
    pprt_alloc_note(kept[i], 4096); /* LINES_ALLOC */
  }
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_out(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    perror(path);
  return fd;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  int cpu = open_out(argv[1], "cpu.pb.gz"), heap = open_out(argv[1], "heap.pb.gz");
  int trace = open_out(argv[1], "trace.pprt");
  if (cpu < 0 || heap < 0 || trace < 0)
    return 1;
  int rc = pprt_trace_start(NULL, pprt_writer_fd(trace));
  if (rc != 0) {
    fprintf(stderr, "pprt_trace_start: %s\n", pprt_strerror(rc));
    return 1;
  }
  pprt_cpu_options o = {.size = sizeof o, .hz = 500};
  rc = pprt_cpu_start(&o, pprt_writer_fd(cpu));
  if (rc != 0) {
    fprintf(stderr, "pprt_cpu_start: %s\n", pprt_strerror(rc));
    return 1;
  }
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < 0.6)
    lines_caller(200);
  if ((rc = pprt_cpu_stop()) != 0 || (rc = pprt_trace_stop()) != 0) {
    fprintf(stderr, "pprt_cpu_stop, pprt_trace_stop: %s\n", pprt_strerror(rc));
    return 1;
  }
  pprt_heap_set_rate(1);
  lines_alloc();
  if ((rc = pprt_heap_write(pprt_writer_fd(heap))) != 0) {
    fprintf(stderr, "pprt_heap_write: %s\n", pprt_strerror(rc));
    return 1;
  }
  close(cpu);
  close(heap);
  close(trace);
  return 0;
}
