/* An index of one compilation unit's functions and inlined instances by
 * address, for the source-lines readers (libdw's in dwarf_scopes.c, pprt's
 * own in dwarf_read.c): filled by one walk of the unit's DIEs, then each
 * address is a binary search and a short look back, as in the symbol table
 * (elf_symbols.c), where dwarf_getscopes walks the unit's DIE tree again
 * for every address. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_INDEX_H
#define PPRT_PLATFORM_POSIX_DWARF_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct pprt__dw_scope {
  uint64_t lo, hi; /* [lo, hi), link-time addresses */
  uint64_t maxend; /* the largest hi of this and every entry before it */
  uint64_t die;    /* a DW_TAG_subprogram, _inlined_subroutine or _entry_point */
  uint32_t depth;  /* nesting: an inlined instance is deeper than its caller */
} pprt__dw_scope;

typedef struct pprt__dw_cu_index {
  pprt__dw_scope *v;
  size_t n, cap;
  int err; /* -ENOMEM once an add failed */
} pprt__dw_cu_index;

/* Adds one range of a DIE (empty ranges are left out). */
void pprt__dw_index_add(pprt__dw_cu_index *ix, uint64_t lo, uint64_t hi, uint64_t die,
                        uint32_t depth);

/* Sorts the index for finding. Errors: -ENOMEM (an add failed; the index
 * is emptied). */
int pprt__dw_index_finish(pprt__dw_cu_index *ix);

/* The DIEs whose ranges hold pc, innermost first, at most max of them into
 * out; returns how many. */
size_t pprt__dw_index_find(const pprt__dw_cu_index *ix, uint64_t pc, uint64_t *out, size_t max);

void pprt__dw_index_free(pprt__dw_cu_index *ix);

#endif /* PPRT_PLATFORM_POSIX_DWARF_INDEX_H */
