/* SIGPROF's and the ending signals' action interposers for Darwin: dyld's
 * __interpose section sends every other image's calls to sigaction and
 * signal to these; for SIGPROF they go through core/sigprof.c, which while
 * a CPU profile runs keeps the program's action as the one pprt forwards to
 * instead of installing it over pprt's handler, and for the termination and
 * crash signals through exits.c. Our own calls still reach libsystem's. */
#include <signal.h>

#include "core/sigprof.h"
#include "preload/preload.h"

static int my_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  return pprt__exits_sigaction(sigaction, sig, act, old);
}

pprt__sigaction_fn pprt__preload_real_sigaction(void) {
  return sigaction;
}

/* signal for SIGPROF as the sigaction it stands for (BSD semantics:
 * SA_RESTART, the signal blocked in its handler). */
static void (*my_signal(int sig, void (*h)(int)))(int) {
  if (sig != SIGPROF && !pprt__exits_watched(sig))
    return signal(sig, h);
  return pprt__exits_signal(sigaction, sig, h, SA_RESTART);
}

#define INTERPOSE(mine, theirs)                                                                    \
  { (const void *)(mine), (const void *)(theirs) }
__attribute__((used, section("__DATA,__interpose"))) static const struct {
  const void *replacement;
  const void *original;
} sigaction_interposers[] = {
    INTERPOSE(my_sigaction, sigaction),
    INTERPOSE(my_signal, signal),
};
