/* In-process symbolization of ELF images (Linux and FreeBSD): the ELF
 * reader behind the symbolizer shell of platform/posix/symbolizer.h.
 *
 * Divisions: reading ELF (notes, a mapped file's .symtab and .dynsym, a
 * loaded object's dynamic symbols in memory), every offset checked, every
 * structure copied out with memcpy because a corrupt file can misalign
 * anything; the sorted symbol table and its lookup; the images the shell
 * reads, each one's tables read the first time an address falls in it.
 *
 * Why not dladdr alone: it sees only .dynsym, so static functions and
 * everything in an executable that was not linked with -rdynamic come out
 * as the nearest exported symbol, however far away. It remains the fallback
 * for an object whose tables cannot be read at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>
#include <sys/stat.h>

#include "core/platform.h"
#include "core/syscalls.h"
#include "platform/posix/elf.h"
#include "platform/posix/symbolizer.h"

typedef PPRT__ELF(Ehdr) elf_ehdr;
typedef PPRT__ELF(Shdr) elf_shdr;
typedef PPRT__ELF(Sym) elf_sym;
typedef PPRT__ELF(Dyn) elf_dyn;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ELF_NATIVE_DATA ELFDATA2MSB
#else
#define ELF_NATIVE_DATA ELFDATA2LSB
#endif

/* ---- notes ---------------------------------------------------------------------- */

static size_t align_up(size_t n, size_t align) {
  return (n + align - 1) & ~(align - 1);
}

int pprt__elf_find_build_id(const void *notes, size_t len, size_t align, const uint8_t **id,
                            size_t *id_len) {
  const uint8_t *p = notes;
  align = align == 8 ? 8 : 4;
  size_t at = 0;
  while (at <= len && len - at >= 12) {
    uint32_t h[3]; /* namesz, descsz, type */
    memcpy(h, p + at, sizeof h);
    size_t name_at = at + 12;
    if (h[0] > len - name_at)
      break;
    size_t desc_at = name_at + align_up(h[0], align);
    if (desc_at > len || h[1] > len - desc_at)
      break;
    if (h[2] == NT_GNU_BUILD_ID && h[0] == 4 && memcmp(p + name_at, "GNU", 4) == 0 && h[1] > 0) {
      *id = p + desc_at;
      *id_len = h[1];
      return 0;
    }
    size_t next = desc_at + align_up(h[1], align);
    if (next <= at || next > len)
      break;
    at = next;
  }
  return -ENOENT;
}

/* ---- the symbol table ---------------------------------------------------------- */

/* Lower is preferred among aliases: global, then weak, then local. */
static int bind_rank(unsigned bind) {
  switch (bind) {
  case STB_GLOBAL:
    return 0;
  case STB_WEAK:
    return 1;
  case STB_LOCAL:
    return 2;
  default:
    return 3;
  }
}

static int symtab_push(pprt__elf_symtab *tab, uintptr_t addr, uintptr_t size, const char *name,
                       int rank) {
  if (tab->n == tab->cap) {
    size_t cap = tab->cap ? 2 * tab->cap : 256;
    if (cap > SIZE_MAX / sizeof *tab->sym)
      return -ENOMEM;
    pprt__elf_sym *grown = realloc(tab->sym, cap * sizeof *grown);
    if (grown == NULL)
      return -ENOMEM;
    tab->sym = grown;
    tab->cap = cap;
  }
  if (addr + size < addr) /* a corrupt size must not wrap the end around */
    size = UINTPTR_MAX - addr;
  tab->sym[tab->n++] = (pprt__elf_sym){addr, size, 0, name, rank};
  return 0;
}

/* Adds the function symbols of one table: syms holds count entries (copied
 * one by one, they may be misaligned), names index strtab[0, strsz), whose
 * last byte the caller has checked is NUL. */
static int add_symbols(pprt__elf_symtab *tab, const uint8_t *syms, size_t count, const char *strtab,
                       size_t strsz, uintptr_t bias) {
  int added = 0;
  for (size_t i = 1; i < count; i++) { /* entry 0 is the reserved null symbol */
    elf_sym sym;
    memcpy(&sym, syms + i * sizeof sym, sizeof sym);
    unsigned type = PPRT__ELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC)
      continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || sym.st_name >= strsz ||
        strtab[sym.st_name] == '\0')
      continue;
    uintptr_t value = (uintptr_t)sym.st_value;
#if defined(__arm__)
    value &= ~(uintptr_t)1; /* the Thumb bit is not part of the address */
