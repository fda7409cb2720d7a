/* One compilation unit of .debug_info read by pprt's own DWARF reader: its
 * header, its abbreviation table, and its DIEs decoded one at a time, for
 * the functions and inlined instances around an address (their ranges,
 * names, declaration and call lines). The unit's bytes come from the
 * section window (dwarf_section.h) and are used in place. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_UNIT_H
#define PPRT_PLATFORM_POSIX_DWARF_UNIT_H

#include <stddef.h>
#include <stdint.h>

#include "platform/posix/dwarf_section.h"

/* The sections a unit's DIEs point into, each read through its window;
 * alt_str is the alternate file's .debug_str (dwz), NULL for none. */
typedef struct pprt__dw_info {
  pprt__dw_section info, abbrev, str, line_str, addr, str_offsets, ranges, rnglists;
  pprt__dw_section *alt_str;
} pprt__dw_info;

typedef struct pprt__dw_attr_spec {
  uint32_t at, form;
  int64_t implicit; /* DW_FORM_implicit_const's value */
} pprt__dw_attr_spec;

typedef struct pprt__dw_abbrev {
  uint64_t code;
  uint32_t tag;
  int children;
  uint32_t first, n; /* its attributes in the unit's spec array */
} pprt__dw_abbrev;

typedef struct pprt__dw_unit {
  const uint8_t *bytes; /* the whole unit, header included; valid while
                           .debug_info's window holds it */
  size_t len;
  uint64_t off; /* its header's offset in .debug_info */
  unsigned version, unit_type, addr_size, offset_size;
  size_t die;               /* the first DIE, from bytes */
  pprt__dw_abbrev *abbrevs; /* by code */
  size_t nabbrevs;
  pprt__dw_attr_spec *specs;
  size_t nspecs;
  /* From the unit DIE: the base of its ranges, and of the x forms. */
  uint64_t low_pc, addr_base, str_offsets_base, rnglists_base;
  uint64_t stmt_list;
  int has_stmt_list;
  const char *comp_dir, *name;
} pprt__dw_unit;

/* pprt__dw_value.is_ref of a reference into the alternate file: dwz's
 * DW_FORM_GNU_ref_alt, DWARF 5's DW_FORM_ref_sup4/8. */
#define PPRT__DW_REF_ALT 2

/* One attribute's value as read: a number, a string, or a reference
 * (is_ref: an offset in .debug_info, of the alternate file when
 * PPRT__DW_REF_ALT). */
typedef struct pprt__dw_value {
  uint32_t form;
  uint64_t u;
  const char *str;
  int is_ref;
} pprt__dw_value;

/* One DIE: where it is, its abbreviation, and where its attributes start. */
typedef struct pprt__dw_die {
  uint64_t off; /* in .debug_info */
  const pprt__dw_abbrev *ab;
  size_t attrs; /* from the unit's bytes */
  size_t next;  /* the DIE after this one's attributes */
} pprt__dw_die;

/* Reads the unit at off of inf->info. Errors: -EINVAL (damaged, or a unit
 * type other than compile or partial), -ENOMEM. */
int pprt__dw_unit_open(pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off);

/* The same through info, a second reader of inf's .debug_info, so that a
 * unit open through the first keeps its bytes (a reference from one unit
 * into another). */
int pprt__dw_unit_open_in(pprt__dw_unit *u, pprt__dw_info *inf, pprt__dw_section *info,
                          uint64_t off);

/* The length of the unit at off, header included, and its offset size;
 * -EINVAL when it runs past the section or cannot be read. */
int pprt__dw_unit_extent(pprt__dw_section *info, uint64_t off, uint64_t *len,
                         unsigned *offset_size);
void pprt__dw_unit_free(pprt__dw_unit *u);

/* The DIE at pos (from the unit's bytes): 1 and *d, 0 for a null entry
 * (the end of a list of children), -1 when damaged. */
int pprt__dw_die_at(const pprt__dw_unit *u, size_t pos, pprt__dw_die *d);

/* The value of attribute at of d: 1 and *v, 0 when d has none. */
int pprt__dw_die_attr(const pprt__dw_unit *u, pprt__dw_info *inf, const pprt__dw_die *d,
                      uint32_t at, pprt__dw_value *v);

/* Calls fn for each [lo, hi) of d's code (low_pc/high_pc, or DW_AT_ranges
 * in .debug_ranges or .debug_rnglists); returns how many, -1 when damaged. */
int pprt__dw_die_ranges(const pprt__dw_unit *u, pprt__dw_info *inf, const pprt__dw_die *d,
                        void (*fn)(void *ctx, uint64_t lo, uint64_t hi), void *ctx);

/* Calls fn for each code range of each function, inlined instance and
 * entry point of the unit, with the DIE's offset and its nesting depth
 * (as dwarf_scopes.c does over libdw): the walk enters lexical blocks and
 * namespaces, and skips other subtrees by DW_AT_sibling where given.
 * Returns 0, or -1 when the unit is damaged (ranges seen so far were
 * reported). */
int pprt__dw_unit_walk(const pprt__dw_unit *u, pprt__dw_info *inf,
                       void (*fn)(void *ctx, uint64_t lo, uint64_t hi, uint64_t die,
                                  uint32_t depth),
                       void *ctx);

/* Where a reference out of a unit leads: unit_at returns the unit holding
 * off in the same file (alt 0: DW_FORM_ref_addr, as GCC's LTO points an
 * inlined instance at the function in another unit, and dwz at its partial
 * units) or in the alternate file (alt 1), and sets *inf to its sections;
 * NULL when there is none. The unit stays valid until the next call. */
typedef struct pprt__dw_refs {
  const pprt__dw_unit *(*unit_at)(void *ctx, int alt, uint64_t off, pprt__dw_info **inf);
  void *ctx;
} pprt__dw_refs;

/* Attribute at of the DIE at off, or of the DIEs it stands for
 * (DW_AT_abstract_origin, DW_AT_specification), as libdw's
 * dwarf_attr_integrate: 1 and *v, else 0. References out of u are followed
 * through refs (NULL: not followed). A string in *v is valid until the
 * next string read from the same section, or the next refs call. */
int pprt__dw_die_integrate(const pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off, uint32_t at,
                           pprt__dw_value *v, const pprt__dw_refs *refs);

#endif /* PPRT_PLATFORM_POSIX_DWARF_UNIT_H */
