/* demo: the program ci/demo records with `pprt record`.
 *
 * Four threads spend their CPU in distinct functions, so the profile has a
 * shape worth looking at: two "hasher" threads in demo_hash_strings, a
 * "sorter" thread in demo_sort_records and main in demo_multiply_matrices.
 * Each allocates at its own site (demo_make_strings, demo_make_records,
 * demo_make_matrix), some of it kept until exit, so a heap profile has both
 * allocated and in-use bytes. For the trace, every batch is a region, the
 * hashers count their batches, and each thread logs when it is done.
 *
 * It links pprt's shared library for the annotations: under pprt record
 * the preloaded copy of pprt answers those calls (the dynamic linker binds
 * them to the first definition, the preload library's), so they reach the
 * trace it is writing.
 *
 * Usage: demo [SECONDS]   (default 2) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pprt.h"

/* Kept as they are written, so the profile names them: no inlining, and
 * with GCC no specialised clones (name.constprop.0). */
#if defined(__GNUC__) && !defined(__clang__)
#define NOINLINE __attribute__((noinline, noclone))
#else
#define NOINLINE __attribute__((noinline))
#endif

static double seconds = 2.0;
static volatile uint64_t sink;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void name_thread(const char *name) {
#ifdef __APPLE__
  pthread_setname_np(name);
#else
  pthread_setname_np(pthread_self(), name);
#endif
  pprt_thread_name(name);
}

/* ---- hashing ------------------------------------------------------------------ */

/* Allocation site 1: many small strings, freed after each batch. */
NOINLINE static char **demo_make_strings(size_t n, uint64_t seed) {
  char **v = malloc(n * sizeof *v);
  for (size_t i = 0; v && i < n; i++) {
    v[i] = malloc(48);
    if (v[i])
      snprintf(v[i], 48, "key-%llu-%zu", (unsigned long long)seed, i * 2654435761u);
  }
  return v;
}

NOINLINE static uint64_t demo_hash_strings(char **v, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int round = 0; round < 40; round++)
    for (size_t i = 0; i < n; i++)
      for (const char *c = v[i]; c && *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

NOINLINE static void *hasher(void *arg) {
  (void)arg;
  name_thread("hasher");
  double end = now() + seconds;
  for (uint64_t batch = 0; now() < end; batch++) {
    pprt_region_begin("hash batch");
    char **v = demo_make_strings(4096, batch);
    if (v) {
      sink ^= demo_hash_strings(v, 4096);
      for (size_t i = 0; i < 4096; i++)
        free(v[i]);
      free(v);
    }
    pprt_region_end();
    pprt_counter("hash batches", (int64_t)batch + 1);
  }
  pprt_log("demo", "hasher done");
  return NULL;
}

/* ---- sorting ------------------------------------------------------------------ */

typedef struct record {
  uint64_t key;
  char payload[56];
} record;

/* Allocation site 2: one large array per batch; every 8th is kept. */
NOINLINE static record *demo_make_records(size_t n, uint64_t seed) {
  record *r = malloc(n * sizeof *r);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; r && i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    r[i].key = x;
    memset(r[i].payload, (int)(x & 0xff), sizeof r[i].payload);
  }
  return r;
}

/* Heapsort, written out so that every frame has a frame pointer (libc's
 * qsort may not, and its caller would vanish from the stacks). */
NOINLINE static void demo_sift_down(record *r, size_t start, size_t n) {
  size_t root = start;
  while (2 * root + 1 < n) {
    size_t child = 2 * root + 1;
    if (child + 1 < n && r[child].key < r[child + 1].key)
      child++;
    if (r[root].key >= r[child].key)
      return;
    record t = r[root];
    r[root] = r[child];
    r[child] = t;
    root = child;
  }
}

NOINLINE static void demo_sort_records(record *r, size_t n) {
  for (size_t i = n / 2; i-- > 0;)
    demo_sift_down(r, i, n);
  for (size_t end = n; end-- > 1;) {
    record t = r[0];
    r[0] = r[end];
    r[end] = t;
    demo_sift_down(r, 0, end);
  }
}

NOINLINE static void *sorter(void *arg) {
  record **kept = arg;
  name_thread("sorter");
  double end = now() + seconds;
  for (uint64_t batch = 0; now() < end; batch++) {
    pprt_region_begin("sort batch");
    record *r = demo_make_records(20000, batch);
    if (r) {
      demo_sort_records(r, 20000);
      sink ^= r[0].key;
      if (batch % 8 == 0 && batch / 8 < 16)
        kept[batch / 8] = r; /* in use at exit */
      else
        free(r);
    }
    pprt_region_end();
  }
  pprt_log("demo", "sorter done");
  return NULL;
}

/* ---- matrices ----------------------------------------------------------------- */

enum { N = 96 };

/* Allocation site 3: three matrices per batch. */
NOINLINE static double *demo_make_matrix(uint64_t seed) {
  double *m = calloc(N * N, sizeof *m);
  for (size_t i = 0; m && i < N * N; i++)
    m[i] = (double)((i * 31 + seed) % 17) / 17.0;
  return m;
}

NOINLINE static void demo_multiply_matrices(const double *a, const double *b, double *c) {
  for (size_t i = 0; i < N; i++)
    for (size_t j = 0; j < N; j++) {
      double s = 0;
      for (size_t k = 0; k < N; k++)
        s += a[i * N + k] * b[k * N + j];
      c[i * N + j] = s;
    }
}

NOINLINE static void multiply_loop(void) {
  double end = now() + seconds;
  for (uint64_t batch = 0; now() < end; batch++) {
    pprt_region_begin("multiply batch");
    double *a = demo_make_matrix(batch), *b = demo_make_matrix(batch + 1), *c = demo_make_matrix(0);
    if (a && b && c) {
      demo_multiply_matrices(a, b, c);
      sink ^= (uint64_t)c[N + 1];
    }
    free(a);
    free(b);
    free(c);
    pprt_region_end();
  }
  pprt_log("demo", "multiply done");
}

int main(int argc, char **argv) {
  if (argc > 1 && (seconds = atof(argv[1])) <= 0) {
    fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
    return 2;
  }
  name_thread("main");
  pprt_log("demo", "start");
  static record *kept[16];
  pthread_t th[3];
  pthread_create(&th[0], NULL, hasher, NULL);
  pthread_create(&th[1], NULL, hasher, NULL);
  pthread_create(&th[2], NULL, sorter, kept);
  multiply_loop();
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  pprt_log("demo", "done");
  printf("demo: done (%s, checksum %llx)\n", pprt_version(), (unsigned long long)sink);
  return 0;
}
