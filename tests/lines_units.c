/* pprt's own DIE reader (platform/posix/dwarf_unit.c) against libdw, the
 * reference: for every unit of each file named on the command line, the
 * code ranges of its functions and inlined instances with their DIE and
 * depth (libdw's side: dwarf_scopes.c's index) and each such DIE's linkage
 * or source name through abstract origins and specifications. The files'
 * sections are read through the windowed reader, compressed or not. */
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include "platform/posix/dwarf_scopes.h"
#include "platform/posix/dwarf_unit.h"

typedef struct scope {
  uint64_t lo, hi, die;
  uint32_t depth;
} scope;

typedef struct scopes {
  scope *v;
  size_t n, cap;
} scopes;

static void add(void *ctx, uint64_t lo, uint64_t hi, uint64_t die, uint32_t depth) {
  scopes *s = ctx;
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 256;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (s->v == NULL)
      abort();
  }
  s->v[s->n++] = (scope){lo, hi, die, depth};
}

static int order(const void *pa, const void *pb) {
  const scope *a = pa, *b = pb;
  if (a->lo != b->lo)
    return a->lo < b->lo ? -1 : 1;
  if (a->die != b->die)
    return a->die < b->die ? -1 : 1;
  return a->hi < b->hi ? -1 : a->hi > b->hi;
}

static unsigned long failures;

static const char *libdw_name(Dwarf_Die *die) {
  Dwarf_Attribute attr;
  const char *name = NULL;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
    name = dwarf_formstring(&attr);
  if (name == NULL && dwarf_attr_integrate(die, DW_AT_name, &attr))
    name = dwarf_formstring(&attr);
  return name;
}

static char *own_name(const pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off) {
  pprt__dw_value v;
  if (pprt__dw_die_integrate(u, inf, off, DW_AT_linkage_name, &v, NULL) ||
      pprt__dw_die_integrate(u, inf, off, DW_AT_MIPS_linkage_name, &v, NULL) ||
      pprt__dw_die_integrate(u, inf, off, DW_AT_name, &v, NULL))
    return v.str ? strdup(v.str) : NULL;
  return NULL;
}

static void section(Elf *elf, size_t shstrndx, const char *want, pprt__dw_section *out) {
  memset(out, 0, sizeof *out);
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    const char *name;
    Elf_Data *d;
    if (gelf_getshdr(scn, &sh) != NULL && sh.sh_type != SHT_NOBITS &&
        (name = elf_strptr(elf, shstrndx, sh.sh_name)) != NULL && strcmp(name, want) == 0 &&
        (d = elf_rawdata(scn, NULL)) != NULL)
      pprt__dw_section_init(out, d->d_buf, d->d_size, (sh.sh_flags & SHF_COMPRESSED) != 0,
                            gelf_getclass(elf) == ELFCLASS64);
  }
}

static void check_file(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC), fd2 = open(path, O_RDONLY | O_CLOEXEC);
  Elf *elf = fd2 >= 0 ? elf_begin(fd2, ELF_C_READ_MMAP, NULL) : NULL;
  Dwarf *dbg = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
  size_t shstrndx;
  if (elf == NULL || dbg == NULL || elf_getshdrstrndx(elf, &shstrndx) != 0) {
    fprintf(stderr, "%s: no DWARF\n", path);
    failures++;
    return;
  }
  pprt__dw_info inf;
  section(elf, shstrndx, ".debug_info", &inf.info);
  section(elf, shstrndx, ".debug_abbrev", &inf.abbrev);
  section(elf, shstrndx, ".debug_str", &inf.str);
  section(elf, shstrndx, ".debug_line_str", &inf.line_str);
  section(elf, shstrndx, ".debug_addr", &inf.addr);
  section(elf, shstrndx, ".debug_str_offsets", &inf.str_offsets);
  section(elf, shstrndx, ".debug_ranges", &inf.ranges);
  section(elf, shstrndx, ".debug_rnglists", &inf.rnglists);
  unsigned long units = 0, nscopes = 0, names = 0, bad = 0;
  Dwarf_Off off = 0, next;
  size_t hsize;
  while (dwarf_nextcu(dbg, off, &next, &hsize, NULL, NULL, NULL) == 0) {
    Dwarf_Die cu;
    pprt__dw_cu_index ix;
    pprt__dw_unit u;
    if (dwarf_offdie(dbg, off + hsize, &cu) == NULL || pprt__dw_index_build(&cu, &ix) != 0) {
      off = next;
      continue;
    }
    units++;
    scopes mine = {0}, theirs = {0};
    for (size_t i = 0; i < ix.n; i++)
      add(&theirs, ix.v[i].lo, ix.v[i].hi, ix.v[i].die, ix.v[i].depth);
    if (pprt__dw_unit_open(&u, &inf, off) != 0 || pprt__dw_unit_walk(&u, &inf, add, &mine) != 0) {
      if (bad++ < 10)
        fprintf(stderr, "%s: unit at %#llx not read\n", path, (unsigned long long)off);
    } else {
      if (mine.n > 1) /* qsort takes no NULL, even for 0 items */
        qsort(mine.v, mine.n, sizeof *mine.v, order);
      if (theirs.n > 1)
        qsort(theirs.v, theirs.n, sizeof *theirs.v, order);
      int same = mine.n == theirs.n;
      for (size_t i = 0; same && i < mine.n; i++)
        same = mine.v[i].lo == theirs.v[i].lo && mine.v[i].hi == theirs.v[i].hi &&
               mine.v[i].die == theirs.v[i].die && mine.v[i].depth == theirs.v[i].depth;
      if (!same && bad++ < 10)
        fprintf(stderr, "%s: unit at %#llx: %zu scopes, libdw %zu\n", path, (unsigned long long)off,
                mine.n, theirs.n);
      for (size_t i = 0; same && i < mine.n; i++) {
        if (i > 0 && mine.v[i].die == mine.v[i - 1].die)
          continue;
        Dwarf_Die die;
        const char *want = dwarf_offdie(dbg, mine.v[i].die, &die) ? libdw_name(&die) : NULL;
        char *got = own_name(&u, &inf, mine.v[i].die);
        if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0)) {
          if (bad++ < 10)
            fprintf(stderr, "%s: DIE %#llx: name %s, libdw %s\n", path,
                    (unsigned long long)mine.v[i].die, got ? got : "(none)",
                    want ? want : "(none)");
        }
        free(got);
        names++;
      }
      nscopes += mine.n;
    }
    pprt__dw_unit_free(&u);
    pprt__dw_index_free(&ix);
    free(mine.v);
    free(theirs.v);
    off = next;
  }
  printf("%s: %lu units, %lu ranges, %lu names, %lu differences; .debug_info window %zu of "
         "%llu bytes\n",
         path, units, nscopes, names, bad, inf.info.win_cap, (unsigned long long)inf.info.size);
  failures += bad + (units == 0);
  pprt__dw_section *all[] = {&inf.info, &inf.abbrev,      &inf.str,    &inf.line_str,
                             &inf.addr, &inf.str_offsets, &inf.ranges, &inf.rnglists};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    pprt__dw_section_free(all[i]);
  dwarf_end(dbg);
  elf_end(elf);
  close(fd);
  close(fd2);
}

int main(int argc, char **argv) {
  elf_version(EV_CURRENT);
  for (int i = 1; i < argc; i++)
    check_file(argv[i]);
  if (argc < 2)
    fprintf(stderr, "usage: lines_units FILE... (with DWARF)\n");
  return argc < 2 || failures != 0;
}
