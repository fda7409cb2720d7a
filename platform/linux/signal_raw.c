/* pprt's signal handler installed with a raw rt_sigaction (Linux x86_64 and
 * i386, PPRT_RAW_SIGACTION=ON, the default there).
 *
 * Why not libc's sigaction: a preloaded or vendored profiler should not
 * depend on which libc (glibc, musl, a sanitizer's interceptor) sits between
 * it and the kernel, and it should be able to put back exactly the action it
 * replaced, restorer included, whoever installed that one.
 *
 * Divisions: the restorer trampolines (assembly, with the unwind information
 * debuggers and unwinders need to walk through a signal frame); the kernel's
 * struct sigaction and the conversions to and from libc's; install and
 * restore. Forwarding and the SIG_DFL rule are shared with the libc version
 * (platform/posix/signal_common.c).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/syscalls.h"
#include "platform/posix/signal_common.h"

/* ---- restorer trampolines ------------------------------------------------------ */

/* The kernel makes a handler return into sa_restorer, which must call
 * rt_sigreturn with the stack pointer just past the return address, i.e.
 * pointing into the signal frame the kernel built. The instruction bytes
 * are the ones glibc's __restore_rt uses, which libgcc, libunwind and gdb
 * recognise as a signal trampoline when no unwind information is found.
 *
 * The unwind information (a "signal frame" FDE, augmentation 'S') tells an
 * unwinder where the interrupted registers are: at fixed offsets from the
 * stack pointer, in the ucontext's mcontext. gdb recognises glibc's
 * trampoline by its name as well, which pprt's does not share, so without
 * this FDE it would stop a backtrace at the signal. The FDE also covers the
 * nop before the entry, because unwinders look up a return address minus one.
 *
 * Each register rule is DW_CFA_expression (0x10) reg, length 3,
 * DW_OP_breg<sp> off, with off written as a two-byte SLEB128 (valid for
 * 0 <= off < 8192; a padded encoding is still well-formed). The CFA is the
 * interrupted stack pointer: DW_CFA_def_cfa_expression (0x0f), length 4,
 * DW_OP_breg<sp> off, DW_OP_deref. Below, SAVED(r, n) says that DWARF
 * register r is at mcontext gregs[n]. */
#define PPRT_STR(x) #x
#define PPRT_SLEB2(off) "(" PPRT_STR(off) ") % 128 + 128, (" PPRT_STR(off) ") / 128"
#define PPRT_CFI_SAVED(reg, breg, off)                                                             \
  ".cfi_escape 0x10, " #reg ", 3, " #breg ", " PPRT_SLEB2(off) "\n"
#define PPRT_CFI_CFA(breg, off) ".cfi_escape 0x0f, 4, " #breg ", " PPRT_SLEB2(off) ", 0x06\n"

#define PPRT_TRAMPOLINE_BEGIN                                                                      \
  ".text\n"                                                                                        \
  ".p2align 4\n"                                                                                   \
  ".globl pprt__restore_rt\n"                                                                      \
  ".hidden pprt__restore_rt\n"                                                                     \
  ".type pprt__restore_rt, @function\n"                                                            \
  ".cfi_startproc simple\n"                                                                        \
  ".cfi_signal_frame\n"
#define PPRT_TRAMPOLINE_END                                                                        \
  ".cfi_endproc\n"                                                                                 \
  ".size pprt__restore_rt, . - pprt__restore_rt\n"

#if defined(__x86_64__)
/* On entry rsp points at the ucontext (the handler's ret popped pretcode);
 * its mcontext gregs start 40 bytes in, 8 bytes each, in glibc's REG_*
 * order. DWARF numbers: rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6,
 * rsp 7, r8-r15 8-15, rip 16. DW_OP_breg7 (rsp) is 0x77. */
#define UC_GREG(n) 40 + 8 * n
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "x86_64 ucontext layout");
_Static_assert(REG_R8 == 0 && REG_R15 == 7 && REG_RDI == 8 && REG_RSI == 9 && REG_RBP == 10 &&
                   REG_RBX == 11 && REG_RDX == 12 && REG_RAX == 13 && REG_RCX == 14 &&
                   REG_RSP == 15 && REG_RIP == 16,
               "x86_64 mcontext register order");
#define SAVED(reg, n) PPRT_CFI_SAVED(reg, 0x77, UC_GREG(n))
/* clang-format off */
__asm__(PPRT_TRAMPOLINE_BEGIN PPRT_CFI_CFA(0x77, UC_GREG(15))
        SAVED(8, 0) SAVED(9, 1) SAVED(10, 2) SAVED(11, 3) SAVED(12, 4) SAVED(13, 5) SAVED(14, 6)
        SAVED(15, 7) SAVED(5, 8) SAVED(4, 9) SAVED(6, 10) SAVED(3, 11) SAVED(1, 12)
        SAVED(0, 13) SAVED(2, 14) SAVED(7, 15) SAVED(16, 16)
        "nop\n"
        "pprt__restore_rt:\n"
        "movq $15, %rax\n" /* __NR_rt_sigreturn */
        "syscall\n"
        PPRT_TRAMPOLINE_END);
/* clang-format on */
#elif defined(__i386__)
/* On entry esp points at the frame's sig argument (pretcode was popped),
 * followed by pinfo, puc, the 128-byte siginfo and the ucontext, whose
 * mcontext gregs start 20 bytes in: gregs[n] is at esp + 160 + 4n. DWARF
 * numbers: eax 0, ecx 1, edx 2, ebx 3, esp 4, ebp 5, esi 6, edi 7, eip 8.
 * DW_OP_breg4 (esp) is 0x74. */
