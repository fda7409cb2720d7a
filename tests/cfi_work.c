/* The CFI unwinder's workload, built several ways (tests/CMakeLists.txt):
 * GCC's defaults at -O2 (no frame pointers), -fno-omit-frame-pointer
 * (leaf functions still frameless), -O3 with sibling calls. Each shape is
 * one the frame-pointer walk loses callers in: a frameless leaf, a chain
 * of frameless callers, and a comparator called back through the C
 * library's qsort (Debian's glibc has no frame pointers); and the same
 * leaf inside the program's own signal handler, whose callers are across
 * the kernel's signal frame. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#if defined(__clang__)
#define NOINLINE __attribute__((noinline)) /* clang has no noclone */
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

volatile unsigned long cfi_sink;

/* A leaf: no calls, so no frame even with -fno-omit-frame-pointer. */
NOINLINE static unsigned long cfi_leaf(unsigned long n) {
  unsigned long x = n;
  for (unsigned long i = 0; i < 20000; i++)
    x = x * 6364136223846793005ul + i;
  return x;
}

NOINLINE static unsigned long cfi_middle(unsigned long n) {
  unsigned long r = cfi_leaf(n);
  cfi_sink += r; /* work after the call: not a tail call */
  return r ^ n;
}

NOINLINE static unsigned long cfi_outer(unsigned long n) {
  unsigned long r = cfi_middle(n + 1);
  cfi_sink += r;
  return r;
}

/* Called back through qsort, burning enough to be sampled. */
NOINLINE static int cfi_cmp(const void *a, const void *b) {
  unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
  for (int i = 0; i < 40; i++)
    cfi_sink += i;
  return x < y ? -1 : x > y;
}

NOINLINE static void cfi_sort_caller(unsigned long seed) {
  static unsigned long v[512];
  for (int i = 0; i < 512; i++)
    v[i] = (seed = seed * 6364136223846793005ul + 1442695040888963407ul) >> 11;
  qsort(v, 512, sizeof v[0], cfi_cmp);
  cfi_sink += v[0];
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The CPU time the last cfi_work_run spent in each shape: the truth a
 * profile's shares are held to. */
static double g_outer_seconds, g_sort_seconds;

/* Runs both shapes for `seconds` of this thread's CPU time, timing each. */
__attribute__((visibility("default"))) void cfi_work_run(double seconds) {
  double t = cpu_now(), end = t + seconds;
  unsigned long n = 1;
  g_outer_seconds = g_sort_seconds = 0;
  while (t < end) {
    for (int i = 0; i < 20; i++)
      cfi_sink += cfi_outer(n++);
    double t1 = cpu_now();
    cfi_sort_caller(n);
    double t2 = cpu_now();
    g_outer_seconds += t1 - t;
    g_sort_seconds += t2 - t1;
    t = t2;
  }
}

/* seconds[0]: under cfi_outer, seconds[1]: under cfi_sort_caller, in the
 * last cfi_work_run. */
__attribute__((visibility("default"))) void cfi_work_truth(double seconds[2]) {
  seconds[0] = g_outer_seconds;
  seconds[1] = g_sort_seconds;
}

/* The program's own handler, interrupted by SIGPROF: its callers are on
 * the far side of the signal frame and the C library's restorer. */
static double g_handler_seconds;

NOINLINE static void cfi_on_signal(int sig) {
  (void)sig;
  double end = cpu_now() + g_handler_seconds;
  unsigned long n = 1;
  while (cpu_now() < end)
    for (int i = 0; i < 20; i++)
      cfi_sink += cfi_outer(n++);
}

NOINLINE static void cfi_raise_caller(void) {
  raise(SIGUSR1);
  cfi_sink++;
}

/* Spends `seconds` of CPU in a SIGUSR1 handler (on the thread's own stack)
 * that this raises. */
__attribute__((visibility("default"))) void cfi_work_in_handler(double seconds) {
  struct sigaction sa, old;
  sa.sa_handler = cfi_on_signal;
  sa.sa_flags = 0;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, &old);
  g_handler_seconds = seconds;
  cfi_raise_caller();
  sigaction(SIGUSR1, &old, NULL);
}
