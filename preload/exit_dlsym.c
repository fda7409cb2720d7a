/* _exit, _Exit and quick_exit for ELF systems (Linux, FreeBSD): defined
 * here so that the dynamic linker binds the program's calls ahead of
 * libc's; each has the outputs written first (exits.c) and then calls
 * libc's (found with dlsym(RTLD_NEXT) by the constructor: a program may
 * call _exit from a signal handler, and dlsym is not async-signal-safe).
 * exit() reaches libc's _exit internally, after the destructor wrote. */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "preload/preload.h"

#define EXPORT __attribute__((visibility("default")))

typedef void (*exit_fn)(int);

static exit_fn real__exit, real__Exit, real_quick_exit;

__attribute__((constructor)) static void resolve_exits(void) {
  real__exit = (exit_fn)dlsym(RTLD_NEXT, "_exit");
  real__Exit = (exit_fn)dlsym(RTLD_NEXT, "_Exit");
  real_quick_exit = (exit_fn)dlsym(RTLD_NEXT, "quick_exit");
}

/* Calls real, or the first of libc's functions that ends the process
 * without exit handlers. */
static _Noreturn void end_with(exit_fn real, int status) {
  pprt__exits_before_exit();
  if (real == NULL)
    real = real__exit ? real__exit : real__Exit;
  if (real != NULL)
    real(status);
  abort(); /* no libc function to end with: not reached on a working libc */
}

EXPORT _Noreturn void _exit(int status) {
  end_with(real__exit, status);
}

EXPORT _Noreturn void _Exit(int status) {
  end_with(real__Exit, status);
}

EXPORT _Noreturn void quick_exit(int status) {
  end_with(real_quick_exit, status);
}
