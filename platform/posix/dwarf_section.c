/* A debug section read forward through a bounded window (dwarf_section.h).
 *
 * Divisions: the compression header (Elf32_Chdr or Elf64_Chdr, then a zlib
 * stream); the window (the inflated bytes kept, moved down as offsets
 * grow); the lookup.
 */
#include "platform/posix/dwarf_section.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* The window's least size: a zlib stream's own history is 32 KiB, and a
 * smaller window would call inflate for every few DIEs. */
#define MIN_WINDOW (64 * 1024)

#define ELFCOMPRESS_ZLIB_TYPE 1

/* deflate's largest expansion: a 258-byte match coded in two bits, 1032
 * to 1 (zlib's FAQ). */
#define MAX_INFLATE_RATIO 1032

/* Compressed bytes consumed between two pprt__dw_pages_drop calls. */
#define DROP_EVERY (256 * 1024)

void pprt__dw_pages_drop(const void *p, size_t len) {
#ifdef MADV_DONTNEED
  long sz = sysconf(_SC_PAGESIZE);
  size_t page = sz > 0 ? (size_t)sz : 4096;
  uintptr_t start = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
  if (end > start)
    madvise((void *)start, end - start, MADV_DONTNEED);
#else
  (void)p;
  (void)len;
#endif
}

/* ---- the compression header ------------------------------------------------------- */

int pprt__dw_section_init(pprt__dw_section *s, const uint8_t *raw, size_t raw_len, int compressed,
                          int elf64) {
  memset(s, 0, sizeof *s);
  s->raw = raw;
  s->raw_len = raw_len;
  s->size = raw_len;
  if (!compressed)
    return 0;
  uint32_t type;
  size_t hdr = elf64 ? 24 : 12;
  if (raw_len < hdr)
    return -EINVAL;
  memcpy(&type, raw, 4);
  if (elf64) {
    memcpy(&s->size, raw + 8, 8);
  } else {
    uint32_t size32;
    memcpy(&size32, raw + 4, 4);
    s->size = size32;
  }
  /* The size is the file's word, and the string sections are inflated
   * whole into a buffer of that size: one a zlib stream of raw_len bytes
   * cannot produce (deflate expands at most 1032 times) is damaged, not a
   * reason to allocate gigabytes. */
  if (type != ELFCOMPRESS_ZLIB_TYPE || /* zstd needs a library pprt does not link */
      s->size / MAX_INFLATE_RATIO > raw_len - hdr) {
    memset(s, 0, sizeof *s);
    return -EINVAL;
  }
  s->compressed = 1;
  s->data = hdr;
  return 0;
}

/* ---- the window ------------------------------------------------------------------- */

static void stream_end(pprt__dw_section *s) {
  if (s->z != NULL) {
    inflateEnd(s->z);
    free(s->z);
    s->z = NULL;
  }
}

/* Starts inflating at the last checkpoint at or before off, else at the
 * section's first byte; the window empties. */
static int stream_start(pprt__dw_section *s, uint64_t off) {
  stream_end(s);
  z_stream *z = calloc(1, sizeof *z);
  if (z == NULL)
    return -ENOMEM;
  size_t k = s->ncp;
  while (k > 0 && s->cp_off[k - 1] > off)
    k--;
  int rc;
  if (k > 0) {
    rc = inflateCopy(z, s->cp[k - 1]);
  } else {
    z->next_in = (Bytef *)(uintptr_t)(s->raw + s->data);
    z->avail_in = (uInt)(s->raw_len - s->data);
    rc = inflateInit(z);
  }
  if (rc != Z_OK) {
    free(z);
    return -ENOMEM;
  }
  s->z = z;
  size_t at = (size_t)(z->next_in - s->raw); /* given back pages behind it again */
  if (at < s->dropped)
    s->dropped = at;
  s->win_len = 0;
  s->win_off = s->inflated = k > 0 ? s->cp_off[k - 1] : 0;
  return 0;
}

static void checkpoint_free(void *cp) {
  inflateEnd(cp);
  free(cp);
}

/* Keeps a copy of the stream when its output has gone cp_every past the
 * last checkpoint (the first pass only: a later pass, restarted from one,
 * finds them made); with PPRT__DW_CHECKPOINTS made, every other one goes
 * first. */