#define UC_GREG(n) 160 + 4 * n
_Static_assert(sizeof(siginfo_t) == 128, "i386 siginfo size");
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 20, "i386 ucontext layout");
_Static_assert(REG_EDI == 4 && REG_ESI == 5 && REG_EBP == 6 && REG_ESP == 7 && REG_EBX == 8 &&
                   REG_EDX == 9 && REG_ECX == 10 && REG_EAX == 11 && REG_EIP == 14,
               "i386 mcontext register order");
#define SAVED(reg, n) PPRT_CFI_SAVED(reg, 0x74, UC_GREG(n))
/* clang-format off */
__asm__(PPRT_TRAMPOLINE_BEGIN PPRT_CFI_CFA(0x74, UC_GREG(7))
        SAVED(7, 4) SAVED(6, 5) SAVED(5, 6) SAVED(4, 7) SAVED(3, 8) SAVED(2, 9) SAVED(1, 10)
        SAVED(0, 11) SAVED(8, 14)
        "nop\n"
        "pprt__restore_rt:\n"
        "movl $173, %eax\n" /* __NR_rt_sigreturn */
        "int $0x80\n"
        PPRT_TRAMPOLINE_END);
/* clang-format on */
#else
#error "platform/linux/signal_raw.c is for x86_64 and i386 (PPRT_RAW_SIGACTION=OFF elsewhere)"
#endif

__attribute__((visibility("hidden"))) void pprt__restore_rt(void);

/* ---- the kernel's struct sigaction ------------------------------------------- */

#define KERNEL_SA_RESTORER 0x04000000ul

/* The layout rt_sigaction reads and writes on x86_64 and i386: the mask is
 * the kernel's 64-bit sigset (two 32-bit words on i386, where a u64 in a
 * struct would be 4-byte aligned anyway). */
struct kernel_sigaction {
  uintptr_t handler;
  unsigned long flags;
  uintptr_t restorer;
  unsigned char mask[8];
};
_Static_assert(sizeof(sigset_t) >= 8, "libc sigset_t holds the kernel's");

static long rt_sigaction(int sig, const struct kernel_sigaction *act,
                         struct kernel_sigaction *old) {
  if (pprt__sys_rt_sigaction(sig, act, old, sizeof act->mask) != 0)
    return -errno;
  return 0;
}

/* libc's sigset_t begins with the kernel's 64 bits in the kernel's layout
 * (glibc and musl copy them the same way), so a byte copy round-trips even
 * the signals libc reserves for itself, which sigaddset refuses. */
static void to_kernel(const struct sigaction *sa, uintptr_t restorer, struct kernel_sigaction *k) {
  memset(k, 0, sizeof *k);
  k->handler =
      (sa->sa_flags & SA_SIGINFO) ? (uintptr_t)sa->sa_sigaction : (uintptr_t)sa->sa_handler;
  k->flags = (unsigned long)(unsigned)sa->sa_flags;
  k->restorer = restorer;
  memcpy(k->mask, &sa->sa_mask, sizeof k->mask);
}

static void from_kernel(const struct kernel_sigaction *k, struct sigaction *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sa_flags = (int)k->flags;
  if (k->flags & SA_SIGINFO)
    sa->sa_sigaction = (void (*)(int, siginfo_t *, void *))k->handler;
  else
    sa->sa_handler = (void (*)(int))k->handler;
  sigemptyset(&sa->sa_mask);
  memcpy(&sa->sa_mask, k->mask, sizeof k->mask);
}

/* ---- install and restore --------------------------------------------------------- */

int pprt__os_signal_install(int sig, pprt__os_handler fn, pprt__os_sigsave *save) {
  if (save->installed)
    return -EBUSY;
  struct sigaction sa, prev;
  struct kernel_sigaction ours, kprev;
  pprt__posix_signal_action(&sa, fn);
  to_kernel(&sa, (uintptr_t)pprt__restore_rt, &ours);
  ours.flags |= KERNEL_SA_RESTORER;
  /* One call installs pprt's action and reads the previous one, so no other
   * installer can slip in between. */
  long err = rt_sigaction(sig, &ours, &kprev);
  if (err != 0)
    return (int)err;
  from_kernel(&kprev, &prev);
  pprt__posix_signal_remember(save, &prev);
  save->restorer = kprev.restorer;
  return 0;
}

int pprt__os_signal_restore(int sig, pprt__os_sigsave *save) {
  /* An adopted action is the program's own call, made while pprt's handler
   * was installed, and is made now: libc adds the restorer its handlers
   * need (x86_64 has no default one; i386's depends on SA_SIGINFO). */
  if (!save->installed || save->adopted)
    return pprt__posix_signal_restore_libc(sig, save);
  struct sigaction sa;
  pprt__posix_signal_restorable(save, &sa);
  /* The saved flags keep the previous SA_RESTORER bit, and save->restorer
   * its trampoline: the kernel gets back exactly what it had. */
  struct kernel_sigaction k;
  to_kernel(&sa, save->restorer, &k);
  long err = rt_sigaction(sig, &k, NULL);
  if (err != 0)
    return (int)err;
  save->installed = 0;
  return 0;
}
