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

/* ---- the CFI unwinder (core/unwind_cfi.c; ELF systems) ------------------------ */

/* 1 when this build has it (0 on Darwin and i386: core/unwind_cfi_none.c). */
extern const int pprt__have_cfi;

/* The walk driven by DWARF call frame information: pcs[0] = regs->pc, then
 * one return address per frame, at most max. Per pc it uses the row of the
 * image's table (pprt__cfi_refresh) and, for a pc no row covers (no table
 * yet, a function without CFI, an expression a row cannot hold), the
 * frame-pointer rule for that frame only. Stops at an undefined return
 * address, a CFA that does not go up the stack or leaves its bounds, an
 * unreadable slot, or max. AS-safe; never waits. */
size_t pprt__unwind_cfi(const pprt__os_regs *regs, pprt__stack_bounds bounds, uintptr_t *pcs,
                        size_t max);

/* The CFI walk for a stack captured outside signals (the allocation
 * sampler): from regs (PPRT__UNWIND_REGS_HERE in the function that calls
 * this), the pcs of the frames above the entry point's frame `frame` (its
 * __builtin_frame_address(0)), so the first pc is in the entry point's
 * caller, as pprt__unwind_frames gives. Returns 0 when the walk did not get
 * past `frame` (the caller then walks frame pointers). At most
 * PPRT__UNWIND_ABOVE_MAX frames are walked in all. */
#define PPRT__UNWIND_ABOVE_MAX 160

/* The walks read whatever stack memory the chain points at, another frame's
 * AddressSanitizer redzone included (code built without frame pointers
 * keeps data in the register). Such a read is checked by hand before it
 * is made, so ASan's own check is left out of every function of a walk
 * (all of them: GCC will not inline an always_inline function across a
 * difference in this attribute). */
#define PPRT__UNWIND_UNCHECKED __attribute__((no_sanitize_address))
size_t pprt__unwind_cfi_above(const pprt__os_regs *regs, uintptr_t frame, pprt__stack_bounds b,
                              uintptr_t *pcs, size_t max);

/* Compiles the tables of the images loaded now that have none yet, drops
 * those of images gone, and publishes the result. Cheap when nothing was
 * loaded or unloaded since the last call (the loader's generation). Not
 * AS-safe: takes a lock, allocates, and waits for running walks before it
 * frees a replaced set. Errors: -ENOMEM (the set in use stays). */
int pprt__cfi_refresh(void);

/* 1 when a walk since the last refresh started in code outside every
 * image the tables know: an image dlopen'ed since, worth a refresh now
 * rather than at the next rescan. AS-safe. */
int pprt__cfi_stale(void);

/* What the tables hold, for profile comments and the benchmark. */
typedef struct pprt__cfi_summary {
  size_t images, tables, rows, bytes, eh_bytes;
  double build_ms;
  size_t by_status[16]; /* images without a table, by enum pprt__cfi_status */
} pprt__cfi_summary;
void pprt__cfi_stats(pprt__cfi_summary *out);

/* One line for a profile's comments: images, rows, memory, fallbacks. */
void pprt__cfi_describe(char *buf, size_t len);

/* The table of the first image whose path contains path_part. Errors:
 * -ENOENT. */
typedef struct pprt__cfi_image_stat {
  int status; /* enum pprt__cfi_status */
  size_t rows, bytes, eh_bytes;
  double build_ms;
} pprt__cfi_image_stat;
int pprt__cfi_image_info(const char *path_part, pprt__cfi_image_stat *out);

/* The registers of the calling function at the point of the call, for a
 * walk that starts outside a signal (the allocation sampler). Inline so
 * that pc, sp and fp are the caller's own. */
#if defined(__x86_64__)
#define PPRT__UNWIND_REGS_HERE(r)                                                                  \
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"                          \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp));                                 \
  (r)->lr = 0
#elif defined(__aarch64__)
#define PPRT__UNWIND_REGS_HERE(r)                                                                  \
  __asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"                       \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp), "=r"((r)->lr))
#else
#define PPRT__UNWIND_REGS_HERE(r) (*(r) = (pprt__os_regs){0, 0, 0, 0})
#endif

/* Whether a frame-pointer step also gives the caller's sp exactly: on
 * x86_64 the saved rbp and return address end the frame; an aarch64 frame
 * record can sit anywhere in its frame. */
#if defined(__x86_64__) || defined(__i386__)
#define pprt__unwind_fp_gives_sp 1
#else
#define pprt__unwind_fp_gives_sp 0
#endif

/* A return address without its pointer-authentication code (aarch64's
 * xpaclri, a no-op hint on cores without it). */
static inline uintptr_t pprt__unwind_strip_pac(uintptr_t ra) {
#if defined(__aarch64__)
  register uintptr_t x30 __asm__("x30") = ra;
  __asm__("hint #7" : "+r"(x30));
  return x30;
#else
  return ra;
#endif
}

/* The largest distance between two frames the walk believes: larger jumps
 * mean a frame pointer that is not one. */
#define PPRT__UNWIND_MAX_FRAME (1u << 20)

#endif /* PPRT_CORE_UNWIND_H */
