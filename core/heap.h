/* The allocation sampler: Go's heap profile for any C program.
 *
 * Allocated bytes are sampled as a Poisson process with mean `rate` bytes
 * between samples: each thread counts bytes down from a distance drawn from
 * an exponential distribution, and the allocation that crosses zero is
 * sampled (an allocation of s bytes is sampled with probability
 * 1 - exp(-s / rate)). Sampled allocations keep their stack; the heap
 * profile scales each (stack, size) bucket back up by
 * 1 / (1 - exp(-size / rate)).
 *
 * The hooks below are what an allocator wrapper calls (the preload
 * library's malloc family, pprt_alloc_note/pprt_free_note). Their fast paths
 * are inline: an unsampled allocation costs one subtract and a branch on a
 * thread-local counter; an unsampled free one load and a branch on a
 * counting filter indexed by the pointer's hash, so frees of blocks that
 * were never sampled do not touch the shared table.
 */
#ifndef PPRT_CORE_HEAP_H
#define PPRT_CORE_HEAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pprt.h"

/* Bytes the calling thread may still allocate before its next sample point. */
extern __thread int64_t pprt__heap_countdown __attribute__((tls_model("initial-exec")));

/* The counting filter, per hash of a pointer: how many sampled blocks live
 * there (counts, changed under the sampler's lock), and a one-bit summary
 * of "count > 0" that free reads. The summary is 32 KiB where the counts
 * are 512 KiB: with a large live heap, the lookup in every free stays in
 * cache (measured 44 -> 36 ns per pair with 262,144 live blocks). */
#define PPRT__HEAP_FILTER_BITS 18
extern uint16_t pprt__heap_filter[1u << PPRT__HEAP_FILTER_BITS];
extern atomic_uchar pprt__heap_summary[(1u << PPRT__HEAP_FILTER_BITS) / 8];

static inline size_t pprt__heap_filter_slot(const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9e3779b97f4a7c15);
  return (size_t)(h >> (64 - PPRT__HEAP_FILTER_BITS));
}

/* Which allocator a pointer belongs to: the same address may be both a
 * malloc block (an arena's backing store) and a note of the arena. */
enum pprt__heap_domain { PPRT__HEAP_MALLOC = 0, PPRT__HEAP_NOTE = 1 };

/* The slow paths. `frame` is the frame address of the allocator entry
 * point (__builtin_frame_address(0) in it): the recorded stack starts at
 * its caller. */
void pprt__heap_sample(void *ptr, size_t size, void *frame, enum pprt__heap_domain d);
void pprt__heap_forget(void *ptr, enum pprt__heap_domain d);

/* After a successful allocation of size bytes at ptr. */
static inline void pprt__heap_on_alloc(void *ptr, size_t size, void *frame,
                                       enum pprt__heap_domain d) {
  if (__builtin_expect((pprt__heap_countdown -= (int64_t)size) > 0, 1))
    return;
  pprt__heap_sample(ptr, size, frame, d);
  /* Not a tail call: the slow path walks the stack from `frame`, which a
   * tail call would already have released (clang on aarch64 does it). */
  __asm__ volatile("" ::: "memory");
}

/* Whether the block at ptr (not NULL) may be sampled: 0 for nearly every
 * block that is not. */
static inline int pprt__heap_maybe_sampled(const void *ptr) {
  size_t slot = pprt__heap_filter_slot(ptr);
  return __builtin_expect(
      (atomic_load_explicit(&pprt__heap_summary[slot >> 3], memory_order_relaxed) >> (slot & 7)) &
          1,
      0);
}

/* Before ptr is freed (before: after the real free another thread may get
 * the same address and sample it). */
static inline void pprt__heap_on_free(void *ptr, enum pprt__heap_domain d) {
  if (ptr != NULL && pprt__heap_maybe_sampled(ptr))
    pprt__heap_forget(ptr, d);
}

/* A sampled block taken out of the table for a realloc, put back if the
 * realloc fails. */
typedef struct pprt__heap_held {
  void *ptr;
  size_t size;
  uint32_t bucket;
  int held;
} pprt__heap_held;

/* Before a realloc of ptr: removes its record if it is sampled. */
void pprt__heap_realloc_begin(void *ptr, pprt__heap_held *h);
/* After it: ok = 0 puts the record back (the block is unchanged). */
void pprt__heap_realloc_end(pprt__heap_held *h, int ok);

/* The calling thread's allocations are pprt's own from now on (the
 * reader and writer threads): never sampled. Its frees and reallocs are
 * still looked up, since a writer callback may free the program's blocks. */
void pprt__heap_ignore_thread(void);

/* Around a public entry point that allocates pprt's own memory on the
 * program's thread (a session's ring and buffers, a profile being built):
 * its allocations are not sampled, its frees still looked up. pause
 * returns the previous state for resume. */
int pprt__heap_pause(void);
void pprt__heap_resume(int previous);

/* The buckets' counts at one moment, for a profile of what changed since
 * (the HTTP endpoint's heap?seconds=N). */
typedef struct pprt__heap_mark {
  uint64_t *counts; /* allocs, frees of each bucket */
  size_t n;
  int64_t wall_ns;
} pprt__heap_mark;

/* Takes a mark. Errors: -ENOMEM. Free it with pprt__heap_mark_free. */
int pprt__heap_mark_take(pprt__heap_mark *m);
void pprt__heap_mark_free(pprt__heap_mark *m);

/* Writes a heap profile as pprt_heap_write does, showing default_type first
 * ("inuse_space" or "alloc_space"); with since, every value is the change
 * since that mark, as Go's delta profiles, and unchanged samples are left
 * out. Errors: the writer's, -ENOMEM, -EINVAL. */
int pprt__heap_write_profile(pprt_writer out, const char *default_type,
                             const pprt__heap_mark *since);

/* Mean bytes between samples when heap profiling is turned on without a
 * rate: Go's MemProfileRate, jemalloc's lg_prof_sample 19. */
#define PPRT__HEAP_DEFAULT_RATE ((size_t)512 * 1024)

#endif /* PPRT_CORE_HEAP_H */
