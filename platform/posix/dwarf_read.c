/* Source lines and inline frames from DWARF read by pprt itself, with zlib
 * alone (PPRT_SYMBOLIZER=dwarf, the default on Linux and FreeBSD): the
 * source-lines reader of core/platform.h.
 *
 * Divisions: the files (an image's debug information: its own file, else a
 * separate one by build id or .gnu_debuglink; the sections it needs, each
 * behind a window, dwarf_section.h); references between units, and dwz's
 * alternate file; the unit (the current one's function index and line
 * program); the lookup; the order.
 *
 * Memory: libdw decompresses every debug section of a file whole when it
 * opens it (10 MB for glibc's). Here .debug_info, .debug_abbrev,
 * .debug_line and the range lists are read forward through windows the
 * size of the largest unit asked for (84 KB in glibc), because the
 * symbolizer hands the addresses over a unit at a time in file order
 * (pprt__os_lines_order); only the string sections, read at random, are
 * inflated whole (240 KB). The pages of the mapped file that a unit read
 * are given back when the next unit starts (pprt__dw_pages_drop).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/posix/dwarf_constants.h"

#include "core/platform.h"
#include "platform/posix/dwarf_aranges.h"
#include "platform/posix/dwarf_index.h"
#include "platform/posix/dwarf_lineprog.h"
#include "platform/posix/dwarf_unit.h"
#include "platform/posix/elf.h"
#include "platform/posix/lines_images.h"

typedef PPRT__ELF(Ehdr) elf_ehdr;
typedef PPRT__ELF(Shdr) elf_shdr;

/* ---- the files ------------------------------------------------------------------- */

/* A file's units by offset, for references from one unit into another;
 * read on the first such reference, through a second reader of
 * .debug_info so that the current unit keeps the first one's window. */
typedef struct unit_table {
  int read;
  uint64_t *off;
  size_t n;
  pprt__dw_section info;
  pprt__dw_unit u; /* the unit last found, while has_u */
  int has_u;
} unit_table;

/* The alternate file that dwz moved DIEs and strings shared by several
 * debug files into (.gnu_debugaltlink). */
typedef struct alt_file {
  const void *map;
  size_t map_len;
  pprt__dw_info inf;
  unit_table units;
} alt_file;

typedef struct lines_image {
  int tried; /* opened, or opening failed once */
  int ok;
  const void *map; /* the file with the debug information, mapped */
  size_t map_len;
  char *path; /* its path */
  pprt__dw_info inf;
  pprt__dw_section line, aranges_sec;
  pprt__dw_aranges aranges;
  const uint8_t *str, *line_str; /* inflated whole */
  unit_table units;
  alt_file *alt; /* NULL for none */
} lines_image;

/* An image's current unit: its function index and its line program. */
typedef struct lines_unit {
  lines_image *img; /* NULL for none */
  uint64_t off;
  uint64_t used; /* when last asked for, in the reader's count of lookups */
  pprt__dw_unit u;
  pprt__dw_cu_index ix;
  pprt__dw_lineprog lp;
  int has_lp;
} lines_unit;

/* Images whose current unit is kept open at once. One per image, since a
 * unit reads through its image's windows, which the image's next unit
 * moves. Several, because a reader the symbolizer keeps between writes (a
 * scraped service's) is asked for a few new addresses a write, in the same
 * few units of several images; a single current unit was read again from
 * the start of its compressed section at each write. */
#define UNIT_SLOTS 4

struct pprt__os_lines {
  pprt__lines_images images; /* a lines_image per object */
  pprt__lines_strings strings;
  char *dirs; /* the caller's debug directories, then the system's */
  lines_unit units[UNIT_SLOTS];
  lines_image *last; /* the image of the unit last asked for */
  uint64_t lookups;
};

