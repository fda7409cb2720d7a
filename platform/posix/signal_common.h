/* What the two ways of installing pprt's signal handler share (libc
 * sigaction in platform/posix/signal.c, the raw rt_sigaction of
 * platform/linux/signal_raw.c): the action pprt installs, and what it keeps
 * of the action it replaces. The forwarding to that action,
 * pprt__os_signal_forward, is in signal_common.c with these. */
#ifndef PPRT_PLATFORM_POSIX_SIGNAL_COMMON_H
#define PPRT_PLATFORM_POSIX_SIGNAL_COMMON_H

#include "core/platform.h"

/* pprt's action for fn: SA_SIGINFO | SA_ONSTACK | SA_RESTART, every signal
 * blocked while it runs. */
void pprt__posix_signal_action(struct sigaction *sa, pprt__os_handler fn);

/* Records prev in save->old as the action to restore and forward to: prev
 * itself, or SIG_IGN where prev is SIG_DFL, so that a SIGPROF arriving after
 * pprt has restored it cannot kill the process (Go issue 19320). Marks save
 * installed; the caller sets save->restorer. */
void pprt__posix_signal_remember(pprt__os_sigsave *save, const struct sigaction *prev);

#endif /* PPRT_PLATFORM_POSIX_SIGNAL_COMMON_H */
