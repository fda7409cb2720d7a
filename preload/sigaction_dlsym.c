/* SIGPROF's and the ending signals' action interposers for ELF systems
 * (Linux, FreeBSD): sigaction and the signal family, defined here so that
 * the dynamic linker binds the program's calls ahead of libc's. For SIGPROF
 * each goes through core/sigprof.c, which while a CPU profile runs keeps the
 * program's action as the one pprt forwards to instead of installing it
 * over pprt's handler (GNU sort's cleanup handler would otherwise get every
 * sample, and re-raise it); for the termination and crash signals through
 * exits.c, where pprt's handler stands for the default action until the
 * program sets its own; other signals go straight to libc's function (found
 * with dlsym(RTLD_NEXT)).
 *
 * The signal family is interposed one by one because the C library builds
 * it on its internal sigaction, not through the dynamic linker: signal,
 * bsd_signal and ssignal (BSD semantics: SA_RESTART, the signal blocked in
 * its handler), sysv_signal and __sysv_signal (System V semantics:
 * SA_RESETHAND | SA_NODEFER; glibc redirects signal to __sysv_signal in
 * strict X/Open programs). Not seen: sigset, sigignore and siginterrupt
 * (obsolescent System V calls, also built on the internal sigaction), and
 * raw system calls. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "core/sigprof.h"
#include "preload/preload.h"

#define EXPORT __attribute__((visibility("default")))

typedef void (*handler_fn)(int);
typedef handler_fn (*signal_fn)(int, handler_fn);

/* Declared here too: not every libc declares every one of them. */
EXPORT handler_fn signal(int sig, handler_fn h);
EXPORT handler_fn bsd_signal(int sig, handler_fn h);
EXPORT handler_fn ssignal(int sig, handler_fn h);
EXPORT handler_fn sysv_signal(int sig, handler_fn h);
EXPORT handler_fn __sysv_signal(int sig, handler_fn h);

static _Atomic(pprt__sigaction_fn) real_sigaction;
static _Atomic(signal_fn) real_signal, real_bsd_signal, real_ssignal, real_sysv_signal,
    real___sysv_signal;

/* libc's function `name`, looked up once; NULL if there is none. A
 * program's handler may be the first caller (sort's calls signal), and
 * dlsym is not async-signal-safe: the constructor below looks them all up
 * first. */
#define RESOLVE(var, type, name)                                                                   \
  type var = atomic_load_explicit(&real_##name, memory_order_relaxed);                             \
  if (var == NULL) {                                                                               \
    var = (type)dlsym(RTLD_NEXT, #name);                                                           \
    atomic_store_explicit(&real_##name, var, memory_order_relaxed);                                \
  }

__attribute__((constructor)) static void resolve_all(void) {
  RESOLVE(a, pprt__sigaction_fn, sigaction);
  RESOLVE(b, signal_fn, signal);
  RESOLVE(c, signal_fn, bsd_signal);
  RESOLVE(d, signal_fn, ssignal);
  RESOLVE(e, signal_fn, sysv_signal);
  RESOLVE(f, signal_fn, __sysv_signal);
  (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  RESOLVE(real, pprt__sigaction_fn, sigaction);
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return pprt__exits_sigaction(real, sig, act, old);
}

pprt__sigaction_fn pprt__preload_real_sigaction(void) {
  RESOLVE(real, pprt__sigaction_fn, sigaction);
  return real;
}

/* The signal family for SIGPROF, as the sigaction it stands for; for other
 * signals libc's own function, or that sigaction where libc has none. */
static handler_fn via_sigaction(signal_fn real, int sig, handler_fn h, int flags) {
  if (sig != SIGPROF && !pprt__exits_watched(sig) && real != NULL)
    return real(sig, h);
  RESOLVE(act, pprt__sigaction_fn, sigaction);
  if (act == NULL) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  return pprt__exits_signal(act, sig, h, flags);
}

/* Each member of the family, with its semantics (see the top). */
#define SIGNAL_WRAPPER(name, flags)                                                                \
  EXPORT handler_fn name(int sig, handler_fn h) {                                                  \
    RESOLVE(real, signal_fn, name);                                                                \
    return via_sigaction(real, sig, h, flags);                                                     \
  }

SIGNAL_WRAPPER(signal, SA_RESTART)
SIGNAL_WRAPPER(bsd_signal, SA_RESTART)
SIGNAL_WRAPPER(ssignal, SA_RESTART)
SIGNAL_WRAPPER(sysv_signal, SA_RESETHAND | SA_NODEFER)
SIGNAL_WRAPPER(__sysv_signal, SA_RESETHAND | SA_NODEFER)
