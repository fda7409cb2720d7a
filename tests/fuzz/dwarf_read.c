/* libFuzzer target: pprt's own DWARF reader (platform/posix/dwarf_*.c)
 * over hostile debug sections must give an answer or nothing for any
 * bytes, never read outside them, crash, hang or leak.
 *
 * The sections are handed to the parsers directly, in the steps
 * dwarf_read.c takes for an image (strings inflated whole, the
 * address-to-unit table from .debug_aranges or else from each unit's
 * ranges, then per unit its walk, index and line program, and the names,
 * lines and call sites of the scopes at a few addresses), rather than
 * through pprt__os_lines_*, which reads only images the process has loaded
 * and their files on disk: an input would need a file and a dlopen each.
 * What dwarf_read.c adds on top, finding a section in the ELF file, is a
 * loop over the section headers with bounds checks.
 *
 * Input: a 16-bit little-endian mask of the sections stored compressed
 * (SHF_COMPRESSED: an Elf64_Chdr, then a zlib stream, through
 * dwarf_section.c's window), then the sizes of the ten sections below
 * (32-bit little-endian, each cut to the bytes left), then their bytes in
 * that order. The seeds (tests/fuzz/seeds/dwarf_read/) are made from
 * real programs by tests/fuzz/dwarf_read_seed.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "platform/posix/dwarf_aranges.h"
#include "platform/posix/dwarf_constants.h"
#include "platform/posix/dwarf_index.h"
#include "platform/posix/dwarf_lineprog.h"
#include "platform/posix/dwarf_section.h"
#include "platform/posix/dwarf_unit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

enum {
  S_INFO,
  S_ABBREV,
  S_STR,
  S_LINE_STR,
  S_ADDR,
  S_STR_OFFSETS,
  S_RANGES,
  S_RNGLISTS,
  S_LINE,
  S_ARANGES,
  NSECS
};

/* Bounds on the work per input, so that a large claimed count is cut
 * rather than timed out (the reader itself has no such bound: a real file
 * has as many units as it has). */
#define MAX_UNITS 64
#define MAX_LOOKUPS 64

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Every unit's offset, and a second reader of .debug_info for the unit a
 * reference leads into, as dwarf_read.c's unit table. */
typedef struct units {
  pprt__dw_info *inf;
  pprt__dw_section info;
  uint64_t off[MAX_UNITS];
  size_t n;
  pprt__dw_unit u;
  int has_u;
} units;

static const pprt__dw_unit *unit_at(void *ctx, int alt, uint64_t off, pprt__dw_info **inf) {
  units *t = ctx;
  if (alt)
    return NULL; /* no alternate file */
  *inf = t->inf;
  if (t->has_u && off - t->u.off < t->u.len)
    return &t->u;
  size_t k = t->n;
  while (k > 0 && t->off[k - 1] > off)
    k--;
  if (k == 0)
    return NULL;
  if (t->has_u)
    pprt__dw_unit_free(&t->u);
  t->has_u = pprt__dw_unit_open_in(&t->u, t->inf, &t->info, t->off[k - 1]) == 0;
  return t->has_u && off - t->u.off < t->u.len ? &t->u : NULL;
}

static void arange_add(void *ctx, uint64_t lo, uint64_t hi) {
  pprt__dw_aranges *a = ctx;
  if (a->n >= 4 * MAX_UNITS)
    return;
  pprt__dw_arange *v = realloc(a->v, (a->n + 1) * sizeof *v);
  if (v == NULL)
    return;
  a->v = v;
  a->v[a->n++] = (pprt__dw_arange){lo, hi, 0};
}