#endif
    int rc = symtab_push(tab, value + bias, (uintptr_t)sym.st_size, strtab + sym.st_name,
                         bind_rank(PPRT__ELF_ST_BIND(sym.st_info)));
    if (rc != 0)
      return rc;
    if (added < INT_MAX)
      added++;
  }
  return added;
}

/* Address first; among aliases the preferred name first (see finish). */
static int sym_order(const void *pa, const void *pb) {
  const pprt__elf_sym *a = pa, *b = pb;
  if (a->addr != b->addr)
    return a->addr < b->addr ? -1 : 1;
  if ((a->size != 0) != (b->size != 0))
    return a->size != 0 ? -1 : 1;
  return pprt__sym_alias_order(a->rank, a->name, b->rank, b->name, 1);
}

void pprt__elf_symtab_finish(pprt__elf_symtab *tab) {
  if (tab->n == 0)
    return;
  qsort(tab->sym, tab->n, sizeof *tab->sym, sym_order);
  size_t out = 0;
  uintptr_t maxend = 0;
  for (size_t i = 0; i < tab->n; i++) {
    if (out > 0 && tab->sym[out - 1].addr == tab->sym[i].addr)
      continue; /* an alias: the first of the run is the preferred one */
    pprt__elf_sym s = tab->sym[i];
    if (s.addr + s.size > maxend)
      maxend = s.addr + s.size;
    s.maxend = maxend;
    tab->sym[out++] = s;
  }
  tab->n = out;
}

#define LOOKBACK_MAX 256

const pprt__elf_sym *pprt__elf_symtab_lookup(const pprt__elf_symtab *tab, uintptr_t addr,
                                             uintptr_t seg_start) {
  /* The last symbol at or below addr. */
  size_t lo = pprt__sym_at_or_below(tab->sym, tab->n, sizeof *tab->sym, addr);
  if (lo == 0)
    return NULL;
  size_t last = lo - 1;
  /* Functions nest (a local entry point inside a bigger function), so a
   * covering symbol may start before the last one; maxend says when no
   * earlier symbol can reach addr any more. The bound keeps one corrupt
   * size from turning every later lookup into a walk of the whole table. */
  size_t stop = last >= LOOKBACK_MAX ? last - LOOKBACK_MAX : 0;
  for (size_t i = last + 1; i-- > stop && tab->sym[i].maxend > addr;) {
    const pprt__elf_sym *s = &tab->sym[i];
    if (s->size != 0 && addr - s->addr < s->size)
      return s;
  }
  const pprt__elf_sym *s = &tab->sym[last];
  if (s->size == 0 && s->addr >= seg_start && (last == 0 || tab->sym[last - 1].maxend <= s->addr))
    return s;
  return NULL;
}

void pprt__elf_symtab_free(pprt__elf_symtab *tab) {
  free(tab->sym);
  memset(tab, 0, sizeof *tab);
}

/* ---- ELF files -------------------------------------------------------------------- */

/* Whether [off, off + len) lies within size bytes. */
static int in_bounds(uint64_t off, uint64_t len, size_t size) {
  return off <= size && len <= size - off;
}

static int read_shdr(const uint8_t *base, size_t size, const elf_ehdr *eh, size_t i,
                     elf_shdr *out) {
  uint64_t off = (uint64_t)eh->e_shoff + (uint64_t)i * sizeof *out;
  if (!in_bounds(off, sizeof *out, size))
    return -ENOEXEC;
  memcpy(out, base + off, sizeof *out);
  return 0;
}

/* -ENOEXEC when the file has a build id note and it differs from want. */
static int check_build_id(const uint8_t *base, size_t size, const elf_ehdr *eh, size_t shnum,
                          const uint8_t *want, size_t want_len) {
  for (size_t i = 0; i < shnum; i++) {
    elf_shdr sh;
    if (read_shdr(base, size, eh, i, &sh) != 0)
      return -ENOEXEC;
    if (sh.sh_type != SHT_NOTE || !in_bounds(sh.sh_offset, sh.sh_size, size))
      continue;
    const uint8_t *id;
    size_t len;
    if (pprt__elf_find_build_id(base + sh.sh_offset, (size_t)sh.sh_size, (size_t)sh.sh_addralign,
                                &id, &len) == 0)
      return len == want_len && memcmp(id, want, len) == 0 ? 0 : -ENOEXEC;
  }
  return 0;
}

