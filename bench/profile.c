/* Profile builder benchmark: build and write a gzip'd pprof profile from
 * 100,000 samples over 10,000 distinct stacks of depth 32, and the same
 * with pprof's own Go package (bench/pprof-go) in the same run. Then
 * symbolization: the write time and peak RSS of a profile of 10,000 distinct
 * real addresses spread over the program, libc and libstdc++, in mode lines
 * (DWARF, through the build's reader: pprt's own, or libdw with
 * PPRT_SYMBOLIZER=libdw) against mode names, in the same run.
 *
 * Each encoder runs in a child process, so peak memory (max RSS, from
 * wait4) is measured the same way for both; the clock covers building and
 * writing, not generating the inputs.
 *
 * Usage: bench/profile [path to the pprof-go binary]
 *        bench/profile --lines | --names | --reader: one symbolization
 *        child's work alone, for valgrind or perf
 *        (without it, `go build` is run in bench/pprof-go; if Go is missing
 *        only pprt's figures are printed) */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/profile.h"
#include "core/symbolize.h"
#include "tests/membuf.h"
#include "read/profile_decode.h"

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

/* ---- symbolization -------------------------------------------------------------- */

#define SYM_ADDRS 10000
#define SYM_DEPTH 8

typedef struct code_range {
  uintptr_t start, limit;
} code_range;

typedef struct ranges {
  code_range v[3]; /* the program, libc, libstdc++ */
  int found[3];
} ranges;

static int find_code(const pprt__os_image *img, void *ctx) {
  ranges *r = ctx;
  int k = img->is_main                     ? 0
          : strstr(img->path, "/libc.so")  ? 1
          : strstr(img->path, "libstdc++") ? 2
                                           : -1;
  if (k >= 0 && !r->found[k]) {
    r->v[k] = (code_range){img->start, img->limit};
    r->found[k] = 1;
  }
  return 0;
}

static uintptr_t sym_addr[SYM_ADDRS]; /* the profile's addresses */

/* A profile whose stacks use SYM_ADDRS distinct code addresses, a third in
 * each image, evenly spread; NULL if an image is missing. */
static pprt__profile *symbolize_profile(void) {
  if (dlopen("libstdc++.so.6", RTLD_NOW) == NULL) {
    fprintf(stderr, "bench/profile: no libstdc++.so.6: %s\n", dlerror());
    return NULL;
  }
  ranges r;
  memset(&r, 0, sizeof r);
  pprt__os_image_each(find_code, &r);
  if (!r.found[0] || !r.found[1] || !r.found[2]) {
    fprintf(stderr, "bench/profile: the program, libc or libstdc++ was not found\n");
    return NULL;
  }
  uintptr_t *addr = sym_addr;
  for (int i = 0; i < SYM_ADDRS; i++) {
    const code_range *c = &r.v[i % 3];
    size_t per = SYM_ADDRS / 3 + 1, j = (size_t)i / 3;
    addr[i] = c->start + (c->limit - c->start) / per * j + 1; /* +1: a return address */
  }
  pprt__value_type types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  pprt__profile *p;
  if (pprt__profile_new(&p, types, 2, types[1], 10000000) != 0)
    return NULL;
  if (pprt__profile_add_os_mappings(p) != 0)
    return NULL;
  int64_t v[2] = {1, 10000000};
  uintptr_t pcs[SYM_DEPTH];
  for (int s = 0; s < SYM_ADDRS; s++) {
    for (int j = 0; j < SYM_DEPTH; j++)
      pcs[j] = addr[((size_t)s * SYM_DEPTH + (size_t)j) % SYM_ADDRS];
    if (pprt__profile_add(p, pcs, SYM_DEPTH, 0, v, NULL, 0) != 0)
      return NULL;
  }
  return p;
}

/* In the child: prints "ns=... bytes=..." for writing that profile in the
 * mode named by arg ("lines" or "names"). */