static int arange_order(const void *pa, const void *pb) {
  const pprt__dw_arange *x = pa, *y = pb;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void index_add(void *ctx, uint64_t lo, uint64_t hi, uint64_t die, uint32_t depth) {
  pprt__dw_index_add(ctx, lo, hi, die, depth);
}

/* A string's bytes, read to its end: ASan catches any that lie outside
 * the input or the window. */
static size_t touch(const char *s) {
  return s ? strlen(s) : 0;
}

/* The frames at pc, as pprt__os_lines_resolve builds them. */
static void lookup(pprt__dw_unit *u, pprt__dw_info *inf, pprt__dw_cu_index *ix,
                   pprt__dw_lineprog *lp, int has_lp, const pprt__dw_refs *refs, uint64_t pc) {
  pprt__dw_row row;
  if (has_lp && pprt__dw_lineprog_find(lp, pc, &row))
    free(pprt__dw_lineprog_path(lp, row.file));
  uint64_t offs[64];
  size_t n = pprt__dw_index_find(ix, pc, offs, 64);
  for (size_t i = 0; i < n; i++) {
    pprt__dw_die d;
    if (offs[i] < u->off || pprt__dw_die_at(u, (size_t)(offs[i] - u->off), &d) != 1)
      break;
    pprt__dw_value v;
    static const uint32_t ats[] = {DW_AT_linkage_name, DW_AT_name, DW_AT_decl_line};
    for (size_t a = 0; a < sizeof ats / sizeof *ats; a++) {
      if (pprt__dw_die_integrate(u, inf, offs[i], ats[a], &v, NULL))
        touch(v.str);
      if (pprt__dw_die_integrate(u, inf, offs[i], ats[a], &v, refs))
        touch(v.str);
    }
    if (pprt__dw_die_attr(u, inf, &d, DW_AT_call_line, &v) == 1)
      touch(v.str); /* NULL unless a string form */
    if (pprt__dw_die_attr(u, inf, &d, DW_AT_call_file, &v) == 1 && has_lp)
      free(pprt__dw_lineprog_path(lp, v.u));
  }
}

/* One unit as dwarf_read.c's unit_for reads it, then lookups at a few of
 * its addresses. */
static void one_unit(pprt__dw_info *inf, pprt__dw_section *line, const uint8_t *str,
                     const uint8_t *line_str, units *t, uint64_t off, const pprt__dw_aranges *ar) {
  pprt__dw_unit u;
  if (pprt__dw_unit_open(&u, inf, off) != 0)
    return;
  pprt__dw_cu_index ix = {0};
  pprt__dw_unit_walk(&u, inf, index_add, &ix);
  touch(u.comp_dir);
  touch(u.name);
  if (pprt__dw_index_finish(&ix) != 0) {
    pprt__dw_unit_free(&u);
    return;
  }
  pprt__dw_lineprog lp;
  int has_lp = 0;
  if (u.has_stmt_list && line->size > u.stmt_list) {
    const uint8_t *p = pprt__dw_section_get(line, u.stmt_list, 4);
    uint64_t plen = 0;
    size_t hdr = 4;
    if (p != NULL) {
      memcpy(&plen, p, 4);
      plen &= 0xffffffffu;
    }
    if (plen == 0xffffffffu && (p = pprt__dw_section_get(line, u.stmt_list + 4, 8))) {
      memcpy(&plen, p, 8);
      hdr = 12;
    }
    if (p != NULL && plen <= line->size - u.stmt_list - hdr &&
        (p = pprt__dw_section_get(line, u.stmt_list, (size_t)plen + hdr)) != NULL) {
      pprt__dw_sections secs = {p,
                                line_str,
                                str,
                                (size_t)plen + hdr,
                                line_str ? inf->line_str.size : 0,
                                str ? inf->str.size : 0};
      has_lp = pprt__dw_lineprog_open(&lp, &secs, 0, u.addr_size, u.comp_dir) == 0;
    }
  }
  pprt__dw_refs refs = {unit_at, t};
  size_t looked = 0;
  for (size_t i = 0; i < ix.n && looked < MAX_LOOKUPS; i++, looked += 2) {
    lookup(&u, inf, &ix, &lp, has_lp, &refs, ix.v[i].lo);
    lookup(&u, inf, &ix, &lp, has_lp, &refs, ix.v[i].lo + (ix.v[i].hi - ix.v[i].lo) / 2);
  }
  /* The unit's own ranges, and back to its first address: the line
   * program's cursor restarts a sequence. */
  for (size_t i = 0; i < ar->n && looked < 2 * MAX_LOOKUPS; i++, looked++)
    if (ar->v[i].unit == off)
      lookup(&u, inf, &ix, &lp, has_lp, &refs, ar->v[i].lo);
  if (ix.n > 0)
    lookup(&u, inf, &ix, &lp, has_lp, &refs, ix.v[0].lo);
  if (has_lp)
    pprt__dw_lineprog_free(&lp);
  pprt__dw_index_free(&ix);
  pprt__dw_unit_free(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  size_t head = 2 + 4 * NSECS;
  if (len < head)
    return 0;
  unsigned compressed = (unsigned)data[0] | (unsigned)data[1] << 8;
  /* Each section a copy of exactly its bytes, so ASan sees any read past
   * them. */
  uint8_t *raw[NSECS];
  pprt__dw_section sec[NSECS];
  size_t at = head;
  for (int i = 0; i < NSECS; i++) {
    size_t n = le32(data + 2 + 4 * i);
    if (n > len - at)
      n = len - at;
    raw[i] = malloc(n ? n : 1);
    memcpy(raw[i], data + at, n);
    at += n;
    if (pprt__dw_section_init(&sec[i], raw[i], n, (compressed >> i) & 1, 1) != 0)
      memset(&sec[i], 0, sizeof sec[i]);
  }
  pprt__dw_info inf = {sec[S_INFO],     sec[S_ABBREV],   sec[S_STR],
                       sec[S_LINE_STR], sec[S_ADDR],     sec[S_STR_OFFSETS],
                       sec[S_RANGES],   sec[S_RNGLISTS], NULL};
  /* Whole, as dwarf_read.c's image_open. */
  const uint8_t *str = inf.str.size ? pprt__dw_section_get(&inf.str, 0, inf.str.size) : NULL;
  const uint8_t *line_str =
      inf.line_str.size ? pprt__dw_section_get(&inf.line_str, 0, inf.line_str.size) : NULL;

  units t = {.inf = &inf};
  if (pprt__dw_section_init(&t.info, raw[S_INFO], sec[S_INFO].raw_len, sec[S_INFO].compressed, 1) !=
      0)
    memset(&t.info, 0, sizeof t.info);
  for (uint64_t o = 0; o < t.info.size && t.n < MAX_UNITS;) {
    uint64_t ulen;
    unsigned osz;
    if (pprt__dw_unit_extent(&t.info, o, &ulen, &osz) != 0)
      break;
    t.off[t.n++] = o;
    o += ulen;
  }

  pprt__dw_aranges ar = {0};
  if (pprt__dw_aranges_read(&sec[S_ARANGES], &ar) != 0 || ar.n == 0) {
    pprt__dw_aranges_free(&ar);
    /* From each unit's own ranges, as where the compiler wrote no table. */
    for (size_t i = 0; i < t.n; i++) {
      pprt__dw_unit u;
      if (pprt__dw_unit_open(&u, &inf, t.off[i]) != 0)
        continue;
      pprt__dw_die root;
      size_t first = ar.n;
      if (pprt__dw_die_at(&u, u.die, &root) == 1)
        pprt__dw_die_ranges(&u, &inf, &root, arange_add, &ar);
      for (size_t k = first; k < ar.n; k++)
        ar.v[k].unit = t.off[i];
      pprt__dw_unit_free(&u);
    }
    if (ar.n > 1)
      qsort(ar.v, ar.n, sizeof *ar.v, arange_order);
  }
  for (size_t i = 0; i < ar.n && i < MAX_LOOKUPS; i++) {
    uint64_t unit;
    pprt__dw_aranges_find(&ar, ar.v[i].lo, &unit);
    pprt__dw_aranges_find(&ar, ar.v[i].hi - 1, &unit);
  }
  for (size_t i = 0; i < t.n; i++)
    one_unit(&inf, &sec[S_LINE], str, line_str, &t, t.off[i], &ar);

  pprt__dw_aranges_free(&ar);
  if (t.has_u)
    pprt__dw_unit_free(&t.u);
  pprt__dw_section_free(&t.info);
  pprt__dw_section *all[] = {&inf.info,    &inf.abbrev,      &inf.str,    &inf.line_str,
                             &inf.addr,    &inf.str_offsets, &inf.ranges, &inf.rnglists,
                             &sec[S_LINE], &sec[S_ARANGES]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    pprt__dw_section_free(all[i]);
  for (int i = 0; i < NSECS; i++)
    free(raw[i]);
  return 0;
}
