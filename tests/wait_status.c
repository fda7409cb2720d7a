/* Runs a command and prints how it ended, "exit N" or "signal N", so the
 * tests can tell a re-raised signal from an exit status of 128+N (a shell
 * cannot). Core dumps are off for the command and its children. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: wait_status COMMAND [ARGS...]\n");
    return 2;
  }
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return 2;
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid)
    return 2;
  if (WIFSIGNALED(status))
    printf("signal %d\n", WTERMSIG(status));
  else
    printf("exit %d\n", WEXITSTATUS(status));
  return 0;
}
