/* pprt's signal handler installed with libc sigaction: every OS and
 * architecture except Linux x86_64/i386 with PPRT_RAW_SIGACTION (see
 * platform/linux/signal_raw.c). libc supplies the sigreturn trampoline. */
#include <errno.h>
#include <signal.h>

#include "core/syscalls.h"
#include "platform/posix/signal_common.h"

int pprt__os_signal_install(int sig, pprt__os_handler fn, pprt__os_sigsave *save) {
  if (save->installed)
    return -EBUSY;
  struct sigaction sa, prev;
  pprt__posix_signal_action(&sa, fn);
  if (pprt__sys_sigaction(sig, &sa, &prev) != 0)
    return -errno;
  pprt__posix_signal_remember(save, &prev);
  save->restorer = 0;
  return 0;
}

int pprt__os_signal_restore(int sig, pprt__os_sigsave *save) {
  return pprt__posix_signal_restore_libc(sig, save);
}
