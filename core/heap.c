/* The allocation sampler's slow paths and the heap profile (see heap.h).
 *
 * Divisions: the per-thread sampling state (countdown, PRNG, reentrancy
 * flag); the sampled-block table (address -> size and bucket) and the
 * buckets ((stack, size) -> counts), both under one mutex since only
 * sampled events reach them (one per `rate` bytes on average); the public
 * API; the heap profile.
 *
 * Recursion: everything here may allocate (the tables grow, the profile is
 * built). Two per-thread flags keep that apart from the program's memory:
 * `inside` is set while the thread is in the sampler's slow path or holds
 * the mutex, and makes the hooks skip everything (nothing re-enters the
 * mutex); `nosample` marks pprt's own threads and pprt's own allocations
 * on the program's threads, which are not sampled, but whose frees and
 * reallocs are still looked up: a writer callback, or pprt's writer thread,
 * may free a block the program allocated, and that block must leave the
 * profile (one flag for both lost those frees). fork: the mutex is the
 * last in pprt's lock order (core/atfork.h), taken around fork and
 * re-created in the child, which keeps sampling with the parent's records.
 */
#include "core/heap.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atfork.h"
#include "core/platform.h"
#include "core/process.h"
#include "core/profile.h"
#include "core/table.h"
#include "core/thread.h"
#include "core/trace.h"
#include "core/unwind.h"
#include "pprt.h"

#define MAX_STACK 64
/* With sampling off a thread re-reads the rate after this many bytes, so
 * turning it on reaches threads that allocate. */
#define OFF_RECHECK ((int64_t)64 << 20)

__thread int64_t pprt__heap_countdown __attribute__((tls_model("initial-exec")));
static __thread uint64_t rng __attribute__((tls_model("initial-exec")));
static __thread int inside __attribute__((tls_model("initial-exec")));
static __thread int nosample __attribute__((tls_model("initial-exec")));

uint16_t pprt__heap_filter[1u << PPRT__HEAP_FILTER_BITS];
atomic_uchar pprt__heap_summary[(1u << PPRT__HEAP_FILTER_BITS) / 8];

/* Under g_lock: one more / one fewer sampled block in ptr's filter slot;
 * the summary bit follows the count across 0. */
static void filter_add(const void *ptr) {
  size_t slot = pprt__heap_filter_slot(ptr);
  if (pprt__heap_filter[slot]++ == 0)
    atomic_fetch_or_explicit(&pprt__heap_summary[slot >> 3], (unsigned char)(1u << (slot & 7)),
                             memory_order_relaxed);
}

static void filter_remove(const void *ptr) {
  size_t slot = pprt__heap_filter_slot(ptr);
  if (--pprt__heap_filter[slot] == 0)
    atomic_fetch_and_explicit(&pprt__heap_summary[slot >> 3],
                              (unsigned char)~(1u << (slot & 7)), memory_order_relaxed);
}

static atomic_size_t g_rate; /* 0: off */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* ---- buckets: (stack, size) ---------------------------------------------------- */

typedef struct bucket {
  size_t stack_off, depth;
  size_t size;
  uint64_t allocs, frees;
} bucket;

static bucket *g_buckets;
static size_t g_nbuckets, g_buckets_cap;
static uintptr_t *g_stacks; /* all buckets' pcs */
static size_t g_nstacks, g_stacks_cap;
static pprt__table g_bucket_index;

struct bucket_key {
  const uintptr_t *pcs;
  size_t depth, size;
};

static int bucket_eq(const void *ctx, uint32_t idx) {
  const struct bucket_key *k = ctx;
  const bucket *b = &g_buckets[idx];
  return b->size == k->size && b->depth == k->depth &&
         memcmp(g_stacks + b->stack_off, k->pcs, k->depth * sizeof *k->pcs) == 0;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t ncap = *cap ? *cap * 2 : 256;
  while (ncap < need)
    ncap *= 2;
  void *n = realloc(*arr, ncap * elem);
  if (n == NULL)
    return -1;
  *arr = n;
  *cap = ncap;
  return 0;
}

