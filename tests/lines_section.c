/* pprt's windowed reader of compressed debug sections
 * (platform/posix/dwarf_section.c) against libelf's whole decompression
 * (elf_compress), for every compressed section of each file named on the
 * command line: forward in chunks of varying size (how units are read),
 * then at offsets out of order (each a restart), and the window's size
 * stays that of the largest chunk asked. Then its address-to-unit table
 * (dwarf_aranges.c) against libdw's, at both ends of every range and at
 * the first byte after it (a gap before the next range is the unit's before
 * it, as libdwfl's addrarange has it). */
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdw.h>

#include "platform/posix/dwarf_aranges.h"
#include "platform/posix/dwarf_section.h"

static unsigned long failures;

static void fail(const char *path, const char *name, const char *what, uint64_t off) {
  if (failures++ < 10)
    fprintf(stderr, "%s: %s: %s at %llu\n", path, name, what, (unsigned long long)off);
}

static void check_section(const char *path, const char *name, pprt__dw_section *s,
                          const uint8_t *want, size_t want_len) {
  if (s->size != want_len) {
    fail(path, name, "size", s->size);
    return;
  }
  size_t largest = 0;
  uint64_t off = 0;
  for (unsigned i = 0; off < want_len; i++) {
    size_t len = 1 + (i * 7919u) % 20000u;
    if (len > want_len - off)
      len = (size_t)(want_len - off);
    const uint8_t *got = pprt__dw_section_get(s, off, len);
    if (got == NULL || memcmp(got, want + off, len) != 0)
      fail(path, name, "forward bytes", off);
    largest = len > largest ? len : largest;
    off += len / 2 + 1; /* chunks overlap, as a unit's end and the next */
  }
  unsigned forward_restarts = s->restarts;
  for (unsigned i = 0; i < 8; i++) {
    uint64_t at = (want_len / 8) * (7 - i);
    size_t len = want_len - at < 4096 ? (size_t)(want_len - at) : 4096;
    const uint8_t *got = pprt__dw_section_get(s, at, len);
    if (got == NULL || memcmp(got, want + at, len) != 0)
      fail(path, name, "out-of-order bytes", at);
  }
  if (pprt__dw_section_get(s, want_len, 1) != NULL)
    fail(path, name, "a byte past the end", want_len);
  if (forward_restarts != 0)
    fail(path, name, "a restart reading forward", forward_restarts);
  if (s->win_cap > (largest > 64 * 1024 ? largest : 64 * 1024))
    fail(path, name, "a window larger than asked", s->win_cap);
  printf("%s: %s: %zu bytes from %zu, window %zu, %u restarts\n", path, name, want_len, s->raw_len,
         s->win_cap, s->restarts);
}

