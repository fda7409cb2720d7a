/* A small shared library for lines_readers: functions forced inline into
 * each other at several depths, built -O2 -g, so that each address has an
 * inline chain whose names, call lines and call files both readers must
 * agree on. */
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))

INLINE uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

INLINE uint64_t fold(uint64_t x, int n) {
  for (int i = 0; i < n; i++)
    x = mix(x + (uint64_t)i);
  return x;
}

INLINE uint64_t branch(uint64_t x) {
  if (x & 1)
    return fold(x, 3);
  return mix(x) + fold(x >> 1, 2);
}

__attribute__((noinline)) uint64_t lines_readers_leaf(uint64_t x) {
  return branch(x) ^ mix(x + 7);
}

uint64_t lines_readers_entry(uint64_t x, int n) {
  uint64_t acc = 0;
  for (int i = 0; i < n; i++)
    acc += lines_readers_leaf(x + (uint64_t)i) + branch(acc);
  return acc;
}
