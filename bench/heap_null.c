/* A do-nothing interposer for bench/heap: malloc and free that only jump to
 * glibc's. What it costs is what any LD_PRELOAD malloc wrapper pays before
 * doing anything (one more indirect jump per call), the floor under the
 * preload library's figures. */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

void *__libc_malloc(size_t n);
void __libc_free(void *p);

EXPORT void *malloc(size_t n) {
  return __libc_malloc(n);
}

EXPORT void free(void *p) {
  __libc_free(p);
}
