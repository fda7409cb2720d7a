/* The per-unit index of functions and inlined instances (dwarf_index.h). */
#include "platform/posix/dwarf_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void pprt__dw_index_add(pprt__dw_cu_index *ix, uint64_t lo, uint64_t hi, uint64_t die,
                        uint32_t depth) {
  if (ix->err || hi <= lo)
    return;
  if (ix->n == ix->cap) {
    size_t cap = ix->cap ? 2 * ix->cap : 64;
    pprt__dw_scope *v = realloc(ix->v, cap * sizeof *v);
    if (v == NULL) {
      ix->err = -ENOMEM;
      return;
    }
    ix->v = v;
    ix->cap = cap;
  }
  ix->v[ix->n++] = (pprt__dw_scope){lo, hi, 0, die, depth};
}

static int scope_order(const void *pa, const void *pb) {
  const pprt__dw_scope *a = pa, *b = pb;
  if (a->lo != b->lo)
    return a->lo < b->lo ? -1 : 1;
  return a->depth < b->depth ? -1 : a->depth > b->depth;
}

int pprt__dw_index_finish(pprt__dw_cu_index *ix) {
  if (ix->err) {
    int err = ix->err;
    pprt__dw_index_free(ix);
    return err;
  }
  if (ix->n > 1) /* qsort takes no NULL, even for 0 items */
    qsort(ix->v, ix->n, sizeof *ix->v, scope_order);
  uint64_t maxend = 0;
  for (size_t i = 0; i < ix->n; i++) {
    if (ix->v[i].hi > maxend)
      maxend = ix->v[i].hi;
    ix->v[i].maxend = maxend;
  }
  return 0;
}

size_t pprt__dw_index_find(const pprt__dw_cu_index *ix, uint64_t pc, uint64_t *out, size_t max) {
  size_t lo = 0, hi = ix->n;
  while (lo < hi) { /* the first entry starting after pc */
    size_t mid = lo + (hi - lo) / 2;
    if (ix->v[mid].lo <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Entries holding pc start at or before it; maxend says when none
   * earlier can reach it. Collected deepest first by insertion. */
  size_t n = 0;
  uint32_t depth[64];
  if (max > 64)
    max = 64;
  for (size_t i = lo; i-- > 0 && ix->v[i].maxend > pc;) {
    const pprt__dw_scope *s = &ix->v[i];
    if (pc >= s->hi)
      continue;
    size_t at = n;
    while (at > 0 && depth[at - 1] < s->depth)
      at--;
    if (at >= max)
      continue;
    if (n == max)
      n--; /* the outermost is dropped */
    memmove(out + at + 1, out + at, (n - at) * sizeof *out);
    memmove(depth + at + 1, depth + at, (n - at) * sizeof *depth);
    out[at] = s->die;
    depth[at] = s->depth;
    n++;
  }
  return n;
}

void pprt__dw_index_free(pprt__dw_cu_index *ix) {
  free(ix->v);
  memset(ix, 0, sizeof *ix);
}
