/* A library that test_images loads with dlopen after its symbolizer is open:
 * its exported function must still be found, and its static function named
 * from the library's .symtab, which dladdr cannot see. */
#include <stdint.h>

#include "tests/workload.h"

#define EXPORT __attribute__((visibility("default")))

static volatile int sink;

TEST_WORKLOAD static int dlopen_static_helper(int x) {
  for (int i = 0; i < x; i++)
    sink += i * x;
  return sink;
}

EXPORT int pprt_test_dlopen_fn(int x) {
  for (int i = 0; i < x; i++)
    sink ^= i;
  return dlopen_static_helper(x) + sink;
}

EXPORT uintptr_t pprt_test_dlopen_static_addr(void) {
  return (uintptr_t)&dlopen_static_helper;
}