static const uint8_t *section_bytes(const void *map, size_t size, const char *want, size_t *len,
                                    int *compressed) {
  const elf_ehdr *eh = map;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != PPRT__ELF_CLASS || eh->e_shentsize != sizeof(elf_shdr) ||
      eh->e_shoff > size || (size - eh->e_shoff) / sizeof(elf_shdr) < eh->e_shnum ||
      eh->e_shstrndx >= eh->e_shnum)
    return NULL;
  const elf_shdr *sh = (const elf_shdr *)((const uint8_t *)map + eh->e_shoff);
  const elf_shdr *names = &sh[eh->e_shstrndx];
  if (names->sh_offset > size || names->sh_size > size - names->sh_offset)
    return NULL;
  const char *strs = (const char *)map + names->sh_offset;
  for (size_t i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_name >= names->sh_size || sh[i].sh_type == SHT_NOBITS || sh[i].sh_offset > size ||
        sh[i].sh_size > size - sh[i].sh_offset)
      continue;
    const char *n = strs + sh[i].sh_name;
    if (memchr(n, 0, names->sh_size - sh[i].sh_name) == NULL || strcmp(n, want) != 0)
      continue;
    *len = sh[i].sh_size;
    *compressed = (sh[i].sh_flags & SHF_COMPRESSED) != 0;
    return (const uint8_t *)map + sh[i].sh_offset;
  }
  return NULL;
}

static void section_open(const void *map, size_t map_len, const char *name,
                         pprt__dw_section *s) {
  size_t len = 0;
  int compressed = 0;
  const uint8_t *b = section_bytes(map, map_len, name, &len, &compressed);
  if (b == NULL || pprt__dw_section_init(s, b, len, compressed, PPRT__ELF_CLASS == ELFCLASS64))
    memset(s, 0, sizeof *s);
  else
    s->file_mapped = 1; /* pprt__elf_map_file's */
}

/* The sections a unit's DIEs point into. */
static void info_open(const void *map, size_t map_len, pprt__dw_info *inf) {
  section_open(map, map_len, ".debug_info", &inf->info);
  section_open(map, map_len, ".debug_abbrev", &inf->abbrev);
  section_open(map, map_len, ".debug_str", &inf->str);
  section_open(map, map_len, ".debug_line_str", &inf->line_str);
  section_open(map, map_len, ".debug_addr", &inf->addr);
  section_open(map, map_len, ".debug_str_offsets", &inf->str_offsets);
  section_open(map, map_len, ".debug_ranges", &inf->ranges);
  section_open(map, map_len, ".debug_rnglists", &inf->rnglists);
}

static void info_free(pprt__dw_info *inf) {
  pprt__dw_section *all[] = {&inf->info,        &inf->abbrev, &inf->str,
                             &inf->line_str,    &inf->addr,   &inf->str_offsets,
                             &inf->ranges,      &inf->rnglists};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    pprt__dw_section_free(all[i]);
}

/* Maps path when it has DWARF of its own: 1 with img->map set, else 0. */
static int try_file(lines_image *img, const char *path) {
  const void *data;
  size_t size, len;
  int compressed;
  if (pprt__elf_map_file(path, &data, &size) != 0)
    return 0;
  if (section_bytes(data, size, ".debug_info", &len, &compressed) == NULL ||
      section_bytes(data, size, ".debug_line", &len, &compressed) == NULL) {
    pprt__elf_unmap_file(data, size);
    return 0;
  }
  img->path = strdup(path);
  if (img->path == NULL) {
    pprt__elf_unmap_file(data, size);
    return 0;
  }
  img->map = data;
  img->map_len = size;
  return 1;
}

/* The object's debug information: its own file, else by build id under
 * each debug directory, else by .gnu_debuglink next to the file, in its
 * .debug directory and under each absolute debug directory. */
