/* An open-addressing hash index: maps a 64-bit hash plus a caller-defined
 * equality to a dense index (0, 1, 2, ...) into the caller's own arrays. The
 * profile builder and the trace encoder keep their entries in arrays and use
 * this to find them. Not AS-safe: it allocates when it grows. */
#ifndef PPRT_CORE_TABLE_H
#define PPRT_CORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pprt__table_slot {
  uint64_t hash;
  uint32_t index_plus_1; /* 0: empty */
} pprt__table_slot;

typedef struct pprt__table {
  pprt__table_slot *slots;
  size_t cap; /* a power of two, or 0 */
  size_t count;
} pprt__table;

/* Returns 1 when entry idx equals the key being looked up. */
typedef int (*pprt__table_eq)(const void *ctx, uint32_t idx);

/* Looks up hash/eq. Returns the entry's index, or when absent inserts
 * new_index and returns it. Returns -1 (table unchanged) when growing fails.
 * The caller checks whether the result equals new_index to know it was
 * inserted. */
int64_t pprt__table_intern(pprt__table *t, uint64_t hash, pprt__table_eq eq, const void *ctx,
                           uint32_t new_index);

/* Looks up hash/eq without inserting: the entry's index, or -1. */
int64_t pprt__table_find(const pprt__table *t, uint64_t hash, pprt__table_eq eq, const void *ctx);

void pprt__table_free(pprt__table *t);

/* Hashing: fold words in, then finish. */
static inline uint64_t pprt__hash_word(uint64_t h, uint64_t w) {
  h ^= w;
  h *= UINT64_C(0x100000001b3);
  return h ^ (h >> 29);
}

static inline uint64_t pprt__hash_finish(uint64_t h) {
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  h *= UINT64_C(0xc4ceb9fe1a85ec53);
  return h ^ (h >> 33);
}

uint64_t pprt__hash_bytes(const void *data, size_t len);

/* Grows *arr (of elem-byte items, *cap of them) to hold at least need,
 * doubling. Returns 0, or -ENOMEM with *arr and *cap unchanged. For the
 * arrays a table indexes. */
int pprt__reserve(void **arr, size_t *cap, size_t need, size_t elem);
#define PPRT__RESERVE(arr, cap, need) pprt__reserve((void **)&(arr), &(cap), (need), sizeof *(arr))

#define PPRT__HASH_SEED UINT64_C(0xcbf29ce484222325)

/* For an array of elem-byte entries that begin with a uint64_t key, *n in
 * use and indexed by t: the index of the entry whose key is `key`, added
 * at the end (zeroed but for its key, the array grown as pprt__reserve
 * does) when there is none. -1 when growing fails. *added (may be NULL)
 * says whether it was added. */
int64_t pprt__table_u64(pprt__table *t, void **arr, size_t *n, size_t *cap, size_t elem,
                        uint64_t key, int *added);
/* The same lookup without adding: the index, or -1. */
int64_t pprt__table_u64_find(const pprt__table *t, const void *arr, size_t elem, uint64_t key);
#define PPRT__TABLE_U64(t, arr, n, cap, key, added)                                                \
  pprt__table_u64((t), (void **)&(arr), &(n), &(cap), sizeof *(arr), (key), (added))

#endif /* PPRT_CORE_TABLE_H */
