/* pprt command helpers for FreeBSD: sysctl for a running child's CPU time;
 * LD_PRELOAD. */
#include <sys/types.h>
#include <sys/sysctl.h>
#include <sys/user.h>

#include "tools/cli.h"

const char cli_os_preload_var[] = "LD_PRELOAD";
const char cli_os_preload_lib[] = "libpprt_preload.so";

int64_t cli_os_child_cpu_ns(int pid) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid};
  struct kinfo_proc kp;
  size_t size = sizeof kp;
  if (sysctl(mib, 4, &kp, &size, NULL, 0) != 0 || size != sizeof kp)
    return -1;
  return (int64_t)kp.ki_runtime * 1000; /* microseconds */
}
