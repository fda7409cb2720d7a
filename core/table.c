/* The hash index of table.h: linear probing, grown at 50% load, full hashes
 * kept so growing never calls back into the caller. */
#include "core/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int grow(pprt__table *t) {
  size_t ncap = t->cap ? t->cap * 2 : 64;
  pprt__table_slot *ns = calloc(ncap, sizeof *ns);
  if (ns == NULL)
    return -1;
  for (size_t i = 0; i < t->cap; i++) {
    pprt__table_slot s = t->slots[i];
    if (s.index_plus_1 == 0)
      continue;
    size_t j = (size_t)s.hash & (ncap - 1);
    while (ns[j].index_plus_1 != 0)
      j = (j + 1) & (ncap - 1);
    ns[j] = s;
  }
  free(t->slots);
  t->slots = ns;
  t->cap = ncap;
  return 0;
}

int64_t pprt__table_intern(pprt__table *t, uint64_t hash, pprt__table_eq eq, const void *ctx,
                           uint32_t new_index) {
  if ((t->count + 1) * 2 > t->cap && grow(t) != 0)
    return -1;
  size_t j = (size_t)hash & (t->cap - 1);
  for (;;) {
    pprt__table_slot *s = &t->slots[j];
    if (s->index_plus_1 == 0) {
      s->hash = hash;
      s->index_plus_1 = new_index + 1;
      t->count++;
      return new_index;
    }
    if (s->hash == hash && eq(ctx, s->index_plus_1 - 1))
      return s->index_plus_1 - 1;
    j = (j + 1) & (t->cap - 1);
  }
}

int64_t pprt__table_find(const pprt__table *t, uint64_t hash, pprt__table_eq eq, const void *ctx) {
  if (t->cap == 0)
    return -1;
  for (size_t j = (size_t)hash & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
    const pprt__table_slot *s = &t->slots[j];
    if (s->index_plus_1 == 0)
      return -1;
    if (s->hash == hash && eq(ctx, s->index_plus_1 - 1))
      return s->index_plus_1 - 1;
  }
}

void pprt__table_free(pprt__table *t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

int pprt__reserve(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need)
    ncap *= 2;
  void *n = realloc(*arr, ncap * elem);
  if (n == NULL)
    return -ENOMEM;
  *arr = n;
  *cap = ncap;
  return 0;
}

struct u64_key {
  const void *const *arr;
  size_t elem;
  uint64_t key;
};

static int u64_eq(const void *ctx, uint32_t idx) {
  const struct u64_key *k = ctx;
  uint64_t v;
  memcpy(&v, (const char *)*k->arr + (size_t)idx * k->elem, sizeof v);
  return v == k->key;
}

int64_t pprt__table_u64_find(const pprt__table *t, const void *arr, size_t elem, uint64_t key) {
  struct u64_key k = {&arr, elem, key};
  return pprt__table_find(t, pprt__hash_finish(key), u64_eq, &k);
}

int64_t pprt__table_u64(pprt__table *t, void **arr, size_t *n, size_t *cap, size_t elem,
                        uint64_t key, int *added) {
  struct u64_key k = {(const void *const *)arr, elem, key};
  uint64_t h = pprt__hash_finish(key);
  int64_t idx = pprt__table_find(t, h, u64_eq, &k);
  if (added)
    *added = idx < 0;
  if (idx >= 0)
    return idx;
  if (pprt__reserve(arr, cap, *n + 1, elem) != 0 ||
      pprt__table_intern(t, h, u64_eq, &k, (uint32_t)*n) < 0)
    return -1;
  char *e = (char *)*arr + *n * elem;
  memset(e, 0, elem);
  memcpy(e, &key, sizeof key);
  return (int64_t)(*n)++;
}

uint64_t pprt__hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = PPRT__HASH_SEED;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = pprt__hash_word(h, w);
    p += 8;
    len -= 8;
  }
  uint64_t w = 0;
  memcpy(&w, p, len);
  h = pprt__hash_word(h, w ^ ((uint64_t)len << 56));
  return pprt__hash_finish(h);
}
