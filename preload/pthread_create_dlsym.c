/* The pthread_create hook for ELF systems (Linux, FreeBSD): the preload
 * library defines pthread_create, which the dynamic linker binds ahead of
 * libc's, and finds libc's with dlsym(RTLD_NEXT). */
#include <dlfcn.h>
#include <errno.h>

#include "preload/preload.h"

__attribute__((visibility("default"))) int pthread_create(pthread_t *thread,
                                                          const pthread_attr_t *attr,
                                                          void *(*fn)(void *), void *arg) {
  static pprt__pthread_create_fn real;
  if (real == NULL) {
    real = (pprt__pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (real == NULL)
      return EAGAIN;
  }
  return pprt__preload_create(real, thread, attr, fn, arg);
}
