/* The signal-mask interposers for ELF systems (Linux, FreeBSD):
 * pthread_sigmask, sigprocmask and sigsuspend, defined here so that the
 * dynamic linker binds the program's calls ahead of libc's, each calling
 * libc's (found with dlsym(RTLD_NEXT)) through core/sigmask.c, which keeps
 * SIGPROF deliverable while a CPU profile runs and tells the program its
 * own mask. When no profile runs and none has changed the thread's mask,
 * each is one load and a branch in front of libc's.
 *
 * Only calls through the dynamic linker are seen: the C library's own
 * (glibc's sigwait, system, posix_spawn, the BSD sigblock/sigsetmask and
 * System V sighold family, which call its internal entry points) and raw
 * system calls are not. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>

#include "core/sigmask.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*sigprocmask_fn)(int, const sigset_t *, sigset_t *);

static _Atomic(pprt__sigmask_fn) real_pthread_sigmask;
static _Atomic(sigprocmask_fn) real_sigprocmask;
static _Atomic(pprt__sigsuspend_fn) real_sigsuspend;

/* libc's function `name`, looked up once; NULL if there is none. */
#define RESOLVE(var, type, name)                                                                  \
  type var = atomic_load_explicit(&real_##name, memory_order_relaxed);                           \
  if (var == NULL) {                                                                              \
    var = (type)dlsym(RTLD_NEXT, #name);                                                          \
    atomic_store_explicit(&real_##name, var, memory_order_relaxed);                               \
  }

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  RESOLVE(real, pprt__sigmask_fn, pthread_sigmask);
  if (real == NULL)
    return ENOSYS;
  return pprt__sigmask_change(real, how, set, old);
}

/* sigprocmask's convention (-1 and errno) turned into pthread_sigmask's. */
static int sigprocmask_as_pthread(int how, const sigset_t *set, sigset_t *old) {
  sigprocmask_fn real = atomic_load_explicit(&real_sigprocmask, memory_order_relaxed);
  return real(how, set, old) == 0 ? 0 : errno;
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  RESOLVE(real, sigprocmask_fn, sigprocmask);
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  int err = pprt__sigmask_change(sigprocmask_as_pthread, how, set, old);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return 0;
}

EXPORT int sigsuspend(const sigset_t *mask) {
  RESOLVE(real, pprt__sigsuspend_fn, sigsuspend);
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return pprt__sigmask_suspend(real, mask);
}
