/* Where the main executable and the vDSO are (core/platform.h, "the
 * program's files"): sysctl KERN_PROC_PATHNAME and the aux vector. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <sys/types.h>
#include <sys/auxv.h>
#include <sys/sysctl.h>

#include "core/platform.h"

/* No path reads a deleted executable. */
const char *const pprt__os_exe_file = NULL;

int pprt__os_exe_path(char *buf, size_t len) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PATHNAME, -1};
  size_t n = len;
  if (sysctl(mib, 4, buf, &n, NULL, 0) != 0)
    return errno == ENOMEM ? -ENAMETOOLONG : -errno;
  if (n <= 1 || buf[0] != '/')
    return -ENOENT;
  return 0;
}

int pprt__os_exec_path(char *buf, size_t len) {
  if (len > INT_MAX)
    len = INT_MAX;
  int rc = elf_aux_info(AT_EXECPATH, buf, (int)len);
  return rc == 0 && buf[0] != '\0' ? 0 : -ENOENT;
}

uintptr_t pprt__os_vdso_base(void) {
#if defined(AT_KPRELOAD)
  void *p = NULL;
  if (elf_aux_info(AT_KPRELOAD, &p, sizeof p) != 0)
    return 0;
  return (uintptr_t)p;
#else
  return 0; /* before FreeBSD 13.0: no vDSO */
#endif
}
