/* pprt command helpers for Linux: /proc for a running child's CPU time;
 * LD_PRELOAD. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"

const char cli_os_preload_var[] = "LD_PRELOAD";
const char cli_os_preload_lib[] = "libpprt_preload.so";

/* utime and stime, fields 14 and 15 of /proc/PID/stat, in clock ticks;
 * the command name before them may hold spaces and parentheses, so fields
 * are counted from the last ')'. */
int64_t cli_os_child_cpu_ns(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  unsigned long long utime, stime;
  if (p == NULL ||
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return -1;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0)
    return -1;
  return (int64_t)((utime + stime) * (1000000000ull / (unsigned long long)hz));
}
