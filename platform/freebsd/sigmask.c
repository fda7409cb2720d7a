/* The thread's signal mask without the preload library's interposer in
 * the way (the sigprocmask system call, as context.c uses it), and a held
 * signal sent again (pthread_kill: FreeBSD has no way to queue a siginfo to
 * one thread), for core/sigmask.c; a pending signal taken off without
 * delivering it (the sigtimedwait system call), for core/sigprof.c. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/platform.h"

int pprt__os_thread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  if (syscall(SYS_sigprocmask, how, set, old) != 0)
    return -errno;
  return 0;
}

int pprt__os_signal_resend(int sig, const siginfo_t *info) {
  (void)info; /* the handler sees SI_LWP from this process */
  return -pthread_kill(pthread_self(), sig);
}

int pprt__os_signal_take(int sig, siginfo_t *info) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  struct timespec zero = {0, 0};
  /* The system call: libc's sigtimedwait is a cancellation point. */
  int got = (int)syscall(SYS_sigtimedwait, &set, info, &zero);
  if (got == sig)
    return 1;
  return got < 0 && errno != EAGAIN && errno != EINTR ? -errno : 0;
}