int pprt__elf_symtab_add_file(pprt__elf_symtab *tab, const void *data, size_t size, uintptr_t bias,
                              const uint8_t *build_id, size_t build_id_len) {
  const uint8_t *base = data;
  elf_ehdr eh;
  if (size < sizeof eh)
    return -ENOEXEC;
  memcpy(&eh, base, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != PPRT__ELF_CLASS ||
      eh.e_ident[EI_DATA] != ELF_NATIVE_DATA || eh.e_ident[EI_VERSION] != EV_CURRENT)
    return -ENOEXEC;
  if (eh.e_shoff == 0)
    return 0; /* no section headers: nothing to read here */
  if (eh.e_shentsize != sizeof(elf_shdr))
    return -ENOEXEC;
  size_t shnum = eh.e_shnum;
  if (shnum == 0) {
    /* More than SHN_LORESERVE sections: the count is in section 0. */
    elf_shdr first;
    if (read_shdr(base, size, &eh, 0, &first) != 0)
      return -ENOEXEC;
    if (first.sh_size > SIZE_MAX)
      return -ENOEXEC;
    shnum = (size_t)first.sh_size;
  }
  if (eh.e_shoff > size || shnum > (size - eh.e_shoff) / sizeof(elf_shdr))
    return -ENOEXEC;
  if (build_id_len != 0 && check_build_id(base, size, &eh, shnum, build_id, build_id_len) != 0)
    return -ENOEXEC;

  int total = 0;
  for (size_t i = 0; i < shnum; i++) {
    elf_shdr sh, str;
    if (read_shdr(base, size, &eh, i, &sh) != 0)
      return -ENOEXEC;
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
      continue;
    /* A bad table is skipped, not fatal: the other one may be fine. */
    if (sh.sh_entsize != sizeof(elf_sym) || !in_bounds(sh.sh_offset, sh.sh_size, size) ||
        sh.sh_link >= shnum || read_shdr(base, size, &eh, sh.sh_link, &str) != 0 ||
        str.sh_type != SHT_STRTAB || str.sh_size == 0 ||
        !in_bounds(str.sh_offset, str.sh_size, size) ||
        base[str.sh_offset + str.sh_size - 1] != '\0')
      continue;
    int n = add_symbols(tab, base + sh.sh_offset, (size_t)(sh.sh_size / sizeof(elf_sym)),
                        (const char *)base + str.sh_offset, (size_t)str.sh_size, bias);
    if (n < 0)
      return n;
    total = n > INT_MAX - total ? INT_MAX : total + n;
  }
  return total;
}

/* ---- loaded objects, in memory ----------------------------------------------------- */

/* Where a dynamic-section address points: the link-time value plus the
 * bias, unless the loader relocated the entry in place (glibc does so where
 * the dynamic section is writable; the vdso's never is). */
static const uint8_t *dyn_ptr(const pprt__elf_object *obj, uintptr_t value, size_t len) {
  if (pprt__elf_object_readable(obj, value + obj->bias, len))
    return (const uint8_t *)(value + obj->bias);
  if (obj->bias != 0 && pprt__elf_object_readable(obj, value, len))
    return (const uint8_t *)value;
  return NULL;
}

static int read_word32(const pprt__elf_object *obj, uintptr_t at, uint32_t *out) {
  if (!pprt__elf_object_readable(obj, at, sizeof *out))
    return -ENOEXEC;
  memcpy(out, (const void *)at, sizeof *out);
  return 0;
}

/* The number of dynamic symbols, which ELF records only in the hash tables:
 * DT_HASH's nchain, or one past the last index DT_GNU_HASH's chains reach. */
static int dynsym_count(const pprt__elf_object *obj, uintptr_t hash, uintptr_t gnu_hash,
                        size_t *count) {
  if (hash != 0) {
    const uint8_t *h = dyn_ptr(obj, hash, 8);
    if (h == NULL)
      return -ENOEXEC;
    uint32_t nchain;
    memcpy(&nchain, h + 4, sizeof nchain);
    *count = nchain;
    return 0;
  }
  if (gnu_hash == 0)
    return -ENOEXEC;
  const uint8_t *g = dyn_ptr(obj, gnu_hash, 16);
  if (g == NULL)
    return -ENOEXEC;
  uint32_t hdr[4]; /* nbuckets, symoffset, bloom words, bloom shift */
  memcpy(hdr, g, sizeof hdr);
  uint64_t bloom_bytes = (uint64_t)hdr[2] * sizeof(uintptr_t);
  uint64_t bucket_bytes = (uint64_t)hdr[0] * 4;
  if (bloom_bytes + bucket_bytes > UINTPTR_MAX - 16 - (uintptr_t)g)
    return -ENOEXEC;
  uintptr_t buckets = (uintptr_t)g + 16 + (uintptr_t)bloom_bytes;
  if (!pprt__elf_object_readable(obj, buckets, (size_t)bucket_bytes))
    return -ENOEXEC;
  uint32_t last = 0;
  for (uint32_t b = 0; b < hdr[0]; b++) {
    uint32_t v;
    memcpy(&v, (const void *)(buckets + (uintptr_t)b * 4), sizeof v);
    if (v > last)
      last = v;
  }
  if (last < hdr[1]) { /* every bucket empty: only the unhashed symbols */
    *count = hdr[1];
    return 0;
  }
  uintptr_t chain = buckets + (uintptr_t)hdr[0] * 4;
  for (;;) {
    uint32_t v;
    if (read_word32(obj, chain + (uintptr_t)(last - hdr[1]) * 4, &v) != 0)
      return -ENOEXEC;
    if (v & 1) /* the last entry of its chain */
      break;
    if (++last == 0)
      return -ENOEXEC;
  }
  *count = (size_t)last + 1;
  return 0;
}

