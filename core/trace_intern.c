/* The trace's intern tables (see trace_intern.h). */
#include "core/trace_intern.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/heap.h"
#include "core/syscalls.h"

#define STR_SLOTS ((size_t)1 << 16)
#define STACK_SLOTS ((size_t)1 << 16)
#define STR_ARENA_LIMIT ((size_t)16 << 20)
#define STACK_ARENA_LIMIT ((size_t)64 << 20)
#define ARENA_BLOCK ((size_t)1 << 20)

itable pprt__trace_strings, pprt__trace_stacks;
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;
static _Atomic int g_tables_ok;

static void *map_zeroed(size_t n) {
  void *p = pprt__sys_mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void *arena_alloc(arena *a, size_t n) {
  n = (n + 7) & ~(size_t)7;
  for (;;) {
    ablock *b = atomic_load_explicit(&a->cur, memory_order_acquire);
    if (b) {
      size_t off = atomic_fetch_add_explicit(&b->used, n, memory_order_relaxed);
      if (off + n <= b->cap)
        return b->data + off;
    }
    size_t size =
        n + offsetof(ablock, data) > ARENA_BLOCK ? n + offsetof(ablock, data) : ARENA_BLOCK;
    if (atomic_load_explicit(&a->mapped, memory_order_relaxed) + size > a->limit)
      return NULL;
    ablock *nb = map_zeroed(size);
    if (nb == NULL)
      return NULL;
    nb->cap = size - offsetof(ablock, data);
    atomic_init(&nb->used, n);
    if (atomic_compare_exchange_strong_explicit(&a->cur, &b, nb, memory_order_acq_rel,
                                                memory_order_acquire)) {
      atomic_fetch_add_explicit(&a->mapped, size, memory_order_relaxed);
      return nb->data;
    }
    munmap(nb, size); /* another thread installed a block first: use it */
  }
}

static int itable_init(itable *t, size_t cap, size_t arena_limit) {
  t->cap = cap;
  t->max_ids = (uint32_t)(cap / 4 * 3);
  t->slots = calloc(cap, sizeof *t->slots);
  t->by_id = calloc((size_t)t->max_ids + 1, sizeof *t->by_id);
  t->ar.limit = arena_limit;
  return t->slots && t->by_id ? 0 : -ENOMEM;
}

static void tables_init(void) {
  /* pprt's memory, not the program's: the first pprt_thread_name may come
   * before any trace, on a thread the heap sampler watches. */
  int paused = pprt__heap_pause();
  if (itable_init(&pprt__trace_strings, STR_SLOTS, STR_ARENA_LIMIT) == 0 &&
      itable_init(&pprt__trace_stacks, STACK_SLOTS, STACK_ARENA_LIMIT) == 0)
    atomic_store_explicit(&g_tables_ok, 1, memory_order_release);
  pprt__heap_resume(paused);
}

int pprt__trace_tables_ready(void) {
  pthread_once(&g_tables_once, tables_init);
  return atomic_load_explicit(&g_tables_ok, memory_order_acquire) ? 0 : -ENOMEM;
}

/* The entry for key, inserted when new. NULL when the table or its arena
 * is full: the caller writes the key inline instead. Lock-free and AS-safe:
 * an insert that loses a race for a slot uses the winner's entry (its own
 * stays unused in the arena, and its id is never referenced). */
const ientry *pprt__itable_intern(itable *t, const void *key, uint32_t len, uint64_t hash) {
  size_t mask = t->cap - 1;
  ientry *mine = NULL;
  for (size_t i = (size_t)hash & mask, n = 0; n < t->cap; i = (i + 1) & mask, n++) {
    ientry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
    for (;;) {
      if (e != NULL) {
        if (e->hash == hash && e->len == len && memcmp(e->bytes, key, len) == 0)
          return e;
        break; /* someone else's key: probe on */
      }
      if (mine == NULL) {
        uint32_t id = atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed) + 1;
        if (id > t->max_ids)
          return NULL;
        mine = arena_alloc(&t->ar, sizeof *mine + len + 1);
        if (mine == NULL)
          return NULL;
        mine->hash = hash;
        mine->id = id;
        mine->len = len;
        memcpy(mine->bytes, key, len);
        mine->bytes[len] = 0;
        atomic_store_explicit(&t->by_id[id], mine, memory_order_release);
      }
      if (atomic_compare_exchange_strong_explicit(&t->slots[i], &e, mine, memory_order_acq_rel,
                                                  memory_order_acquire))
        return mine;
      /* e now holds the winner: compare with it */
    }
  }
  return NULL;
}

const ientry *pprt__itable_entry(itable *t, uint32_t id) {
  if (id == 0 || id > t->max_ids)
    return NULL;
  return atomic_load_explicit(&t->by_id[id], memory_order_acquire);
}
