/* An ordinary program that knows nothing of pprt, for the preload tests:
 * two threads (named "burner") spend their CPU in two named functions, then
 * the program optionally forks and execs a child, and exits with the status
 * given on its command line. With "exec" after the child program it execs
 * it directly instead, with an empty environment (so not preloaded): the
 * new image must not inherit a profiling timer that kills it.
 *
 * Usage: cpu_burn SECONDS EXIT_STATUS [CHILD_PROGRAM [exec]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

static volatile unsigned long sink;
static double seconds;

__attribute__((noinline)) void burn_hot_inner(void);
void burn_hot_inner(void) {
  unsigned long x = sink;
  LCG_ROUNDS(x, 200000);
  sink = x;
}

__attribute__((noinline)) static void burn_hot_outer(void) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end)
    burn_hot_inner();
}

static void *worker(void *arg) {
  (void)arg;
#ifdef __APPLE__
  pthread_setname_np("burner");
#else
  pthread_setname_np(pthread_self(), "burner");
#endif
  burn_hot_outer();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SECONDS EXIT_STATUS [CHILD_PROGRAM]\n", argv[0]);
    return 2;
  }
  seconds = atof(argv[1]);
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  if (argc > 4 && strcmp(argv[4], "exec") == 0) {
    char *const child_argv[] = {argv[3], "0.5", argv[2], NULL};
    char *const empty_env[] = {NULL};
    execve(argv[3], child_argv, empty_env);
    return 126;
  }
  if (argc > 3) {
    pid_t pid = fork();
    if (pid == 0) {
      execl(argv[3], argv[3], "0.2", "0", (char *)NULL);
      _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return 10;
  }
  return atoi(argv[2]);
}