static int find_debug(pprt__os_lines *l, lines_image *img, const pprt__elf_object *obj) {
  if (try_file(img, obj->file))
    return 1;
  char path[PATH_MAX];
  for (const char *d = l->dirs; *d;) {
    size_t n = strcspn(d, ":");
    int k = snprintf(path, sizeof path, "%.*s/.build-id/", (int)n, d);
    for (size_t i = 0;
         obj->build_id_len >= 2 && i < obj->build_id_len && k > 0 && (size_t)k + 8 < sizeof path;
         i++) {
      k += snprintf(path + k, sizeof path - (size_t)k, "%02x", obj->build_id[i]);
      if (i == 0)
        path[k++] = '/';
    }
    if (obj->build_id_len >= 2 && k > 0 && (size_t)k + 7 < sizeof path) {
      memcpy(path + k, ".debug", 7);
      if (try_file(img, path))
        return 1;
    }
    d += n + (d[n] == ':');
  }
  const void *data;
  size_t size, len;
  int compressed;
  if (pprt__elf_map_file(obj->file, &data, &size) != 0)
    return 0;
  const uint8_t *link = section_bytes(data, size, ".gnu_debuglink", &len, &compressed);
  char name[256];
  int have =
      link != NULL && memchr(link, 0, len) != NULL && strlen((const char *)link) < sizeof name;
  if (have)
    strcpy(name, (const char *)link);
  pprt__elf_unmap_file(data, size);
  if (!have || strchr(name, '/') != NULL)
    return 0;
  const char *slash = strrchr(obj->path, '/');
  int dirlen = slash ? (int)(slash - obj->path) : 0;
  if (snprintf(path, sizeof path, "%.*s/%s", dirlen, obj->path, name) < (int)sizeof path &&
      strcmp(path, obj->path) != 0 && try_file(img, path))
    return 1;
  if (snprintf(path, sizeof path, "%.*s/.debug/%s", dirlen, obj->path, name) < (int)sizeof path &&
      try_file(img, path))
    return 1;
  for (const char *d = l->dirs; *d;) {
    size_t n = strcspn(d, ":");
    if (d[0] == '/' &&
        snprintf(path, sizeof path, "%.*s%.*s/%s", (int)n, d, dirlen, obj->path, name) <
            (int)sizeof path &&
        try_file(img, path))
      return 1;
    d += n + (d[n] == ':');
  }
  return 0;
}

/* Reads the address-to-unit table, from .debug_aranges or, where the
 * compiler wrote none (clang), from each unit's own ranges. */
static void unit_range(void *ctx, uint64_t lo, uint64_t hi) {
  uint64_t *v = ctx; /* [0] the unit, [1] a pprt__dw_aranges *, [2] cap */
  pprt__dw_aranges *a = (pprt__dw_aranges *)(uintptr_t)v[1];
  if (a->n == v[2]) {
    size_t cap = v[2] ? 2 * v[2] : 256;
    pprt__dw_arange *nv = realloc(a->v, cap * sizeof *nv);
    if (nv == NULL)
      return;
    a->v = nv;
    v[2] = cap;
  }
  a->v[a->n++] = (pprt__dw_arange){lo, hi, v[0]};
}

