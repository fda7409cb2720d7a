/* Exercises every entry point of the malloc family and prints what each
 * returned, in a form that does not depend on addresses, so test_heap can
 * compare a run under the preload library with a plain one. Exits 1 if a
 * result breaks what libc documents.
 *
 * --valgrind leaves out what valgrind's own allocator does not do: pvalloc
 * (it aborts) and errno on calloc overflow. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(const char *what, int ok) {
  printf("%-44s %s\n", what, ok ? "ok" : "FAILED");
  failures += !ok;
}

static int aligned(const void *p, size_t a) {
  return p != NULL && ((uintptr_t)p & (a - 1)) == 0;
}

/* Sizes whose product overflows, hidden from the compiler's warnings. */
static volatile size_t huge = SIZE_MAX / 2;

int main(int argc, char **argv) {
  int valgrind = argc > 1 && strcmp(argv[1], "--valgrind") == 0;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  char *p = malloc(100);
  check("malloc(100)", p != NULL && malloc_usable_size(p) >= 100);
  memset(p, 'x', 100);
  free(p);
  free(NULL);
  check("free(NULL)", 1);

  int *z = calloc(1000, sizeof *z);
  int zero = z != NULL;
  for (int i = 0; zero && i < 1000; i++)
    zero = z[i] == 0;
  check("calloc zeroed", zero);
  free(z);
  errno = 0;
  check("calloc overflow -> NULL, ENOMEM",
        calloc(huge, 4) == NULL && (valgrind || errno == ENOMEM));

  char *r = realloc(NULL, 50);
  check("realloc(NULL, 50) allocates", r != NULL);
  memset(r, 'a', 50);
  r = realloc(r, 5000);
  check("realloc grow keeps the bytes", r != NULL && r[0] == 'a' && r[49] == 'a');
  r = realloc(r, 10);
  check("realloc shrink keeps the bytes", r != NULL && r[9] == 'a');
  char *r0 = realloc(r, 0);
  printf("%-44s %s\n", "realloc(p, 0) returns", r0 ? "a block" : "NULL");
  free(r0);

  errno = 0;
  check("reallocarray overflow -> NULL, ENOMEM",
        reallocarray(NULL, huge, 4) == NULL && errno == ENOMEM);
  long *ra = reallocarray(NULL, 10, sizeof *ra);
  check("reallocarray(NULL, 10, 8)", ra != NULL);
  free(ra);

  void *pm = NULL;
  check("posix_memalign 64", posix_memalign(&pm, 64, 1000) == 0 && aligned(pm, 64));
  free(pm);
  check("posix_memalign 4096", posix_memalign(&pm, 4096, 10) == 0 && aligned(pm, 4096));
  free(pm);
  check("posix_memalign 3 -> EINVAL", posix_memalign(&pm, 3, 10) == EINVAL);

  void *al = aligned_alloc(256, 1024);
  check("aligned_alloc 256", aligned(al, 256));
  free(al);
  void *ma = memalign(128, 100);
  check("memalign 128", aligned(ma, 128));
  free(ma);
  void *va = valloc(100);
  check("valloc page-aligned", aligned(va, page));
  free(va);
  if (!valgrind) {
    void *pv = pvalloc(100);
    check("pvalloc page-aligned, a page usable",
          aligned(pv, page) && malloc_usable_size(pv) >= page);
    free(pv);
  }

  /* many sizes, to cross sample points at any rate */
  for (int i = 0; i < 10000; i++)
    free(malloc((size_t)(i % 512) + 1));
  check("10000 malloc/free pairs", 1);
  return failures ? 1 : 0;
}
