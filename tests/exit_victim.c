/* The program preload_exits runs under the preload library: it keeps some
 * memory (for the heap profile), burns CPU, and ends the way its first
 * argument says:
 *   wait        burn until a signal ends it
 *   handler     its own SIGTERM handler (installed with signal, which must
 *               return SIG_DFL) sets a flag; it then exits 7
 *   segv abort _exit _Exit quick_exit corrupt
 *               after the CPU seconds of its second argument
 *               (corrupt: scribbles over the heap and frees a wild pointer)
 *   fork        forks a child that calls _exit(9) and one that raises
 *               SIGTERM, prints how each ended and in how many ms, and
 *               returns 0
 * It prints "ready" on stdout after the CPU seconds of its second argument
 * (default 1), after a first line with SIGINT, SIGTERM and SIGHUP's actions
 * as it sees them (dfl, ign or handler). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_flag;
static void *g_kept[32];
static volatile double g_sink;

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void keep_memory(void) {
  for (int i = 0; i < 32; i++) {
    g_kept[i] = malloc(1 << 20);
    memset(g_kept[i], i, 1 << 20);
  }
}

__attribute__((noinline)) static void spin(void) {
  double x = g_sink;
  for (int i = 0; i < 200000; i++)
    x = x * 1.0000001 + 0.5;
  g_sink = x;
}

/* Burns CPU until `until` seconds of it (forever if negative) or the flag. */
__attribute__((noinline)) static void burn(double until) {
  while (!g_flag && (until < 0 || cpu_s() < until))
    spin();
}

static const char *action(int sig) {
  struct sigaction sa;
  sigaction(sig, NULL, &sa);
  return sa.sa_handler == SIG_DFL ? "dfl" : sa.sa_handler == SIG_IGN ? "ign" : "handler";
}

static void on_term(int sig) {
  (void)sig;
  g_flag = 1;
}

/* CPU time of the process itself, or of its waited-for children. */
static double usage_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "wait";
  double ready = argc > 2 ? atof(argv[2]) : 1.0;
  keep_memory();
  /* Through signal(), the family the preload library interposes one by
   * one; the actions are read back with sigaction. */
  if (strcmp(mode, "handler") == 0 && signal(SIGTERM, on_term) != SIG_DFL)
    return 98;
  printf("INT=%s TERM=%s HUP=%s\n", action(SIGINT), action(SIGTERM), action(SIGHUP));
  /* What the process used before main (the loader, a sanitizer's start):
   * before the profile could see it. */
  printf("cpu at main: %.6f\n", usage_s(RUSAGE_SELF));
  fflush(stdout);
  burn(ready);
  printf("ready\n");
  fflush(stdout);
  if (strcmp(mode, "segv") == 0)
    *(volatile int *)(uintptr_t)8 = 1;
  if (strcmp(mode, "abort") == 0)
    abort();
  if (strcmp(mode, "_exit") == 0)
    _exit(3);
  if (strcmp(mode, "_Exit") == 0)
    _Exit(4);
  if (strcmp(mode, "quick_exit") == 0)
    quick_exit(5);
  if (strcmp(mode, "corrupt") == 0) {
    /* Small blocks, inside the heap's own mapping: the scribble itself
     * cannot fault, whatever the layout. */
    char *a = malloc(48), *b = malloc(48);
    memset(a, 0x5a, 48 + 16); /* over b's chunk header */
    free(a + 24);             /* a wild pointer: glibc aborts */
    free(b);
    *(volatile int *)(uintptr_t)8 = 1;
  }
  if (strcmp(mode, "fork") == 0) {
    for (int i = 0; i < 2; i++) {
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      pid_t pid = fork();
      if (pid == 0) {
        if (i == 0)
          _exit(9);
        raise(SIGTERM);
        _exit(99);
      }
      int st = 0;
      waitpid(pid, &st, 0);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
      printf("child %s %d in %.0f ms\n", WIFSIGNALED(st) ? "signal" : "exit",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), ms);
    }
    /* The children's CPU time is in the wait status's rusage, not in
     * this process's profile. */
    printf("children cpu: %.6f\n", usage_s(RUSAGE_CHILDREN));
    fflush(stdout);
    return 0;
  }
  burn(-1);
  if (g_flag) {
    printf("handler ran\n");
    fflush(stdout);
    exit(7);
  }
  return 0;
}
