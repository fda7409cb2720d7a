/* PPRT_UNWINDER=fp: no libunwind in this build. */
#include <errno.h>

#include "core/unwind.h"

const int pprt__have_libunwind = 0;

int pprt__unwind_libunwind(void *ucontext, uintptr_t *pcs, size_t max) {
  (void)ucontext;
  (void)pcs;
  (void)max;
  return -ENOTSUP;
}