static int run_symbolize(const char *arg) {
  pprt__profile *p = symbolize_profile();
  if (p == NULL)
    return 1;
  pprt_set_symbolize(strcmp(arg, "lines") == 0 ? PPRT_SYMBOLIZE_LINES : PPRT_SYMBOLIZE_NAMES);
  counter c = {0};
  pprt_writer w = {count_write, &c};
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  uint64_t t0 = pprt__os_monotonic_ns();
  if (pprt__profile_write_os(p, 1, w) != 0)
    return 1;
  uint64_t ns = pprt__os_monotonic_ns() - t0;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  long long cpu_ns = (long long)(c1.tv_sec - c0.tv_sec) * 1000000000 + (c1.tv_nsec - c0.tv_nsec);
  printf("ns=%llu bytes=%zu cpu=%lld\n", (unsigned long long)ns, c.bytes, cpu_ns);
  return 0;
}

static int addr_order(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* In the child: the source-lines reader alone over the profile's addresses,
 * each once, in the reader's order (sorted, then pprt__os_lines_order),
 * between one open and close, as the symbolizer hands a write's new
 * addresses to it; prints as run_symbolize, bytes being the frames found. */
static int run_reader(const char *arg) {
  (void)arg;
  pprt__profile *p = symbolize_profile();
  if (p == NULL)
    return 1;
  static uint64_t sorted[SYM_ADDRS];
  for (size_t i = 0; i < SYM_ADDRS; i++)
    sorted[i] = sym_addr[i];
  qsort(sorted, SYM_ADDRS, sizeof *sorted, addr_order);
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  uint64_t t0 = pprt__os_monotonic_ns();
  pprt__os_lines *l;
  if (pprt__os_lines_open(&l, getenv("PPRT_DEBUG_DIRS")) != 0)
    return 1;
  pprt__os_lines_order(l, sorted, SYM_ADDRS);
  size_t frames = 0;
  pprt__os_frame fr[64];
  for (size_t i = 0; i < SYM_ADDRS; i++)
    frames += (size_t)pprt__os_lines_resolve(l, (uintptr_t)sorted[i], fr, 64);
  pprt__os_lines_close(l);
  uint64_t ns = pprt__os_monotonic_ns() - t0;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  long long cpu_ns = (long long)(c1.tv_sec - c0.tv_sec) * 1000000000 + (c1.tv_nsec - c0.tv_nsec);
  printf("ns=%llu bytes=%zu cpu=%lld\n", (unsigned long long)ns, frames, cpu_ns);
  return 0;
}

/* What mode lines found, counted in a profile written here (unmeasured):
 * locations with a file:line, and Lines of inlined functions. */
static void count_lines(size_t *with_line, size_t *nlocs, size_t *inlined) {
  *with_line = *nlocs = *inlined = 0;
  pprt__profile *p = symbolize_profile();
  membuf m = {0};
  Pprt__Profile *prof = NULL;
  char err[128];
  pprt_set_symbolize(PPRT_SYMBOLIZE_LINES);
  if (p == NULL || pprt__profile_write_os(p, 1, mem_writer(&m)) != 0 ||
      pprt__profile_decode(m.data, m.len, &prof, err, sizeof err) != 0)
    return;
  for (size_t i = 0; i < prof->n_location; i++) {
    const Pprt__Location *l = prof->location[i];
    *nlocs += 1;
    *with_line += l->n_line > 0 && l->line[0]->line > 0;
    *inlined += l->n_line > 1 ? l->n_line - 1 : 0;
  }
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
  mem_free(&m);
}

typedef struct result {
  double ms, mib, cpu_ms; /* cpu_ms: the write's CPU time, where the child says */
  long bytes;
  int ok;
} result;

/* Runs argv (or child(arg) when argv is NULL) in a child; parses its line. */
static result measure(char *const argv[], int (*child)(const char *), const char *arg) {
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
      int rc = child(arg);
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
  long long cpu = -1;
  if (sscanf(line, "ns=%llu bytes=%ld cpu=%lld", &ns, &r.bytes, &cpu) < 2)
    return r;
  r.cpu_ms = cpu >= 0 ? (double)cpu / 1e6 : -1;
  r.ms = (double)ns / 1e6;
  r.mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is KiB on Linux and FreeBSD */
  r.ok = 1;
  return r;
}

/* The symbolization figures; 1 when the targets are met. */
static int symbolize_figures(void) {
  printf("symbolization: %d distinct addresses (the program, libc, libstdc++), stacks of %d;\n"
         "  the fastest of 3 runs each; time and CPU time of the write\n",
         SYM_ADDRS, SYM_DEPTH);
  if (pprt__symbolize_mode() != PPRT_SYMBOLIZE_LINES) {
    printf("  PPRT_SYMBOLIZE asks for another mode; not measured\n");
    return 1;
  }
  if (dlopen("libstdc++.so.6", RTLD_LAZY) == NULL) { /* macOS, FreeBSD: libc++ */
    printf("  no libstdc++.so.6 here; not measured\n");
    return 1;
  }
  /* The fastest of three runs of each: this is a shared machine's figure. */
  result names = {0}, lines = {0}, reader = {0};
  for (int i = 0; i < 3; i++) {
    result n = measure(NULL, run_symbolize, "names"), l = measure(NULL, run_symbolize, "lines");
    result r = measure(NULL, run_reader, NULL);
    if (!n.ok || !l.ok || !r.ok) {
      fprintf(stderr, "bench/profile: the symbolization runs failed\n");
      return 0;
    }
    if (!names.ok || n.ms < names.ms)
      names = n;
    if (!lines.ok || l.ms < lines.ms)
      lines = l;
    if (!reader.ok || r.ms < reader.ms)
      reader = r;
  }
  size_t with_line, nlocs, inlined;
  count_lines(&with_line, &nlocs, &inlined);
  printf("  %-28s %9s %10s %12s %12s\n", "", "time", "CPU time", "peak RSS", "output");
  printf("  %-28s %7.1f ms %7.1f ms %8.1f MiB %9ld B\n", "names (symbol tables)", names.ms,
         names.cpu_ms, names.mib, names.bytes);
  printf("  %-28s %7.1f ms %7.1f ms %8.1f MiB %9ld B\n", "lines (DWARF, " PPRT_SYMBOLIZER_NAME ")", lines.ms,
         lines.cpu_ms, lines.mib, lines.bytes);
  printf("  %-28s %7.1f ms %7.1f ms %8.1f MiB %7ld frames\n", "lines reader alone", reader.ms,
         reader.cpu_ms, reader.mib, reader.bytes);
  printf("  lines: %zu of %zu locations with file:line, %zu inlined frames\n", with_line, nlocs,
         inlined);
  if (with_line == 0) {
    printf("  (no lines: a build without a DWARF reader, or no debug information; targets not "
           "checked)\n");
    return 1;
  }
  int ok = lines.ms <= 300 && lines.mib <= 1.5 * names.mib;
  printf("  lines / names: time %.2fx, peak RSS %.2fx\n", lines.ms / names.ms,
         lines.mib / names.mib);
  printf("  target (lines <= 300 ms, RSS <= 1.5x names): %s\n", ok ? "met" : "MISSED");
  return ok;
}

int main(int argc, char **argv) {
  char go_bin[4096] = {0};
  /* One measured child's work alone, for a memory or CPU profiler. */
  if (argc > 1 && strcmp(argv[1], "--reader") == 0)
    return run_reader(NULL);
  if (argc > 1 && (strcmp(argv[1], "--lines") == 0 || strcmp(argv[1], "--names") == 0))
    return run_symbolize(argv[1] + 2);
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
  result c = measure(NULL, run_pprt, NULL);
  if (!c.ok) {
    fprintf(stderr, "bench/profile: the pprt encoder failed\n");
    return 1;
  }
  printf("  %-28s %9s %12s %12s\n", "", "time", "peak RSS", "output");
  printf("  %-28s %7.1f ms %8.1f MiB %9ld B\n", "pprt (C, protobuf-c, zlib)", c.ms, c.mib, c.bytes);
  int sym_ok = symbolize_figures();
  if (!go_bin[0])
    return sym_ok ? 0 : 1;
  char *gargv[] = {go_bin, NULL};
  result g = measure(gargv, NULL, NULL);
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
  return ok && sym_ok ? 0 : 1;
}
