/* Stack unwinding inside the SIGPROF handler: from the interrupted
 * registers to a list of pcs, leaf first. AS-safe: no allocation, no locks,
 * bounded work, and no read of memory that might not be mapped. */
#ifndef PPRT_CORE_UNWIND_H
#define PPRT_CORE_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "core/platform.h"

/* The stack a walk may read freely: [lo, hi). lo = hi = 0 when unknown;
 * then every frame outside the pages already checked is probed with
 * pprt__os_readable. */
typedef struct pprt__stack_bounds {
  uintptr_t lo, hi;
} pprt__stack_bounds;

/* Walks the frame-pointer chain: pcs[0] = regs->pc, then one return
 * address per frame, at most max. Stops at a null, misaligned, decreasing
 * or implausibly far frame pointer, or one that cannot be read. Returns the
 * number of pcs written (at least 1 when max > 0). */
size_t pprt__unwind_fp(const pprt__os_regs *regs, pprt__stack_bounds bounds, uintptr_t *pcs,
                       size_t max);

/* The walk above without a leaf: one return address per frame from the
 * frame at fp up, at most max; sp is a lower bound for fp. For stacks
 * captured outside signals (the allocation sampler passes its entry
 * point's __builtin_frame_address(0), so the first pc is in its caller). */
size_t pprt__unwind_frames(uintptr_t fp, uintptr_t sp, pprt__stack_bounds bounds,
                           uintptr_t *pcs, size_t max);

/* The same walk with libunwind (unw_init_local2 with UNW_INIT_SIGNAL_FRAME,
 * for code built without frame pointers); -ENOTSUP when pprt was built
 * without it (PPRT_UNWINDER=fp). Returns the number of pcs or a negative
 * errno. libunwind may take the loader's lock to find unwind tables, which
 * the interrupted thread may hold: prefer frame pointers. */
int pprt__unwind_libunwind(void *ucontext, uintptr_t *pcs, size_t max);

/* 1 when this build has the libunwind unwinder. */
extern const int pprt__have_libunwind;

/* The largest distance between two frames the walk believes: larger jumps
 * mean a frame pointer that is not one. */
#define PPRT__UNWIND_MAX_FRAME (1u << 20)

#endif /* PPRT_CORE_UNWIND_H */
