/* How the victim programs of the preload tests report their own checks
 * (sigmask_victim.c, sigprof_victim.c): "ok WHAT" per check passed, and
 * "FAIL WHAT: WHY" with exit status 1 at the first that fails. The cmocka
 * driver reads these lines; each is flushed at once, so that a crash
 * afterwards loses none. */
#ifndef PPRT_TESTS_VICTIM_CHECK_H
#define PPRT_TESTS_VICTIM_CHECK_H

#include <stdio.h>
#include <unistd.h>

#define CHECK(what, cond, ...)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s: ", what);                                                                   \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      fflush(stdout);                                                                              \
      _exit(1);                                                                                    \
    }                                                                                              \
  } while (0)

static inline void ok(const char *what) {
  printf("ok %s\n", what);
  fflush(stdout);
}

#endif /* PPRT_TESTS_VICTIM_CHECK_H */
