/* The malloc family for the allocation sampler on Darwin: dyld's
 * __interpose section sends every other image's calls to ours when the
 * library is inserted with DYLD_INSERT_LIBRARIES; our own calls still reach
 * libSystem's. No bootstrap arena is needed: nothing is looked up at run
 * time. SIP-protected binaries have DYLD_ variables stripped and are not
 * seen. malloc_size (Darwin's malloc_usable_size) is not interposed: blocks
 * are libSystem's, unchanged. */
#include <malloc/malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/heap.h"

static void *my_malloc(size_t n) {
  void *p = malloc(n);
  if (p)
    pprt__heap_on_alloc(p, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

static void my_free(void *p) {
  pprt__heap_on_free(p, PPRT__HEAP_MALLOC);
  free(p);
}

static void *my_calloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p)
    pprt__heap_on_alloc(p, n * size, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

static void *my_realloc(void *p, size_t n) {
  pprt__heap_held held;
  pprt__heap_realloc_begin(p, &held);
  void *q = realloc(p, n);
  pprt__heap_realloc_end(&held, q != NULL || n == 0);
  if (q)
    pprt__heap_on_alloc(q, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return q;
}

static int my_posix_memalign(void **out, size_t align, size_t n) {
  int rc = posix_memalign(out, align, n);
  if (rc == 0 && *out)
    pprt__heap_on_alloc(*out, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return rc;
}

static void *my_aligned_alloc(size_t align, size_t n) {
  void *p = aligned_alloc(align, n);
  if (p)
    pprt__heap_on_alloc(p, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

static void *my_valloc(size_t n) {
  void *p = valloc(n);
  if (p)
    pprt__heap_on_alloc(p, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

#define INTERPOSE(mine, theirs) {(const void *)(mine), (const void *)(theirs)}
__attribute__((used, section("__DATA,__interpose"))) static const struct {
  const void *replacement;
  const void *original;
} heap_interposers[] = {
    INTERPOSE(my_malloc, malloc),
    INTERPOSE(my_free, free),
    INTERPOSE(my_calloc, calloc),
    INTERPOSE(my_realloc, realloc),
    INTERPOSE(my_posix_memalign, posix_memalign),
    INTERPOSE(my_aligned_alloc, aligned_alloc),
    INTERPOSE(my_valloc, valloc),
};