int pprt__elf_symtab_add_memory(pprt__elf_symtab *tab, const pprt__elf_object *obj) {
  const pprt__elf_phdr *dyn_ph = NULL;
  for (size_t i = 0; i < obj->phnum; i++)
    if (obj->phdr[i].p_type == PT_DYNAMIC)
      dyn_ph = &obj->phdr[i];
  if (dyn_ph == NULL)
    return -ENOEXEC;
  uintptr_t dyn = obj->bias + (uintptr_t)dyn_ph->p_vaddr;
  size_t ndyn = (size_t)dyn_ph->p_filesz / sizeof(elf_dyn);
  if (!pprt__elf_object_readable(obj, dyn, ndyn * sizeof(elf_dyn)))
    return -ENOEXEC;
  uintptr_t symtab = 0, strtab = 0, hash = 0, gnu_hash = 0;
  size_t strsz = 0, syment = sizeof(elf_sym);
  for (size_t i = 0; i < ndyn; i++) {
    elf_dyn d;
    memcpy(&d, (const void *)(dyn + i * sizeof d), sizeof d);
    if (d.d_tag == DT_NULL)
      break;
    switch (d.d_tag) {
    case DT_SYMTAB:
      symtab = (uintptr_t)d.d_un.d_ptr;
      break;
    case DT_STRTAB:
      strtab = (uintptr_t)d.d_un.d_ptr;
      break;
    case DT_STRSZ:
      strsz = (size_t)d.d_un.d_val;
      break;
    case DT_SYMENT:
      syment = (size_t)d.d_un.d_val;
      break;
    case DT_HASH:
      hash = (uintptr_t)d.d_un.d_ptr;
      break;
    case DT_GNU_HASH:
      gnu_hash = (uintptr_t)d.d_un.d_ptr;
      break;
    }
  }
  size_t count;
  if (symtab == 0 || strtab == 0 || strsz == 0 || syment != sizeof(elf_sym) ||
      dynsym_count(obj, hash, gnu_hash, &count) != 0 || count > SIZE_MAX / sizeof(elf_sym))
    return -ENOEXEC;
  const uint8_t *syms = dyn_ptr(obj, symtab, count * sizeof(elf_sym));
  const char *strs = (const char *)dyn_ptr(obj, strtab, strsz);
  if (syms == NULL || strs == NULL || strs[strsz - 1] != '\0')
    return -ENOEXEC;
  return add_symbols(tab, syms, count, strs, strsz, obj->bias);
}

/* ---- files ------------------------------------------------------------------------ */

int pprt__elf_map_file(const char *path, const void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  /* O_NONBLOCK: opening a FIFO planted at a library's path must not hang. */
  int fd = pprt__sys_open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = -errno;
  } else if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX) {
    rc = -ENOEXEC;
  } else {
    void *p = pprt__sys_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      rc = -errno;
    } else {
      *data = p;
      *size = (size_t)st.st_size;
    }
  }
  close(fd);
  return rc;
}

void pprt__elf_unmap_file(const void *data, size_t size) {
  munmap((void *)data, size);
}

/* ---- the images the symbolizer reads (platform/posix/symbolizer.h) ------------- */

/* One loaded object and, once read, its symbols and the files they point into. */
struct pprt__sym_image {
  pprt__elf_object obj;
  pprt__elf_symtab tab;
  const void *map[2]; /* the object's file and its separate debug file */
  size_t map_len[2];
};

