/* Whether Linux trusts the CPU counter: its current clocksource is the TSC
 * (x86) or the architected timer (aarch64). The kernel demotes the TSC to
 * another clocksource when it finds it unstable or unsynchronised between
 * CPUs, which is exactly when pprt must not use it either. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "platform/posix/counter.h"
#include "core/syscalls.h"

int pprt__posix_counter_trusted(void) {
#if defined(__x86_64__) || defined(__i386__)
  const char *want = "tsc";
#elif defined(__aarch64__)
  const char *want = "arch_sys_counter";
#else
  const char *want = NULL;
#endif
  if (want == NULL)
    return 0;
  int fd = pprt__sys_open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                          O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  return strcmp(buf, want) == 0;
}
