/* pprt record against a SIGTERM that comes right after it started the
 * program: the program gets the signal, and pprt does not leave it running
 * as an orphan. pprt installs its forwarders before the fork; before, one
 * that came between the fork and their installation (which includes the
 * wait for the program's exec) killed pprt alone.
 *
 * Each round starts `pprt record -- sleep 30` and sends SIGTERM to pprt as
 * soon as it has a child (read from /proc/PID/task/PID/children), then
 * checks that the child is gone. This process is a child subreaper, so an
 * orphan becomes its child: it can be seen, and is killed at the end.
 * Paths come from CMake: PPRT_TOOL (the pprt command), PRELOAD_LIB. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

extern char **environ;

#define ROUNDS 30

/* The first child of process pid, or 0 while it has none; -1 when the
 * kernel does not list children. */
static pid_t first_child(pid_t pid) {
  char path[64], buf[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return errno == ENOENT ? -1 : 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return (pid_t)atoi(buf);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_sigterm_right_after_start(void **state) {
  (void)state;
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  char dir[] = "/tmp/pprt-record-sig-XXXXXX";
  assert_non_null(mkdtemp(dir));
  int orphans = 0, hit = 0;
  for (int round = 0; round < ROUNDS; round++) {
    char *argv[] = {(char *)PPRT_TOOL,
                    "record",
                    "--quiet",
                    "--preload",
                    (char *)PRELOAD_LIB,
                    "-o",
                    dir,
                    "--cpu",
                    "--",
                    "sleep",
                    "30",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pprt;
    assert_int_equal(posix_spawn(&pprt, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    pid_t child = 0;
    double deadline = now_s() + 10;
    while ((child = first_child(pprt)) == 0 && now_s() < deadline)
      ;
    if (child < 0) {
      kill(pprt, SIGKILL);
      waitpid(pprt, NULL, 0);
      skip(); /* no /proc/PID/task/PID/children here */
    }
    assert_true(child > 0);
    kill(pprt, SIGTERM);
    int status;
    assert_int_equal(waitpid(pprt, &status, 0), pprt);
    /* pprt ends as the program did (killed by SIGTERM), or was killed
     * itself: either way the program must be gone too. */
    deadline = now_s() + 5;
    int reaped = 0;
    while (now_s() < deadline && !reaped) {
      pid_t r = waitpid(child, NULL, WNOHANG); /* an orphan is ours to reap */
      reaped = r == child || (r < 0 && errno == ECHILD && kill(child, 0) != 0);
      if (!reaped)
        usleep(1000);
    }
    if (!reaped) {
      orphans++;
      kill(child, SIGKILL);
      waitpid(child, NULL, 0);
    }
    hit += WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  print_message("%d rounds, %d orphaned programs, %d pprt ended by SIGTERM\n", ROUNDS, orphans,
                hit);
  assert_int_equal(orphans, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sigterm_right_after_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