static void checkpoint(pprt__dw_section *s) {
  if (s->cp_every == 0)
    s->cp_every = PPRT__DW_CHECKPOINT;
  uint64_t last = s->ncp ? s->cp_off[s->ncp - 1] : 0;
  if (s->inflated < last + s->cp_every)
    return;
  if (s->ncp == PPRT__DW_CHECKPOINTS) {
    size_t kept = 0;
    for (size_t i = 0; i < s->ncp; i++) {
      if (i % 2 == 0) {
        checkpoint_free(s->cp[i]);
      } else {
        s->cp[kept] = s->cp[i];
        s->cp_off[kept++] = s->cp_off[i];
      }
    }
    s->ncp = kept;
    s->cp_every *= 2;
  }
  void **cp = realloc(s->cp, (s->ncp + 1) * sizeof *cp);
  if (cp != NULL)
    s->cp = cp;
  uint64_t *cp_off = realloc(s->cp_off, (s->ncp + 1) * sizeof *cp_off);
  if (cp_off != NULL)
    s->cp_off = cp_off;
  z_stream *z = calloc(1, sizeof *z);
  if (cp == NULL || cp_off == NULL || z == NULL || inflateCopy(z, s->z) != Z_OK) {
    free(z); /* no checkpoint: a restart goes back further */
    return;
  }
  s->cp[s->ncp] = z;
  s->cp_off[s->ncp++] = s->inflated;
}

/* Drops the window's bytes before off (all of them when off is past it). */
static void drop_before(pprt__dw_section *s, uint64_t off) {
  if (off <= s->win_off)
    return;
  if (off >= s->win_off + s->win_len) {
    s->win_off += s->win_len;
    s->win_len = 0;
    return;
  }
  size_t cut = (size_t)(off - s->win_off);
  memmove(s->win, s->win + cut, s->win_len - cut);
  s->win_len -= cut;
  s->win_off = off;
}

/* Inflates into the window's free space: 0, or -1 at the stream's end or
 * on damaged data. */
static int fill(pprt__dw_section *s) {
  z_stream *z = s->z;
  z->next_out = s->win + s->win_len;
  z->avail_out = (uInt)(s->win_cap - s->win_len);
  int rc = inflate(z, Z_NO_FLUSH);
  size_t got = (s->win_cap - s->win_len) - z->avail_out;
  s->win_len += got;
  s->inflated += got;
  size_t used = (size_t)(z->next_in - s->raw);
  if (s->file_mapped && used > s->dropped + DROP_EVERY) { /* the input behind the stream */
    pprt__dw_pages_drop(s->raw + s->dropped, used - s->dropped);
    s->dropped = used;
  }
  if (rc == Z_STREAM_END || rc == Z_OK)
    return got > 0 || rc == Z_OK ? 0 : -1;
  return -1;
}

/* ---- the lookup --------------------------------------------------------------------- */

const uint8_t *pprt__dw_section_get(pprt__dw_section *s, uint64_t off, size_t len) {
  if (off > s->size || len > s->size - off)
    return NULL;
  if (!s->compressed)
    return s->raw + off;
  if (s->z != NULL && off >= s->win_off && off + len <= s->win_off + s->win_len)
    return s->win + (off - s->win_off);
  size_t cap = len > MIN_WINDOW ? len : MIN_WINDOW;
  if (cap > s->win_cap) {
    uint8_t *w = realloc(s->win, cap);
    if (w == NULL)
      return NULL;
    s->win = w;
    s->win_cap = cap;
  }
  if (s->z == NULL || off < s->win_off) {
    if (s->z != NULL)
      s->restarts++;
    if (stream_start(s, off) != 0)
      return NULL;
  }
  drop_before(s, off);
  while (s->win_off < off || s->win_len < len) {
    if (s->win_len == s->win_cap)
      drop_before(s, off);
    if (fill(s) != 0) {
      stream_end(s); /* the next call starts again */
      return NULL;
    }
    checkpoint(s);
    drop_before(s, off);
  }
  return s->win + (off - s->win_off);
}

void pprt__dw_section_free(pprt__dw_section *s) {
  stream_end(s);
  for (size_t i = 0; i < s->ncp; i++)
    checkpoint_free(s->cp[i]);
  free(s->cp);
  free(s->cp_off);
  free(s->win);
  memset(s, 0, sizeof *s);
}
