/* Telling setitimer's SIGPROF from others on Darwin, which has only the
 * process timer (see platform/posix/thread_timer_none.c).
 *
 * XNU gives every caught signal that is not a fault or SIGCHLD si_code 0:
 * psignal_internal records si_code 0 and si_pid = the sending process for
 * the handler, and sendsig copies them (bsd/kern/kern_sig.c and
 * bsd/dev/{i386,arm}/unix_signal.c, xnu-11417). ITIMER_PROF's SIGPROF is
 * sent by bsd_ast on a thread of the process itself, so its si_pid is the
 * process's own pid (or 0, as the per-process si_* fields are cleared by the
 * sendsig that consumes them and a second pending signal can find them
 * empty). So a SIGPROF from kill(1) in another process is told apart, but
 * one from raise() or kill(getpid()) is not. */
#include <signal.h>
#include <unistd.h>

#include "core/platform.h"

enum pprt__os_sigprof_source pprt__os_sigprof_source(const siginfo_t *info, uintptr_t cookie) {
  (void)cookie;
  if (info->si_code == 0 && (info->si_pid == 0 || info->si_pid == getpid()))
    return PPRT__OS_SIGPROF_PROCESS_TIMER;
  return PPRT__OS_SIGPROF_OTHER;
}

unsigned pprt__os_sigprof_overrun(const siginfo_t *info) {
  (void)info; /* only the process timer here: setitimer has no overrun count */
  return 0;
}
