/* Allocation sampler benchmark: what the preload library's heap profiling
 * adds to a 64-byte malloc+free pair, what one sampled allocation costs,
 * and the same for jemalloc's and tcmalloc's samplers, in one run.
 *
 * Every figure is a ratio against a baseline measured in the same run: the
 * workload (bench/heap_work) runs in a child process per configuration,
 * glibc's malloc without any preload for pprt, each allocator without its
 * sampler for jemalloc and tcmalloc (they are different allocators). Runs
 * go round-robin over the configurations, and each figure is the median
 * over the rounds of each run's median slice, so a neighbour's burst of
 * load lands on all rows alike rather than on one.
 *
 * The bench installs nothing: an allocator that ld.so cannot preload (the
 * child then reports glibc) is one line and its rows are skipped.
 *
 * Usage: bench/heap [rounds, default 9] [seconds per run, default 0.2] */
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pprt.h"

#include "bench_util.h"

#define MAX_ROUNDS 101
#define NWORK 2

extern char **environ;

static const char *const workloads[NWORK] = {"tight", "window"};

enum { GLIBC, FLOOR, PPRT_OFF, PPRT_512K, PPRT_ALL, JE, JE_19, JE_0, TC, TC_512K, TC_1, NCONFIG };

typedef struct config {
  const char *label;
  const char *preload; /* LD_PRELOAD, or NULL */
  const char *env[3];  /* NAME=VALUE, after the inherited ones are cleared */
  const char *alloc;   /* what the child must report serving malloc */
  const char *prof;    /* what it must report as jemalloc's opt.prof, or NULL */
  const char *rate;    /* what it must report as pprt_heap_rate(), or NULL */
  int base;            /* the row its ratio is against */
} config;

static char preload_lib[] = BENCH_PRELOAD;
#ifdef BENCH_NULL_PRELOAD
static const char *const null_lib = BENCH_NULL_PRELOAD;
#else
static const char *const null_lib = NULL; /* no __libc_malloc to jump to: no floor row */
#endif
static char heap_path[4096];
static char path_env[4200];

#define JE_LIB "libjemalloc.so.2"
#define JE_PROF "MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:"
#define TC_LIB "libtcmalloc.so.4"
#define TC_SAMPLE "TCMALLOC_SAMPLE_PARAMETER="

static config configs[NCONFIG] = {
    [GLIBC] = {"glibc malloc, no preload", NULL, {NULL}, "glibc", NULL, "-", GLIBC},
    [FLOOR] = {"do-nothing interposer", NULL /* set in main */, {NULL}, "glibc", NULL, "-", GLIBC},
    [PPRT_OFF] = {"pprt preload, sampling off", preload_lib, {NULL}, "glibc", NULL, "0", GLIBC},
    [PPRT_512K] =
        {"pprt preload, 512 KiB", preload_lib, {path_env}, "glibc", NULL, "524288", GLIBC},
    [PPRT_ALL] = {"pprt preload, rate 1 (all)",
                  preload_lib,
                  {path_env, "PPRT_HEAP_RATE=1"},
                  "glibc",
                  NULL,
                  "1",
                  GLIBC},
    [JE] = {"jemalloc, prof off", JE_LIB, {NULL}, "jemalloc", "0", NULL, JE},
    [JE_19] =
        {"jemalloc prof, lg_prof_sample:19", JE_LIB, {JE_PROF "19"}, "jemalloc", "1", NULL, JE},
    [JE_0] = {"jemalloc prof, lg_prof_sample:0", JE_LIB, {JE_PROF "0"}, "jemalloc", "1", NULL, JE},
    [TC] = {"tcmalloc, sampling off", TC_LIB, {TC_SAMPLE "0"}, "tcmalloc", NULL, NULL, TC},
    [TC_512K] =
        {"tcmalloc, sample 524288", TC_LIB, {TC_SAMPLE "524288"}, "tcmalloc", NULL, NULL, TC},
    [TC_1] = {"tcmalloc, sample 1 (all)", TC_LIB, {TC_SAMPLE "1"}, "tcmalloc", NULL, NULL, TC},
};

static int skipped[NCONFIG];
static double runs[NCONFIG][NWORK][MAX_ROUNDS];
static char versions[NCONFIG][128];

