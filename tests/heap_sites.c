/* An ordinary program for the heap tests, run under the preload library:
 * MIB MiB allocated in 64-byte blocks at site_a, MIB MiB in 8 KiB blocks
 * at site_b, MIB MiB in 1 MiB blocks at site_c; then every other block of
 * each site freed, so half of each stays in use at exit.
 *
 * Usage: heap_sites MIB */
#include <stdio.h>
#include <stdlib.h>

/* Not tail calls: each site's frame must be on the stack inside malloc. */
#define SITE(name, size)                                                                         \
  __attribute__((noinline)) void *name(void);                                                    \
  void *name(void) {                                                                             \
    void *p = malloc(size);                                                                      \
    __asm__ volatile("" ::"r"(p) : "memory");                                                    \
    return p;                                                                                    \
  }

SITE(site_a, 64)
SITE(site_b, 8192)
SITE(site_c, 1 << 20)

static void run(void *(*site)(void), size_t size, size_t mib) {
  size_t n = (mib << 20) / size;
  void **p = calloc(n, sizeof *p);
  if (!p)
    exit(3);
  for (size_t i = 0; i < n; i++)
    if ((p[i] = site()) == NULL)
      exit(4);
  for (size_t i = 1; i < n; i += 2)
    free(p[i]);
  free(p); /* the even blocks stay allocated until exit */
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MIB\n", argv[0]);
    return 2;
  }
  size_t mib = (size_t)atol(argv[1]);
  run(site_a, 64, mib);
  run(site_b, 8192, mib);
  run(site_c, 1 << 20, mib);
  return 0;
}
