/* The malloc family for the allocation sampler on ELF systems (Linux,
 * FreeBSD): definitions that bind ahead of libc's, each calling libc's
 * (found with dlsym(RTLD_NEXT)) and reporting to core/heap.h. The hooks'
 * fast paths are inline: an unsampled malloc adds one subtract and a
 * branch, an unsampled free one load and a branch.
 *
 * Bootstrap: dlsym itself may allocate (glibc's dlerror buffer) before the
 * real functions are known. Those requests are served from a small static
 * arena; its blocks carry their size in a header, free() ignores them,
 * realloc() moves them to real memory and malloc_usable_size() knows them. */
#include <dlfcn.h>
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/heap.h"

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static size_t (*real_usable_size)(void *);

/* ---- the bootstrap arena ------------------------------------------------------- */

#define BOOT_SIZE (64 * 1024)
static alignas(16) unsigned char boot[BOOT_SIZE];
static atomic_size_t boot_used;

typedef struct boot_header {
  size_t size;
  size_t pad; /* keeps blocks 16-aligned */
} boot_header;

static int in_boot(const void *p) {
  return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + BOOT_SIZE;
}

static void *boot_alloc(size_t n) {
  size_t need = sizeof(boot_header) + ((n + 15) & ~(size_t)15);
  size_t at = atomic_fetch_add(&boot_used, need);
  if (at + need > BOOT_SIZE)
    return NULL; /* cannot happen for dlsym's few small requests */
  boot_header *h = (boot_header *)(boot + at);
  h->size = n;
  return h + 1; /* static storage: already zero, as calloc needs */
}

static size_t boot_size(const void *p) {
  return ((const boot_header *)p - 1)->size;
}

/* ---- resolving libc's functions --------------------------------------------------- */

static atomic_int state; /* 0 unresolved, 1 resolving, 2 resolved */
static __thread int resolving_here __attribute__((tls_model("initial-exec")));

static void resolve(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&state, &expected, 1)) {
    while (atomic_load(&state) != 2 && !resolving_here)
      ; /* another thread is resolving: a few microseconds, once */
    return;
  }
  resolving_here = 1;
  real_malloc = dlsym(RTLD_NEXT, "malloc");
  real_free = dlsym(RTLD_NEXT, "free");
  real_calloc = dlsym(RTLD_NEXT, "calloc");
  real_realloc = dlsym(RTLD_NEXT, "realloc");
  real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = dlsym(RTLD_NEXT, "memalign");
  real_valloc = dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
  real_usable_size = dlsym(RTLD_NEXT, "malloc_usable_size");
  resolving_here = 0;
  atomic_store(&state, 2);
}

/* ready() before the functions are resolved: resolves them, unless this
 * thread is doing so already. */
__attribute__((noinline, cold)) static int ready_slow(void) {
  if (resolving_here)
    return 0;
  resolve();
  return !resolving_here && real_malloc != NULL;
}

/* 1 when libc's functions are ready; 0 while this thread resolves them.
 * Inline: as a call it cost every malloc and free a call and a return. */
static inline __attribute__((always_inline)) int ready(void) {
  if (__builtin_expect(atomic_load_explicit(&state, memory_order_acquire) == 2, 1))
    return 1;
  return ready_slow();
}

/* ---- the family ------------------------------------------------------------------------ */

/* malloc at a sample point: the bytes counted in malloc go back on the
 * counter, and the common hook counts them again, crosses zero, and
 * records the block with the stack above malloc's frame. */
__attribute__((noinline)) static void *malloc_sample_point(size_t n, void *frame) {
  pprt__heap_countdown += (int64_t)n;
  void *p = real_malloc(n);
  if (p)
    pprt__heap_on_alloc(p, n, frame, PPRT__HEAP_MALLOC);
  return p;
}

