/* Profile builder benchmark: build and write a gzip'd pprof profile from
 * 100,000 samples over 10,000 distinct stacks of depth 32, and the same
 * with pprof's own Go package (bench/pprof-go) in the same run.
 *
 * Each encoder runs in a child process, so peak memory (max RSS, from
 * wait4) is measured the same way for both; the clock covers building and
 * writing, not generating the inputs.
 *
 * Usage: bench/profile [path to the pprof-go binary]
 *        (without it, `go build` is run in bench/pprof-go; if Go is missing
 *        only pprt's figures are printed) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/profile.h"

#define SAMPLES 100000
#define STACKS 10000
#define DEPTH 32

static uint64_t splitmix(uint64_t x) {
  x += UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

typedef struct counter {
  size_t bytes;
} counter;

static int count_write(void *ctx, const void *data, size_t len) {
  (void)data;
  ((counter *)ctx)->bytes += len;
  return 0;
}

/* The C encoder, in the child: prints "ns=... bytes=...". */
static int run_pprt(const char *out_path) {
  static uintptr_t pcs[STACKS][DEPTH];
  static int pick[SAMPLES];
  for (int s = 0; s < STACKS; s++)
    for (int j = 0; j < DEPTH; j++)
      pcs[s][j] = (uintptr_t)(0x400000 + (splitmix((uint64_t)(s * DEPTH + j)) % 0x100000 & ~3ull));
  for (int i = 0; i < SAMPLES; i++)
    pick[i] = (int)(splitmix((uint64_t)i ^ 0xabcdef) % STACKS);

  uint64_t t0 = pprt__os_monotonic_ns();
  pprt__value_type types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  pprt__profile *p;
  if (pprt__profile_new(&p, types, 2, types[1], 10000000) != 0)
    return 1;
  pprt__profile_set_time(p, 1700000000000000000, 1000000000);
  pprt__mapping_info m = {0x400000, 0x500000, 0, "/usr/bin/bench", "0123456789abcdef"};
  if (pprt__profile_add_mapping(p, &m) != 0)
    return 1;
  int64_t v[2] = {1, 10000000};
  for (int i = 0; i < SAMPLES; i++)
    if (pprt__profile_add(p, pcs[pick[i]], DEPTH, PPRT__STACK_LEAF_EXACT, v, NULL, 0) != 0)
      return 1;
  counter c = {0};
  pprt_writer w = {count_write, &c};
  int fd = -1;
  if (out_path) {
    fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
      return 1;
    w = pprt_writer_fd(fd);
  }
  if (pprt__profile_write(p, NULL, NULL, w) != 0)
    return 1;
  uint64_t ns = pprt__os_monotonic_ns() - t0;
  if (fd >= 0) {
    c.bytes = (size_t)lseek(fd, 0, SEEK_END);
    close(fd);
  }
  pprt__profile_free(p);
  printf("ns=%llu bytes=%zu\n", (unsigned long long)ns, c.bytes);
  return 0;
}

typedef struct result {
  double ms, mib;
  long bytes;
  int ok;
} result;

/* Runs argv (or run_pprt when argv is NULL) in a child; parses its line. */
static result measure(char *const argv[], const char *out_path) {
  result r = {0};
  int fds[2];
  if (pipe(fds) != 0)
    return r;
  fflush(stdout); /* or the child would print our buffered lines too */
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    if (argv == NULL) {
      int rc = run_pprt(out_path);
      fflush(stdout);
      _exit(rc);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  char line[256] = {0};
  ssize_t n = read(fds[0], line, sizeof line - 1);
  close(fds[0]);
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0 || n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status))
    return r;
  unsigned long long ns;
  if (sscanf(line, "ns=%llu bytes=%ld", &ns, &r.bytes) != 2)
    return r;
  r.ms = (double)ns / 1e6;
  r.mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is KiB on Linux and FreeBSD */
  r.ok = 1;
  return r;
}

int main(int argc, char **argv) {
  char go_bin[4096] = {0};
  if (argc > 1) {
    snprintf(go_bin, sizeof go_bin, "%s", argv[1]);
  } else {
    const char *src = PPRT_SOURCE_DIR "/bench/pprof-go";
    snprintf(go_bin, sizeof go_bin, "%s/pprof-go-bench", PPRT_BINARY_DIR);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && go build -o '%s' . 2>&1", src, go_bin);
    if (system(cmd) != 0) {
      fprintf(stderr, "bench/profile: could not build %s with go; pprt figures only\n", src);
      go_bin[0] = '\0';
    }
  }

  printf("pprt profile benchmark: %d samples, %d distinct stacks, depth %d\n", SAMPLES, STACKS,
         DEPTH);
  result c = measure(NULL, NULL);
  if (!c.ok) {
    fprintf(stderr, "bench/profile: the pprt encoder failed\n");
    return 1;
  }
  printf("  %-28s %9s %12s %12s\n", "", "time", "peak RSS", "output");
  printf("  %-28s %7.1f ms %8.1f MiB %9ld B\n", "pprt (C, protobuf-c, zlib)", c.ms, c.mib,
         c.bytes);
  if (!go_bin[0])
    return 0;
  char *gargv[] = {go_bin, NULL};
  result g = measure(gargv, NULL);
  if (!g.ok) {
    fprintf(stderr, "bench/profile: %s failed\n", go_bin);
    return 1;
  }
  printf("  %-28s %7.1f ms %8.1f MiB %9ld B\n", "github.com/google/pprof (Go)", g.ms, g.mib,
         g.bytes);
  printf("  pprt / Go: time %.2fx, peak RSS %.2fx, size %.3fx\n", c.ms / g.ms, c.mib / g.mib,
         (double)c.bytes / (double)g.bytes);
  int ok = c.ms < g.ms && c.bytes <= g.bytes;
  printf("  target (faster, no larger): %s\n", ok ? "met" : "MISSED");
  return ok ? 0 : 1;
}
