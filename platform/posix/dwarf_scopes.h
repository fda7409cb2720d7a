/* An index of one compilation unit's functions and inlined instances by
 * address, for the libdw source-lines reader (dwarf_lines.c): built by one
 * walk of the unit's DIEs, then each address is a binary search, where
 * dwarf_getscopes walks the unit's DIE tree again for every address. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_SCOPES_H
#define PPRT_PLATFORM_POSIX_DWARF_SCOPES_H

#include <stddef.h>
#include <stdint.h>

#include <elfutils/libdw.h>

typedef struct pprt__dw_scope {
  Dwarf_Addr lo, hi; /* [lo, hi), link-time addresses */
  Dwarf_Addr maxend; /* the largest hi of this and every entry before it */
  Dwarf_Off die;     /* a DW_TAG_subprogram, _inlined_subroutine or _entry_point */
  uint32_t depth;    /* nesting: an inlined instance is deeper than its caller */
} pprt__dw_scope;

typedef struct pprt__dw_cu_index {
  pprt__dw_scope *v;
  size_t n;
} pprt__dw_cu_index;

/* Builds the index of cu. Errors: -ENOMEM (out is left empty). */
int pprt__dw_index_build(Dwarf_Die *cu, pprt__dw_cu_index *out);

/* The DIEs whose ranges hold pc, innermost first, at most max of them into
 * out; returns how many. */
size_t pprt__dw_index_find(const pprt__dw_cu_index *ix, Dwarf_Addr pc, Dwarf_Off *out, size_t max);

void pprt__dw_index_free(pprt__dw_cu_index *ix);

#endif /* PPRT_PLATFORM_POSIX_DWARF_SCOPES_H */
