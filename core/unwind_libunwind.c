/* The libunwind unwinder (PPRT_UNWINDER=libunwind): DWARF CFI, for code
 * built without frame pointers. Starts from the signal's ucontext with
 * UNW_INIT_SIGNAL_FRAME so the leaf frame is treated as interrupted, not
 * as a call. About 0.4 us a frame where frame pointers cost ~1 ns. */
#include <errno.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "core/unwind.h"

const int pprt__have_libunwind = 1;

int pprt__unwind_libunwind(void *ucontext, uintptr_t *pcs, size_t max) {
  unw_cursor_t cursor;
  if (unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) < 0)
    return -EINVAL;
  size_t n = 0;
  do {
    unw_word_t ip;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
      break;
    pcs[n++] = (uintptr_t)ip;
  } while (n < max && unw_step(&cursor) > 0);
  return (int)n;
}
