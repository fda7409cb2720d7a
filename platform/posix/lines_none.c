/* Source lines where pprt has no debug information reader (built without
 * libdw, or Darwin): every profile gets function names only, and says so
 * in a comment (core/symbolize.c). */
#include <errno.h>
#include <stddef.h>

#include "core/platform.h"

int pprt__os_lines_open(pprt__os_lines **out, const char *debug_dirs) {
  (void)debug_dirs;
  *out = NULL;
  return -ENOTSUP;
}

int pprt__os_lines_resolve(pprt__os_lines *l, uintptr_t addr, pprt__os_frame *out, size_t max) {
  (void)l;
  (void)addr;
  (void)out;
  (void)max;
  return 0;
}

void pprt__os_lines_order(pprt__os_lines *l, uint64_t *addrs, size_t n) {
  (void)l; /* nothing is read */
  (void)addrs;
  (void)n;
}

void pprt__os_lines_close(pprt__os_lines *l) {
  (void)l;
}