static int arange_order(const void *pa, const void *pb) {
  const pprt__dw_arange *x = pa, *y = pb;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void read_aranges(lines_image *img) {
  section_open(img->map, img->map_len, ".debug_aranges", &img->aranges_sec);
  if (img->aranges_sec.size > 0 && pprt__dw_aranges_read(&img->aranges_sec, &img->aranges) == 0 &&
      img->aranges.n > 0) {
    pprt__dw_section_free(&img->aranges_sec);
    return;
  }
  pprt__dw_section_free(&img->aranges_sec);
  pprt__dw_aranges_free(&img->aranges);
  uint64_t ctx[3] = {0, (uint64_t)(uintptr_t)&img->aranges, 0};
  for (uint64_t off = 0; off < img->inf.info.size;) {
    pprt__dw_unit u;
    if (pprt__dw_unit_open(&u, &img->inf, off) != 0)
      break;
    pprt__dw_die root;
    ctx[0] = off;
    if (pprt__dw_die_at(&u, u.die, &root) == 1)
      pprt__dw_die_ranges(&u, &img->inf, &root, unit_range, ctx);
    off += u.len;
    pprt__dw_unit_free(&u);
  }
  if (img->aranges.n > 1) /* qsort takes no NULL, even for 0 items */
    qsort(img->aranges.v, img->aranges.n, sizeof *img->aranges.v, arange_order);
}

/* ---- references between units, and the alternate file --------------------------- */

static void table_free(unit_table *t) {
  if (t->has_u)
    pprt__dw_unit_free(&t->u);
  pprt__dw_section_free(&t->info);
  free(t->off);
  memset(t, 0, sizeof *t);
}

/* Every unit's offset, from the headers alone. */
static void table_read(unit_table *t, const pprt__dw_section *info) {
  t->read = 1;
  if (pprt__dw_section_init(&t->info, info->raw, info->raw_len, info->compressed,
                            PPRT__ELF_CLASS == ELFCLASS64) != 0)
    return;
  t->info.file_mapped = info->file_mapped;
  size_t cap = 0;
  for (uint64_t o = 0; o < t->info.size;) {
    uint64_t len;
    unsigned osz;
    if (pprt__dw_unit_extent(&t->info, o, &len, &osz) != 0)
      break;
    if (t->n == cap) {
      cap = cap ? 2 * cap : 256;
      uint64_t *v = realloc(t->off, cap * sizeof *v);
      if (v == NULL)
        break;
      t->off = v;
    }
    t->off[t->n++] = o;
    o += len;
  }
}

/* The unit of t holding off, or NULL. */
static const pprt__dw_unit *table_unit(unit_table *t, pprt__dw_info *inf, uint64_t off) {
  if (t->has_u && off - t->u.off < t->u.len)
    return &t->u;
  if (!t->read)
    table_read(t, &inf->info);
  size_t lo = 0, hi = t->n;
  while (lo < hi) { /* the first unit starting after off */
    size_t mid = lo + (hi - lo) / 2;
    if (t->off[mid] <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  if (t->has_u)
    pprt__dw_unit_free(&t->u);
  t->has_u = pprt__dw_unit_open_in(&t->u, inf, &t->info, t->off[lo - 1]) == 0;
  return t->has_u && off - t->u.off < t->u.len ? &t->u : NULL;
}

static const pprt__dw_unit *ref_unit(void *ctx, int alt, uint64_t off, pprt__dw_info **inf) {
  lines_image *img = ctx;
  if (alt && img->alt == NULL)
    return NULL;
  *inf = alt ? &img->alt->inf : &img->inf;
  return table_unit(alt ? &img->alt->units : &img->units, *inf, off);
}

/* The alternate file of .gnu_debugaltlink (a path, then the file's build
 * id): at the path, relative to the debug file's directory when relative,
 * else by build id under each debug directory. Only a file with that
 * build id is taken. */
static int alt_try(alt_file *a, const char *path, const uint8_t *id, size_t id_len) {
  const void *data;
  size_t size, len;
  int compressed;
  if (pprt__elf_map_file(path, &data, &size) != 0)
    return 0;
  const uint8_t *notes = section_bytes(data, size, ".note.gnu.build-id", &len, &compressed);
  const uint8_t *got;
  size_t got_len;
  if (notes == NULL || compressed || pprt__elf_find_build_id(notes, len, 4, &got, &got_len) != 0 ||
      got_len != id_len || memcmp(got, id, id_len) != 0 ||
      section_bytes(data, size, ".debug_info", &len, &compressed) == NULL) {
    pprt__elf_unmap_file(data, size);
    return 0;
  }
  a->map = data;
  a->map_len = size;
  return 1;
}

static void alt_open(pprt__os_lines *l, lines_image *img) {
  size_t len;
  int compressed;
  const uint8_t *link = section_bytes(img->map, img->map_len, ".gnu_debugaltlink", &len, &compressed);
  const uint8_t *nul = link && !compressed ? memchr(link, 0, len) : NULL;
  if (nul == NULL || nul + 1 >= link + len)
    return;
  const char *name = (const char *)link;
  const uint8_t *id = nul + 1;
  size_t id_len = (size_t)(link + len - id);
  alt_file *a = calloc(1, sizeof *a);
  if (a == NULL)
    return;
  char path[PATH_MAX];
  const char *slash = strrchr(img->path, '/');
  int found = 0;
  if (name[0] == '/')
    found = alt_try(a, name, id, id_len);
  else if (slash != NULL &&
           snprintf(path, sizeof path, "%.*s/%s", (int)(slash - img->path), img->path, name) <
               (int)sizeof path)
    found = alt_try(a, path, id, id_len);
  for (const char *d = l->dirs; !found && *d;) {
    size_t n = strcspn(d, ":");
    int k = snprintf(path, sizeof path, "%.*s/.build-id/", (int)n, d);
    for (size_t i = 0; id_len >= 2 && i < id_len && k > 0 && (size_t)k + 8 < sizeof path; i++) {
      k += snprintf(path + k, sizeof path - (size_t)k, "%02x", id[i]);
      if (i == 0)
        path[k++] = '/';
    }
    if (id_len >= 2 && k > 0 && (size_t)k + 7 < sizeof path) {
      memcpy(path + k, ".debug", 7);
      found = alt_try(a, path, id, id_len);
    }
    d += n + (d[n] == ':');
  }
  if (!found) {
    free(a);
    return;
  }
  info_open(a->map, a->map_len, &a->inf);
  img->alt = a;
  img->inf.alt_str = &a->inf.str;
}

static void image_open(pprt__os_lines *l, lines_image *img, const pprt__elf_object *obj) {
  img->tried = 1;
  if (obj->file == NULL || !find_debug(l, img, obj))
    return;
  info_open(img->map, img->map_len, &img->inf);
  section_open(img->map, img->map_len, ".debug_line", &img->line);
  alt_open(l, img);
  /* Whole: their strings are handed out until close. */
  img->str = img->inf.str.size ? pprt__dw_section_get(&img->inf.str, 0, img->inf.str.size) : NULL;
  img->line_str = img->inf.line_str.size
                      ? pprt__dw_section_get(&img->inf.line_str, 0, img->inf.line_str.size)
                      : NULL;
  read_aranges(img);
  img->ok = img->inf.info.size > 0 && img->aranges.n > 0;
}

static void image_free(lines_image *img) {
  info_free(&img->inf);
  pprt__dw_section_free(&img->line);
  pprt__dw_section_free(&img->aranges_sec);
  pprt__dw_aranges_free(&img->aranges);
  table_free(&img->units);
  if (img->alt != NULL) {
    info_free(&img->alt->inf);
    table_free(&img->alt->units);
    pprt__elf_unmap_file(img->alt->map, img->alt->map_len);
    free(img->alt);
  }
  if (img->map)
    pprt__elf_unmap_file(img->map, img->map_len);
  free(img->path);
  memset(img, 0, sizeof *img);
}

static int image_used(const void *img) {
  return ((const lines_image *)img)->tried;
}

static void image_release(void *img) {
  image_free(img);
}

int pprt__os_lines_open(pprt__os_lines **out, const char *debug_dirs) {
  *out = NULL;
  pprt__os_lines *l = calloc(1, sizeof *l);
  if (l == NULL)
    return -ENOMEM;
  int rc = pprt__lines_images_open(&l->images, sizeof(lines_image), image_used);
  if (rc != 0) {
    free(l);
    return rc;
  }
  static const char system_dirs[] = "/usr/lib/debug";
  size_t n = debug_dirs && *debug_dirs ? strlen(debug_dirs) + 1 : 0;
  l->dirs = malloc(n + sizeof system_dirs);
  if (l->dirs == NULL) {
    pprt__os_lines_close(l);
    return -ENOMEM;
  }
  if (n) {
    memcpy(l->dirs, debug_dirs, n - 1);
    l->dirs[n - 1] = ':';
  }
  memcpy(l->dirs + n, system_dirs, sizeof system_dirs);
  *out = l;
  return 0;
}

static void unit_free(lines_unit *u) {
  pprt__dw_unit_free(&u->u);
  pprt__dw_index_free(&u->ix);
  pprt__dw_lineprog_free(&u->lp);
  memset(u, 0, sizeof *u);
}

static void units_free(pprt__os_lines *l) {
  for (int i = 0; i < UNIT_SLOTS; i++)
    unit_free(&l->units[i]);
  l->last = NULL;
}

void pprt__os_lines_close(pprt__os_lines *l) {
  if (l == NULL)
    return;
  units_free(l);
  pprt__lines_images_close(&l->images, image_release);
  pprt__lines_strings_free(&l->strings);
  free(l->dirs);
  free(l);
}

/* ---- the unit --------------------------------------------------------------------------- */

static void index_add(void *ctx, uint64_t lo, uint64_t hi, uint64_t die, uint32_t depth) {
  pprt__dw_index_add(ctx, lo, hi, die, depth);
}

/* Unit off of img made img's current one; NULL when it cannot be read. */
static lines_unit *unit_for(pprt__os_lines *l, lines_image *img, uint64_t off) {
  /* img's slot, else a free one, else the one asked for least recently. */
  lines_unit *u = NULL;
  for (int i = 0; i < UNIT_SLOTS && u == NULL; i++)
    if (l->units[i].img == img)
      u = &l->units[i];
  for (int i = 0; i < UNIT_SLOTS && u == NULL; i++)
    if (l->units[i].img == NULL)
      u = &l->units[i];
  if (u == NULL) {
    u = &l->units[0];
    for (int i = 1; i < UNIT_SLOTS; i++)
      if (l->units[i].used < u->used)
        u = &l->units[i];
  }
  u->used = ++l->lookups;
  /* What the last unit read of its file goes back (see pprt__dw_pages_drop);
   * a kept unit reads its pages in again when next asked. */
  lines_image *last = l->last;
  l->last = img;
  if (last != NULL && (last != img || u->off != off))
    pprt__dw_pages_drop(last->map, last->map_len);
  if (u->img == img && u->off == off)
    return u;
  unit_free(u);
  u->used = l->lookups;
  if (pprt__dw_unit_open(&u->u, &img->inf, off) != 0)
    return NULL;
  u->img = img;
  u->off = off;
  pprt__dw_unit_walk(&u->u, &img->inf, index_add, &u->ix);
  if (pprt__dw_index_finish(&u->ix) != 0) {
    unit_free(u);
    return NULL;
  }
  if (u->u.has_stmt_list && img->line.size > u->u.stmt_list) {
    /* The unit's line program alone, through .debug_line's window. */
    const uint8_t *p = pprt__dw_section_get(&img->line, u->u.stmt_list, 4);
    uint64_t len = 0;
    size_t hdr = 4;
    if (p != NULL) {
      memcpy(&len, p, 4);
      len &= 0xffffffffu;
    }
    if (len == 0xffffffffu && (p = pprt__dw_section_get(&img->line, u->u.stmt_list + 4, 8))) {
      memcpy(&len, p, 8);
      hdr = 12;
    }
    if (p != NULL && len <= img->line.size - u->u.stmt_list - hdr &&
        (p = pprt__dw_section_get(&img->line, u->u.stmt_list, (size_t)len + hdr)) != NULL) {
      pprt__dw_sections secs = {p,
                                img->line_str,
                                img->str,
                                (size_t)len + hdr,
                                img->line_str ? img->inf.line_str.size : 0,
                                img->str ? img->inf.str.size : 0};
      u->has_lp = pprt__dw_lineprog_open(&u->lp, &secs, 0, u->u.addr_size, u->u.comp_dir) == 0;
    }
  }
  return u;
}

/* ---- the lookup ---------------------------------------------------------------------------- */

#define PPRT__OS_MAX_INLINE 64

static const char *intern(pprt__os_lines *l, char *path) {
  return pprt__lines_intern(&l->strings, path);
}

/* A file of the unit's table, joined to the unit's directory when relative
 * (the call files of DWARF 5). */
static const char *unit_file(pprt__os_lines *l, lines_unit *u, uint64_t idx, int join) {
  char *name = u->has_lp ? pprt__dw_lineprog_path(&u->lp, idx) : NULL;
  if (join && name != NULL && name[0] != '/' && u->u.comp_dir && u->u.comp_dir[0] == '/') {
    size_t dl = strlen(u->u.comp_dir), nl = strlen(name);
    char *full = malloc(dl + nl + 2);
    if (full != NULL) {
      memcpy(full, u->u.comp_dir, dl);
      full[dl] = '/';
      memcpy(full + dl + 1, name, nl + 1);
      free(name);
      name = full;
    }
  }
  return intern(l, name);
}

/* The image holding addr, its debug information opened on first use; NULL
 * for an address in no image or an image without debug information. A
 * new snapshot of the loader's list moves the images: the current unit,
 * which points at one, is let go then. */
static lines_image *image_for(pprt__os_lines *l, uintptr_t addr, const pprt__elf_object **objp,
                              long *index) {
  void *before = l->images.state;
  long i = pprt__lines_image_of(&l->images, addr);
  if (l->images.state != before)
    units_free(l);
  if (index != NULL)
    *index = i;
  if (i < 0)
    return NULL;
  lines_image *img = (lines_image *)l->images.state + i;
  *objp = &l->images.snap.obj[i];
  if (!img->tried)
    image_open(l, img, *objp);
  return img->ok ? img : NULL;
}

int pprt__os_lines_resolve(pprt__os_lines *l, uintptr_t addr, pprt__os_frame *out, size_t max) {
  const pprt__elf_object *obj;
  lines_image *img = image_for(l, addr, &obj, NULL);
  uint64_t unit;
  if (img == NULL || max == 0)
    return 0;
  uint64_t pc = addr - obj->bias;
  if (!pprt__dw_aranges_find(&img->aranges, pc, &unit))
    return 0;
  lines_unit *u = unit_for(l, img, unit);
  if (u == NULL)
    return 0;
  const char *file = NULL;
  int line = 0;
  pprt__dw_row row;
  if (u->has_lp && pprt__dw_lineprog_find(&u->lp, pc, &row)) {
    file = unit_file(l, u, row.file, 0);
    line = (int)row.line;
  }
  uint64_t offs[PPRT__OS_MAX_INLINE];
  size_t nscopes = pprt__dw_index_find(&u->ix, pc, offs, PPRT__OS_MAX_INLINE);
  size_t n = 0;
  for (size_t i = 0; i < nscopes && n < max; i++) {
    pprt__dw_die d;
    if (offs[i] < u->u.off || pprt__dw_die_at(&u->u, (size_t)(offs[i] - u->u.off), &d) != 1)
      break;
    pprt__dw_value v;
    const char *name = NULL;
    pprt__dw_refs refs = {ref_unit, img};
    if (pprt__dw_die_integrate(&u->u, &img->inf, offs[i], DW_AT_linkage_name, &v, &refs) ||
        pprt__dw_die_integrate(&u->u, &img->inf, offs[i], DW_AT_MIPS_linkage_name, &v, &refs) ||
        pprt__dw_die_integrate(&u->u, &img->inf, offs[i], DW_AT_name, &v, &refs))
      name = v.str;
    int decl = 0;
    if (pprt__dw_die_integrate(&u->u, &img->inf, offs[i], DW_AT_decl_line, &v, &refs))
      decl = (int)v.u;
    /* A name in the unit's own bytes (DW_FORM_string) moves with the
     * window: every name is copied once into the table kept until close. */
    out[n++] = (pprt__os_frame){name ? intern(l, strdup(name)) : NULL, file, line, decl};
    if (d.ab->tag != DW_TAG_inlined_subroutine)
      break;
    file = NULL;
    line = 0;
    if (pprt__dw_die_attr(&u->u, &img->inf, &d, DW_AT_call_line, &v) == 1)
      line = (int)v.u;
    if (pprt__dw_die_attr(&u->u, &img->inf, &d, DW_AT_call_file, &v) == 1)
      file = unit_file(l, u, v.u, 1);
  }
  if (n == 0) {
    if (file == NULL)
      return 0;
    out[n++] = (pprt__os_frame){NULL, file, line, 0};
  }
  return (int)n;
}

/* ---- the order ------------------------------------------------------------------------------ */

typedef struct order_key {
  size_t img; /* index in the snapshot, SIZE_MAX for none */
  uint64_t unit, addr;
} order_key;

static int key_order(const void *pa, const void *pb) {
  const order_key *a = pa, *b = pb;
  if (a->img != b->img)
    return a->img < b->img ? -1 : 1;
  if (a->unit != b->unit)
    return a->unit < b->unit ? -1 : 1;
  return (a->addr > b->addr) - (a->addr < b->addr);
}

void pprt__os_lines_order(pprt__os_lines *l, uint64_t *addrs, size_t n) {
  order_key *k = n > 1 ? malloc(n * sizeof *k) : NULL;
  if (k == NULL)
    return;
  for (size_t i = 0; i < n; i++) {
    const pprt__elf_object *obj;
    long index;
    lines_image *img = image_for(l, (uintptr_t)addrs[i], &obj, &index);
    k[i] = (order_key){SIZE_MAX, UINT64_MAX, addrs[i]};
    if (img == NULL)
      continue;
    k[i].img = (size_t)index;
    if (!pprt__dw_aranges_find(&img->aranges, addrs[i] - obj->bias, &k[i].unit))
      k[i].unit = UINT64_MAX;
  }
  qsort(k, n, sizeof *k, key_order);
  for (size_t i = 0; i < n; i++)
    addrs[i] = k[i].addr;
  free(k);
}
