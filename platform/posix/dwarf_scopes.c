/* The per-unit index of functions and inlined instances (dwarf_scopes.h).
 *
 * Why: dwarf_getscopes finds the scopes around an address by walking the
 * unit's DIE tree from its root, so a profile with thousands of addresses
 * in a large unit (glibc's malloc.c) walks it thousands of times. One walk
 * collects every function's and inlined instance's address ranges; each
 * address is then a binary search and a short look back, as in the symbol
 * table (elf_symbols.c). */
#include "platform/posix/dwarf_scopes.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
  pprt__dw_cu_index *ix;
  size_t cap;
  int err;
} builder;

static void push(builder *b, Dwarf_Addr lo, Dwarf_Addr hi, Dwarf_Off die, uint32_t depth) {
  if (b->err || hi <= lo)
    return;
  if (b->ix->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    pprt__dw_scope *v = realloc(b->ix->v, cap * sizeof *v);
    if (v == NULL) {
      b->err = -ENOMEM;
      return;
    }
    b->ix->v = v;
    b->cap = cap;
  }
  b->ix->v[b->ix->n++] = (pprt__dw_scope){lo, hi, 0, die, depth};
}

/* Records the code ranges of die's children that are functions, and looks
 * inside those and inside the scopes that can hold them (lexical blocks,
 * namespaces). Types are not entered: code there is declared, and defined
 * at the namespace level. */
static void walk(builder *b, Dwarf_Die *die, uint32_t depth) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0)
    return;
  do {
    int tag = dwarf_tag(&child);
    switch (tag) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_entry_point: {
      Dwarf_Addr base, start, end;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0)
        push(b, start, end, dwarf_dieoffset(&child), depth);
      walk(b, &child, depth + 1);
      break;
    }
    case DW_TAG_lexical_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
      walk(b, &child, depth + 1);
      break;
    default:
      break;
    }
  } while (!b->err && dwarf_siblingof(&child, &child) == 0);
}

static int scope_order(const void *pa, const void *pb) {
  const pprt__dw_scope *a = pa, *b = pb;
  if (a->lo != b->lo)
    return a->lo < b->lo ? -1 : 1;
  return a->depth < b->depth ? -1 : a->depth > b->depth;
}

int pprt__dw_index_build(Dwarf_Die *cu, pprt__dw_cu_index *out) {
  memset(out, 0, sizeof *out);
  builder b = {out, 0, 0};
  walk(&b, cu, 0);
  if (b.err) {
    pprt__dw_index_free(out);
    return b.err;
  }
  if (out->n > 1) /* qsort takes no NULL, even for 0 items */
    qsort(out->v, out->n, sizeof *out->v, scope_order);
  Dwarf_Addr maxend = 0;
  for (size_t i = 0; i < out->n; i++) {
    if (out->v[i].hi > maxend)
      maxend = out->v[i].hi;
    out->v[i].maxend = maxend;
  }
  return 0;
}

size_t pprt__dw_index_find(const pprt__dw_cu_index *ix, Dwarf_Addr pc, Dwarf_Off *out, size_t max) {
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
