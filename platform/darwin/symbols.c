/* In-process symbolization of Mach-O images (Darwin): the Mach-O reader
 * behind the symbolizer shell of platform/posix/symbolizer.h.
 *
 * An image's symbols are read in place from its LC_SYMTAB nlist entries in
 * __LINKEDIT, the first time an address falls in the image. nlist has no
 * sizes: a function ends at the next symbol, the next entry of
 * LC_FUNCTION_STARTS (which also knows the stripped functions a symbol
 * table lacks, so their addresses are not given to the function before
 * them) or the end of its section. The shell asks dladdr for an image
 * whose table cannot be read.
 */
#include <errno.h>
#include <mach-o/dyld.h>
#include <mach-o/nlist.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "platform/darwin/macho.h"
#include "platform/posix/symbolizer.h"

typedef struct sym {
  uintptr_t addr;
  uintptr_t end; /* one past the function's last byte */
  const char *name;
  int rank; /* 0 external, 1 private: the preferred alias first */
} sym;

/* One image from dyld's list and, once read, its function symbols. */
struct pprt__sym_image {
  pprt__macho_image mi;
  sym *sym;
  size_t nsym;
};

/* ---- reading an image's tables ---------------------------------------------------- */

typedef struct image_layout {
  const struct segment_command_64 *linkedit, *text;
  const struct symtab_command *symtab;
  const struct linkedit_data_command *starts;
} image_layout;

static void image_layout_of(const pprt__macho_image *mi, image_layout *out) {
  memset(out, 0, sizeof *out);
  for (const struct load_command *lc = pprt__macho_next_command(mi->header, NULL); lc;
       lc = pprt__macho_next_command(mi->header, lc)) {
    if (lc->cmd == LC_SEGMENT_64 && lc->cmdsize >= sizeof(struct segment_command_64)) {
      const struct segment_command_64 *seg = (const struct segment_command_64 *)lc;
      if (strncmp(seg->segname, "__LINKEDIT", sizeof seg->segname) == 0)
        out->linkedit = seg;
      else if (strncmp(seg->segname, "__TEXT", sizeof seg->segname) == 0)
        out->text = seg;
    } else if (lc->cmd == LC_SYMTAB && lc->cmdsize >= sizeof(struct symtab_command)) {
      out->symtab = (const struct symtab_command *)lc;
    } else if (lc->cmd == LC_FUNCTION_STARTS &&
               lc->cmdsize >= sizeof(struct linkedit_data_command)) {
      out->starts = (const struct linkedit_data_command *)lc;
    }
  }
}

/* The in-memory address of [off, off + len) of the file's __LINKEDIT, or
 * NULL when that range is not inside it. (In the dyld shared cache the
 * offsets are relative to the cache's shared __LINKEDIT, which the image's
 * segment command describes; the same arithmetic holds.) */
static const uint8_t *linkedit_ptr(const pprt__macho_image *mi, const image_layout *l, uint64_t off,
                                   uint64_t len) {
  const struct segment_command_64 *le = l->linkedit;
  if (le == NULL || off < le->fileoff || off - le->fileoff > le->filesize ||
      len > le->filesize - (off - le->fileoff))
    return NULL;
  return (const uint8_t *)(uintptr_t)(le->vmaddr + (uint64_t)mi->slide + (off - le->fileoff));
}

/* The image's sections, numbered from 1 in load-command order as nlist's
 * n_sect counts them (at most 255); code marks those holding instructions,
 * so that data symbols in __TEXT (__const, __cstring) are not functions. */
typedef struct section_range {
  uintptr_t start, end;
  int code;
} section_range;

