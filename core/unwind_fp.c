/* The frame-pointer unwinder (see unwind.h). Every ABI pprt supports keeps
 * the same two words at a frame pointer: [fp] = the caller's frame pointer,
 * [fp + one word] = the return address (x86_64 and i386 push rbp/ebp after
 * the call pushed the return address; aarch64 stores x29, x30 as a pair).
 *
 * A frame pointer is believed only if it is aligned, above the previous one
 * (stacks grow down, so callers' frames are higher) and not absurdly far
 * from it. Code built without frame pointers uses the register for data;
 * these checks stop the walk at such a value, and reads outside the known
 * stack are probed first, so a bad chain ends the stack instead of
 * faulting inside the signal handler. */
#include "core/unwind.h"

#include <string.h>

#define WORD sizeof(uintptr_t)
#define PAGE ((uintptr_t)4096)

/* Whether [addr, addr + 2 words) can be read. Probes at most one page per
 * call beyond the last page found readable. */
PPRT__UNWIND_UNCHECKED static int frame_readable(uintptr_t addr, pprt__stack_bounds b, uintptr_t *ok_page) {
  if (b.hi && addr >= b.lo && addr + 2 * WORD <= b.hi)
    return 1;
  if (b.hi)
    return 0; /* bounds known: outside them is not a frame of this stack */
  uintptr_t first = addr & ~(PAGE - 1), last = (addr + 2 * WORD - 1) & ~(PAGE - 1);
  for (uintptr_t pg = first;; pg += PAGE) {
    if (pg != *ok_page) {
      if (!pprt__os_readable(pg))
        return 0;
      *ok_page = pg;
    }
    if (pg == last)
      return 1;
  }
}

PPRT__UNWIND_UNCHECKED size_t pprt__unwind_frames(uintptr_t fp, uintptr_t sp, pprt__stack_bounds bounds,
                           uintptr_t *pcs, size_t max) {
  size_t n = 0;
  uintptr_t prev = sp, ok_page = 0;
  while (n < max) {
    /* The first frame may sit at sp itself; later ones strictly above. */
    if (fp == 0 || (fp & (WORD - 1)) != 0 || fp < prev || (n > 0 && fp == prev) ||
        fp - prev > PPRT__UNWIND_MAX_FRAME)
      break;
    if (!frame_readable(fp, bounds, &ok_page))
      break;
    uintptr_t words[2];
    memcpy(words, (const void *)fp, sizeof words);
    uintptr_t next = words[0], ret = words[1];
    if (ret < PAGE)
      break; /* no code lives in the first page: the end of the chain */
    pcs[n++] = ret;
    prev = fp;
    fp = next;
  }
  return n;
}

PPRT__UNWIND_UNCHECKED size_t pprt__unwind_fp(const pprt__os_regs *regs, pprt__stack_bounds bounds, uintptr_t *pcs,
                       size_t max) {
  if (max == 0)
    return 0;
  pcs[0] = regs->pc;
  return 1 + pprt__unwind_frames(regs->fp, regs->sp, bounds, pcs + 1, max - 1);
}
