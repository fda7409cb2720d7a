/* What a process holds, counted from outside pprt: open descriptors,
 * threads and POSIX timers. For the tests (and the soak) that check that
 * starting and stopping gives back all it took. A count is -1 where this
 * OS does not list it. */
#ifndef PPRT_TESTS_PROC_COUNTS_H
#define PPRT_TESTS_PROC_COUNTS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* Entries of a directory, those starting with '.' left out. Descriptors
 * are /proc/self/fd on Linux, /dev/fd on macOS and FreeBSD. */
static inline int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d && strcmp(path, "/proc/self/fd") == 0)
    d = opendir("/dev/fd");
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* POSIX timers: one "ID:" line each in /proc/self/timers (Linux). */
static inline int count_timers(void) {
  FILE *f = fopen("/proc/self/timers", "r");
  if (!f)
    return -1;
  int n = 0;
  char line[256];
  while (fgets(line, sizeof line, f))
    n += strncmp(line, "ID:", 3) == 0;
  fclose(f);
  return n;
}

#endif /* PPRT_TESTS_PROC_COUNTS_H */
