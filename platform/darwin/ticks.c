/* The trace clock on Darwin: mach_absolute_time, which reads the CPU counter
 * through the commpage (no system call) and whose rate the timebase states
 * exactly: 1 GHz on Intel Macs, 24 MHz on Apple silicon. It is not
 * CLOCK_MONOTONIC (which on Darwin also counts sleep), so never "monotonic"
 * in pprt__ticks_info's sense even where the rate is 1e9. */
#include <mach/kern_return.h>
#include <mach/mach_time.h>

#include "core/platform.h"

pprt__ticks_info pprt__os_ticks_init(void) {
  mach_timebase_info_data_t tb;
  if (mach_timebase_info(&tb) != KERN_SUCCESS || tb.numer == 0)
    return (pprt__ticks_info){0, 0};
  /* ticks * numer / denom = nanoseconds. An inexact quotient (no Mac has
   * one: 1/1 and 125/3) is better measured. */
  if ((uint64_t)1000000000u * tb.denom % tb.numer != 0)
    return (pprt__ticks_info){0, 0};
  return (pprt__ticks_info){(uint64_t)1000000000u * tb.denom / tb.numer, 0};
}

uint64_t pprt__os_ticks(void) {
  return mach_absolute_time();
}
