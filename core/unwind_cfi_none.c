/* Builds without the CFI unwinder (Darwin, i386): frame pointers instead.
 * Darwin's compilers keep frame pointers by default, and its system
 * libraries are built with them; i386 CFI is not compiled. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/unwind.h"

const int pprt__have_cfi = 0;

size_t pprt__unwind_cfi(const pprt__os_regs *regs, pprt__stack_bounds bounds, uintptr_t *pcs,
                        size_t max) {
  return pprt__unwind_fp(regs, bounds, pcs, max);
}

size_t pprt__unwind_cfi_above(const pprt__os_regs *regs, uintptr_t frame, pprt__stack_bounds b,
                              uintptr_t *pcs, size_t max) {
  (void)regs;
  return pprt__unwind_frames(frame, frame, b, pcs, max);
}

int pprt__cfi_stale(void) {
  return 0;
}

int pprt__cfi_refresh(void) {
  return -ENOTSUP;
}

void pprt__cfi_stats(pprt__cfi_summary *out) {
  memset(out, 0, sizeof *out);
}

void pprt__cfi_describe(char *buf, size_t len) {
  snprintf(buf, len, "unwind tables: none in this build (frame pointers)");
}

int pprt__cfi_image_info(const char *path_part, pprt__cfi_image_stat *out) {
  (void)path_part;
  (void)out;
  return -ENOENT;
}
