/* The unwinder's view of an interrupted FreeBSD thread: the registers it
 * starts from (pprt__os_context_regs) and which words it may read
 * (pprt__os_readable). Both run in the signal handler.
 *
 * pprt__os_readable uses the same probe as Linux, the sigprocmask system
 * call with an invalid `how`: sys_sigprocmask copies the 16-byte set in
 * before kern_sigprocmask rejects the how, so the call fails with EFAULT
 * when the set is unreadable and EINVAL otherwise, and changes nothing. It
 * is one system call, needs no file descriptor and is async-signal-safe
 * (unlike a pipe probe, whose descriptor must be created outside the
 * handler and can be closed or reused behind pprt's back). The call goes
 * through syscall(2), not libc's sigprocmask, because libthr's wrapper
 * copies the set in user space first and would fault. */
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/platform.h"
#include "platform/posix/readable_probe.h"

int pprt__os_context_regs(const void *ucontext, pprt__os_regs *regs) {
  const mcontext_t *mc = &((const ucontext_t *)ucontext)->uc_mcontext;
#if defined(__x86_64__)
  *regs = (pprt__os_regs){
      .pc = (uintptr_t)mc->mc_rip, .sp = (uintptr_t)mc->mc_rsp, .fp = (uintptr_t)mc->mc_rbp};
#elif defined(__i386__)
  *regs = (pprt__os_regs){
      .pc = (uintptr_t)mc->mc_eip, .sp = (uintptr_t)mc->mc_esp, .fp = (uintptr_t)mc->mc_ebp};
#elif defined(__aarch64__)
  *regs = (pprt__os_regs){.pc = (uintptr_t)mc->mc_gpregs.gp_elr,
                          .sp = (uintptr_t)mc->mc_gpregs.gp_sp,
                          .fp = (uintptr_t)mc->mc_gpregs.gp_x[29],
                          .lr = (uintptr_t)mc->mc_gpregs.gp_lr};
#else
  (void)mc;
  (void)regs;
  return -ENOTSUP;
#endif
  return 0;
}

/* Not described yet: a walk stops at a signal trampoline. */
int pprt__os_sigframe_layout(pprt__os_sigframe *l) {
  (void)l;
  return -ENOTSUP;
}

int pprt__os_is_sigreturn(uintptr_t pc) {
  (void)pc;
  return 0;
}

static int sigmask_faults(uintptr_t p) {
  return syscall(SYS_sigprocmask, -1, (void *)p, NULL) != 0 && errno == EFAULT;
}

int pprt__os_readable(uintptr_t addr) {
  return pprt__readable_by_probe(addr, sizeof(sigset_t), sigmask_faults);
}
