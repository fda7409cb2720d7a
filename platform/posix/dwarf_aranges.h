/* The address-to-unit table of an image's .debug_aranges, for pprt's own
 * DWARF reader: read once through the section window (dwarf_section.h),
 * then each address is a binary search. glibc's: 2,063 units in 2,083
 * ranges, 50 KB, where libdw's aranges with its unit tables are 2.5 MB. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_ARANGES_H
#define PPRT_PLATFORM_POSIX_DWARF_ARANGES_H

#include <stddef.h>
#include <stdint.h>

#include "platform/posix/dwarf_section.h"

typedef struct pprt__dw_arange {
  uint64_t lo, hi; /* [lo, hi), link-time addresses */
  uint64_t unit;   /* the unit's header offset in .debug_info */
} pprt__dw_arange;

typedef struct pprt__dw_aranges {
  pprt__dw_arange *v; /* by lo */
  size_t n;
} pprt__dw_aranges;

/* Reads every set of the section. Errors: -EINVAL (a damaged or unknown
 * set: what was read before it is kept), -ENOMEM. */
int pprt__dw_aranges_read(pprt__dw_section *s, pprt__dw_aranges *out);

/* The unit of the last range starting at or below pc: 1 and *unit, else 0
 * (below the first range, or past the end of the last). Gaps between
 * ranges go to the unit before them, as in libdw. */
int pprt__dw_aranges_find(const pprt__dw_aranges *a, uint64_t pc, uint64_t *unit);

void pprt__dw_aranges_free(pprt__dw_aranges *a);

#endif /* PPRT_PLATFORM_POSIX_DWARF_ARANGES_H */
