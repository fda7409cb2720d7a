/* SIGPROF and the program's signal masks while a CPU profile runs.
 *
 * A thread that blocks SIGPROF never gets pprt's ticks, so its CPU time is
 * missing from the profile. Thread pools do that on purpose: liblzma, for
 * one, blocks every signal before pthread_create so that its workers
 * inherit a full mask. While a profile runs, pprt keeps SIGPROF unblocked
 * in the kernel's mask of each thread it sees start or change its mask,
 * and remembers per thread that the program's mask blocks it
 * (pprt__thread.sigprof_lifted). The program is told its own mask back,
 * and a SIGPROF that is not pprt's is held until the program unblocks it
 * (pprt__thread_defer_signal, from the handler). When no profile runs,
 * pprt gives the kernel the program's mask back at the thread's next mask
 * call and then stays out of the way.
 *
 * Callers: the preload library's interposers of pthread_sigmask,
 * sigprocmask and sigsuspend, its pthread_create and exec hooks, and
 * pprt_thread_register / pprt_thread_unregister. Each function acts on the
 * calling thread only. */
#ifndef PPRT_CORE_SIGMASK_H
#define PPRT_CORE_SIGMASK_H

#include <signal.h>

/* libc's pthread_sigmask, or an adapter of sigprocmask: 0 or an errno
 * value. */
typedef int (*pprt__sigmask_fn)(int how, const sigset_t *set, sigset_t *old);

/* libc's sigsuspend: -1 with errno set. */
typedef int (*pprt__sigsuspend_fn)(const sigset_t *mask);

/* Registers the fork handler that gives a child the program's mask back at
 * once (a child has no profile). Before anything can lift SIGPROF: the
 * preload library's constructor; pprt__sigmask_lift calls it too. Not
 * AS-safe; idempotent. */
void pprt__sigmask_init(void);

/* pthread_sigmask(how, set, old) as the program sees it, made with real.
 * While a profile runs, SIGPROF stays unblocked whatever set says, and old
 * holds SIGPROF when the program's mask blocked it. When the program
 * unblocks SIGPROF, a held one is delivered before this returns. Returns
 * what real returns. AS-safe when real is. */
int pprt__sigmask_change(pprt__sigmask_fn real, int how, const sigset_t *set, sigset_t *old);

/* sigsuspend(mask) as the program sees it, made with real: when mask lets
 * SIGPROF through although the program's mask blocks it, a held SIGPROF
 * ends the wait, as a pending one would. AS-safe when real is. */
int pprt__sigmask_suspend(pprt__sigsuspend_fn real, const sigset_t *mask);

/* While a profile runs: unblocks SIGPROF on the calling thread when its
 * mask blocks it, remembering that the program's mask does. Not AS-safe. */
void pprt__sigmask_lift(void);

/* Blocks SIGPROF again on the calling thread if pprt had unblocked it; a
 * held SIGPROF becomes pending. */
void pprt__sigmask_give_back(void);

/* Around something that inherits the kernel's mask of the calling thread (a
 * new thread, an exec'd image): pprt__sigmask_block_wished blocks SIGPROF
 * for the time being if pprt had unblocked it, and with move_held makes a
 * held SIGPROF pending, as it would be in the kernel (pending signals
 * survive exec). It returns what to pass to pprt__sigmask_unblock_lifted
 * afterwards. */
int pprt__sigmask_block_wished(int move_held);
void pprt__sigmask_unblock_lifted(int blocked);

#endif /* PPRT_CORE_SIGMASK_H */