static size_t image_sections(const pprt__macho_image *mi, section_range out[255]) {
  size_t n = 0;
  for (const struct load_command *lc = pprt__macho_next_command(mi->header, NULL); lc;
       lc = pprt__macho_next_command(mi->header, lc)) {
    if (lc->cmd != LC_SEGMENT_64 || lc->cmdsize < sizeof(struct segment_command_64))
      continue;
    const struct segment_command_64 *seg = (const struct segment_command_64 *)lc;
    if (seg->nsects > (lc->cmdsize - sizeof *seg) / sizeof(struct section_64))
      break; /* the numbering after this would be wrong */
    const struct section_64 *sect = (const struct section_64 *)(seg + 1);
    for (uint32_t i = 0; i < seg->nsects && n < 255; i++, n++) {
      out[n].start = (uintptr_t)sect[i].addr + (uintptr_t)mi->slide;
      out[n].end = out[n].start + (uintptr_t)sect[i].size;
      out[n].code = (seg->initprot & VM_PROT_EXECUTE) &&
                    (sect[i].flags & (S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS));
    }
  }
  return n;
}

/* LC_FUNCTION_STARTS: ULEB128 deltas from __TEXT's address, 0 ends them. */
static size_t function_starts(const pprt__macho_image *mi, const image_layout *l, uintptr_t **out) {
  *out = NULL;
  if (l->starts == NULL || l->text == NULL)
    return 0;
  const uint8_t *p = linkedit_ptr(mi, l, l->starts->dataoff, l->starts->datasize);
  if (p == NULL)
    return 0;
  const uint8_t *end = p + l->starts->datasize;
  /* Each entry takes at least one byte. */
  uintptr_t *starts = malloc((l->starts->datasize ? l->starts->datasize : 1) * sizeof *starts);
  if (starts == NULL)
    return 0;
  size_t n = 0;
  uintptr_t addr = (uintptr_t)l->text->vmaddr + (uintptr_t)mi->slide;
  while (p < end) {
    uint64_t delta = 0;
    unsigned shift = 0;
    while (p < end && shift < 64) {
      uint8_t b = *p++;
      delta |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80))
        break;
    }
    if (delta == 0)
      break;
    addr += (uintptr_t)delta;
    starts[n++] = addr;
  }
  *out = starts;
  return n;
}

static int sym_order(const void *pa, const void *pb) {
  const sym *a = pa, *b = pb;
  if (a->addr != b->addr)
    return a->addr < b->addr ? -1 : 1;
  return pprt__sym_alias_order(a->rank, a->name, b->rank, b->name, 0);
}

/* The first start above addr, or UINTPTR_MAX. */
static uintptr_t next_start(const uintptr_t *starts, size_t n, uintptr_t addr) {
  size_t lo = pprt__sym_at_or_below(starts, n, sizeof *starts, addr);
  return lo < n ? starts[lo] : UINTPTR_MAX;
}

