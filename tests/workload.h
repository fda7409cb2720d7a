/* TEST_WORKLOAD marks a function that a test looks for in stacks, samples
 * or symbol tables: it stays one out-of-line copy at its own address under
 * the name it is written with, in every build type.
 *
 * noinline alone is not enough: at -O2 and above GCC still makes
 * specialised or split copies under other names (f.constprop.0, f.isra.0,
 * f.part.0), which are what runs, and merges identical functions. noipa
 * (GCC 8) turns all of that off; noclone is the older half of it. Clang has
 * neither: noinline is the closest it offers. */
#ifndef PPRT_TESTS_WORKLOAD_H
#define PPRT_TESTS_WORKLOAD_H

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define TEST_WORKLOAD __attribute__((noipa))
#elif defined(__GNUC__) && !defined(__clang__)
#define TEST_WORKLOAD __attribute__((noinline, noclone))
#else
#define TEST_WORKLOAD __attribute__((noinline))
#endif

#endif /* PPRT_TESTS_WORKLOAD_H */
