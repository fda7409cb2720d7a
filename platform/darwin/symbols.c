/* In-process symbolization of Mach-O images (Darwin): the symbolizer of
 * core/platform.h.
 *
 * An image's symbols are read in place from its LC_SYMTAB nlist entries in
 * __LINKEDIT, the first time an address falls in the image. nlist has no
 * sizes: a function ends at the next symbol, the next entry of
 * LC_FUNCTION_STARTS (which also knows the stripped functions a symbol
 * table lacks, so their addresses are not given to the function before
 * them) or the end of its section. dladdr is the fallback for an image
 * whose table cannot be read.
 */
#include <dlfcn.h>
#include <errno.h>
#include <mach-o/dyld.h>
#include <mach-o/nlist.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "platform/darwin/macho.h"

typedef struct sym {
  uintptr_t addr;
  uintptr_t end; /* one past the function's last byte */
  const char *name;
  int rank; /* 0 external, 1 private: the preferred alias first */
} sym;

enum { IMAGE_UNREAD, IMAGE_TABLE, IMAGE_DLADDR };

typedef struct sym_image {
  pprt__macho_image mi;
  int state;
  int live;
  sym *sym;
  size_t nsym;
} sym_image;

typedef struct sym_range {
  uintptr_t start, limit;
  size_t image;
} sym_range;