/* Variables that would change what a child measures. */
static int inherited_ok(const char *kv) {
  static const char *const drop[] = {
      "LD_PRELOAD=",  "PPRT_",      "MALLOC_CONF=", "TCMALLOC_",
      "HEAPPROFILE=", "HEAPCHECK=", "CPUPROFILE=",  "JE_MALLOC_CONF="};
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
    if (strncmp(kv, drop[i], strlen(drop[i])) == 0)
      return 0;
  return 1;
}

typedef struct result {
  int ok;
  double ns;
  char alloc[32], prof[8], rate[32], version[128];
} result;

/* Copies the value of `key` (up to a space or the end of the line). */
static void field(const char *line, const char *key, char *out, size_t len, int to_eol) {
  const char *p = strstr(line, key);
  out[0] = '\0';
  if (p == NULL)
    return;
  p += strlen(key);
  size_t n = to_eol ? strcspn(p, "\n") : strcspn(p, " \n");
  if (n >= len)
    n = len - 1;
  memcpy(out, p, n);
  out[n] = '\0';
}

/* Runs the workload under configuration c; stderr is dropped when quiet
 * (the probes, where ld.so's "cannot be preloaded" is expected). */
static result run(const config *c, const char *work, double seconds, int quiet) {
  result r = {0};
  char *envp[512];
  size_t n = 0;
  char ld[4200];
  for (char **e = environ; *e && n < 500; e++)
    if (inherited_ok(*e))
      envp[n++] = *e;
  if (c->preload) {
    snprintf(ld, sizeof ld, "LD_PRELOAD=%s", c->preload);
    envp[n++] = ld;
  }
  for (int i = 0; i < 3 && c->env[i]; i++)
    envp[n++] = (char *)c->env[i];
  envp[n] = NULL;

  char secs[32];
  snprintf(secs, sizeof secs, "%g", seconds);
  char *argv[] = {(char *)BENCH_HEAP_WORK, (char *)work, secs, NULL};
  int fds[2];
  if (pipe(fds) != 0)
    return r;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    if (quiet) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 2);
    }
    execve(argv[0], argv, envp);
    _exit(127);
  }
  close(fds[1]);
  char line[512] = {0};
  size_t got = 0;
  ssize_t k;
  while (got < sizeof line - 1 && (k = read(fds[0], line + got, sizeof line - 1 - got)) > 0)
    got += (size_t)k;
  close(fds[0]);
  int status;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return r;
  unlink(heap_path);
  char ns[32];
  field(line, "alloc=", r.alloc, sizeof r.alloc, 0);
  field(line, "prof=", r.prof, sizeof r.prof, 0);
  field(line, "pprt_rate=", r.rate, sizeof r.rate, 0);
  field(line, "version=", r.version, sizeof r.version, 1);
  field(line, "ns=", ns, sizeof ns, 0);
  r.ns = atof(ns);
  r.ok = r.alloc[0] && r.ns > 0;
  return r;
}

/* Whether a configuration runs as asked; says why not once per family. */
static int probe(int i) {
  const config *c = &configs[i];
  result r = run(c, "tight", 0.01, 1);
  if (!r.ok) {
    printf("  %s: the workload failed\n", c->label);
    return 0;
  }
  if (strcmp(r.alloc, c->alloc) != 0) {
    if (i == JE)
      printf("  jemalloc with prof not found (apt-get install libjemalloc2)\n");
    else if (i == TC)
      printf("  tcmalloc not found (apt-get install libgoogle-perftools4)\n");
    else if (i != JE_19 && i != JE_0 && i != TC_512K && i != TC_1)
      printf("  %s: malloc is served by %s, not %s\n", c->label, r.alloc, c->alloc);
    return 0;
  }
  if (c->prof && strcmp(r.prof, c->prof) != 0) {
    printf("  jemalloc found but without prof (opt.prof=%s; built without --enable-prof?): "
           "skipping its prof rows\n",
           r.prof);
    return 0;
  }
  if (c->rate && strcmp(r.rate, c->rate) != 0) {
    printf("  %s: pprt_heap_rate() is %s, expected %s\n", c->label, r.rate, c->rate);
    return 0;
  }
  snprintf(versions[i], sizeof versions[i], "%s", r.version);
  return 1;
}

