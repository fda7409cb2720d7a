/* The trace's intern tables: strings and stacks to ids, lock-free and
 * async-signal-safe, for the life of the process (ids are global; each
 * generation lists the ones it uses). Entries live in mapped arenas that
 * are never freed, so a published entry stays readable by any thread. */
#ifndef PPRT_CORE_TRACE_INTERN_H
#define PPRT_CORE_TRACE_INTERN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A bump allocator over mapped blocks, never freed: an entry, once
 * published, stays readable by any thread for the life of the process. */
typedef struct ablock {
  size_t cap;
  _Atomic size_t used;
  _Alignas(8) uint8_t data[];
} ablock;

typedef struct arena {
  ablock *_Atomic cur;
  _Atomic size_t mapped;
  size_t limit;
} arena;

/* An interned key: a string's bytes (NUL-terminated) or a stack's pcs as
 * uint64_t words. */
typedef struct ientry {
  uint64_t hash;
  uint32_t id;
  uint32_t len; /* bytes */
  _Alignas(8) uint8_t bytes[];
} ientry;

typedef struct itable {
  ientry *_Atomic *slots;
  ientry *_Atomic *by_id; /* [1, max_ids] */
  size_t cap;             /* slots, a power of two */
  uint32_t max_ids;
  _Atomic uint32_t next_id;
  arena ar;
} itable;

extern itable pprt__trace_strings, pprt__trace_stacks;

/* Makes both tables, once. 0, or -ENOMEM. */
int pprt__trace_tables_ready(void);

/* The entry for key, inserted when new. NULL when the table or its arena
 * is full: the caller writes the key inline instead. AS-safe. */
const ientry *pprt__itable_intern(itable *t, const void *key, uint32_t len, uint64_t hash);

/* The entry of id, or NULL. AS-safe. */
const ientry *pprt__itable_entry(itable *t, uint32_t id);

#endif /* PPRT_CORE_TRACE_INTERN_H */
