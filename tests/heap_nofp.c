/* A program built with GCC's -O2 defaults (no frame pointers) for the heap
 * tests, run under the preload library: allocation sites two and three
 * calls below main, so a heap profile shows whether the allocation
 * sampler's walk kept the callers (the frame-pointer walk loses them: the
 * frame pointer register holds data here).
 *
 * Usage: heap_nofp MIB */
#include <stdio.h>
#include <stdlib.h>

volatile unsigned long nofp_sink;

/* Not tail calls: each site's frame is on the stack inside malloc. */
__attribute__((noinline)) void *nofp_site(size_t size);
void *nofp_site(size_t size) {
  void *p = malloc(size);
  __asm__ volatile("" ::"r"(p) : "memory");
  return p;
}

__attribute__((noinline)) static void nofp_run(size_t mib) {
  size_t n = (mib << 20) / 256;
  for (size_t i = 0; i < n; i++) {
    void *p = nofp_site(256);
    if (p == NULL)
      exit(3);
    nofp_sink += (unsigned long)p;
    free(p);
  }
}

__attribute__((noinline)) static void nofp_outer(size_t mib) {
  nofp_run(mib);
  nofp_sink++;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MIB\n", argv[0]);
    return 2;
  }
  nofp_outer((size_t)atol(argv[1]));
  return 0;
}
