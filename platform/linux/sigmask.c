/* The thread's signal mask without the preload library's interposer in
 * the way (rt_sigprocmask), a held signal sent again with its siginfo
 * (rt_tgsigqueueinfo), for core/sigmask.c; and a pending signal taken off
 * without delivering it (rt_sigtimedwait), for core/sigprof.c. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/platform.h"

int pprt__os_thread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  /* The kernel writes only its own 8 bytes of a libc sigset_t. */
  if (old != NULL)
    sigemptyset(old);
  if (syscall(SYS_rt_sigprocmask, how, set, old, (size_t)(_NSIG / 8)) != 0)
    return -errno;
  return 0;
}

int pprt__os_signal_resend(int sig, const siginfo_t *info) {
  siginfo_t si = *info;
  si.si_signo = sig;
  long pid = (long)getpid(), tid = syscall(SYS_gettid);
  if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &si) == 0)
    return 0;
  /* EPERM: a code that claims a sender (si_code >= 0, or SI_TKILL), which
   * the kernel accepts only from the thread whose id is the process id. */
  if (syscall(SYS_tgkill, pid, tid, sig) != 0)
    return -errno;
  return 0;
}

int pprt__os_signal_take(int sig, siginfo_t *info) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  struct timespec zero = {0, 0};
  long got = syscall(SYS_rt_sigtimedwait, &set, info, &zero, (size_t)(_NSIG / 8));
  if (got == sig)
    return 1;
  return got < 0 && errno != EAGAIN && errno != EINTR ? -errno : 0;
}