/* The aranges of path's .debug_aranges (scn in raw) against libdw's. */
static void check_aranges(const char *path, Elf *raw, Elf_Scn *scn, int elf64) {
  GElf_Shdr sh;
  Elf_Data *r = elf_rawdata(scn, NULL);
  pprt__dw_section s;
  pprt__dw_aranges mine;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  Dwarf *dbg = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
  Dwarf_Aranges *theirs;
  size_t n;
  (void)raw;
  if (gelf_getshdr(scn, &sh) == NULL || r == NULL || dbg == NULL ||
      pprt__dw_section_init(&s, r->d_buf, r->d_size, (sh.sh_flags & SHF_COMPRESSED) != 0, elf64) !=
          0 ||
      pprt__dw_aranges_read(&s, &mine) != 0 || dwarf_getaranges(dbg, &theirs, &n) != 0) {
    fail(path, ".debug_aranges", "not read", 0);
    n = 0;
  }
  size_t checked = 0, gaps = 0;
  for (size_t i = 0; i < n; i++) {
    Dwarf_Addr addr, next_addr = 0;
    Dwarf_Word len, next_len;
    Dwarf_Off die, next_die;
    Dwarf_Arange *ar = dwarf_onearange(theirs, i);
    if (ar == NULL || dwarf_getarangeinfo(ar, &addr, &len, &die) != 0 || len == 0)
      continue;
    Dwarf_Arange *after = i + 1 < n ? dwarf_onearange(theirs, i + 1) : NULL;
    int has_next =
        after != NULL && dwarf_getarangeinfo(after, &next_addr, &next_len, &next_die) == 0;
    /* The first byte after the range: in a gap before the next range it
     * is the range's unit's, as libdwfl has it; past the last range,
     * no unit's. */
    Dwarf_Addr ends[3] = {addr, addr + len - 1, addr + len};
    for (int e = 0; e < 3; e++) {
      uint64_t unit;
      Dwarf_Off next;
      size_t hsize;
      int found = pprt__dw_aranges_find(&mine, ends[e], &unit);
      if (e == 2 && has_next && next_addr <= ends[e])
        continue; /* no gap */
      if (e == 2 && !has_next) {
        if (found)
          fail(path, ".debug_aranges", "a unit past the last range", ends[e]);
        continue;
      }
      if (!found || dwarf_nextcu(dbg, unit, &next, &hsize, NULL, NULL, NULL) != 0 ||
          unit + hsize != die)
        fail(path, ".debug_aranges", e == 2 ? "another unit for a gap" : "another unit", ends[e]);
      checked++;
      gaps += e == 2;
    }
  }
  printf("%s: .debug_aranges: %zu ranges, %zu addresses (%zu in gaps) checked against libdw\n",
         path, mine.n, checked, gaps);
  if (n) {
    pprt__dw_aranges_free(&mine);
    pprt__dw_section_free(&s);
  }
  if (dbg)
    dwarf_end(dbg);
  if (fd >= 0)
    close(fd);
}

/* Every compressed section of path; returns how many. */
static int check_file(const char *path) {
  int fd_raw = open(path, O_RDONLY | O_CLOEXEC), fd_whole = open(path, O_RDONLY | O_CLOEXEC);
  Elf *raw = fd_raw >= 0 ? elf_begin(fd_raw, ELF_C_READ_MMAP, NULL) : NULL;
  Elf *whole = fd_whole >= 0 ? elf_begin(fd_whole, ELF_C_READ_MMAP, NULL) : NULL;
  size_t shstrndx;
  int n = 0;
  if (raw == NULL || whole == NULL || elf_getshdrstrndx(raw, &shstrndx) != 0) {
    fprintf(stderr, "%s: not an ELF file\n", path);
    n = -1;
  }
  int elf64 = raw != NULL && gelf_getclass(raw) == ELFCLASS64;
  for (Elf_Scn *scn = NULL; n >= 0 && (scn = elf_nextscn(raw, scn)) != NULL;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == NULL)
      continue;
    const char *name = elf_strptr(raw, shstrndx, sh.sh_name);
    if (name != NULL && strcmp(name, ".debug_aranges") == 0)
      check_aranges(path, raw, scn, elf64);
    if (!(sh.sh_flags & SHF_COMPRESSED))
      continue;
    Elf_Data *r = elf_rawdata(scn, NULL);
    Elf_Scn *wscn = elf_getscn(whole, elf_ndxscn(scn));
    Elf_Data *w = wscn && elf_compress(wscn, 0, 0) >= 0 ? elf_getdata(wscn, NULL) : NULL;
    pprt__dw_section s;
    if (r == NULL || w == NULL || pprt__dw_section_init(&s, r->d_buf, r->d_size, 1, elf64) != 0) {
      fail(path, name ? name : "?", "not read", 0);
      continue;
    }
    check_section(path, name ? name : "?", &s, w->d_buf, w->d_size);
    pprt__dw_section_free(&s);
    n++;
  }
  if (raw)
    elf_end(raw);
  if (whole)
    elf_end(whole);
  if (fd_raw >= 0)
    close(fd_raw);
  if (fd_whole >= 0)
    close(fd_whole);
  return n;
}

int main(int argc, char **argv) {
  elf_version(EV_CURRENT);
  int sections = 0;
  for (int i = 1; i < argc; i++) {
    int n = check_file(argv[i]);
    if (n < 0)
      failures++;
    else
      sections += n;
  }
  if (sections == 0) {
    fprintf(stderr, "usage: lines_section FILE... (with compressed debug sections)\n");
    return 1;
  }
  return failures != 0;
}
