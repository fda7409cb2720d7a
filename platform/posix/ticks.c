/* The trace clock for Linux and FreeBSD: the CPU counter of counter.h when
 * the kernel keeps its own clock on it, else CLOCK_MONOTONIC. */
#include <stdatomic.h>

#include "core/platform.h"
#include "platform/posix/counter.h"

static atomic_int use_counter; /* set once by pprt__os_ticks_init */
static atomic_int decided;

uint64_t pprt__os_ticks_init(void) {
  if (!atomic_load_explicit(&decided, memory_order_acquire)) {
    /* Racing initialisers reach the same answer; the store is idempotent. */
    int use = PPRT__HAVE_COUNTER && pprt__posix_counter_trusted();
    atomic_store_explicit(&use_counter, use, memory_order_relaxed);
    atomic_store_explicit(&decided, 1, memory_order_release);
  }
  if (!atomic_load_explicit(&use_counter, memory_order_relaxed))
    return 1000000000u;
  return pprt__counter_hz();
}

uint64_t pprt__os_ticks(void) {
  if (atomic_load_explicit(&use_counter, memory_order_relaxed))
    return pprt__counter_read();
  return pprt__os_monotonic_ns();
}
