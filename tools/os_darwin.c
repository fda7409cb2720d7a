/* pprt command helpers for macOS: libproc for a running child's CPU time;
 * DYLD_INSERT_LIBRARIES. */
#include <libproc.h>
#include <mach/mach_time.h>
#include <sys/resource.h>

#include "tools/cli.h"

const char cli_os_preload_var[] = "DYLD_INSERT_LIBRARIES";
const char cli_os_preload_lib[] = "libpprt_preload.dylib";

/* rusage_info times are in mach absolute time units (ns on x86_64, not on
 * arm64). */
int64_t cli_os_child_cpu_ns(int pid) {
  struct rusage_info_v0 ri;
  if (proc_pid_rusage(pid, RUSAGE_INFO_V0, (rusage_info_t *)&ri) != 0)
    return -1;
  mach_timebase_info_data_t tb;
  if (mach_timebase_info(&tb) != KERN_SUCCESS || tb.denom == 0)
    return -1;
  return (int64_t)((ri.ri_user_time + ri.ri_system_time) * tb.numer / tb.denom);
}
