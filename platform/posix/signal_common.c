/* The OS-neutral part of pprt's signal handling, shared by the libc and the
 * raw rt_sigaction installers: pprt's action, the program's action kept (as
 * found, or adopted from the program later), the SIG_DFL -> SIG_IGN rule
 * for putting it back, and forwarding a signal that is not pprt's to it. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "core/syscalls.h"
#include "platform/posix/signal_common.h"

void pprt__posix_signal_action(struct sigaction *sa, pprt__os_handler fn) {
  memset(sa, 0, sizeof *sa);
  sa->sa_sigaction = fn;
  sa->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  /* Every signal blocked: the handler is not reentered by another profiling
   * signal or by a program's handler that could interrupt the ring write. */
  sigfillset(&sa->sa_mask);
}

void pprt__posix_signal_remember(pprt__os_sigsave *save, const struct sigaction *prev) {
  save->old = *prev;
  save->adopted = 0;
  save->installed = 1;
}

void pprt__posix_signal_restorable(const pprt__os_sigsave *save, struct sigaction *out) {
  *out = save->old;
  /* sa_handler and sa_sigaction share storage on every supported libc, so
   * this also catches a null sa_sigaction installed with SA_SIGINFO. */
  if (out->sa_handler == SIG_DFL) {
    out->sa_handler = SIG_IGN;
    out->sa_flags &= ~SA_SIGINFO;
  }
}

int pprt__posix_signal_restore_libc(int sig, pprt__os_sigsave *save) {
  if (!save->installed)
    return 0; /* nothing of pprt's to take away */
  struct sigaction sa;
  pprt__posix_signal_restorable(save, &sa);
  if (pprt__sys_sigaction(sig, &sa, NULL) != 0)
    return -errno;
  save->installed = 0;
  return 0;
}

void pprt__os_signal_adopt(pprt__os_sigsave *save, const struct sigaction *act) {
  save->old = *act;
  save->restorer = 0;
  save->adopted = 1;
}

void pprt__os_signal_forward(const pprt__os_sigsave *save, int sig, siginfo_t *info,
                             void *ucontext) {
  const struct sigaction *sa = &save->old;
  /* Checked before SA_SIGINFO: the kernel ignores (or applies the default
   * to) these values whatever the flags say. pprt ignores the default too:
   * a signal of pprt's that arrives late (a clock closed, a timer deleted)
   * must not kill the process. */
  if (sa->sa_handler == SIG_IGN || sa->sa_handler == SIG_DFL)
    return;
  if (sa->sa_flags & SA_SIGINFO)
    sa->sa_sigaction(sig, info, ucontext);
  else
    sa->sa_handler(sig);
}
