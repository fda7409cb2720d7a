/* The signal-mask interposers for Darwin: dyld's __interpose section sends
 * every other image's calls to pthread_sigmask, sigprocmask and sigsuspend
 * to these, which go through core/sigmask.c (SIGPROF kept deliverable while
 * a CPU profile runs, the program told its own mask); our own calls still
 * reach libsystem's. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "core/sigmask.h"

static int my_pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  return pprt__sigmask_change(pthread_sigmask, how, set, old);
}

/* sigprocmask's convention (-1 and errno) turned into pthread_sigmask's. */
static int sigprocmask_as_pthread(int how, const sigset_t *set, sigset_t *old) {
  return sigprocmask(how, set, old) == 0 ? 0 : errno;
}

static int my_sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  int err = pprt__sigmask_change(sigprocmask_as_pthread, how, set, old);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return 0;
}

static int my_sigsuspend(const sigset_t *mask) {
  return pprt__sigmask_suspend(sigsuspend, mask);
}

#define INTERPOSE(mine, theirs) {(const void *)(mine), (const void *)(theirs)}
__attribute__((used, section("__DATA,__interpose"))) static const struct {
  const void *replacement;
  const void *original;
} sigmask_interposers[] = {
    INTERPOSE(my_pthread_sigmask, pthread_sigmask),
    INTERPOSE(my_sigprocmask, sigprocmask),
    INTERPOSE(my_sigsuspend, sigsuspend),
};
