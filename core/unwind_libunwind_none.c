/* libunwind's unwinder where the build has no libunwind (PPRT_UNWINDER fp or
 * cfi): pprt__unwind_libunwind answers -ENOTSUP. */
#include <errno.h>

#include "core/unwind.h"

const int pprt__have_libunwind = 0;

int pprt__unwind_libunwind(void *ucontext, uintptr_t *pcs, size_t max) {
  (void)ucontext;
  (void)pcs;
  (void)max;
  return -ENOTSUP;
}