/* ---- the slow path in this process, through the custom-allocator API -------- */

static void *volatile note_base;

/* This thread's CPU time, as the workload measures it. */
static double cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per pprt_alloc_note + pprt_free_note pair of 4096 blocks at a time,
 * called at stack depth `depth`, median of batches over `seconds`. */
__attribute__((noinline)) static double notes(int depth, double seconds) {
  if (depth > 1) {
    double r = notes(depth - 1, seconds);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the frames stay */
    return r;
  }
  enum { BATCH = 4096, MAXB = 4001 };
  static double batch[MAXB];
  char *base = note_base;
  int nb = 0;
  double start = cpu_ns();
  while (nb < MAXB && cpu_ns() - start < seconds * 1e9) {
    double t0 = cpu_ns();
    for (int i = 0; i < BATCH; i++)
      pprt_alloc_note(base + (size_t)i * 64, 64);
    for (int i = 0; i < BATCH; i++)
      pprt_free_note(base + (size_t)i * 64);
    batch[nb++] = (cpu_ns() - t0) / BATCH;
  }
  return median(batch, nb);
}

/* ---- output ---------------------------------------------------------------------- */

static double fig[NCONFIG][NWORK];

static void row(int i, const char *note) {
  if (skipped[i])
    return;
  printf("  %-34s", configs[i].label);
  for (int w = 0; w < NWORK; w++) {
    int b = configs[i].base;
    if (b == i)
      printf(" %8.2f      base        ", fig[i][w]);
    else
      printf(" %8.2f  %6.3fx %+8.2f", fig[i][w], fig[i][w] / fig[b][w], fig[i][w] - fig[b][w]);
  }
  printf("  %s\n", note);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 9;
  double seconds = argc > 2 ? atof(argv[2]) : 0.2;
  if (rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0)) {
    fprintf(stderr, "usage: %s [rounds 1-%d] [seconds per run > 0]\n", argv[0], MAX_ROUNDS);
    return 2;
  }
  char dir[] = "/tmp/pprt-bench-heap-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(heap_path, sizeof heap_path, "%s/heap.pb.gz", dir);
  snprintf(path_env, sizeof path_env, "PPRT_HEAPPROFILE=%s", heap_path);

  printf("pprt heap benchmark: 64-byte malloc+free pairs in a child process per row,\n"
         "median of %d round-robin runs of %.2f s (each the median of 31 slices\n"
         "of the child's thread CPU time)\n",
         rounds, seconds);
  printf("\nprobing the allocators\n");
  int any_skipped = 0;
  configs[FLOOR].preload = null_lib;
  for (int i = 0; i < NCONFIG; i++) {
    /* A jemalloc without prof is said once, at lg_prof_sample:19. */
    skipped[i] = (i == FLOOR && null_lib == NULL) || skipped[configs[i].base] ||
                 (i == JE_0 && skipped[JE_19]) || !probe(i);
    any_skipped |= skipped[i];
  }
  if (skipped[GLIBC] || skipped[PPRT_512K]) {
    fprintf(stderr, "bench/heap: the glibc or pprt rows cannot run\n");
    return 1;
  }
  if (!any_skipped)
    printf("  all found\n");

  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < NCONFIG; i++)
      for (int w = 0; w < NWORK; w++) {
        if (skipped[i])
          continue;
        result res = run(&configs[i], workloads[w], seconds, 0);
        if (!res.ok) {
          fprintf(stderr, "bench/heap: %s %s failed\n", configs[i].label, workloads[w]);
          return 1;
        }
        runs[i][w][r] = res.ns;
      }
  for (int i = 0; i < NCONFIG; i++)
    for (int w = 0; w < NWORK; w++)
      if (!skipped[i])
        fig[i][w] = median(runs[i][w], rounds);

  printf("\n1. a malloc(64)+free pair: ns, ratio and ns added against the row's base\n");
  printf("  %-34s %-27s%-27s\n", "", " tight loop", " window of 4096 live blocks");
  printf("  %-34s", "");
  for (int w = 0; w < NWORK; w++)
    printf(" %8s  %7s %8s", "ns/pair", "ratio", "+ns");
  printf("\n");
  char note[160];
  snprintf(note, sizeof note, "glibc %s", gnu_get_libc_version());
  row(GLIBC, note);
  row(FLOOR, "malloc/free that only jump to glibc's");
  row(PPRT_OFF, "preloaded, no PPRT_HEAPPROFILE");
  row(PPRT_512K, "the target: <= 1.15x");
  row(PPRT_ALL, "every allocation sampled");
  if (!skipped[JE]) {
    printf("\n");
    versions[JE][strcspn(versions[JE], "-")] = '\0'; /* 5.3.0-0-g<commit> */
    snprintf(note, sizeof note, "jemalloc %s; %.2fx / %.2fx glibc", versions[JE],
             fig[JE][0] / fig[GLIBC][0], fig[JE][1] / fig[GLIBC][1]);
    row(JE, note);
    row(JE_19, "512 KiB, jemalloc's default interval");
    row(JE_0, "every allocation sampled");
  }
  if (!skipped[TC]) {
    printf("\n");
    snprintf(note, sizeof note, "%s; %.2fx / %.2fx glibc", versions[TC], fig[TC][0] / fig[GLIBC][0],
             fig[TC][1] / fig[GLIBC][1]);
    row(TC, note);
    row(TC_512K, "512 KiB");
    row(TC_1, "every allocation sampled");
  }

  /* 2. A sampled allocation: from the rows above, and timed in-process. */
  printf("\n2. a sampled allocation (its malloc and its free)\n");
  for (int w = 0; w < NWORK; w++)
    printf("  pprt rate 1 - glibc, %-6s        %8.0f ns per sampled pair (unwind, lock, tables)\n",
           workloads[w], fig[PPRT_ALL][w] - fig[GLIBC][w]);
  if (!skipped[JE_0])
    printf("  jemalloc lg_prof_sample:0 - prof off %7.0f ns per sampled pair (tight)\n",
           fig[JE_0][0] - fig[JE][0]);
  if (!skipped[TC_1])
    printf("  tcmalloc sample 1 - sample 0       %8.0f ns per sampled pair (tight)\n",
           fig[TC_1][0] - fig[TC][0]);
  static char arena[4096 * 64];
  note_base = arena;
  double plain[2], sampled[2];
  int depths[2] = {4, 32};
  for (int d = 0; d < 2; d++) {
    pprt_heap_set_rate(0);
    plain[d] = notes(depths[d], 0.3);
    pprt_heap_set_rate(1);
    sampled[d] = notes(depths[d], 0.3);
  }
  pprt_heap_set_rate(0);
  for (int d = 0; d < 2; d++)
    printf("  pprt_alloc_note+pprt_free_note, %2d frames deep: %6.0f ns sampled, %5.1f ns not\n",
           depths[d], sampled[d], plain[d]);
  double p = -expm1(-64.0 / 524288.0);
  printf("  at 512 KiB a 64-byte block is sampled with p = %.3g: %.2f ns per pair on average\n", p,
         p * (fig[PPRT_ALL][0] - fig[GLIBC][0]));

  if (!skipped[FLOOR]) {
    printf("\nwhere pprt's time at 512 KiB goes (ns per pair, tight / window)\n");
    printf("  interposing at all (do-nothing interposer - glibc)      %+6.2f / %+6.2f\n",
           fig[FLOOR][0] - fig[GLIBC][0], fig[FLOOR][1] - fig[GLIBC][1]);
    printf("  pprt's wrappers and checks (pprt 512 KiB - do-nothing)  %+6.2f / %+6.2f\n",
           fig[PPRT_512K][0] - fig[FLOOR][0], fig[PPRT_512K][1] - fig[FLOOR][1]);
  }

  double t = fig[PPRT_512K][0] / fig[GLIBC][0], win = fig[PPRT_512K][1] / fig[GLIBC][1];
  int met = t <= 1.15 && win <= 1.15;
  printf("\nverdict: pprt at 512 KiB costs %.2fx glibc (%+.2f ns) in the tight loop and %.2fx "
         "(%+.2f ns) with the window: target <= 1.15x %s\n",
         t, fig[PPRT_512K][0] - fig[GLIBC][0], win, fig[PPRT_512K][1] - fig[GLIBC][1],
         met ? "met" : "MISSED");
  rmdir(dir);
  return met ? 0 : 1;
}