struct pprt__os_symbolizer {
  sym_image *img; /* every image seen: names stay valid until close */
  size_t nimg, img_cap;
  sym_range *range; /* executable segments of live images, sorted */
  size_t nrange;
  uint32_t dyld_count;
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

static int count_underscores(const char *s) {
  int n = 0;
  while (s[n] == '_')
    n++;
  return n;
}

static int sym_order(const void *pa, const void *pb) {
  const sym *a = pa, *b = pb;
  if (a->addr != b->addr)
    return a->addr < b->addr ? -1 : 1;
  if (a->rank != b->rank)
    return a->rank - b->rank;
  int ua = count_underscores(a->name), ub = count_underscores(b->name);
  if (ua != ub)
    return ua - ub;
  return strcmp(a->name, b->name);
}

/* The first start above addr, or UINTPTR_MAX. */
static uintptr_t next_start(const uintptr_t *starts, size_t n, uintptr_t addr) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (starts[mid] <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n ? starts[lo] : UINTPTR_MAX;
}

static void image_read(sym_image *img) {
  const pprt__macho_image *mi = &img->mi;
  image_layout l;
  image_layout_of(mi, &l);
  section_range sect[255];
  size_t nsect = image_sections(mi, sect);
  img->state = IMAGE_DLADDR;
  if (l.symtab == NULL)
    return;
  const uint8_t *syms =
      linkedit_ptr(mi, &l, l.symtab->symoff, (uint64_t)l.symtab->nsyms * sizeof(struct nlist_64));
  const char *strs = (const char *)linkedit_ptr(mi, &l, l.symtab->stroff, l.symtab->strsize);
  if (syms == NULL || strs == NULL || l.symtab->nsyms == 0)
    return;
  size_t strsize = l.symtab->strsize;
  sym *tab = malloc(l.symtab->nsyms * sizeof *tab);
  if (tab == NULL)
    return;
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
  img->state = out > 0 ? IMAGE_TABLE : IMAGE_DLADDR;
}

static const sym *image_lookup(const sym_image *img, uintptr_t addr) {
  size_t lo = 0, hi = img->nsym;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (img->sym[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || addr >= img->sym[lo - 1].end)
    return NULL;
  return &img->sym[lo - 1];
}

/* ---- the symbolizer ---------------------------------------------------------------- */

static int range_order(const void *pa, const void *pb) {
  const sym_range *a = pa, *b = pb;
  return a->start < b->start ? -1 : a->start > b->start;
}

static int build_ranges(pprt__os_symbolizer *s) {
  size_t n = 0, cap = 16;
  sym_range *r = malloc(cap * sizeof *r);
  if (r == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < s->nimg; i++) {
    const pprt__macho_image *mi = &s->img[i].mi;
    for (const struct load_command *lc = pprt__macho_next_command(mi->header, NULL);
         s->img[i].live && lc; lc = pprt__macho_next_command(mi->header, lc)) {
      if (lc->cmd != LC_SEGMENT_64 || lc->cmdsize < sizeof(struct segment_command_64))
        continue;
      const struct segment_command_64 *seg = (const struct segment_command_64 *)lc;
      if (!(seg->initprot & VM_PROT_EXECUTE) || seg->vmsize == 0)
        continue;
      if (n == cap) {
        sym_range *grown = realloc(r, 2 * cap * sizeof *r);
        if (grown == NULL) {
          free(r);
          return -ENOMEM;
        }
        r = grown;
        cap *= 2;
      }
      uintptr_t start = (uintptr_t)seg->vmaddr + (uintptr_t)mi->slide;
      r[n++] = (sym_range){start, start + (uintptr_t)seg->vmsize, i};
    }
  }
  qsort(r, n, sizeof *r, range_order);
  free(s->range);
  s->range = r;
  s->nrange = n;
  return 0;
}

/* Brings the image list up to date; consumes snap. */
static int merge_snapshot(pprt__os_symbolizer *s, pprt__macho_snapshot *snap) {
  for (size_t i = 0; i < s->nimg; i++)
    s->img[i].live = 0;
  int rc = 0;
  for (size_t k = 0; k < snap->n; k++) {
    pprt__macho_image *mi = &snap->img[k];
    size_t i = 0;
    while (i < s->nimg && s->img[i].mi.header != mi->header)
      i++;
    if (i < s->nimg) {
      s->img[i].live = 1;
      continue;
    }
    if (s->nimg == s->img_cap) {
      size_t cap = s->img_cap ? 2 * s->img_cap : 64;
      sym_image *grown = realloc(s->img, cap * sizeof *grown);
      if (grown == NULL) {
        rc = -ENOMEM;
        break;
      }
      s->img = grown;
      s->img_cap = cap;
    }
    s->img[s->nimg++] = (sym_image){.mi = *mi, .live = 1};
    mi->path = NULL; /* moved */
  }
  s->dyld_count = snap->dyld_count;
  pprt__macho_snapshot_free(snap);
  return rc != 0 ? rc : build_ranges(s);
}

int pprt__os_symbolizer_open(pprt__os_symbolizer **out) {
  pprt__os_symbolizer *s = calloc(1, sizeof *s);
  if (s == NULL)
    return -ENOMEM;
  pprt__macho_snapshot snap;
  int rc = pprt__macho_snapshot_take(&snap);
  if (rc == 0)
    rc = merge_snapshot(s, &snap);
  if (rc != 0) {
    pprt__os_symbolizer_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

static const sym_range *find_range(const pprt__os_symbolizer *s, uintptr_t addr) {
  size_t lo = 0, hi = s->nrange;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->range[mid].start <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || addr >= s->range[lo - 1].limit)
    return NULL;
  return &s->range[lo - 1];
}

int pprt__os_symbolize(pprt__os_symbolizer *s, uintptr_t addr, const char **name,
                       uintptr_t *offset) {
  const sym_range *r = find_range(s, addr);
  if (r == NULL && _dyld_image_count() != s->dyld_count) {
    pprt__macho_snapshot snap;
    if (pprt__macho_snapshot_take(&snap) == 0 && merge_snapshot(s, &snap) == 0)
      r = find_range(s, addr);
  }
  if (r == NULL)
    return -ENOENT;
  sym_image *img = &s->img[r->image];
  if (img->state == IMAGE_UNREAD)
    image_read(img);
  if (img->state == IMAGE_TABLE) {
    const sym *found = image_lookup(img, addr);
    if (found == NULL)
      return -ENOENT;
    *name = found->name;
    *offset = addr - found->addr;
    return 0;
  }
  Dl_info info;
  if (dladdr((const void *)addr, &info) == 0 || info.dli_sname == NULL || info.dli_saddr == NULL ||
      (uintptr_t)info.dli_saddr > addr || (uintptr_t)info.dli_saddr < r->start)
    return -ENOENT;
  *name = info.dli_sname;
  *offset = addr - (uintptr_t)info.dli_saddr;
  return 0;
}

void pprt__os_symbolizer_close(pprt__os_symbolizer *s) {
  if (s == NULL)
    return;
  for (size_t i = 0; i < s->nimg; i++) {
    free(s->img[i].sym);
    free(s->img[i].mi.path);
  }
  free(s->img);
  free(s->range);
  free(s);
}