/* Under g_lock. The bucket's index, or -1 on ENOMEM. */
static int64_t bucket_intern(const uintptr_t *pcs, size_t depth, size_t size) {
  uint64_t h = PPRT__HASH_SEED;
  for (size_t i = 0; i < depth; i++)
    h = pprt__hash_word(h, pcs[i]);
  h = pprt__hash_finish(pprt__hash_word(h, size));
  struct bucket_key k = {pcs, depth, size};
  int64_t idx = pprt__table_find(&g_bucket_index, h, bucket_eq, &k);
  if (idx >= 0)
    return idx;
  if (grow((void **)&g_buckets, &g_buckets_cap, g_nbuckets + 1, sizeof *g_buckets) ||
      grow((void **)&g_stacks, &g_stacks_cap, g_nstacks + depth, sizeof *g_stacks))
    return -1;
  idx = pprt__table_intern(&g_bucket_index, h, bucket_eq, &k, (uint32_t)g_nbuckets);
  if (idx < 0)
    return -1;
  memcpy(g_stacks + g_nstacks, pcs, depth * sizeof *pcs);
  g_buckets[idx] = (bucket){g_nstacks, depth, size, 0, 0};
  g_nstacks += depth;
  g_nbuckets++;
  return idx;
}

/* ---- sampled blocks: (address, domain) -> (size, bucket) -------------------------- */

typedef struct block {
  uint64_t key; /* address << 1 | domain; 0 empty; 1 removed */
  size_t size;
  uint32_t bucket;
} block;

#define BLOCK_EMPTY 0
#define BLOCK_GONE 1

static block *g_blocks;
static size_t g_blocks_cap, g_blocks_used; /* used: live + removed slots */

/* Notes may be at any address (a byte arena), so the domain goes below the
 * address rather than into its low bit. p is never NULL here, so a key is
 * never 0 (empty) or 1 (removed). */
static uint64_t block_key(const void *p, enum pprt__heap_domain d) {
  return ((uint64_t)(uintptr_t)p << 1) | (uint64_t)d;
}

static size_t block_slot(uint64_t key, size_t cap) {
  return (size_t)pprt__hash_finish(key) & (cap - 1);
}

static block *block_find(uint64_t key) {
  if (g_blocks_cap == 0)
    return NULL;
  for (size_t i = block_slot(key, g_blocks_cap);; i = (i + 1) & (g_blocks_cap - 1)) {
    if (g_blocks[i].key == key)
      return &g_blocks[i];
    if (g_blocks[i].key == BLOCK_EMPTY)
      return NULL;
  }
}

static int blocks_rehash(size_t ncap) {
  block *nb = calloc(ncap, sizeof *nb);
  if (nb == NULL)
    return -1;
  size_t used = 0;
  for (size_t i = 0; i < g_blocks_cap; i++) {
    if (g_blocks[i].key <= BLOCK_GONE)
      continue;
    size_t j = block_slot(g_blocks[i].key, ncap);
    while (nb[j].key != BLOCK_EMPTY)
      j = (j + 1) & (ncap - 1);
    nb[j] = g_blocks[i];
    used++;
  }
  free(g_blocks);
  g_blocks = nb;
  g_blocks_cap = ncap;
  g_blocks_used = used;
  return 0;
}

static int block_insert(uint64_t key, size_t size, uint32_t b) {
  if ((g_blocks_used + 1) * 2 > g_blocks_cap &&
      blocks_rehash(g_blocks_cap ? g_blocks_cap * 2 : 1024) != 0)
    return -1;
  size_t i = block_slot(key, g_blocks_cap);
  while (g_blocks[i].key > BLOCK_GONE)
    i = (i + 1) & (g_blocks_cap - 1);
  if (g_blocks[i].key == BLOCK_EMPTY)
    g_blocks_used++;
  g_blocks[i] = (block){key, size, b};
  return 0;
}

/* ---- sampling ------------------------------------------------------------------------ */

static uint64_t next_random(void) {
  if (rng == 0) {
    /* Seeded per thread from its id, the clock and a stack address. */
    uintptr_t here = (uintptr_t)&here;
    rng = pprt__hash_finish(pprt__os_monotonic_ns() ^ (pprt__thread_id() << 32) ^ here) | 1;
  }
  /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * UINT64_C(2685821657736338717);
}

/* The distance to the next sample: exponential with mean rate, by the
 * inverse CDF; 0 at rate 1 (every allocation). */
