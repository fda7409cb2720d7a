/* Telling setitimer's SIGPROF from others on FreeBSD, which has only the
 * process timer for pprt (see platform/posix/thread_timer_none.c).
 *
 * When ITIMER_PROF expires, the thread's AST handler sends SIGPROF with
 * kern_psignal, which fills in si_code SI_KERNEL (sys/kern/kern_sig.c,
 * kern_psignal; the AST is ast() in subr_trap.c on older releases). Other
 * senders have their own codes: kill SI_USER, sigqueue SI_QUEUE, timer_create
 * SI_TIMER, thr_kill (raise, pthread_kill) SI_LWP. */
#include <signal.h>

#include "core/platform.h"

enum pprt__os_sigprof_source pprt__os_sigprof_source(const siginfo_t *info, uintptr_t cookie) {
  (void)cookie;
  return info->si_code == SI_KERNEL ? PPRT__OS_SIGPROF_PROCESS_TIMER : PPRT__OS_SIGPROF_OTHER;
}

unsigned pprt__os_sigprof_overrun(const siginfo_t *info) {
  (void)info; /* only the process timer here: setitimer has no overrun count */
  return 0;
}
