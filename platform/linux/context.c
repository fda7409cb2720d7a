/* The unwinder's view of an interrupted Linux thread: the registers it
 * starts from (pprt__os_context_regs) and which words it may read
 * (pprt__os_readable). Both run in the signal handler. */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/platform.h"
#include "platform/posix/readable_probe.h"

int pprt__os_context_regs(const void *ucontext, pprt__os_regs *regs) {
  const mcontext_t *mc = &((const ucontext_t *)ucontext)->uc_mcontext;
#if defined(__x86_64__)
  *regs = (pprt__os_regs){.pc = (uintptr_t)mc->gregs[REG_RIP],
                          .sp = (uintptr_t)mc->gregs[REG_RSP],
                          .fp = (uintptr_t)mc->gregs[REG_RBP]};
#elif defined(__i386__)
  *regs = (pprt__os_regs){.pc = (uintptr_t)mc->gregs[REG_EIP],
                          .sp = (uintptr_t)mc->gregs[REG_ESP],
                          .fp = (uintptr_t)mc->gregs[REG_EBP]};
#elif defined(__aarch64__)
  *regs = (pprt__os_regs){.pc = (uintptr_t)mc->pc,
                          .sp = (uintptr_t)mc->sp,
                          .fp = (uintptr_t)mc->regs[29],
                          .lr = (uintptr_t)mc->regs[30]};
#else
  (void)mc;
  (void)regs;
  return -ENOTSUP;
#endif
  return 0;
}

/* The kernel's rt_sigframe, as the restorer finds it: on x86_64 the
 * handler's return popped the restorer's address, leaving sp at the
 * ucontext; on aarch64 sp is the frame itself, siginfo then ucontext. The
 * C library's ucontext_t matches the kernel's layout (it is what a handler
 * receives). */
int pprt__os_sigframe_layout(pprt__os_sigframe *l) {
#if defined(__x86_64__)
  *l = (pprt__os_sigframe){offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]),
                           offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]),
                           offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP]), SIZE_MAX};
#elif defined(__aarch64__)
  *l = (pprt__os_sigframe){sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext.pc),
                           sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext.sp),
                           sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext.regs[29]),
                           sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext.regs[30])};
#else
  (void)l;
  return -ENOTSUP;
#endif
  return 0;
}

/* glibc's x86_64 __restore_rt: mov $15, %rax; syscall. The aarch64
 * vDSO's (and qemu-user's) __kernel_rt_sigreturn: mov x8, #139; svc #0. */
int pprt__os_is_sigreturn(uintptr_t pc) {
#if defined(__x86_64__)
  static const uint8_t code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
#elif defined(__aarch64__)
  static const uint8_t code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
#else
  static const uint8_t code[] = {0};
  return 0;
#endif
  uintptr_t page = pc & ~(uintptr_t)4095, last = (pc + sizeof code - 1) & ~(uintptr_t)4095;
  if (!pprt__os_readable(page) || (last != page && !pprt__os_readable(last)))
    return 0;
  return memcmp((const void *)pc, code, sizeof code) == 0;
}

/* The kernel reads the 8-byte signal set at p before it looks at `how`, so
 * an invalid how fails with EFAULT when the set is unreadable and with
 * EINVAL otherwise, and changes nothing either way (the probe gperftools and
 * abseil use). */
static int sigmask_faults(uintptr_t p) {
  return syscall(SYS_rt_sigprocmask, ~0, (void *)p, NULL, (size_t)8) != 0 && errno == EFAULT;
}

int pprt__os_readable(uintptr_t addr) {
  return pprt__readable_by_probe(addr, 8, sigmask_faults);
}
