/* The unwinder's view of an interrupted Darwin thread: the registers it
 * starts from (pprt__os_context_regs) and which words it may read
 * (pprt__os_readable). Both run in the signal handler.
 *
 * pprt__os_readable copies the word with vm_read_overwrite on the task's own
 * port, which returns an error instead of faulting on an unmapped or
 * unreadable address. It is a Mach call (a message to the kernel on the
 * thread's reply port) that takes no user-space lock and allocates nothing,
 * which is why crash reporters (PLCrashReporter, KSCrash) use it in signal
 * handlers. A pipe-write probe was the alternative; it needs a descriptor
 * created outside the handler that the program may close or reuse. */
#include <errno.h>
#include <mach/mach.h>
#include <signal.h>
#include <sys/ucontext.h>

#include "core/platform.h"

int pprt__os_context_regs(const void *ucontext, pprt__os_regs *regs) {
  /* Darwin's uc_mcontext is a pointer to the machine state. */
  const mcontext_t mc = ((const ucontext_t *)ucontext)->uc_mcontext;
#if defined(__x86_64__)
  *regs = (pprt__os_regs){.pc = (uintptr_t)mc->__ss.__rip,
                          .sp = (uintptr_t)mc->__ss.__rsp,
                          .fp = (uintptr_t)mc->__ss.__rbp};
#elif defined(__aarch64__)
  /* The accessors authenticate or strip pointer signatures on arm64e. */
  *regs = (pprt__os_regs){.pc = (uintptr_t)__darwin_arm_thread_state64_get_pc(mc->__ss),
                          .sp = (uintptr_t)__darwin_arm_thread_state64_get_sp(mc->__ss),
                          .fp = (uintptr_t)__darwin_arm_thread_state64_get_fp(mc->__ss),
                          .lr = (uintptr_t)__darwin_arm_thread_state64_get_lr(mc->__ss)};
#else
  (void)mc;
  (void)regs;
  return -ENOTSUP;
#endif
  return 0;
}

int pprt__os_readable(uintptr_t addr) {
  if (addr < 4096 || addr > UINTPTR_MAX - (sizeof(uintptr_t) - 1))
    return 0;
  uintptr_t word;
  vm_size_t got = 0;
  int saved = errno;
  kern_return_t kr = vm_read_overwrite(mach_task_self(), (vm_address_t)addr, sizeof word,
                                       (vm_address_t)&word, &got);
  errno = saved;
  return kr == KERN_SUCCESS && got == sizeof word;
}