static int64_t draw(size_t rate) {
  if (rate <= 1)
    return 0;
  /* u in (0, 1]: 53 random bits, never 0. */
  double u = ((double)(next_random() >> 11) + 1.0) / 9007199254740992.0;
  double d = -log(u) * (double)rate;
  return d > 9e18 ? INT64_MAX : (int64_t)d + 1;
}

/* Takes the mutex with the thread marked inside, so that what it frees
 * or allocates meanwhile does not come back for the mutex. Returns the
 * previous mark for unlock_heap. */
static int lock_heap(void) {
  int was = inside;
  inside = 1;
  pthread_mutex_lock(&g_lock);
  return was;
}

static void unlock_heap(int was) {
  pthread_mutex_unlock(&g_lock);
  inside = was;
}

/* The forking thread holds the mutex from prepare to parent or child:
 * another fork handler's free in between must not wait for it. */
static int fork_was_inside;

static void atfork_prepare(void) {
  fork_was_inside = lock_heap();
}

static void atfork_parent(void) {
  unlock_heap(fork_was_inside);
}

static void atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_lock = fresh;
  inside = fork_was_inside;
}

static const pprt__fork_hooks fork_hooks = {atfork_prepare, atfork_parent, atfork_child};

static void install_atfork(void) {
  pprt__fork_register(PPRT__FORK_HEAP, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_atfork_once, install_atfork)

/* Records a sampled block: its stack from `frame` up, its bucket, its
 * table entry and its filter count. */
static void record(void *ptr, size_t size, void *frame, enum pprt__heap_domain d) {
  uintptr_t pcs[MAX_STACK];
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  size_t depth = 0;
  if (PPRT__DEFAULT_UNWINDER == PPRT_UNWIND_CFI) {
    /* From this function's own registers up through the allocator's
     * entry point, so callers built without frame pointers keep theirs. */
    pprt__os_regs regs;
    PPRT__UNWIND_REGS_HERE(&regs);
    depth = pprt__unwind_cfi_above(&regs, (uintptr_t)frame, pprt__thread_self()->stack, pcs,
                                   MAX_STACK);
  }
  if (depth == 0)
    depth = pprt__unwind_frames((uintptr_t)frame, here, pprt__thread_self()->stack, pcs,
                                MAX_STACK);
  /* Into a running trace too (nothing happens when none runs). */
  pprt__trace_alloc_sample(pprt__thread_id(), pprt__os_monotonic_ns(), (uint64_t)(uintptr_t)ptr,
                           size, pcs, depth);
  pthread_mutex_lock(&g_lock);
  int64_t b = bucket_intern(pcs, depth, size);
  block *old = b >= 0 ? block_find(block_key(ptr, d)) : NULL;
  if (old != NULL) {
    /* Its free was never seen (a note's allocator that did not say): the
     * address holds the new block now, so the old one is gone. One entry
     * per address, or a later free would leave the other in use. */
    g_buckets[old->bucket].frees++;
    old->size = size;
    old->bucket = (uint32_t)b;
    g_buckets[b].allocs++;
  } else if (b >= 0 && block_insert(block_key(ptr, d), size, (uint32_t)b) == 0) {
    g_buckets[b].allocs++;
    filter_add(ptr);
  }
  pthread_mutex_unlock(&g_lock);
}

void pprt__heap_sample(void *ptr, size_t size, void *frame, enum pprt__heap_domain d) {
  if (inside || nosample) {
    pprt__heap_countdown = 1; /* decide again at the thread's next allocation */
    return;
  }
  inside = 1;
  size_t rate = atomic_load_explicit(&g_rate, memory_order_relaxed);
  if (rate == 0) {
    pprt__heap_countdown = OFF_RECHECK;
  } else if (rng == 0 && rate > 1) {
    /* The thread's first sample point: start its Poisson process here,
     * counting this allocation against the first distance. */
    pprt__heap_countdown = draw(rate) - (int64_t)size;
    if (pprt__heap_countdown <= 0) {
      record(ptr, size, frame, d);
      pprt__heap_countdown = draw(rate);
    }
  } else {
    record(ptr, size, frame, d);
    pprt__heap_countdown = draw(rate);
  }
  inside = 0;
}

/* Under g_lock: takes the block's record out, updating its bucket. */
static int take_block(uint64_t key, const void *ptr, block *out) {
  block *bl = block_find(key);
  if (bl == NULL)
    return 0;
  *out = *bl;
  bl->key = BLOCK_GONE;
  filter_remove(ptr);
  return 1;
}

/* Also on pprt's own threads and with sampling paused: the block may be
 * the program's (freed in a writer callback). Not from inside the slow
 * path, which frees only pprt's memory. */
void pprt__heap_forget(void *ptr, enum pprt__heap_domain d) {
  if (inside)
    return;
  block bl;
  int was = lock_heap();
  int sampled = take_block(block_key(ptr, d), ptr, &bl);
  if (sampled)
    g_buckets[bl.bucket].frees++;
  unlock_heap(was);
  if (sampled)
    pprt__trace_free_sample(pprt__thread_id(), pprt__os_monotonic_ns(), (uint64_t)(uintptr_t)ptr);
}

void pprt__heap_realloc_begin(void *ptr, pprt__heap_held *h) {
  h->held = 0;
  if (ptr == NULL || inside || !pprt__heap_maybe_sampled(ptr))
    return;
  block bl;
  int was = lock_heap();
  if (take_block(block_key(ptr, PPRT__HEAP_MALLOC), ptr, &bl)) {
    h->ptr = ptr;
    h->size = bl.size;
    h->bucket = bl.bucket;
    h->held = 1;
  }
  unlock_heap(was);
}

void pprt__heap_realloc_end(pprt__heap_held *h, int ok) {
  if (!h->held)
    return;
  int was = lock_heap();
  if (ok) {
    g_buckets[h->bucket].frees++; /* the old block is gone */
  } else if (block_insert(block_key(h->ptr, PPRT__HEAP_MALLOC), h->size, h->bucket) == 0) {
    filter_add(h->ptr);
  }
  unlock_heap(was);
}

void pprt__heap_ignore_thread(void) {
  nosample = 1;
}

int pprt__heap_pause(void) {
  int was = nosample;
  nosample = 1;
  return was;
}

void pprt__heap_resume(int previous) {
  nosample = previous;
}

/* ---- the public API -------------------------------------------------------------------- */

int pprt_heap_set_rate(size_t bytes) {
  pthread_once(&g_atfork_once, install_atfork);
  if (bytes > 0 && PPRT__DEFAULT_UNWINDER == PPRT_UNWIND_CFI) {
    /* The images loaded now; later ones at each heap profile written (a
     * pc in an image without a table walks by frame pointers). */
    int paused = pprt__heap_pause();
    pprt__cfi_refresh();
    pprt__heap_resume(paused);
  }
  atomic_store(&g_rate, bytes);
  /* This thread starts its process now; others at their next sample point
   * (or within OFF_RECHECK bytes if sampling was off). */
  rng = 0;
  pprt__heap_countdown = 0;
  return 0;
}

size_t pprt_heap_rate(void) {
  return atomic_load(&g_rate);
}

void pprt_alloc_note(void *ptr, size_t size) {
  if (ptr != NULL)
    pprt__heap_on_alloc(ptr, size, __builtin_frame_address(0), PPRT__HEAP_NOTE);
}

void pprt_free_note(void *ptr) {
  pprt__heap_on_free(ptr, PPRT__HEAP_NOTE);
}

/* ---- the heap profile --------------------------------------------------------------------- */

/* Go's scaleHeapSample: a block of `size` bytes was sampled with
 * probability 1 - exp(-size / rate); each sampled one stands for
 * 1 / that many. */
static double scale_for(size_t size, size_t rate) {
  if (rate <= 1 || size == 0)
    return 1.0;
  return 1.0 / (1.0 - exp(-(double)size / (double)rate));
}

int pprt_heap_write(pprt_writer out) {
  return pprt__heap_write_profile(out, "inuse_space", NULL);
}

int pprt__heap_mark_take(pprt__heap_mark *m) {
  int was_busy = pprt__heap_pause();
  int rc = 0;
  int was = lock_heap();
  m->n = g_nbuckets;
  m->counts = malloc((g_nbuckets ? g_nbuckets : 1) * 2 * sizeof *m->counts);
  if (m->counts == NULL) {
    m->n = 0;
    rc = -ENOMEM;
  }
  for (size_t i = 0; i < m->n; i++) {
    m->counts[2 * i] = g_buckets[i].allocs;
    m->counts[2 * i + 1] = g_buckets[i].frees;
  }
  unlock_heap(was);
  m->wall_ns = (int64_t)pprt__os_wall_ns();
  pprt__heap_resume(was_busy);
  return rc;
}

void pprt__heap_mark_free(pprt__heap_mark *m) {
  free(m->counts);
  m->counts = NULL;
  m->n = 0;
}

int pprt__heap_write_profile(pprt_writer out, const char *default_type,
                             const pprt__heap_mark *since) {
  if (out.write == NULL)
    return -EINVAL;
  int was_busy = pprt__heap_pause();
  size_t rate = atomic_load(&g_rate);
  if (rate > 0 && PPRT__DEFAULT_UNWINDER == PPRT_UNWIND_CFI)
    pprt__cfi_refresh();
  static const pprt__value_type types[4] = {{"alloc_objects", "count"},
                                            {"alloc_space", "bytes"},
                                            {"inuse_objects", "count"},
                                            {"inuse_space", "bytes"}};
  pprt__profile *p;
  int rc = pprt__profile_new(&p, types, 4, (pprt__value_type){"space", "bytes"},
                             (int64_t)(rate ? rate : PPRT__HEAP_DEFAULT_RATE));
  if (rc != 0) {
    pprt__heap_resume(was_busy);
    return rc;
  }
  pprt__profile_set_default_type(p, default_type);
  int64_t now = (int64_t)pprt__os_wall_ns();
  if (since)
    pprt__profile_set_time(p, since->wall_ns, now - since->wall_ns);
  else
    pprt__profile_set_time(p, now, 0);
  char comment[160];
  snprintf(comment, sizeof comment, "pprt %s heap profile: one sample per %zu bytes allocated%s%s",
           pprt_version(), rate, rate == 0 ? " (sampling off)" : "",
           since ? "; the change over the profile's duration" : "");
  pprt__profile_add_comment(p, comment);
  const char *ending = pprt__profile_ending();
  if (ending) {
    snprintf(comment, sizeof comment, "ending: written %s", ending);
    pprt__profile_add_comment(p, comment);
  }

  /* The buckets and their stacks are copied under the mutex and the
   * profile is built from the copy: adding a sample (hashing its stack,
   * interning its labels) costs far more than copying it, and every
   * sampled allocation and every free of a sampled block in the program
   * waits for the mutex meanwhile. */
  int was = lock_heap();
  size_t nbuckets = g_nbuckets, nstacks = g_nstacks;
  bucket *buckets = malloc((nbuckets ? nbuckets : 1) * sizeof *buckets);
  uintptr_t *stacks = malloc((nstacks ? nstacks : 1) * sizeof *stacks);
  if (buckets && stacks) {
    if (nbuckets) /* none yet: both tables are still NULL */
      memcpy(buckets, g_buckets, nbuckets * sizeof *buckets);
    if (nstacks)
      memcpy(stacks, g_stacks, nstacks * sizeof *stacks);
  } else {
    rc = -ENOMEM;
  }
  unlock_heap(was);
  for (size_t i = 0; i < nbuckets && rc == 0; i++) {
    const bucket *b = &buckets[i];
    double s = scale_for(b->size, rate);
    /* A delta, as Go's net/http/pprof: every value is now minus then. */
    uint64_t allocs0 = 0, frees0 = 0;
    if (since && i < since->n) {
      allocs0 = since->counts[2 * i];
      frees0 = since->counts[2 * i + 1];
    }
    double allocs = (double)(b->allocs - allocs0);
    double live = (double)(b->allocs - b->frees) - (double)(allocs0 - frees0);
    if (since && allocs == 0 && live == 0)
      continue;
    int64_t v[4] = {(int64_t)llround(allocs * s), (int64_t)llround(allocs * (double)b->size * s),
                    (int64_t)llround(live * s), (int64_t)llround(live * (double)b->size * s)};
    pprt__label l[1 + PPRT__PROCESS_LABELS] = {{"bytes", NULL, (int64_t)b->size, "bytes"}};
    size_t nl = 1 + pprt__process_labels(l + 1);
    rc = pprt__profile_add(p, stacks + b->stack_off, b->depth, 0, v, l, nl);
  }
  free(buckets);
  free(stacks);

  if (rc == 0)
    rc = pprt__profile_add_os_mappings(p);
  if (rc == 0)
    rc = pprt__profile_write_os(p, 1, out);
  pprt__profile_free(p);
  pprt__heap_resume(was_busy);
  return rc;
}
