/* Small helpers the benchmarks share: the order and the median of their
 * figures, and the optional first argument, seconds per measurement. */
#ifndef PPRT_BENCH_BENCH_UTIL_H
#define PPRT_BENCH_BENCH_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* For qsort: ascending doubles. */
static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n), NAN when n is 0; v keeps its order. */
static inline double median(const double *v, int n) {
  double *s = n > 0 ? malloc((size_t)n * sizeof *s) : NULL;
  if (s == NULL)
    return NAN;
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  return m;
}

/* argv[1], seconds per measurement, when given (it must be > 0: else the
 * usage line and exit status 2); otherwise `otherwise`. */
static inline double seconds_arg(int argc, char **argv, double otherwise) {
  if (argc <= 1)
    return otherwise;
  double seconds = atof(argv[1]);
  if (!(seconds > 0)) {
    fprintf(stderr, "usage: %s [seconds per measurement > 0]\n", argv[0]);
    exit(2);
  }
  return seconds;
}

#endif /* PPRT_BENCH_BENCH_UTIL_H */
