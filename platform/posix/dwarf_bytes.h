/* Reading DWARF's bytes, bounds-checked: the sections come from files pprt
 * did not write. A reader over [b, b + end) from pos; any read past the end
 * sets err, and every read after that gives 0. Little-endian: the ELF
 * files of the machine pprt runs on. For the files of pprt's DWARF reader
 * (dwarf_unit.c, dwarf_lineprog.c) only. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_BYTES_H
#define PPRT_PLATFORM_POSIX_DWARF_BYTES_H

#include <stddef.h>
#include <stdint.h>

typedef struct rd {
  const uint8_t *b;
  size_t pos, end;
  int err;
} rd;

/* An n-byte unsigned number (n at most 8). */
static inline uint64_t rd_n(rd *r, unsigned n) {
  if (r->err || n > 8 || r->end - r->pos < n) {
    r->err = 1;
    return 0;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++)
    v |= (uint64_t)r->b[r->pos + i] << (8 * i);
  r->pos += n;
  return v;
}

static inline void rd_skip(rd *r, uint64_t n) {
  if (r->err || r->end - r->pos < n)
    r->err = 1;
  else
    r->pos += (size_t)n;
}

/* LEB128; bits past the 64th are dropped. */
static inline uint64_t rd_uleb(rd *r) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (r->err || r->pos >= r->end) {
      r->err = 1;
      return 0;
    }
    uint8_t c = r->b[r->pos++];
    if (shift < 64)
      v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80))
      return v;
  }
}

static inline int64_t rd_sleb(rd *r) {
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t c;
  do {
    if (r->err || r->pos >= r->end) {
      r->err = 1;
      return 0;
    }
    c = r->b[r->pos++];
    if (shift < 64)
      v |= (uint64_t)(c & 0x7f) << shift;
    shift += 7;
  } while (c & 0x80);
  if (shift < 64 && (c & 0x40))
    v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

#endif /* PPRT_PLATFORM_POSIX_DWARF_BYTES_H */
