/* pprt's line-program interpreter (platform/posix/dwarf_lineprog.c)
 * against libdw, the reference implementation: for every address of every
 * function of each file named on the command line (the test programs, built
 * with -g), dwarf_getsrc_die's row and the interpreter's must agree on
 * whether there is one, its line and its file. Each function's addresses go
 * in increasing order, functions in the order of their DIEs, so the cursor
 * both moves on and starts sequences again. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include "platform/posix/dwarf_scopes.h"

typedef struct check {
  Dwarf_Die *cu;
  pprt__dw_lineprog *lp;
  const char *file;
  unsigned long addrs, lines, mismatches;
} check;

static void compare(check *c, Dwarf_Addr pc) {
  Dwarf_Line *dl = dwarf_getsrc_die(c->cu, pc);
  const char *want_file = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
  int want_line = 0;
  if (dl != NULL && dwarf_lineno(dl, &want_line) != 0)
    want_line = 0;
  pprt__dw_row row;
  int found = pprt__dw_lineprog_find(c->lp, pc, &row);
  char *got_file = found ? pprt__dw_lineprog_path(c->lp, row.file) : NULL;
  int ok = (dl != NULL) == found;
  if (ok && found)
    ok = (int)row.line == want_line &&
         (want_file == NULL ? got_file == NULL
                            : got_file != NULL && strcmp(want_file, got_file) == 0);
  c->addrs++;
  c->lines += found;
  if (!ok && c->mismatches++ < 10)
    fprintf(stderr, "%s: %#llx: libdw %s:%d, pprt %s%s:%u\n", c->file, (unsigned long long)pc,
            want_file ? want_file : "(none)", dl ? want_line : 0, found ? "" : "(none) ",
            got_file ? got_file : "", found ? row.line : 0);
  free(got_file);
}

static int each_function(Dwarf_Die *fn, void *arg) {
  check *c = arg;
  Dwarf_Addr lo, hi;
  if (dwarf_lowpc(fn, &lo) == 0 && dwarf_highpc(fn, &hi) == 0)
    for (Dwarf_Addr pc = lo; pc < hi; pc++)
      compare(c, pc);
  return DWARF_CB_OK;
}

/* Every function of path; returns the mismatches, or -1 when the file has
 * no debug information the test can read. */
static long check_file(const char *path, unsigned long *addrs, unsigned long *lines) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  Dwarf *dbg = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
  if (dbg == NULL) {
    fprintf(stderr, "%s: no DWARF\n", path);
    if (fd >= 0)
      close(fd);
    return -1;
  }
  pprt__dw_sections secs;
  pprt__dw_sections_get(dwarf_getelf(dbg), &secs);
  check c = {0};
  c.file = path;
  long units = 0, failed = 0;
  Dwarf_Off off = 0, next;
  size_t hsize;
  while (dwarf_nextcu(dbg, off, &next, &hsize, NULL, NULL, NULL) == 0) {
    Dwarf_Die cu;
    Dwarf_Attribute attr;
    Dwarf_Word stmt;
    uint8_t addr_size;
    if (dwarf_offdie(dbg, off + hsize, &cu) != NULL &&
        dwarf_attr(&cu, DW_AT_stmt_list, &attr) != NULL && dwarf_formudata(&attr, &stmt) == 0 &&
        dwarf_diecu(&cu, &cu, &addr_size, NULL) != NULL) {
      const char *comp_dir =
          dwarf_attr(&cu, DW_AT_comp_dir, &attr) ? dwarf_formstring(&attr) : NULL;
      pprt__dw_lineprog lp;
      units++;
      if (pprt__dw_lineprog_open(&lp, &secs, stmt, addr_size, comp_dir) != 0) {
        fprintf(stderr, "%s: unit at %#llx: the line program is not read\n", path,
                (unsigned long long)off);
        failed++;
      } else {
        c.cu = &cu;
        c.lp = &lp;
        dwarf_getfuncs(&cu, each_function, &c, 0);
        pprt__dw_lineprog_free(&lp);
      }
    }
    off = next;
  }
  dwarf_end(dbg);
  close(fd);
  printf("%s: %ld units, %lu addresses, %lu with a line, %lu mismatches\n", path, units, c.addrs,
         c.lines, c.mismatches);
  *addrs += c.addrs;
  *lines += c.lines;
  return units == 0 ? -1 : (long)c.mismatches + failed;
}

int main(int argc, char **argv) {
  int rc = 0;
  unsigned long addrs = 0, lines = 0;
  for (int i = 1; i < argc; i++)
    if (check_file(argv[i], &addrs, &lines) != 0)
      rc = 1;
  if (argc < 2 || lines == 0) {
    fprintf(stderr, "usage: lines_program FILE... (with DWARF line tables)\n");
    rc = 1;
  }
  return rc;
}
