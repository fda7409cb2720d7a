/* What the two ways of installing pprt's signal handler share (libc
 * sigaction in platform/posix/signal.c, the raw rt_sigaction of
 * platform/linux/signal_raw.c): the action pprt installs, what it keeps
 * of the action it replaces, and what it puts back. The forwarding to that action,
 * pprt__os_signal_forward, is in signal_common.c with these. */
#ifndef PPRT_PLATFORM_POSIX_SIGNAL_COMMON_H
#define PPRT_PLATFORM_POSIX_SIGNAL_COMMON_H

#include "core/platform.h"

/* pprt's action for fn: SA_SIGINFO | SA_ONSTACK | SA_RESTART, every signal
 * blocked while it runs. */
void pprt__posix_signal_action(struct sigaction *sa, pprt__os_handler fn);

/* Records prev, the action pprt's replaced, in save->old as the action to
 * restore and forward to. Marks save installed; the caller sets
 * save->restorer. */
void pprt__posix_signal_remember(pprt__os_sigsave *save, const struct sigaction *prev);

/* The action pprt__os_signal_restore installs: save->old, or SIG_IGN where
 * that is SIG_DFL, so that a SIGPROF of pprt's still pending cannot kill the
 * process (Go issue 19320). */
void pprt__posix_signal_restorable(const pprt__os_sigsave *save, struct sigaction *out);

/* pprt__os_signal_restore with libc's sigaction: the libc installer's, and
 * the raw one's for an action the program set through libc (adopted). */
int pprt__posix_signal_restore_libc(int sig, pprt__os_sigsave *save);

#endif /* PPRT_PLATFORM_POSIX_SIGNAL_COMMON_H */
