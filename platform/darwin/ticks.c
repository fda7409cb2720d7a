/* The trace clock on Darwin: mach_absolute_time, which reads the CPU counter
 * through the commpage (no system call) and whose rate the timebase states
 * exactly: 1 GHz on Intel Macs, 24 MHz on Apple silicon. */
#include <mach/kern_return.h>
#include <mach/mach_time.h>

#include "core/platform.h"

uint64_t pprt__os_ticks_init(void) {
  mach_timebase_info_data_t tb;
  if (mach_timebase_info(&tb) != KERN_SUCCESS || tb.numer == 0)
    return 0;
  /* ticks * numer / denom = nanoseconds */
  return (uint64_t)1000000000u * tb.denom / tb.numer;
}

uint64_t pprt__os_ticks(void) {
  return mach_absolute_time();
}
