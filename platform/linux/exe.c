/* Where the main executable and the vDSO are (core/platform.h, "the
 * program's files"): /proc/self/exe and the aux vector. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <sys/auxv.h>

#include "core/platform.h"

const char *const pprt__os_exe_file = "/proc/self/exe";

int pprt__os_exe_path(char *buf, size_t len) {
  if (len < 2)
    return -ENAMETOOLONG;
  ssize_t n = readlink("/proc/self/exe", buf, len - 1);
  if (n < 0)
    return -errno;
  if (n == 0 || buf[0] != '/')
    return -ENOENT;
  if ((size_t)n >= len - 1)
    return -ENAMETOOLONG; /* perhaps cut short */
  buf[n] = '\0';
  /* The kernel marks a deleted file; the path is the file it was (Go's
   * runtime trims the mark the same way). */
  static const char deleted[] = " (deleted)";
  if ((size_t)n > sizeof deleted - 1 && strcmp(buf + n - (sizeof deleted - 1), deleted) == 0)
    buf[n - (sizeof deleted - 1)] = '\0';
  return 0;
}

int pprt__os_exec_path(char *buf, size_t len) {
  const char *fn = (const char *)getauxval(AT_EXECFN);
  if (fn == NULL || fn[0] == '\0')
    return -ENOENT;
  size_t n = strlen(fn);
  if (n >= len)
    return -ENAMETOOLONG;
  memcpy(buf, fn, n + 1);
  return 0;
}

uintptr_t pprt__os_vdso_base(void) {
  return (uintptr_t)getauxval(AT_SYSINFO_EHDR);
}