int pprt__sym_snapshot_take(pprt__sym_snapshot *out) {
  pprt__elf_snapshot snap;
  int rc = pprt__elf_snapshot_take(&snap);
  for (size_t k = 0; rc == 0 && k < snap.n; k++) {
    pprt__sym_image *img = calloc(1, sizeof *img);
    if (img == NULL)
      rc = -ENOMEM;
    else
      rc = pprt__sym_snapshot_add(out, img);
    if (rc == 0) { /* the object moves into the image: its path and phdr too */
      img->obj = snap.obj[k];
      snap.obj[k].path = NULL;
      snap.obj[k].phdr = NULL;
    }
  }
  out->generation = snap.adds;
  pprt__elf_snapshot_free(&snap);
  return rc;
}

uint64_t pprt__sym_generation(void) {
  return pprt__elf_loader_adds();
}

int pprt__sym_image_same(const pprt__sym_image *a, const pprt__sym_image *b) {
  return a->obj.bias == b->obj.bias && strcmp(a->obj.path, b->obj.path) == 0 &&
         a->obj.phnum == b->obj.phnum;
}

int pprt__sym_image_ranges(const pprt__sym_image *img,
                           int (*fn)(uintptr_t start, uintptr_t limit, void *ctx), void *ctx) {
  const pprt__elf_object *obj = &img->obj;
  for (size_t j = 0; j < obj->phnum; j++) {
    const pprt__elf_phdr *ph = &obj->phdr[j];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    uintptr_t start = obj->bias + (uintptr_t)ph->p_vaddr;
    int rc = fn(start, start + (uintptr_t)ph->p_memsz, ctx);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* Maps path and adds its symbols to img's table; keeps the mapping when it
 * gave any (the names point into it). */
static void image_add_file(pprt__sym_image *img, int slot, const char *path) {
  const void *data;
  size_t size;
  if (pprt__elf_map_file(path, &data, &size) != 0)
    return;
  size_t before = img->tab.n;
  int n = pprt__elf_symtab_add_file(&img->tab, data, size, img->obj.bias, img->obj.build_id,
                                    img->obj.build_id_len);
  if (n > 0) {
    img->map[slot] = data;
    img->map_len[slot] = size;
  } else {
    img->tab.n = before; /* what an error left behind points into data */
    pprt__elf_unmap_file(data, size);
  }
}

/* Separate debug information, where distributions install it: Debian and
 * Fedora by build id, FreeBSD by path. It holds the .symtab that the
 * shipped file was stripped of, so static functions of libc get names. */
static void image_add_debug_file(pprt__sym_image *img) {
  const pprt__elf_object *obj = &img->obj;
  char path[PATH_MAX];
  int n = -1;
  if (obj->build_id_len >= 2) {
    n = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", obj->build_id[0]);
    for (size_t i = 1; i < obj->build_id_len && n > 0 && (size_t)n + 8 < sizeof path; i++)
      n += snprintf(path + n, sizeof path - (size_t)n, "%02x", obj->build_id[i]);
    if (n > 0 && (size_t)n + 7 < sizeof path) {
      memcpy(path + n, ".debug", 7);
      if (access(path, R_OK) == 0) {
        image_add_file(img, 1, path);
        return;
      }
    }
  }
  if (obj->path[0] == '/') {
    n = snprintf(path, sizeof path, "/usr/lib/debug%s.debug", obj->path);
    if (n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0)
      image_add_file(img, 1, path);
  }
}

/* Reads img's symbols: its file and debug file, else its dynamic symbols in
 * memory (the vdso, a deleted or unreadable file), else none (the shell
 * then asks dladdr). */
int pprt__sym_image_read(pprt__sym_image *img) {
  if (img->obj.file != NULL) {
    image_add_file(img, 0, img->obj.file);
    image_add_debug_file(img);
  }
  if (img->tab.n == 0 && pprt__elf_symtab_add_memory(&img->tab, &img->obj) < 0)
    img->tab.n = 0; /* a partial table from a corrupt object is not trusted */
  pprt__elf_symtab_finish(&img->tab);
  return img->tab.n > 0;
}

const char *pprt__sym_image_lookup(const pprt__sym_image *img, uintptr_t addr, uintptr_t seg_start,
                                   uintptr_t *func) {
  const pprt__elf_sym *sym = pprt__elf_symtab_lookup(&img->tab, addr, seg_start);
  if (sym == NULL)
    return NULL;
  *func = sym->addr;
  return sym->name;
}

void pprt__sym_image_free(pprt__sym_image *img) {
  if (img == NULL)
    return;
  pprt__elf_symtab_free(&img->tab);
  for (int k = 0; k < 2; k++)
    if (img->map[k] != NULL)
      pprt__elf_unmap_file(img->map[k], img->map_len[k]);
  free(img->obj.path);
  free(img->obj.phdr);
  free(img);
}
