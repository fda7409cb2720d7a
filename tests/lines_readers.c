/* The whole source-lines reader (core/platform.h's pprt__os_lines_*) over
 * one shared library, address by address, for comparing pprt's own reader
 * (dwarf_read.c) with the libdw one (dwarf_lines.c): this program is built
 * once with each, and lines_readers.cmake compares their outputs.
 *
 * Usage: lines_readers LIBRARY STEP [plain]
 * Loads LIBRARY, takes every STEP-th byte of its executable segments and
 * resolves them through one reader in the contract's order (sorted, then
 * pprt__os_lines_order; with "plain", in address order only, which the
 * contract also allows), then prints one line per address in address
 * order: "offset: frame|frame|..." with each frame as name,file,line,
 * start_line, innermost first. offset is the address less the library's
 * load bias, so outputs of two processes compare. */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"

typedef struct segs {
  uintptr_t bias;
  uintptr_t lo[8], hi[8];
  size_t n;
} segs;

static int find_segs(struct dl_phdr_info *info, size_t size, void *ctx) {
  (void)size;
  segs *s = ctx;
  if (info->dlpi_addr != s->bias)
    return 0;
  for (size_t i = 0; i < info->dlpi_phnum && s->n < 8; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      s->lo[s->n] = info->dlpi_addr + ph->p_vaddr;
      s->hi[s->n] = s->lo[s->n] + ph->p_memsz;
      s->n++;
    }
  }
  return 1;
}

static int addr_order(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return (a > b) - (a < b);
}

static const char *or_q(const char *s) {
  return s ? s : "?";
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIBRARY STEP [plain]\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  struct link_map *lm = NULL;
  if (h == NULL || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
    fprintf(stderr, "%s: %s\n", argv[1], dlerror());
    return 1;
  }
  size_t step = strtoul(argv[2], NULL, 10);
  int plain = argc > 3 && strcmp(argv[3], "plain") == 0;
  segs s = {.bias = lm->l_addr};
  dl_iterate_phdr(find_segs, &s);
  size_t n = 0, cap = 0;
  uint64_t *addrs = NULL;
  for (size_t i = 0; step > 0 && i < s.n; i++)
    for (uintptr_t a = s.lo[i]; a < s.hi[i]; a += step) {
      if (n == cap) {
        cap = cap ? 2 * cap : 4096;
        addrs = realloc(addrs, cap * sizeof *addrs);
        if (addrs == NULL)
          return 1;
      }
      addrs[n++] = a;
    }
  if (n == 0) {
    fprintf(stderr, "%s: no executable segment\n", argv[1]);
    return 1;
  }
  qsort(addrs, n, sizeof *addrs, addr_order);
  pprt__os_lines *l;
  int rc = pprt__os_lines_open(&l, NULL);
  if (rc != 0) {
    fprintf(stderr, "pprt__os_lines_open: %d\n", rc);
    return 1;
  }
  if (!plain)
    pprt__os_lines_order(l, addrs, n);
  /* Each address's line, kept until all are resolved: strings are valid
   * until close, the lines are printed in address order. */
  typedef struct out_line {
    uint64_t addr;
    char *text;
  } out_line;
  out_line *out = calloc(n, sizeof *out);
  if (out == NULL)
    return 1;
  for (size_t i = 0; i < n; i++) {
    pprt__os_frame f[64];
    int k = pprt__os_lines_resolve(l, (uintptr_t)addrs[i], f, 64);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL)
      return 1;
    fprintf(m, "%llx:", (unsigned long long)(addrs[i] - s.bias));
    for (int j = 0; j < k; j++)
      fprintf(m, "%s%s,%s,%d,%d", j ? "|" : " ", or_q(f[j].name), or_q(f[j].file), f[j].line,
              f[j].start_line);
    fclose(m);
    out[i] = (out_line){addrs[i], text};
  }
  pprt__os_lines_close(l);
  qsort(out, n, sizeof *out, addr_order); /* by addr, the first member */
  for (size_t i = 0; i < n; i++) {
    puts(out[i].text);
    free(out[i].text);
  }
  free(out);
  free(addrs);
  dlclose(h);
  return 0;
}
