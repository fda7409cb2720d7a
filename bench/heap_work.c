/* The workload bench/heap times under each allocator and profiler: 64-byte
 * malloc+free pairs, in a process of its own so LD_PRELOAD and the
 * allocators' variables apply from the start. It links nothing of pprt.
 *
 *   heap_work tight   malloc(64) then free it, as fast as possible
 *   heap_work window  malloc(64), then free a random one of 4096 live
 *                     blocks in its place, so frees are rarely of the block
 *                     just allocated and the pointers spread over the heap
 *
 * It times slices of pairs after a warm-up and prints one line:
 *   alloc=<glibc|jemalloc|tcmalloc> prof=<0|1|-> pprt_rate=<n|-> ns=<median ns per pair>
 *   version=<the allocator's version, to the end of the line>
 * The allocator is asked, not assumed: an LD_PRELOAD that ld.so cannot load
 * is only a warning, and the program would run on glibc.
 *
 * Usage: heap_work tight|window [seconds, default 0.2] */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define SIZE 64
#define WINDOW 4096
#define SLICES 31

static void *live[WINDOW];

/* The thread's CPU time: on a shared machine, time spent preempted by a
 * neighbour is not the allocator's. */
static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Keeps the compiler from pairing malloc with free and deleting both. */
static inline void escape(void *p) {
  __asm__ volatile("" ::"r"(p) : "memory");
}

__attribute__((noinline)) static void tight(long n) {
  for (long i = 0; i < n; i++) {
    void *p = malloc(SIZE);
    escape(p);
    free(p);
  }
}

__attribute__((noinline)) static void window(long n) {
  static uint32_t x = 2463534242u;
  for (long i = 0; i < n; i++) {
    x ^= x << 13; /* xorshift32: a few cycles, the same in every run */
    x ^= x >> 17;
    x ^= x << 5;
    uint32_t k = x & (WINDOW - 1);
    void *p = malloc(SIZE);
    *(volatile char *)p = 1;
    free(live[k]);
    live[k] = p;
  }
}

static double timed(void (*loop)(long), long n) {
  double t0 = now_ns();
  loop(n);
  return (now_ns() - t0) / (double)n;
}

/* Which allocator serves malloc, found by the symbols it exports, and its
 * version. */
static void describe(char *out, size_t len, char *ver, size_t verlen) {
  int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
      (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
  const char *(*tc_version)(int *, int *, const char **) =
      (const char *(*)(int *, int *, const char **))dlsym(RTLD_DEFAULT, "tc_version");
  size_t (*pprt_heap_rate)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "pprt_heap_rate");
  char rate[32] = "-";
  if (pprt_heap_rate)
    snprintf(rate, sizeof rate, "%zu", pprt_heap_rate());
  if (mallctl) {
    const char *version = "?";
    size_t vlen = sizeof version;
    mallctl("version", &version, &vlen, NULL, 0);
    bool prof = false;
    size_t plen = sizeof prof;
    if (mallctl("opt.prof", &prof, &plen, NULL, 0) != 0)
      prof = false; /* built without --enable-prof */
    snprintf(out, len, "alloc=jemalloc prof=%d pprt_rate=%s", prof, rate);
    snprintf(ver, verlen, "%s", version);
  } else if (tc_version) {
    snprintf(out, len, "alloc=tcmalloc prof=- pprt_rate=%s", rate);
    snprintf(ver, verlen, "%s", tc_version(NULL, NULL, NULL));
  } else {
    snprintf(out, len, "alloc=glibc prof=- pprt_rate=%s", rate);
    snprintf(ver, verlen, "-");
  }
}

int main(int argc, char **argv) {
  void (*loop)(long) = NULL;
  if (argc > 1 && strcmp(argv[1], "tight") == 0)
    loop = tight;
  else if (argc > 1 && strcmp(argv[1], "window") == 0)
    loop = window;
  double seconds = argc > 2 ? atof(argv[2]) : 0.2;
  if (loop == NULL || !(seconds > 0)) {
    fprintf(stderr, "usage: %s tight|window [seconds > 0]\n", argv[0]);
    return 2;
  }
  for (int i = 0; i < WINDOW; i++)
    live[i] = malloc(SIZE);

  /* Warm-up, which also sizes the slices: SLICES of them fill `seconds`. */
  long n = 1 << 12;
  double ns;
  while ((ns = timed(loop, n)) * (double)n < 20e6 && n < (1L << 26))
    n *= 2;
  long per_slice = (long)(seconds * 1e9 / SLICES / ns) + 1;

  double slice[SLICES];
  for (int i = 0; i < SLICES; i++)
    slice[i] = timed(loop, per_slice);
  qsort(slice, SLICES, sizeof slice[0], cmp_double);

  char what[256], version[128];
  describe(what, sizeof what, version, sizeof version);
  printf("%s ns=%.3f version=%s\n", what, slice[SLICES / 2], version);
  for (int i = 0; i < WINDOW; i++)
    free(live[i]);
  return 0;
}
