/* Version and error strings of the public API. */
#include <errno.h>
#include <string.h>

#include "pprt.h"

#define STR2(x) #x
#define STR(x) STR2(x)

const char *pprt_version(void) {
  return STR(PPRT_VERSION_MAJOR) "." STR(PPRT_VERSION_MINOR) "." STR(PPRT_VERSION_PATCH);
}

const char *pprt_strerror(int err) {
  if (err < 0)
    err = -err;
  switch (err) {
  case 0:
    return "success";
  case EBUSY:
    return "already in use";
  case EINVAL:
    return "invalid argument";
  case ENOMEM:
    return "out of memory";
  case ENOSPC:
    return "no space left (buffer full or device full)";
  case EPIPE:
    return "already stopped";
  case EMSGSIZE:
    return "record too large";
  case ENOTSUP:
    return "not supported on this system";
  case EAGAIN:
    return "nothing ready yet";
  case EIO:
    return "input/output error";
  case EPERM:
    return "operation not permitted";
  case ENOENT:
    return "not found";
  case EACCES:
    return "permission denied (for perf events: perf_event_paranoid, or a seccomp filter)";
  case ESRCH:
    return "no such thread";
  case EADDRINUSE:
    return "address already in use";
  case EMFILE:
  case ENFILE:
    return "too many open files";
  default:
    return "unknown error";
  }
}
