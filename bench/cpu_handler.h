/* What bench/cpu.c's handler-cost part shares with bench/cpu_cfi.c: the
 * handler that does pprt's record() with a chosen unwinder, and its
 * measurement (raise(SIGPROF) at the bottom of a recursion, alternating
 * with an empty handler). */
#ifndef PPRT_BENCH_CPU_HANDLER_H
#define PPRT_BENCH_CPU_HANDLER_H

#include <stddef.h>

enum { H_EMPTY, H_FP, H_LIBUNWIND, H_CFI };

typedef struct hcost {
  double empty_ns, full_ns, inside_ns, frames;
  double inside_min_ns; /* the fastest batch by the handler's clock */
} hcost;

/* ns per signal with an empty handler and with mode's, medians of
 * alternating batches for about `seconds`; inside_ns from the handler's
 * own clock. */
hcost measure_handler(int mode, size_t depth, long batch, double seconds);
void print_hcost(const char *name, size_t depth, hcost h);

/* Installs the bench's SIGPROF handler and ring (and builds the cfi
 * tables); teardown undoes it. */
void handler_setup(void);
void handler_teardown(void);

void bench_unwinders(void);  /* bench/cpu_cfi.c */
void bench_cfi_tables(void); /* bench/cpu_cfi.c */

#endif /* PPRT_BENCH_CPU_HANDLER_H */
