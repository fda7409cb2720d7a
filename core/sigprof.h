/* SIGPROF's action while a CPU profile runs: pprt's handler is the one
 * installed, and the program's action is kept as the one to forward the
 * SIGPROFs that are not pprt's to, and to put back at stop.
 *
 * Go's runtime owns SIGPROF the same way (signal_unix.go: the program's
 * handler is only ever the one it forwards to). A program that sets its
 * own SIGPROF action while a profile runs (GNU sort installs a cleanup
 * handler for SIGPROF among others, which removes its temporary files and
 * re-raises) would otherwise receive pprt's samples, or take the signal
 * away from pprt. With the preload library, its sigaction and signal calls
 * for SIGPROF come here (pprt__sigprof_sigaction): the action is kept, not
 * installed, and the program is told the action it set last. A program
 * that links pprt must not replace SIGPROF's handler while it profiles, as
 * with Go's runtime/pprof and gperftools; its handler installed before
 * pprt_cpu_start is forwarded to.
 *
 * Before an exec, the SIGPROFs pending on the exec'ing thread and the
 * process are taken off (pprt__sigprof_exec_prepare): pending signals
 * survive exec, and the new image has SIGPROF's default action, which
 * ends it.
 *
 * Callers: core/cpu.c (install, restore, forward, exec, fork), the preload
 * library's sigaction interposers. */
#ifndef PPRT_CORE_SIGPROF_H
#define PPRT_CORE_SIGPROF_H

#include <signal.h>

#include "core/platform.h"

/* libc's sigaction: 0, or -1 with errno set. */
typedef int (*pprt__sigaction_fn)(int sig, const struct sigaction *act, struct sigaction *old);

/* Registers the fork handler that frees the lock in a child (another
 * thread of the parent may have held it). Before the program can call
 * sigaction through pprt: the preload library's constructor;
 * pprt__sigprof_install calls it too. Not AS-safe; idempotent. */
void pprt__sigprof_init(void);

/* Installs fn as SIGPROF's handler, keeping the program's action
 * (pprt__os_signal_install). Where pprt's handler is still installed
 * because a restore failed, it stays, with the program's action kept from
 * before, and this returns 0: a failed restore does not stop every later
 * profile with -EBUSY. Not AS-safe. */
int pprt__sigprof_install(pprt__os_handler fn);

/* Puts back the program's latest action, SIG_IGN where that is SIG_DFL
 * (pprt__os_signal_restore). On failure pprt's handler stays installed (it
 * forwards what is not pprt's and drops late ticks, so it is harmless) and
 * the next install or restore takes it from there. Not AS-safe. */
int pprt__sigprof_restore(void);

/* From pprt's handler, for a SIGPROF that is not pprt's: calls the
 * program's latest action, as the kernel would have (nothing for SIG_IGN
 * and SIG_DFL; an SA_RESETHAND action is reset to SIG_DFL first). AS-safe. */
void pprt__sigprof_forward(int sig, siginfo_t *info, void *ucontext);

/* sigaction(sig, act, old) as the program sees it, made with real when
 * pprt is not involved: while pprt's handler is installed in this process,
 * for SIGPROF, act is kept as the program's action instead of installed,
 * and old receives the program's previous one. pprt's own calls (the
 * libc installer, under the lock) go to real. Returns what sigaction
 * returns. AS-safe when real is. */
int pprt__sigprof_sigaction(pprt__sigaction_fn real, int sig, const struct sigaction *act,
                            struct sigaction *old);

/* Before an exec by the calling thread: blocks SIGPROF, calls stop(ctx),
 * which stops what could signal the thread during the exec (its own
 * sampling source, the process timer) and returns 0 when there is nothing
 * of pprt's to do (then so does this); then takes the pending SIGPROFs off
 * the thread's and the process's pending sets. own(info, ctx) says whether
 * one is a tick of pprt's, which is dropped; any other is sent to the
 * thread again and meets the mask the thread had, as if it had just
 * arrived: delivered to pprt's handler, which forwards it to the program's
 * action (or holds it, core/sigmask.c), or left pending where the thread
 * blocks SIGPROF. Where the program's action is SIG_IGN, SIG_IGN is
 * installed instead, which discards them all and which the new image
 * inherits, as it would without pprt. Not AS-safe. */
void pprt__sigprof_exec_prepare(int (*stop)(void *ctx),
                                int (*own)(const siginfo_t *info, void *ctx), void *ctx);

/* After an exec that failed: pprt's handler again if prepare took it away
 * and running says the profile still runs. Not AS-safe. */
void pprt__sigprof_exec_failed(int running);

/* In a forked child, which has no profile: the program's action back (as
 * pprt__sigprof_restore), and the lock free whatever another thread of the
 * parent was doing. */
void pprt__sigprof_fork_child(void);

#endif /* PPRT_CORE_SIGPROF_H */
