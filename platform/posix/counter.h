/* The CPU's own cycle or timer counter, read from user space without a
 * system call: x86 rdtsc, aarch64 cntvct_el0. An architecture mechanism, not
 * an OS one; whether the counter may be trusted as a clock (constant rate,
 * synchronised across CPUs) is the OS's call, which
 * pprt__posix_counter_trusted answers per backend. */
#ifndef PPRT_PLATFORM_POSIX_COUNTER_H
#define PPRT_PLATFORM_POSIX_COUNTER_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#define PPRT__HAVE_COUNTER 1
static inline uint64_t pprt__counter_read(void) {
  return __builtin_ia32_rdtsc();
}
/* The TSC's rate is not architecturally visible: measure it. */
static inline uint64_t pprt__counter_hz(void) {
  return 0;
}
#elif defined(__aarch64__)
#define PPRT__HAVE_COUNTER 1
static inline uint64_t pprt__counter_read(void) {
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
}
static inline uint64_t pprt__counter_hz(void) {
  uint64_t v;
  __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(v));
  return v;
}
#else
#define PPRT__HAVE_COUNTER 0
static inline uint64_t pprt__counter_read(void) {
  return 0;
}
static inline uint64_t pprt__counter_hz(void) {
  return 0;
}
#endif

/* 1 when the OS keeps its own clock on this counter (so it runs at a
 * constant rate and agrees across CPUs), else 0. Reads system state once;
 * not AS-safe. Implemented by each ELF backend. */
int pprt__posix_counter_trusted(void);

#endif /* PPRT_PLATFORM_POSIX_COUNTER_H */