int pprt__sym_image_read(pprt__sym_image *img) {
  const pprt__macho_image *mi = &img->mi;
  image_layout l;
  image_layout_of(mi, &l);
  section_range sect[255];
  size_t nsect = image_sections(mi, sect);
  if (l.symtab == NULL)
    return 0;
  const uint8_t *syms =
      linkedit_ptr(mi, &l, l.symtab->symoff, (uint64_t)l.symtab->nsyms * sizeof(struct nlist_64));
  const char *strs = (const char *)linkedit_ptr(mi, &l, l.symtab->stroff, l.symtab->strsize);
  if (syms == NULL || strs == NULL || l.symtab->nsyms == 0)
    return 0;
  size_t strsize = l.symtab->strsize;
  sym *tab = malloc(l.symtab->nsyms * sizeof *tab);
  if (tab == NULL)
    return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < l.symtab->nsyms; i++) {
    struct nlist_64 nl;
    memcpy(&nl, syms + (size_t)i * sizeof nl, sizeof nl);
    if ((nl.n_type & N_STAB) || (nl.n_type & N_TYPE) != N_SECT || nl.n_sect == NO_SECT ||
        nl.n_un.n_strx == 0 || nl.n_un.n_strx >= strsize)
      continue;
    const char *name = strs + nl.n_un.n_strx;
    if (memchr(name, '\0', strsize - nl.n_un.n_strx) == NULL)
      continue;
    /* The C compiler's leading underscore is not part of the name a user
     * wrote, and dladdr leaves it out too. */
    if (name[0] == '_')
      name++;
    uintptr_t addr = (uintptr_t)nl.n_value + (uintptr_t)mi->slide;
    const section_range *in = nl.n_sect <= nsect ? &sect[nl.n_sect - 1] : NULL;
    if (name[0] == '\0' || in == NULL || !in->code || addr < in->start || addr >= in->end)
      continue; /* data, not code */
    /* A function ends at the latest where its section does. */
    tab[n++] = (sym){addr, in->end, name, (nl.n_type & N_EXT) ? 0 : 1};
  }
  qsort(tab, n, sizeof *tab, sym_order);
  size_t out = 0;
  for (size_t i = 0; i < n; i++)
    if (out == 0 || tab[out - 1].addr != tab[i].addr)
      tab[out++] = tab[i];
  uintptr_t *starts;
  size_t nstarts = function_starts(mi, &l, &starts);
  for (size_t i = 0; i < out; i++) {
    uintptr_t end = tab[i].end;
    if (i + 1 < out && tab[i + 1].addr < end)
      end = tab[i + 1].addr;
    uintptr_t next = next_start(starts, nstarts, tab[i].addr);
    if (next < end)
      end = next;
    tab[i].end = end;
  }
  free(starts);
  img->sym = tab;
  img->nsym = out;
  return out > 0;
}

const char *pprt__sym_image_lookup(const pprt__sym_image *img, uintptr_t addr, uintptr_t seg_start,
                                   uintptr_t *func) {
  (void)seg_start; /* every symbol's end is known */
  size_t lo = pprt__sym_at_or_below(img->sym, img->nsym, sizeof *img->sym, addr);
  if (lo == 0 || addr >= img->sym[lo - 1].end)
    return NULL;
  *func = img->sym[lo - 1].addr;
  return img->sym[lo - 1].name;
}

/* ---- the images the symbolizer reads (platform/posix/symbolizer.h) ------------- */

int pprt__sym_snapshot_take(pprt__sym_snapshot *out) {
  pprt__macho_snapshot snap;
  int rc = pprt__macho_snapshot_take(&snap);
  for (size_t k = 0; rc == 0 && k < snap.n; k++) {
    pprt__sym_image *img = calloc(1, sizeof *img);
    rc = img == NULL ? -ENOMEM : pprt__sym_snapshot_add(out, img);
    if (rc == 0) {
      img->mi = snap.img[k];
      snap.img[k].path = NULL; /* moved */
    }
  }
  out->generation = snap.dyld_count;
  pprt__macho_snapshot_free(&snap);
  return rc;
}

/* dyld's image count: it grows with every dlopen that loads an image. */
uint64_t pprt__sym_generation(void) {
  return _dyld_image_count();
}

int pprt__sym_image_same(const pprt__sym_image *a, const pprt__sym_image *b) {
  return a->mi.header == b->mi.header;
}

int pprt__sym_image_ranges(const pprt__sym_image *img,
                           int (*fn)(uintptr_t start, uintptr_t limit, void *ctx), void *ctx) {
  const pprt__macho_image *mi = &img->mi;
  for (const struct segment_command_64 *seg = pprt__macho_next_code(mi->header, NULL); seg;
       seg = pprt__macho_next_code(mi->header, seg)) {
    uintptr_t start = (uintptr_t)seg->vmaddr + (uintptr_t)mi->slide;
    int rc = fn(start, start + (uintptr_t)seg->vmsize, ctx);
    if (rc != 0)
      return rc;
  }
  return 0;
}

void pprt__sym_image_free(pprt__sym_image *img) {
  if (img == NULL)
    return;
  free(img->sym);
  free(img->mi.path);
  free(img);
}
