/* The exec family, for ELF systems: a profiled process that execs must not
 * hand a SIGPROF to the new image, whose SIGPROF action is the default one:
 * it would die of it ("Profiling timer expired") before it could install a
 * handler. The process timer survives exec, and so does a SIGPROF pending
 * on the exec'ing thread or on the process, such as one from the thread's
 * own clock that expired while the kernel ran the exec. Each wrapper stops
 * those sources and takes pending SIGPROFs off first
 * (pprt__cpu_exec_prepare), execs, and re-arms them if the exec failed.
 * glibc's execl/execvp/... call execve internally, not through its PLT, so
 * each is wrapped itself. The profile of the image that execs is not
 * written (its exit handlers never run); a new image that loads the preload
 * library again starts its own, at the same path. A trace being streamed
 * ends its generation first, so that its file is complete up to the exec.
 * The new image inherits the kernel's signal mask: where the program's mask
 * blocks SIGPROF and pprt had unblocked it (core/sigmask.c), it is blocked
 * again first, and a held SIGPROF is left pending, as the kernel would have
 * kept it. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/sigmask.h"
#include "core/trace.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

extern char **environ;

/* Calls libc's `name` through `call` with pprt's sources stopped. */
#define WRAP_EXEC(type, name, call)                                                               \
  do {                                                                                            \
    type real = (type)dlsym(RTLD_NEXT, name);                                                     \
    if (real == NULL) {                                                                           \
      errno = ENOSYS;                                                                             \
      return -1;                                                                                  \
    }                                                                                             \
    pprt__trace_exec_prepare();                                                                   \
    pprt__cpu_exec_prepare();                                                                     \
    int blocked = pprt__sigmask_block_wished(1);                                                  \
    int rc = call;                                                                                \
    int saved = errno;                                                                            \
    pprt__sigmask_unblock_lifted(blocked);                                                        \
    pprt__cpu_exec_failed();                                                                      \
    errno = saved;                                                                                \
    return rc;                                                                                    \
  } while (0)

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  WRAP_EXEC(execve_fn, "execve", real(path, argv, envp));
}

EXPORT int execv(const char *path, char *const argv[]) {
  WRAP_EXEC(execv_fn, "execv", real(path, argv));
}

EXPORT int execvp(const char *file, char *const argv[]) {
  WRAP_EXEC(execv_fn, "execvp", real(file, argv));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  WRAP_EXEC(execve_fn, "execvpe", real(file, argv, envp));
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  WRAP_EXEC(fexecve_fn, "fexecve", real(fd, argv, envp));
}

/* The list forms gather their arguments and use the vector forms above.
 * envp_out receives execle's environment (after the terminating NULL). */
static char **gather(const char *arg0, va_list ap, char ***envp_out) {
  size_t n = 1, cap = 16;
  char **argv = malloc(cap * sizeof *argv);
  if (!argv)
    return NULL;
  argv[0] = (char *)arg0;
  for (char *a = arg0 ? va_arg(ap, char *) : NULL;; a = va_arg(ap, char *)) {
    if (n + 1 >= cap) {
      char **more = realloc(argv, (cap *= 2) * sizeof *argv);
      if (!more) {
        free(argv);
        return NULL;
      }
      argv = more;
    }
    argv[n++] = a;
    if (a == NULL)
      break;
  }
  if (arg0 == NULL)
    argv[0] = NULL;
  if (envp_out)
    *envp_out = va_arg(ap, char **);
  return argv;
}

#define LIST_FORM(call, with_env)                                                                 \
  do {                                                                                            \
    va_list ap;                                                                                   \
    va_start(ap, arg0);                                                                           \
    char **envp = environ;                                                                        \
    char **argv = gather(arg0, ap, with_env ? &envp : NULL);                                      \
    va_end(ap);                                                                                   \
    if (!argv) {                                                                                  \
      errno = ENOMEM;                                                                             \
      return -1;                                                                                  \
    }                                                                                             \
    int rc = call;                                                                                \
    int saved = errno;                                                                            \
    free(argv);                                                                                   \
    errno = saved;                                                                                \
    return rc;                                                                                    \
  } while (0)

EXPORT int execl(const char *path, const char *arg0, ...) {
  LIST_FORM(execv(path, argv), 0);
}

EXPORT int execlp(const char *file, const char *arg0, ...) {
  LIST_FORM(execvp(file, argv), 0);
}

EXPORT int execle(const char *path, const char *arg0, ...) {
  LIST_FORM(execve(path, argv, envp), 1);
}
