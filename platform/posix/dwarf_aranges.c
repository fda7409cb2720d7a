/* .debug_aranges into a sorted table (dwarf_aranges.h). */
#include "platform/posix/dwarf_aranges.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t le(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static int push(pprt__dw_aranges *a, size_t *cap, uint64_t lo, uint64_t len, uint64_t unit) {
  if (len == 0 || lo + len < lo)
    return 0;
  if (a->n == *cap) {
    size_t c = *cap ? 2 * *cap : 256;
    pprt__dw_arange *v = realloc(a->v, c * sizeof *v);
    if (v == NULL)
      return -ENOMEM;
    a->v = v;
    *cap = c;
  }
  a->v[a->n++] = (pprt__dw_arange){lo, lo + len, unit};
  return 0;
}

static int by_lo(const void *pa, const void *pb) {
  const pprt__dw_arange *x = pa, *y = pb;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* One set at off: its ranges into a; *next receives the next set's offset. */
static int read_set(pprt__dw_section *s, uint64_t off, pprt__dw_aranges *a, size_t *cap,
                    uint64_t *next) {
  const uint8_t *p = pprt__dw_section_get(s, off, 4);
  if (p == NULL)
    return -EINVAL;
  uint64_t len = le(p, 4);
  unsigned hdr = 4, osz = 4;
  if (len == 0xffffffff) {
    if ((p = pprt__dw_section_get(s, off + 4, 8)) == NULL)
      return -EINVAL;
    len = le(p, 8);
    hdr = 12;
    osz = 8;
  }
  if (len > s->size - off - hdr || len < 2 + osz + 2)
    return -EINVAL;
  *next = off + hdr + len;
  if ((p = pprt__dw_section_get(s, off, (size_t)(hdr + len))) == NULL)
    return -EINVAL;
  const uint8_t *end = p + hdr + len, *q = p + hdr;
  unsigned version = (unsigned)le(q, 2);
  uint64_t unit = le(q + 2, osz);
  unsigned asz = q[2 + osz], seg = q[3 + osz];
  if (version != 2 || seg != 0 || (asz != 4 && asz != 8))
    return -EINVAL;
  /* Tuples start at a multiple of twice the address size from the set's
   * start. */
  size_t at = hdr + 2 + osz + 2, align = 2 * asz;
  at = (at + align - 1) / align * align;
  for (q = p + at; end - q >= 2 * (ptrdiff_t)asz; q += 2 * asz) {
    uint64_t lo = le(q, asz), n = le(q + asz, asz);
    if (lo == 0 && n == 0)
      break;
    int rc = push(a, cap, lo, n, unit);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int pprt__dw_aranges_read(pprt__dw_section *s, pprt__dw_aranges *out) {
  memset(out, 0, sizeof *out);
  size_t cap = 0;
  int rc = 0;
  for (uint64_t off = 0, next; rc == 0 && off < s->size; off = next)
    rc = read_set(s, off, out, &cap, &next);
  if (out->n > 1) /* qsort takes no NULL, even for 0 items */
    qsort(out->v, out->n, sizeof *out->v, by_lo);
  return rc;
}

int pprt__dw_aranges_find(const pprt__dw_aranges *a, uint64_t pc, uint64_t *unit) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) { /* the first range starting after pc */
    size_t mid = lo + (hi - lo) / 2;
    if (a->v[mid].lo <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* A gap between two ranges belongs to the unit before it, as libdw has
   * it (libdwfl's addrarange): the padding after a function in a section
   * of its own (.text.startup) lies outside its unit's ranges but inside
   * the unit's line table, which gives it a line. Past the last range,
   * nothing. */
  if (lo == 0 || (lo == a->n && pc >= a->v[lo - 1].hi))
    return 0;
  *unit = a->v[lo - 1].unit;
  return 1;
}

void pprt__dw_aranges_free(pprt__dw_aranges *a) {
  free(a->v);
  memset(a, 0, sizeof *a);
}
