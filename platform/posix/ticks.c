/* The trace clock for Linux and FreeBSD: the CPU counter of counter.h when
 * the kernel keeps its own clock on it and, where the counter states its
 * rate, it runs at that rate; else CLOCK_MONOTONIC. */
#include <stdatomic.h>
#include <time.h>

#include "core/platform.h"
#include "platform/posix/counter.h"

enum { UNDECIDED, MONOTONIC, COUNTER };
static atomic_int source; /* set once by pprt__os_ticks_init */

/* Whether a counter with a stated rate runs at it, against the monotonic
 * clock over ~2 ms. Not a measurement of the rate (the stated one is used,
 * exactly): a gate against a counter that states one rate and runs at
 * another. Each end reads the two clocks back to back: tens of ns apart
 * natively, ~10 us under an emulator, far within the slack over 2 ms. */
static int counter_runs_at(uint64_t hz) {
  if (hz == 0)
    return 1; /* the TSC: its rate is measured by the caller */
  uint64_t n0 = pprt__os_monotonic_ns(), t0 = pprt__counter_read();
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  uint64_t t1 = pprt__counter_read(), n1 = pprt__os_monotonic_ns();
  if (t1 <= t0 || n1 <= n0)
    return 0;
  double ratio = (double)(t1 - t0) * 1e9 / (double)(n1 - n0) / (double)hz;
  double slack = 1.0 / PPRT__TICKS_RATE_SLACK_DIV;
  return ratio > 1 - slack && ratio < 1 + slack;
}

pprt__ticks_info pprt__os_ticks_init(void) {
  int s = atomic_load_explicit(&source, memory_order_acquire);
  if (s == UNDECIDED) {
    int want = MONOTONIC;
    if (PPRT__HAVE_COUNTER && pprt__posix_counter_trusted() && counter_runs_at(pprt__counter_hz()))
      want = COUNTER;
    /* Racing initialisers may measure differently: the first answer wins,
     * so that every caller sees one clock. */
    s = UNDECIDED;
    if (atomic_compare_exchange_strong(&source, &s, want))
      s = want;
  }
  if (s == MONOTONIC)
    return (pprt__ticks_info){1000000000u, 1};
  return (pprt__ticks_info){pprt__counter_hz(), 0};
}

uint64_t pprt__os_ticks(void) {
  if (atomic_load_explicit(&source, memory_order_relaxed) == COUNTER)
    return pprt__counter_read();
  return pprt__os_monotonic_ns();
}
