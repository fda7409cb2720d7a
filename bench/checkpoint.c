/* Checkpoint benchmark (PPRT_CHECKPOINT): what one rewrite of the CPU
 * profile so far costs, to choose the interval `pprt record` uses.
 *
 *   1. the real path: a CPU profile (100 Hz) of this process burning CPU
 *      through a few thousand distinct stacks, with a checkpoint every
 *      0.25 s; the callbacks time each one on the reader thread (wall and
 *      the reader's CPU time) from opening path.tmp to its rename;
 *   2. a large profile: 10,000 stacks of depth 32 over real code addresses
 *      (this binary's and libc's), written the way a checkpoint writes
 *      (mappings and comments added, symbolized, gzip'd, path.tmp renamed
 *      over path), five times.
 *
 * Usage: bench/checkpoint [DIR]   (DIR for the files; default $TMPDIR, or
 *                                   /tmp) */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/platform.h"
#include "core/profile.h"
#include "pprt.h"

static char g_path[512], g_tmp[520];
static int g_fd = -1;
static uint64_t g_t0, g_c0;
static double g_wall_ms[1024], g_cpu_ms[1024];
static size_t g_n;
static off_t g_bytes;

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int begin(void *ctx, pprt_writer *out) {
  (void)ctx;
  g_t0 = pprt__os_monotonic_ns();
  g_c0 = thread_cpu_ns();
  g_fd = open(g_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (g_fd < 0)
    return -1;
  *out = pprt_writer_fd(g_fd);
  return 0;
}

static void end(void *ctx, int rc) {
  (void)ctx;
  g_bytes = lseek(g_fd, 0, SEEK_END);
  close(g_fd);
  if (rc == 0)
    rename(g_tmp, g_path);
  if (g_n < sizeof g_wall_ms / sizeof *g_wall_ms) {
    g_wall_ms[g_n] = (double)(pprt__os_monotonic_ns() - g_t0) / 1e6;
    g_cpu_ms[g_n] = (double)(thread_cpu_ns() - g_c0) / 1e6;
    g_n++;
  }
}

/* ---- the workload: distinct stacks by the path taken ---- */

static volatile double g_sink;

#define LEAF(name, k)                                                                              \
  __attribute__((noinline)) static void name(void) {                                               \
    double x = g_sink;                                                                             \
    for (int i = 0; i < 2000; i++)                                                                 \
      x = x * 1.0000001 + k;                                                                       \
    g_sink = x;                                                                                    \
  }
LEAF(leaf_a, 0.1)
LEAF(leaf_b, 0.2)
LEAF(leaf_c, 0.3)
LEAF(leaf_d, 0.4)

__attribute__((noinline)) static void level(int depth, unsigned path) {
  if (depth == 0) {
    static void (*const leaves[4])(void) = {leaf_a, leaf_b, leaf_c, leaf_d};
    leaves[path & 3]();
    return;
  }
  if (path & 1)
    level(depth - 1, path >> 1);
  else
    level(depth - 1, (path >> 1) ^ 0x55);
  g_sink += 1;
}

static double process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void stats(const double *v, size_t n, double *mean, double *max) {
  *mean = 0;
  *max = 0;
  for (size_t i = 0; i < n; i++) {
    *mean += v[i] / (double)n;
    if (v[i] > *max)
      *max = v[i];
  }
}

static int real_path(const char *dir) {
  snprintf(g_path, sizeof g_path, "%s/pprt-bench-checkpoint.pb.gz", dir);
  snprintf(g_tmp, sizeof g_tmp, "%s.tmp", g_path);
  pprt__cpu_checkpoint c = {250000000u, begin, end, NULL};
  pprt__cpu_set_checkpoint(&c);
  int fd = open("/dev/null", O_WRONLY);
  if (pprt_cpu_start(NULL, pprt_writer_fd(fd)) != 0) {
    fprintf(stderr, "checkpoint: cannot start the CPU profiler\n");
    return 1;
  }
  double until = process_cpu_s() + 6.0;
  unsigned path = 0;
  while (process_cpu_s() < until)
    for (int i = 0; i < 64; i++)
      level(6 + (int)(path % 7), path * 2654435761u), path++;
  pprt_cpu_stop();
  close(fd);
  pprt__cpu_set_checkpoint(NULL);
  unlink(g_path);
  if (g_n < 2) {
    fprintf(stderr, "checkpoint: only %zu checkpoints\n", g_n);
    return 1;
  }
  /* The first ones are small; the last has every stack. */
  double mw, xw, mc, xc;
  stats(g_wall_ms + g_n / 2, g_n - g_n / 2, &mw, &xw);
  stats(g_cpu_ms + g_n / 2, g_n - g_n / 2, &mc, &xc);
  printf("real path: %zu checkpoints of a 6 s CPU profile (100 Hz), the later half:\n", g_n);
  printf("  %.2f ms wall (max %.2f), %.2f ms reader CPU (max %.2f) each; last file %lld bytes\n",
         mw, xw, mc, xc, (long long)g_bytes);
  return 0;
}

/* ---- a large profile ---- */

#define STACKS 10000
#define DEPTH 32

static int large(const char *dir) {
  /* Real code: pprt's own functions and libc's, with small offsets. */
  const uintptr_t bases[] = {(uintptr_t)&level,     (uintptr_t)&leaf_a,
                             (uintptr_t)&real_path, (uintptr_t)&printf,
                             (uintptr_t)&malloc,    (uintptr_t)&qsort,
                             (uintptr_t)&strtod,    (uintptr_t)&snprintf,
                             (uintptr_t)&fopen,     (uintptr_t)&pprt__profile_write};
  const size_t nbases = sizeof bases / sizeof *bases;
  static const pprt__value_type types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  pprt__profile *p;
  if (pprt__profile_new(&p, types, 2, types[1], 10000000) != 0)
    return 1;
  uint64_t x = 88172645463325252ull;
  for (int s = 0; s < STACKS; s++) {
    uintptr_t pcs[DEPTH];
    for (int j = 0; j < DEPTH; j++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      pcs[j] = bases[x % nbases] + (uintptr_t)(x >> 40) % 64;
    }
    int64_t v[2] = {1 + s % 7, 10000000ll * (1 + s % 7)};
    if (pprt__profile_add(p, pcs, DEPTH, PPRT__STACK_LEAF_EXACT, v, NULL, 0) != 0)
      return 1;
  }
  snprintf(g_path, sizeof g_path, "%s/pprt-bench-checkpoint-large.pb.gz", dir);
  snprintf(g_tmp, sizeof g_tmp, "%s.tmp", g_path);
  double ms[5];
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = pprt__os_monotonic_ns();
    pprt__profile_mark m = pprt__profile_get_mark(p);
    pprt__profile_add_comment(p, "checkpoint: bench");
    int fd = open(g_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = fd < 0 ? -1 : pprt__profile_add_os_mappings(p);
    if (rc == 0)
      rc = pprt__profile_write_os(p, 1, pprt_writer_fd(fd));
    g_bytes = lseek(fd, 0, SEEK_END);
    close(fd);
    if (rc != 0 || rename(g_tmp, g_path) != 0)
      return 1;
    pprt__profile_rewind(p, m);
    ms[i] = (double)(pprt__os_monotonic_ns() - t0) / 1e6;
  }
  unlink(g_path);
  pprt__profile_free(p);
  double mean, max;
  stats(ms, 5, &mean, &max);
  printf("large profile: %d stacks of depth %d, symbolized: %.1f ms per checkpoint (max %.1f), "
         "%lld bytes\n",
         STACKS, DEPTH, mean, max, (long long)g_bytes);
  printf("  at pprt record's 5 s interval: %.2f%% of one core; at 1 s: %.1f%%\n", mean / 50,
         mean / 10);
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR");
  if (dir == NULL || *dir == '\0')
    dir = "/tmp";
  int rc = real_path(dir);
  if (rc == 0)
    rc = large(dir);
  return rc;
}
