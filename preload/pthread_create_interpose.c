/* The pthread_create hook for Darwin: dyld's __interpose section replaces
 * every other image's calls to pthread_create with ours when the library is
 * inserted with DYLD_INSERT_LIBRARIES (no DYLD_FORCE_FLAT_NAMESPACE needed);
 * our own call to pthread_create still reaches the real one. SIP-protected
 * binaries (/bin, /usr/bin) have DYLD_ variables stripped and cannot be
 * profiled this way. */
#include "preload/preload.h"

static int interposed_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*fn)(void *), void *arg) {
  return pprt__preload_create(pthread_create, thread, attr, fn, arg);
}

__attribute__((used, section("__DATA,__interpose"))) static const struct {
  const void *replacement;
  const void *original;
} interposers[] = {{(const void *)interposed_create, (const void *)pthread_create}};
