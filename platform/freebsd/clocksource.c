/* Whether FreeBSD trusts the CPU counter: its chosen timecounter
 * (kern.timecounter.hardware) is the TSC on x86 or the ARM generic timer on
 * aarch64. FreeBSD falls back to another timecounter when the TSC is not
 * invariant or not synchronised between CPUs. */
#include <string.h>
#include <sys/types.h>
#include <sys/sysctl.h>

#include "platform/posix/counter.h"

int pprt__posix_counter_trusted(void) {
#if defined(__x86_64__) || defined(__i386__)
  const char *want = "TSC"; /* "TSC" or "TSC-low" */
#elif defined(__aarch64__)
  const char *want = "ARM MPCore Timecounter";
#else
  const char *want = NULL;
#endif
  if (want == NULL)
    return 0;
  char buf[64];
  size_t len = sizeof buf - 1;
  if (sysctlbyname("kern.timecounter.hardware", buf, &len, NULL, 0) != 0)
    return 0;
  buf[len < sizeof buf ? len : sizeof buf - 1] = '\0';
  return strncmp(buf, want, strlen(want)) == 0;
}
