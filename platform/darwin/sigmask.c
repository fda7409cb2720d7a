/* The thread's signal mask and a held signal sent again, for
 * core/sigmask.c, on Darwin; no way to take a pending signal off (see
 * pprt__os_signal_take).
 *
 * pthread_sigmask is called by name: dyld's __interpose redirects calls
 * from every image but the one that interposes, so the preload library's
 * own calls reach libsystem's.
 *
 * A held SIGPROF cannot go back through the kernel while a profile runs:
 * XNU gives a signal the process sends itself si_code 0 and its own pid,
 * exactly what the profiling timer's SIGPROF looks like (sigprof.c), so
 * pprt's handler would count it as a tick instead of forwarding it. The
 * installed action is called directly instead, as the kernel would: with
 * its sa_mask and the signal blocked, the held siginfo, and no ucontext
 * (there is no interrupted context to give). When pprt's handler is the
 * installed action it forwards the signal to the program's, since the
 * siginfo is the one it found not to be its own. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "core/platform.h"
#include "core/syscalls.h"

int pprt__os_thread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  return -pthread_sigmask(how, set, old);
}

int pprt__os_signal_resend(int sig, const siginfo_t *info) {
  sigset_t cur;
  pthread_sigmask(SIG_SETMASK, NULL, &cur);
  struct sigaction sa;
  if (pprt__sys_sigaction(sig, NULL, &sa) != 0)
    return -errno;
  /* Blocked: the kernel keeps it pending, as it would have. The default
   * action (termination, for SIGPROF) is the kernel's to take too. */
  if (sigismember(&cur, sig) == 1 || sa.sa_handler == SIG_DFL)
    return -pthread_kill(pthread_self(), sig);
  if (sa.sa_handler == SIG_IGN)
    return 0;
  sigset_t block = sa.sa_mask, old;
  if (!(sa.sa_flags & SA_NODEFER))
    sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  siginfo_t si = *info;
  si.si_signo = sig;
  if (sa.sa_flags & SA_SIGINFO)
    sa.sa_sigaction(sig, &si, NULL);
  else
    sa.sa_handler(sig);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return 0;
}

int pprt__os_signal_take(int sig, siginfo_t *info) {
  (void)sig;
  (void)info;
  return -ENOTSUP;
}
