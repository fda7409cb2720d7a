/* The process labels of core/process.h: pid, parent pid and the program's
 * name, read once per process (a forked child reads its own again). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/process.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t g_pid; /* whose labels g_name holds; 0 none yet */
static pid_t g_ppid;
static char g_name[256];

/* The base name of argv[0] from the command line; "" when the OS will not
 * say. The image's own argv[0], not the executable's path: `sh` stays
 * `sh` whatever it links to, and a compiler's cc1 is named cc1. */
static void read_name(char *buf, size_t len) {
  char cmd[4096];
  size_t n = 0;
  buf[0] = '\0';
  if (pprt__os_cmdline(cmd, sizeof cmd - 1, &n) != 0 || n == 0)
    return;
  cmd[n] = '\0'; /* argv[0] ends at the first NUL */
  const char *base = strrchr(cmd, '/');
  base = base && base[1] ? base + 1 : cmd;
  /* A login shell's "-bash". */
  if (base[0] == '-' && base[1])
    base++;
  size_t k = strlen(base);
  if (k >= len)
    k = len - 1;
  memcpy(buf, base, k);
  buf[k] = '\0';
}

size_t pprt__process_labels(pprt__label *out) {
  pid_t me = getpid();
  pthread_mutex_lock(&g_lock);
  if (g_pid != me) {
    read_name(g_name, sizeof g_name);
    g_ppid = getppid();
    g_pid = me;
  }
  pthread_mutex_unlock(&g_lock);
  size_t n = 0;
  out[n++] = (pprt__label){"pid", NULL, (int64_t)me, "id"};
  if (g_name[0])
    out[n++] = (pprt__label){"process", g_name, 0, NULL};
  out[n++] = (pprt__label){"ppid", NULL, (int64_t)g_ppid, "id"};
  return n;
}