/* The bytes are counted before libc's malloc runs, so an unsampled malloc
 * ends in a jump to it (one subtract, one branch, no call of our own). A
 * request that then fails still counts against the countdown, which only
 * moves the next sample point of a process out of memory. */
EXPORT void *malloc(size_t n) {
  if (!ready())
    return boot_alloc(n);
  if (__builtin_expect((pprt__heap_countdown -= (int64_t)n) > 0, 1))
    return real_malloc(n);
  void *p = malloc_sample_point(n, __builtin_frame_address(0));
  __asm__ volatile("" ::: "memory"); /* malloc's frame lives through the walk */
  return p;
}

__attribute__((noinline)) static void free_maybe_sampled(void *p) {
  pprt__heap_forget(p, PPRT__HEAP_MALLOC);
  if (ready())
    real_free(p);
}

EXPORT void free(void *p) {
  if (p == NULL || in_boot(p))
    return;
  if (pprt__heap_maybe_sampled(p)) {
    free_maybe_sampled(p);
    return;
  }
  if (ready())
    real_free(p);
}

EXPORT void *calloc(size_t n, size_t size) {
  if (!ready()) {
    if (size && n > SIZE_MAX / size)
      return NULL;
    return boot_alloc(n * size);
  }
  void *p = real_calloc(n, size);
  if (p)
    pprt__heap_on_alloc(p, n * size, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

/* realloc's semantics are libc's: realloc(NULL, n) allocates, and what
 * realloc(p, 0) does (glibc frees p and returns NULL) is passed through. */
static void *do_realloc(void *p, size_t n, void *frame) {
  if (!ready()) {
    void *q = boot_alloc(n);
    if (q && p)
      memcpy(q, p, in_boot(p) && boot_size(p) < n ? boot_size(p) : n);
    return q;
  }
  if (p != NULL && in_boot(p)) {
    void *q = real_malloc(n ? n : 1);
    if (q) {
      memcpy(q, p, boot_size(p) < n ? boot_size(p) : n);
      pprt__heap_on_alloc(q, n, frame, PPRT__HEAP_MALLOC);
    }
    return q;
  }
  pprt__heap_held held;
  pprt__heap_realloc_begin(p, &held);
  void *q = real_realloc(p, n);
  /* NULL with n > 0 is a failure: p is untouched. */
  pprt__heap_realloc_end(&held, q != NULL || n == 0);
  if (q)
    pprt__heap_on_alloc(q, n, frame, PPRT__HEAP_MALLOC);
  return q;
}

EXPORT void *realloc(void *p, size_t n) {
  return do_realloc(p, n, __builtin_frame_address(0));
}

EXPORT void *reallocarray(void *p, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  return do_realloc(p, n * size, __builtin_frame_address(0));
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (!ready() || !real_posix_memalign)
    return ENOMEM;
  int rc = real_posix_memalign(out, align, n);
  if (rc == 0 && *out)
    pprt__heap_on_alloc(*out, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return rc;
}

/* The aligned allocators that return a pointer, reported alike. */
#define ALIGNED(fn, params, args, size)                                                           \
  EXPORT void *fn params {                                                                        \
    if (!ready() || !real_##fn)                                                                   \
      return NULL;                                                                                \
    void *p = real_##fn args;                                                                     \
    if (p)                                                                                        \
      pprt__heap_on_alloc(p, size, __builtin_frame_address(0), PPRT__HEAP_MALLOC);               \
    return p;                                                                                     \
  }

ALIGNED(aligned_alloc, (size_t align, size_t n), (align, n), n)
ALIGNED(memalign, (size_t align, size_t n), (align, n), n)
ALIGNED(valloc, (size_t n), (n), n)
ALIGNED(pvalloc, (size_t n), (n), n)

EXPORT size_t malloc_usable_size(void *p) {
  if (p == NULL)
    return 0;
  if (in_boot(p))
    return boot_size(p);
  return ready() && real_usable_size ? real_usable_size(p) : 0;
}
